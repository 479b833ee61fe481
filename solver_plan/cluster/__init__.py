"""Clusters: devices grouped in nodes, links by topology level, hardware numbers w and g."""
from solver_plan.cluster.model import Cluster, DeviceSpec, GradientSync, Link, LinkLevel
from solver_plan.cluster.loader import load_cluster, cluster_from_dict, preset_names, resolve_cluster

__all__ = ["Cluster", "DeviceSpec", "GradientSync", "Link", "LinkLevel", "load_cluster", "cluster_from_dict",
           "preset_names", "resolve_cluster"]
