"""Collective communication: one alpha-beta model for every term, and the groups of a configuration.

`collective_time(cluster, kind, nbytes, group_size, devices_per_node_in_group)` prices a collective
from the group's shape alone (no device lists, so groups of thousands of devices cost nothing to
price). Every step pays the link latency alpha, every byte the achieved seconds per byte beta
(`Cluster.g`: 1 / (bandwidth per device x link efficiency); between nodes a device's share of its
node's NICs). n = group size, k = devices of the group per node, m = n / k nodes, S = `nbytes`.

One node (m = 1), ring (NCCL's choice on NVLink/PCIe; Thakur et al., IJHPCA 2005, and Patarasuk
& Yuan, JPDC 2009, for the bandwidth-optimal ring):
- all_reduce:      2(n-1) alpha + 2(n-1)/n S beta        (reduce-scatter then all-gather)
- reduce_scatter:   (n-1) alpha +  (n-1)/n S beta        (S: the full input on each device)
- all_gather:       (n-1) alpha +  (n-1)/n S beta        (S: the full output on each device)
- all_to_all:       (n-1) alpha +  (n-1)/n S beta        (pairwise exchange; S held per device)
- broadcast:        (n-1) alpha +          S beta        (pipelined ring)
- p2p:                    alpha +          S beta_p2p   (beta_p2p: `Cluster.g_p2p`, the link's
                                                     point-to-point efficiency; every other kind
                                                     is an NCCL collective at `efficiency`)
Across nodes, hierarchical (NCCL's two-level rings and trees; Jia et al. 2018, "Highly scalable
deep learning training system with mixed-precision", for the 3-phase all-reduce): reduce-scatter
inside each node on S, the inter-node collective among the m nodes on S/k per device (each device
of a node drives its share of the node's NICs), all-gather inside the node. all_to_all sends
(k-1)/n S inside and (n-k)/n S between nodes; broadcast crosses each node boundary once on S/k per
device. For all_reduce the inter-node phase is the faster of a ring, 2(m-1) alpha_e + 2(m-1)/m S/k
beta_e, and NCCL's double binary tree, 2 ceil(log2 m) alpha_e + 2 S/k beta_e / TREE_BANDWIDTH_FACTOR
(NCCL src/graph/tuning.cc: tree latency 2 (k-1) alpha_i + 2 log2(m) alpha_e; its
treeCorrectionFactor derates tree bandwidth to 0.5-1.0 by message size, median about 0.7), as
NCCL's tuner picks the fastest.
Bucketed gradient sync (PyTorch DDP's 25 MiB buckets, Horovod tensor fusion): `buckets` collectives
of S / buckets each, so the latency is paid per bucket, not per tensor.

A collective over a set of a configuration's dimensions runs in every group of devices whose tile
coordinates agree on all the other dimensions; the groups run side by side, so its time is that of
the slowest group (the one spanning the most nodes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from solver_plan.cluster import Cluster, LinkLevel
from solver_plan.cost.config import REPLICA, ParallelConfig
from solver_plan.cost.tiles import tile_coordinates
from solver_plan.units import MIB

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "p2p")
TREE_BANDWIDTH_FACTOR = 0.7  # NCCL tuning.cc treeCorrectionFactor, Simple protocol, mid sizes
# PyTorch DistributedDataParallel's bucket_cap_mb default, 25 MiB (torch/nn/parallel/distributed.py:
# bucket_cap_mb * 1024 * 1024): the per-operator question's runtime; the hybrid planner's runtimes
# carry their own buckets (runtime/profiles.py Overlap)
DDP_BUCKET_BYTES = 25 * MIB


@dataclass(frozen=True)
class CollectiveTime:
    """Seconds of one collective split into its alpha (latency) and beta (transfer) parts."""
    latency: float
    transfer: float
    algorithm: str = "ring"

    @property
    def seconds(self) -> float:
        """Total seconds, latency + transfer."""
        return self.latency + self.transfer


def _ring(kind: str, nbytes: float, n: int, alpha: float, beta: float) -> CollectiveTime:
    """One level, n ranks: the formulas of the module docstring."""
    if n <= 1 or nbytes <= 0:
        return CollectiveTime(0.0, 0.0)
    if kind == "all_reduce":
        return CollectiveTime(2 * (n - 1) * alpha, 2 * (n - 1) / n * nbytes * beta)
    if kind in ("reduce_scatter", "all_gather", "all_to_all"):
        return CollectiveTime((n - 1) * alpha, (n - 1) / n * nbytes * beta)
    if kind == "broadcast":
        return CollectiveTime((n - 1) * alpha, nbytes * beta)
    if kind == "p2p":
        return CollectiveTime(alpha, nbytes * beta)
    raise ValueError(f"unknown collective {kind!r}; expected one of {KINDS}")


def _add(*parts: CollectiveTime, algorithm: str) -> CollectiveTime:
    return CollectiveTime(sum(p.latency for p in parts), sum(p.transfer for p in parts), algorithm)


def _hierarchical(kind: str, nbytes: float, n: int, k: int, m: int,
                  alpha_i: float, beta_i: float, alpha_e: float, beta_e: float) -> CollectiveTime:
    """m > 1 nodes, k devices of the group on each."""
    share = nbytes / k
    if kind == "all_reduce":
        inside = _add(_ring("reduce_scatter", nbytes, k, alpha_i, beta_i),
                      _ring("all_gather", nbytes, k, alpha_i, beta_i), algorithm="ring")
        ring = _ring("all_reduce", share, m, alpha_e, beta_e)
        tree = CollectiveTime(2 * math.ceil(math.log2(m)) * alpha_e, 2 * share * beta_e / TREE_BANDWIDTH_FACTOR)
        best, name = (ring, "ring") if ring.seconds <= tree.seconds else (tree, "tree")
        return _add(inside, best, algorithm=f"hierarchical-{name}")
    if kind in ("reduce_scatter", "all_gather"):
        return _add(_ring(kind, nbytes, k, alpha_i, beta_i), _ring(kind, share, m, alpha_e, beta_e),
                    algorithm="hierarchical-ring")
    if kind == "all_to_all":
        return CollectiveTime((k - 1) * alpha_i + (n - k) * alpha_e,
                              (k - 1) / n * nbytes * beta_i + (n - k) / n * nbytes * beta_e, "pairwise")
    if kind == "broadcast":
        return _add(_ring("broadcast", nbytes, k, alpha_i, beta_i), _ring("broadcast", share, m, alpha_e, beta_e),
                    algorithm="hierarchical-ring")
    if kind == "p2p":
        return _ring("p2p", nbytes, 2, alpha_e, beta_e)
    raise ValueError(f"unknown collective {kind!r}; expected one of {KINDS}")


def collective_cost(cluster: Cluster, kind: str, nbytes: float, group_size: int,
                    devices_per_node_in_group: int | None = None, *, buckets: float = 1) -> CollectiveTime:
    """`collective_time` with its latency and transfer parts (see the module docstring).

    `devices_per_node_in_group` None: the group packed on as few nodes as possible. For `p2p`,
    group_size is 2 and devices_per_node_in_group 2 (same node) or 1 (two nodes). `buckets` may
    be fractional: a tensor's share of the bucketed gradient sync."""
    if kind not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; expected one of {KINDS}")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if not (buckets > 0 and math.isfinite(buckets)):
        raise ValueError(f"buckets must be positive, got {buckets!r}")
    n = group_size
    k = min(n, cluster.devices_per_node) if devices_per_node_in_group is None else devices_per_node_in_group
    if not (1 <= k <= min(n, cluster.devices_per_node)):
        raise ValueError(f"devices_per_node_in_group must be in 1..{min(n, cluster.devices_per_node)}, got {k}")
    if n <= 1 or nbytes <= 0:
        return CollectiveTime(0.0, 0.0)
    m = math.ceil(n / k)
    if m > cluster.nodes:
        raise ValueError(f"a group of {n} with {k} per node needs {m} nodes; {cluster.name!r} has {cluster.nodes}")
    per_bucket = nbytes / buckets
    # a point-to-point copy runs at the link's p2p rate, collectives at NCCL's bus rate
    beta = cluster.g_p2p if kind == "p2p" else cluster.g
    alpha_i, beta_i = cluster.alpha(LinkLevel.INTRA_NODE), beta(LinkLevel.INTRA_NODE)
    if m == 1:
        one = _ring(kind, per_bucket, n, alpha_i, beta_i)
    else:
        alpha_e, beta_e = cluster.alpha(LinkLevel.INTER_NODE), beta(LinkLevel.INTER_NODE)
        one = _hierarchical(kind, per_bucket, n, k, m, alpha_i, beta_i, alpha_e, beta_e)
    return CollectiveTime(one.latency * buckets, one.transfer * buckets, one.algorithm)


def collective_time(cluster: Cluster, kind: str, nbytes: float, group_size: int,
                    devices_per_node_in_group: int | None = None, *, buckets: float = 1) -> float:
    """Seconds of one collective of `kind` on a group of `group_size` devices with
    `devices_per_node_in_group` of them on each node: latency x steps + bytes x seconds per byte."""
    return collective_cost(cluster, kind, nbytes, group_size, devices_per_node_in_group, buckets=buckets).seconds


def gradient_sync_time(cluster: Cluster, nbytes: float, group_size: int,
                       devices_per_node_in_group: int | None = None,
                       bucket_bytes: float = DDP_BUCKET_BYTES) -> float:
    """A tensor's share of a bucketed gradient all-reduce: nbytes / bucket_bytes buckets of
    bucket_bytes each (latency per bucket, bandwidth per byte), so the sum over a model's tensors
    is the all-reduce of all its gradients in buckets of `bucket_bytes`. On a cluster whose runtime
    syncs through parameter owners (`cluster.gradient_sync`, FlexFlow's presets) it is
    `parameter_server_sync_time` instead."""
    if nbytes <= 0 or group_size <= 1:
        return 0.0
    if cluster.gradient_sync.owner_based:
        return parameter_server_sync_time(cluster, nbytes, group_size, devices_per_node_in_group)
    return collective_time(cluster, "all_reduce", nbytes, group_size, devices_per_node_in_group,
                           buckets=nbytes / bucket_bytes)


def parameter_server_sync_time(cluster: Cluster, nbytes: float, group_size: int,
                               devices_per_node_in_group: int | None = None) -> float:
    """Gradient copies of one tensor into its owner (FlexFlow's runtime; formula and source in
    `cluster/sync.py`): k replicas per node on m nodes,
    (k-1)(alpha_i + S / B_i) + (m-1)(alpha_e + S / B_e), B the scheme's copy bandwidth per level."""
    if nbytes <= 0 or group_size <= 1:
        return 0.0
    k = min(group_size, cluster.devices_per_node) if devices_per_node_in_group is None else devices_per_node_in_group
    m = math.ceil(group_size / k)
    seconds = (k - 1) * (cluster.alpha(LinkLevel.INTRA_NODE) + nbytes * cluster.g_gradient_copy(LinkLevel.INTRA_NODE))
    if m > 1:
        seconds += (m - 1) * (cluster.alpha(LinkLevel.INTER_NODE)
                              + nbytes * cluster.g_gradient_copy(LinkLevel.INTER_NODE))
    return seconds


def p2p_time(cluster: Cluster, level: LinkLevel, nbytes: float) -> float:
    """One point-to-point copy on a link level: alpha + nbytes x beta_p2p, beta_p2p =
    `Cluster.g_p2p` = 1 / (bandwidth x the link's p2p_efficiency), a measured peer-to-peer copy
    rate (CUDA's p2pBandwidthLatencyTest; p100-4x4: data/published/interconnect.yaml), which
    defaults to the collective `efficiency`. 0 on the same device or for no bytes."""
    if level == LinkLevel.SAME_DEVICE or nbytes <= 0:
        return 0.0
    return cluster.alpha(level) + nbytes * cluster.g_p2p(level)


def ring_allreduce_bytes(shard_bytes: float, group_size: int) -> float:
    """Bytes each device sends (and receives) in a ring all-reduce: 2(n-1)/n x shard bytes."""
    if group_size <= 1:
        return 0.0
    return 2.0 * (group_size - 1) / group_size * shard_bytes


@lru_cache(maxsize=100_000)
def collective_groups(cfg: ParallelConfig, names: tuple[str, ...], over: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Device groups of `cfg` that share tile coordinates on every dimension not in `over`
    (and the same replica: identical copies never communicate with each other)."""
    coords = tile_coordinates(cfg, tuple(names) + (REPLICA,))
    keep = [j for j in range(len(names)) if j not in over] + [len(names)]
    groups: dict[tuple, list[int]] = {}
    for position, device in enumerate(cfg.devices):
        groups.setdefault(tuple(coords[position, keep]), []).append(device)
    return tuple(tuple(g) for g in groups.values())


@dataclass(frozen=True)
class GroupShape:
    """Size of a configuration's collective groups and devices per node of the slowest one."""
    size: int
    per_node: int


def group_shape(cluster: Cluster, cfg: ParallelConfig, names: tuple[str, ...], over: tuple[int, ...]) -> GroupShape:
    """The shape of the group spanning the most nodes (the slowest, since groups run side by side)."""
    size = 1
    for j in over:
        size *= cfg.degree(names[j])
    if size <= 1:
        return GroupShape(1, 1)
    nodes = max(len({cluster.node_of(d) for d in group}) for group in collective_groups(cfg, names, over))
    return GroupShape(size, max(1, min(size // nodes, cluster.devices_per_node)))
