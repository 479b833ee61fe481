"""The symbolic cost model (SMSG): data quantities per operator and edge, times by link level.

For an operator under a configuration on n devices (tiles from `tiles.py`, all equal in size when
degrees divide the dimensions, so "per device" means the busiest device):
- `q_x`: FLOPs of the busiest device for forward + backward, 3 x forward FLOPs / n (backward = 2x).
- `q_c`: bytes each device sends in the operator's own collectives, ring all-reduce counted as
  2(n-1)/n x shard bytes over each group:
  forward, partial sums of the output tile over the group of split *reduction* dimensions;
  backward, partial gradients of each input tile over the group of the dimensions that do not
  split that input (it was replicated along them), e.g. Linear `out` split -> all-reduce of dX.
  Inputs that need no gradient (model inputs, Embedding ids) skip the backward part.
- `q_p`: bytes of the ring all-reduce of the parameter-gradient shard (parameter bytes / product of
  degrees of the weight dimensions) over the group of the other dimensions (sample, attribute).
- memory per used device: parameter shard x `optimizer_factor` + the output tile's share of the
  activation bytes kept for backward.
For an edge (u -> v carrying tensor t) under (s_u, s_v):
- `q_r`: bytes the busiest device must receive so its needed tile is local: in forward, each device
  of v receives the part of its input tile not held by u's tile on that same device; in backward,
  each device of u receives the part of its output tile's gradient not held by v on that device.
  q_r is the forward maximum plus the backward maximum; zero when the tiles coincide.
Seconds: compute w x q_x (or measured (forward_s + backward_s) / n); collectives g x bytes +
2(n-1) x latency with g, latency of the slowest group (gradient sync: bandwidth only, as
frameworks bucket it); q_r g x bytes + latency per direction with g of
the slowest link level any receiver needs (inter-node when some missing piece has no replica on its
node), so a configuration spanning nodes pays inter-node bandwidth.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from solver_plan.cluster import Cluster, LinkLevel
from solver_plan.cost.collectives import group_link
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.dims import OpLayout, op_layout, op_signature
from solver_plan.cost.redistribution import redistribution
from solver_plan.cost.tiles import box_volume, tile_boxes
from solver_plan.errors import InputError
from solver_plan.graph.ir import Edge, Graph, Operator
from solver_plan.graph.ops import OpType

BACKWARD_FACTOR = 2.0  # backward FLOPs per forward FLOP


@dataclass(frozen=True)
class NodeCost:
    q_x: float  # FLOPs, busiest device, forward + backward
    q_c: float  # bytes per device, intra-operator collectives (forward + backward)
    q_p: float  # bytes per device, parameter-gradient all-reduce
    compute_s: float
    comm_s: float
    sync_s: float
    seconds: float
    memory_bytes: float  # on each device the configuration uses


@dataclass(frozen=True)
class EdgeCost:
    q_r: float  # bytes, busiest receiver forward + busiest receiver backward
    seconds: float


def _busiest_volume(boxes: np.ndarray) -> int:
    return int(box_volume(boxes).max())


def needs_gradient(graph: Graph, op: Operator, input_index: int) -> bool:
    return op.op_type != OpType.EMBEDDING and graph.producer(op.inputs[input_index]).op_type != OpType.INPUT


class CostModel:
    """Costs of configurations on one cluster; results are memoised on shapes + configurations,
    so repeated blocks are computed once."""

    def __init__(self, cluster: Cluster, optimizer_factor: float = 4.0):
        if not (isinstance(optimizer_factor, (int, float)) and math.isfinite(optimizer_factor)
                and optimizer_factor >= 0):
            raise InputError(f"optimizer_factor must be a non-negative number, got {optimizer_factor!r}",
                             "optimizer_factor")
        self.cluster = cluster
        self.optimizer_factor = float(optimizer_factor)
        inter = cluster.nodes > 1
        self._g_by_level = np.array([0.0, cluster.g(LinkLevel.INTRA_NODE),
                                     cluster.g(LinkLevel.INTER_NODE) if inter else 0.0])
        self._latency_by_level = np.array([0.0, cluster.intra_node.latency,
                                           cluster.inter_node.latency if inter else 0.0])
        self._nodes: dict[tuple, NodeCost] = {}
        self._edges: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    # --- operators -------------------------------------------------------------------------
    def node(self, graph: Graph, op: Operator, cfg: ParallelConfig) -> NodeCost:
        grads = tuple(needs_gradient(graph, op, i) for i in range(len(op.inputs)))
        key = (op_signature(op, graph), op.measured, op.activation_bytes_override, grads, cfg)
        cost = self._nodes.get(key)
        if cost is None:
            cost = self._nodes[key] = self._node(graph, op, cfg, grads)
        return cost

    def _node(self, graph: Graph, op: Operator, cfg: ParallelConfig, grads: tuple[bool, ...]) -> NodeCost:
        layout = op_layout(op, graph)
        n = cfg.num_devices
        q_x = (1.0 + BACKWARD_FACTOR) * op.flops / n
        if op.measured is not None:
            compute_s = (op.measured.forward_s + op.measured.backward_s) / n
        else:
            compute_s = self.cluster.w * q_x
        out_shapes = tuple(t.shape for t in op.outputs)
        in_shapes = tuple(graph.tensor(t).shape for t in op.inputs)
        out_tiles = [_busiest_volume(tile_boxes(cfg, layout.names, axes, shape))
                     for axes, shape in zip(layout.output_axes, out_shapes)]
        q_c, comm_s = self._collectives(op, cfg, layout, out_tiles, in_shapes, grads)
        q_p, sync_s, shard = self._parameter_sync(op, cfg, layout)
        kept_share = sum(out_tiles) / sum(math.prod(s) for s in out_shapes)
        memory = shard * self.optimizer_factor + op.activation_bytes * kept_share
        return NodeCost(q_x, q_c, q_p, compute_s, comm_s, sync_s, compute_s + comm_s + sync_s, memory)

    def _collectives(self, op, cfg, layout: OpLayout, out_tiles, in_shapes, grads) -> tuple[float, float]:
        volume = seconds = 0.0
        forward = group_link(self.cluster, cfg, layout.names, layout.reduction_dims)
        for tile in out_tiles:
            v, s = forward.allreduce(tile * op.dtype_bytes)
            volume, seconds = volume + v, seconds + s
        for axes, shape, grad in zip(layout.input_axes, in_shapes, grads):
            if not grad:
                continue
            backward = group_link(self.cluster, cfg, layout.names, layout.dims_off(axes))
            if backward.size > 1:
                tile = _busiest_volume(tile_boxes(cfg, layout.names, axes, shape))
                v, s = backward.allreduce(tile * op.dtype_bytes)
                volume, seconds = volume + v, seconds + s
        return volume, seconds

    def _parameter_sync(self, op, cfg, layout: OpLayout) -> tuple[float, float, float]:
        """(q_p bytes, seconds, parameter shard bytes per device)."""
        if op.params == 0:
            return 0.0, 0.0, 0.0
        split = math.prod(cfg.degree(name) for name in layout.weight_dims)
        shard = op.param_bytes / split
        # Gradients are all-reduced in buckets (PyTorch DDP, Horovod fusion), not one message per
        # operator: bandwidth only, else a 100-layer model would pay 100 x 2(n-1) latencies.
        link = group_link(self.cluster, cfg, layout.names, layout.replica_dims)
        volume, seconds = link.allreduce(shard, with_latency=False)
        return volume, seconds, shard

    # --- edges -----------------------------------------------------------------------------
    def edge(self, graph: Graph, edge: Edge, src_cfg: ParallelConfig, dst_cfg: ParallelConfig) -> EdgeCost:
        """One pair of configurations; not memoised (pairs are too many to keep), use `edge_matrix`
        for candidate lists."""
        args = self._edge_args(graph, edge)
        q_r, seconds = self._edge_matrices(graph, *args, (src_cfg,), (dst_cfg,))
        return EdgeCost(float(q_r[0, 0]), float(seconds[0, 0]))

    def edge_matrix(self, graph: Graph, edge: Edge, src_cfgs: Sequence[ParallelConfig],
                    dst_cfgs: Sequence[ParallelConfig]) -> np.ndarray:
        """(len(src_cfgs), len(dst_cfgs)) seconds of redistribution along `edge`."""
        return self.edge_matrices(graph, edge, src_cfgs, dst_cfgs)[1]

    def edge_matrices(self, graph: Graph, edge: Edge, src_cfgs: Sequence[ParallelConfig],
                      dst_cfgs: Sequence[ParallelConfig]) -> tuple[np.ndarray, np.ndarray]:
        """(q_r bytes, seconds), each (len(src_cfgs), len(dst_cfgs)); read-only arrays."""
        args = self._edge_args(graph, edge)
        src, output_index, dst, input_index, grad = args
        key = (op_signature(src, graph), output_index, op_signature(dst, graph), input_index, grad,
               tuple(src_cfgs), tuple(dst_cfgs))
        result = self._edges.get(key)
        if result is None:
            result = self._edges[key] = self._edge_matrices(graph, *args, key[5], key[6])
        return result

    @staticmethod
    def _edge_args(graph: Graph, edge: Edge) -> tuple[Operator, int, Operator, int, bool]:
        src, dst = graph.op(edge.src), graph.op(edge.dst)
        output_index = next(k for k, t in enumerate(src.outputs) if t.name == edge.tensor)
        return src, output_index, dst, edge.input_index, needs_gradient(graph, dst, edge.input_index)

    def _edge_matrices(self, graph, src, output_index, dst, input_index, grad, src_cfgs, dst_cfgs):
        tensor = src.outputs[output_index]
        src_layout, dst_layout = op_layout(src, graph), op_layout(dst, graph)
        held = [tile_boxes(c, src_layout.names, src_layout.output_axes[output_index], tensor.shape)
                for c in src_cfgs]
        needed = [tile_boxes(c, dst_layout.names, dst_layout.input_axes[input_index], tensor.shape)
                  for c in dst_cfgs]
        elements, level = redistribution(self.cluster, dst_cfgs, needed, src_cfgs, held)
        q_r, seconds = self._transfer(elements.T, level.T, tensor.dtype_bytes)
        if grad:
            elements, level = redistribution(self.cluster, src_cfgs, held, dst_cfgs, needed)
            back_q, back_s = self._transfer(elements, level, tensor.dtype_bytes)
            q_r, seconds = q_r + back_q, seconds + back_s
        q_r.setflags(write=False)
        seconds.setflags(write=False)
        return q_r, seconds

    def _transfer(self, elements: np.ndarray, level: np.ndarray, dtype_bytes: int):
        volume = elements.astype(float) * dtype_bytes
        seconds = self._g_by_level[level] * volume + self._latency_by_level[level] * (volume > 0)
        return volume, seconds
