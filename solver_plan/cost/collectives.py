"""Collective communication inside one configuration: groups of devices and ring all-reduce.

A collective over a set of dimensions runs in every group of devices whose tile coordinates agree
on all the other dimensions; the groups run side by side, so its time is that of the slowest group
(the slowest link level some group spans).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from solver_plan.cluster import Cluster
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.tiles import tile_coordinates


def ring_allreduce_bytes(shard_bytes: float, group_size: int) -> float:
    """Bytes each device sends (and receives) in a ring all-reduce: 2(n-1)/n x shard bytes."""
    if group_size <= 1:
        return 0.0
    return 2.0 * (group_size - 1) / group_size * shard_bytes


@dataclass(frozen=True)
class GroupLink:
    size: int  # devices per group
    g: float  # seconds per byte of the slowest group
    latency: float  # per-message latency of the slowest group

    def allreduce(self, shard_bytes: float, with_latency: bool = True) -> tuple[float, float]:
        """(bytes per device, seconds) of a ring all-reduce of `shard_bytes` in every group.

        `with_latency=False` prices bandwidth only, for traffic that frameworks pack into large
        buckets (gradient synchronisation) so that per-operator message latency does not apply."""
        volume = ring_allreduce_bytes(shard_bytes, self.size)
        if volume == 0.0:
            return 0.0, 0.0
        latency = 2 * (self.size - 1) * self.latency if with_latency else 0.0
        return volume, self.g * volume + latency


@lru_cache(maxsize=100_000)
def collective_groups(cfg: ParallelConfig, names: tuple[str, ...], over: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Device groups of `cfg` that share tile coordinates on every dimension not in `over`."""
    coords = tile_coordinates(cfg, names)
    keep = [j for j in range(len(names)) if j not in over]
    groups: dict[tuple, list[int]] = {}
    for position, device in enumerate(cfg.devices):
        groups.setdefault(tuple(coords[position, keep]), []).append(device)
    return tuple(tuple(g) for g in groups.values())


def group_link(cluster: Cluster, cfg: ParallelConfig, names: tuple[str, ...], over: tuple[int, ...]) -> GroupLink:
    size = 1
    for j in over:
        size *= cfg.degree(names[j])
    if size <= 1:
        return GroupLink(1, 0.0, 0.0)
    groups = collective_groups(cfg, names, over)
    slowest = max(groups, key=lambda devs: (cluster.g_group(devs), cluster.group_latency(devs)))
    return GroupLink(size, cluster.g_group(slowest), cluster.group_latency(slowest))
