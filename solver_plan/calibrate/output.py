"""A `Cluster` written back as YAML that `load_cluster` reads to an equal cluster (base units:
bytes, bytes per second, FLOP/s, seconds), with a header saying where the numbers came from."""
from __future__ import annotations

from pathlib import Path

import yaml

from solver_plan.cluster.model import Cluster, Link, LinkLevel


def _link(link: Link, inter: bool) -> dict:
    data = {"bandwidth": float(link.bandwidth), "latency": float(link.latency), "efficiency": float(link.efficiency)}
    if link.p2p_efficiency is not None:  # only when set: None follows `efficiency`
        data["p2p_efficiency"] = float(link.p2p_efficiency)
    if inter and link.nics_per_node is not None:
        data["nics_per_node"] = int(link.nics_per_node)
    return data


def cluster_dict(cluster: Cluster) -> dict:
    """The cluster as the YAML document `load_cluster` reads back (base units: bytes, bytes per second,
    FLOP/s, seconds).
    """
    d = cluster.device
    device = {"name": d.name, "memory": float(d.memory), "peak_flops": float(d.peak_flops)}
    if d.matrix_flops:
        device["matrix_flops"] = {k: float(v) for k, v in d.matrix_flops}
    if d.vector_flops:
        device["vector_flops"] = {k: float(v) for k, v in d.vector_flops}
    if d.hbm_bandwidth is not None:
        device["hbm_bandwidth"] = float(d.hbm_bandwidth)
    for name in ("matrix_efficiency", "vector_efficiency", "memory_efficiency", "narrow_efficiency"):
        curve = getattr(d, name)
        if curve:
            device[name] = [[float(t), float(e)] for t, e in curve]
    device["launch_overhead"] = float(d.launch_overhead)
    if d.kernel_time_scale != 1.0:
        device["kernel_time_scale"] = float(d.kernel_time_scale)
    links = {"intra_node": _link(cluster.intra_node, False)}
    if cluster.inter_node is not None:
        links["inter_node"] = _link(cluster.inter_node, True)
    data = {"name": cluster.name, "nodes": cluster.nodes, "devices_per_node": cluster.devices_per_node,
            "device": device, "links": links}
    sync = cluster.gradient_sync.as_yaml()  # the runtime's gradient sync, when not NCCL's ring
    if sync is not None:
        data["gradient_sync"] = sync
    if cluster.host is not None:  # host memory and PCIe, for offloading
        data["host"] = cluster.host.as_yaml()
    hardware = {}
    if cluster.w_override is not None:
        hardware["w"] = float(cluster.w_override)
    for level, value in cluster.g_overrides:
        hardware["g_intra_node" if level == LinkLevel.INTRA_NODE else "g_inter_node"] = float(value)
    if hardware:
        data["hardware"] = hardware
    return data


class _FlowLists(yaml.SafeDumper):
    pass


def _represent_list(dumper, value):
    return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)


_FlowLists.add_representer(list, _represent_list)


def cluster_yaml(cluster: Cluster, header: str = "") -> str:
    """The cluster as YAML text, with `header` as leading comment lines."""
    body = yaml.dump(cluster_dict(cluster), Dumper=_FlowLists, sort_keys=False, default_flow_style=False)
    comments = "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines())
    return comments + body


def write_cluster_yaml(cluster: Cluster, path: str | Path, header: str = "") -> None:
    """Write `cluster_yaml` to `path` atomically."""
    from solver_plan.files import write_text_atomic
    write_text_atomic(Path(path), cluster_yaml(cluster, header))
