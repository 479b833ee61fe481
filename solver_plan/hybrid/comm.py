"""Collective times of a hybrid plan, all through the cost core's one collective model
(`solver_plan.cost.collectives.collective_time`: alpha-beta, ring or tree, hierarchical across nodes).

`collective(cluster, kind, nbytes, group_size, per_node, buckets)`: one collective of `nbytes` (the
full buffer each member holds) over `group_size` devices, `per_node` of them on each node.
"""
from __future__ import annotations

from solver_plan.cluster import Cluster
from solver_plan.cost.collectives import collective_time


def collective(cluster: Cluster, kind: str, nbytes: float, group_size: int, per_node: int | None = None,
               buckets: int = 1) -> float:
    """Seconds of one collective of `nbytes` over `group_size` devices, `per_node` of them per node (default:
    as many as fit), in `buckets` buckets: `cost.collectives.collective_time`'s alpha-beta model; 0 for a
    group of one or no bytes.
    """
    if group_size <= 1 or nbytes <= 0:
        return 0.0
    per_node = min(group_size, cluster.devices_per_node) if per_node is None else max(1, min(per_node, group_size))
    return float(collective_time(cluster, kind, nbytes, group_size, devices_per_node_in_group=per_node,
                                 buckets=buckets))


def crosses_nodes(cluster: Cluster, device_a: int, device_b: int) -> bool:
    """Whether devices `device_a` and `device_b` sit on different nodes."""
    return cluster.node_of(device_a) != cluster.node_of(device_b)
