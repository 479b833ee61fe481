"""The symbolic cost model (SMSG): data quantities per operator and edge, times from the hardware models.

For an operator under a configuration on n devices holding s = n / replicas distinct tiles (tiles
from `tiles.py`, all equal in size when degrees divide the dimensions, so "per device" means the
busiest device), with the training precision P in force (`precision.py`):
- `q_x`: FLOPs of the busiest device for forward + backward, 3 x forward FLOPs / s (backward = 2x).
- `q_c`: bytes each device sends in the operator's own collectives, ring all-reduce counted as
  2(k-1)/k x shard bytes over each group of k (tensor bytes in P's activation dtype):
  forward, partial sums of the output tile over the group of split *reduction* dimensions;
  backward, partial gradients of each input tile over the group of the dimensions that do not
  split that input (it was replicated along them), e.g. Linear `out` split -> all-reduce of dX.
  Inputs that need no gradient (model inputs, Embedding ids) skip the backward part.
- `q_p`: bytes of the ring all-reduce of the parameter-gradient shard (parameters / product of
  degrees of the weight dimensions, in P's gradient dtype) over the group of the other dimensions;
  under owner-based sync (`cluster.gradient_sync`) the bytes the owner receives, (n - 1) x shard.
- memory per used device: parameter shard x P's bytes per parameter (weights, gradients, master
  copy, optimizer moments) + the output tile's share of the activations, in P's activation dtype,
  when some backward pass reads them (`activations.keeps_output`: a BatchNorm or addition output
  feeding a ReLU is freed).
For an edge (u -> v carrying tensor t) under (s_u, s_v):
- `q_r`: bytes the busiest device must receive so its needed tile is local: in forward, each device
  of v receives the part of its input tile not held by u's tile on that same device; in backward,
  each device of u receives the part of its output tile's gradient not held by v on that device.
  q_r is the forward maximum plus the backward maximum; zero when the tiles coincide.
Seconds:
- compute: measured (forward_s + backward_s) / s where a profile gives them; else 3 x
  `compute_time` of the per-device forward kernel (FLOPs / s; HBM bytes = input and output tiles
  + weight shard, in their dtypes) on the matrix units for GEMM-like operators and the vector units
  for the rest, at the peak of P's compute dtype (backward: two kernels the size of the forward,
  dX and dW). A `hardware: w` override in the cluster YAML prices w x q_x instead.
- every communication term uses the one alpha-beta model of `collectives.py`: operator collectives
  `collective_time(all_reduce)` on the slowest group's shape; gradient sync its share of a bucketed
  all-reduce (`gradient_sync_time`: latency per 25 MiB bucket, not per tensor); q_r a point-to-point
  transfer per direction on the slowest link level any receiver needs (inter-node when some missing
  piece has no replica on its node), alpha + q_r x `Cluster.g_p2p` (the link's p2p_efficiency:
  a measured peer-to-peer copy rate, defaulting to the collective efficiency).
A graph tensor's declared element size (`Tensor.dtype_bytes`, 4 for the zoo) is narrowed to P's
activation dtype: min(declared, activation bytes); profile activation sizes scale the same way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from solver_plan.cluster import Cluster, LinkLevel
from solver_plan.cost.activations import kept_outputs
from solver_plan.cost.collectives import (DDP_BUCKET_BYTES, collective_time, gradient_sync_time, group_shape,
                                          ring_allreduce_bytes)
from solver_plan.cost.compute import compute_time
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.attention import attention_core_seconds
from solver_plan.cost.kernels import (MEMORY_FORMATS, WINDOWED, attention_score_memory,
                                     channels_narrow, conv_kernel, elementwise_kernels)
from solver_plan.cost.dims import OpLayout, op_layout, op_signature
from solver_plan.cost.precision import Precision, TrainingPrecision
from solver_plan.cost.redistribution import redistribution
from solver_plan.cost.tiles import box_volume, tile_boxes
from solver_plan.errors import InputError
from solver_plan.graph.ir import Edge, Graph, Operator
from solver_plan.graph.ops import OpType
from solver_plan.runtime import RuntimeProfile, resolve_runtime

BACKWARD_FACTOR = 2.0  # backward FLOPs per forward FLOP
MATRIX_OPS = frozenset({OpType.LINEAR, OpType.MATMUL, OpType.CONV2D, OpType.ATTENTION, OpType.LSTM,
                        OpType.PROFILED})
NO_KERNEL_OPS = frozenset({OpType.INPUT, OpType.RESHAPE})  # data loading, views: no device work


def elementwise_kind(op: Operator) -> str | None:
    """The `kernels.ELEMENTWISE` kind that prices `op` (BatchNorm, ReLU, 4-D Add, pooling), or None."""
    kind = op.attrs.get("kind")
    if op.op_type == OpType.BATCHNORM:
        return "BatchNorm2d"
    if op.op_type == OpType.UNARY and kind == "relu":
        return "ReLU"
    if op.op_type == OpType.BINARY and kind == "add" and len(op.outputs[0].shape) == 4:
        # a convolutional residual (N, C, H, W); a transformer's residual add stands for Megatron's
        # fused bias-dropout-add (the zoo graphs have no dropout operator), left on the generic rule
        return "Add"
    if op.op_type == OpType.POOL2D and not op.attrs.get("global_pool"):
        return {"max": "MaxPool2d", "avg": "AvgPool2d"}.get(kind)
    return None


def unit_of(op_type: OpType) -> str:
    """Matrix (tensor-core) unit for GEMM-like operators, vector unit for element-wise and the rest."""
    return "matrix" if op_type in MATRIX_OPS else "vector"


@dataclass(frozen=True)
class NodeCost:
    """Cost of one operator under one configuration on n devices holding s distinct tiles (module
    docstring for the derivations): q_x = 3 x forward FLOPs / s; q_c = ring all-reduce bytes
    2(k-1)/k x shard of the partial sums (forward) and input gradients (backward); q_p = ring
    all-reduce bytes of the parameter-gradient shard; compute_s from the roofline (`compute_time`)
    or the profile, comm_s and sync_s from the alpha-beta model of `collectives.py` (Thakur et al.
    2005); seconds = compute_s + comm_s + sync_s; memory per used device = parameter shard x bytes
    per parameter + the kept activations.
    """
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
    """Cost of one edge under a pair of configurations: q_r, bytes the busiest receiver gets forward plus
    backward, and their seconds (alpha + q_r x `Cluster.g_p2p` on the slowest link needed).
    """
    q_r: float  # bytes, busiest receiver forward + busiest receiver backward
    seconds: float


def _busiest_volume(boxes: np.ndarray) -> int:
    return int(box_volume(boxes).max())


def needs_gradient(graph: Graph, op: Operator, input_index: int) -> bool:
    """Whether backward computes a gradient for input `input_index` of `op`: not for model inputs nor for
    Embedding ids.
    """
    return op.op_type != OpType.EMBEDDING and graph.producer(op.inputs[input_index]).op_type != OpType.INPUT


class CostModel:
    """Costs of configurations on one cluster; results are memoised on shapes + configurations,
    so repeated blocks are computed once."""

    def __init__(self, cluster: Cluster, optimizer_factor: float | None = None,
                 precision: "TrainingPrecision | str | None" = None, bucket_bytes: float = DDP_BUCKET_BYTES,
                 memory_format: str = "nhwc", runtime: "RuntimeProfile | str | None" = None):
        """`precision`: a `TrainingPrecision`, a name (fp32, tf32, bf16, fp16, fp8, auto) or None
        (auto: `default_for(cluster.device)`). `memory_format`: nhwc (channels last, default) or
        nchw, the layout of 4-d activations (NCHW convolutions on tensor cores pay layout
        transposes: `kernels.conv_kernel`). `optimizer_factor`, if given, replaces the
        precision's bytes per parameter by factor x weight bytes (the first model's knob).
        `runtime`: the training runtime whose kernels price attention (`RuntimeProfile` or its name;
        None: the default, megatron-core): fused or not, the kernel family, causal skipping
        (`attention_seconds`); nothing else here depends on it."""
        if optimizer_factor is not None and not (
                isinstance(optimizer_factor, (int, float)) and math.isfinite(optimizer_factor)
                and optimizer_factor >= 0):
            raise InputError(f"optimizer_factor must be a non-negative number, got {optimizer_factor!r}",
                             "optimizer_factor")
        if not (isinstance(bucket_bytes, (int, float)) and math.isfinite(bucket_bytes) and bucket_bytes > 0):
            raise InputError(f"bucket_bytes must be a positive number, got {bucket_bytes!r}", "bucket_bytes")
        self.cluster = cluster
        self.precision = TrainingPrecision.parse("auto" if precision is None else precision, cluster.device)
        if not cluster.device.supports(self.precision.compute):
            raise InputError(f"{cluster.device.name} has no {self.precision.compute.value} units; "
                             f"choose another precision", "--precision")
        self.optimizer_factor = None if optimizer_factor is None else float(optimizer_factor)
        self.bucket_bytes = float(bucket_bytes)
        if memory_format not in MEMORY_FORMATS:
            raise InputError(f"memory format must be one of {', '.join(MEMORY_FORMATS)}, got {memory_format!r}",
                             "--memory-format")
        self.memory_format = memory_format
        self.runtime = resolve_runtime(runtime)
        self.kernels = self.runtime.kernels
        inter = cluster.nodes > 1
        # point-to-point alpha-beta by link level, for vectorised redistribution (collectives.p2p_time):
        # a copy between two devices runs at the link's p2p rate (Cluster.g_p2p), not NCCL's bus rate
        self._g_by_level = np.array([0.0, cluster.g_p2p(LinkLevel.INTRA_NODE),
                                     cluster.g_p2p(LinkLevel.INTER_NODE) if inter else 0.0])
        self._latency_by_level = np.array([0.0, cluster.alpha(LinkLevel.INTRA_NODE),
                                           cluster.alpha(LinkLevel.INTER_NODE) if inter else 0.0])
        self._nodes: dict[tuple, NodeCost] = {}
        self._memories: dict[tuple, float] = {}  # `node_memory`, by `nodes' key
        self._edges: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._kept: dict[int, tuple[Graph, frozenset[str]]] = {}  # by id: hashing a Graph is O(graph)

    def fresh(self) -> "CostModel":
        """The same model (cluster, precision, optimizer factor, buckets, memory format) with nothing
        memoised: what the plan validator re-prices with (`plan_price.py`)."""
        return CostModel(self.cluster, self.optimizer_factor, self.precision, self.bucket_bytes, self.memory_format,
                         self.runtime)

    def _kept_outputs(self, graph: Graph) -> frozenset[str]:
        entry = self._kept.get(id(graph))
        if entry is None or entry[0] is not graph:
            entry = self._kept[id(graph)] = (graph, kept_outputs(graph))
        return entry[1]

    # --- precision -------------------------------------------------------------------------
    def element_bytes(self, declared: int) -> int:
        """Bytes per element of a tensor declared with `declared` bytes: min(declared, activation
        dtype bytes), so a fp32 graph trains its activations in bf16 under mixed precision."""
        return min(declared, self.precision.activations.bytes)

    def activation_scale(self, op: Operator) -> float:
        """Factor from the declared activation bytes of `op` to those in the activation dtype."""
        return self.element_bytes(op.dtype_bytes) / op.dtype_bytes

    def parameter_bytes(self) -> float:
        """Bytes kept per parameter: the precision's weights + gradients + master + moments, or
        optimizer_factor x weight bytes when that knob is set."""
        if self.optimizer_factor is not None:
            return self.optimizer_factor * self.precision.parameters.bytes
        return float(self.precision.bytes_per_parameter().total)

    # --- operators -------------------------------------------------------------------------
    def node(self, graph: Graph, op: Operator, cfg: ParallelConfig) -> NodeCost:
        """`NodeCost` of `op` under `cfg`, memoised on the operator's signature and the configuration
        (identical layers price once).
        """
        return self.nodes(graph, op, (cfg,))[0]

    def nodes(self, graph: Graph, op: Operator, configs: Sequence[ParallelConfig]) -> list[NodeCost]:
        """`node` for each of `configs`, the operator's part of the memo key taken once (a build
        costs every candidate of every operator: 37,056 on megatron-1T at 3,072 devices)."""
        prefix, grads, kept = self._node_key(graph, op)
        costs = []
        for cfg in configs:
            key = (*prefix, cfg)
            cost = self._nodes.get(key)
            if cost is None:
                cost = self._nodes[key] = self._node(graph, op, cfg, grads, kept)
            costs.append(cost)
        return costs

    def _node_key(self, graph: Graph, op: Operator) -> tuple[tuple, tuple[bool, ...], bool]:
        """The operator's part of the node memo key (`nodes`, `node_memory`: identical layers share
        it), with the inputs needing a gradient and whether its outputs are kept."""
        grads = tuple(needs_gradient(graph, op, i) for i in range(len(op.inputs)))
        kept = op.name in self._kept_outputs(graph)
        return (op_signature(op, graph), op.measured, op.activation_bytes_override, grads, kept), grads, kept

    def _node(self, graph: Graph, op: Operator, cfg: ParallelConfig, grads: tuple[bool, ...],
              kept: bool = True) -> NodeCost:
        layout = op_layout(op, graph)
        shards = cfg.num_shards  # replicas repeat the work, they do not divide it
        q_x = (1.0 + BACKWARD_FACTOR) * op.flops / shards
        in_shapes = tuple(graph.tensor(t).shape for t in op.inputs)
        out_tiles = self._output_tiles(op, cfg, layout)
        if op.measured is not None:
            compute_s = (op.measured.forward_s + op.measured.backward_s) / shards
        else:
            compute_s = self.compute_seconds(graph, op, cfg, layout, out_tiles, q_x)
        q_c, comm_s = self._collectives(op, cfg, layout, out_tiles, in_shapes, grads)
        q_p, sync_s, shard_params = self._parameter_sync(op, cfg, layout)
        memory = self._memory(graph, op, cfg, out_tiles, shard_params, kept)
        return NodeCost(q_x, q_c, q_p, compute_s, comm_s, sync_s, compute_s + comm_s + sync_s, memory)

    def node_memory(self, graph: Graph, op: Operator, configs: Sequence[ParallelConfig]) -> list[float]:
        """`NodeCost.memory_bytes` of `op` under each of `configs` without its times (the collectives'
        groups on thousands of devices cost most of a node's pricing): the same figures as `nodes`
        (one `_memory` for both), for choosing among candidates by memory alone."""
        prefix, _, kept = self._node_key(graph, op)
        layout = op_layout(op, graph)
        out = []
        for cfg in configs:
            key = (*prefix, cfg)  # `nodes`' key: a node priced whole already knows its memory
            memory = self._memories.get(key)
            if memory is None:
                cost = self._nodes.get(key)
                if cost is not None:
                    memory = cost.memory_bytes
                else:
                    shard = 0.0 if op.params == 0 else op.params / math.prod(cfg.degree(n) for n in layout.weight_dims)
                    memory = self._memory(graph, op, cfg, self._output_tiles(op, cfg, layout), shard, kept)
                self._memories[key] = memory
            out.append(memory)
        return out

    def _memory(self, graph: Graph, op: Operator, cfg: ParallelConfig, out_tiles: Sequence[int],
                shard_params: float, kept: bool) -> float:
        """Bytes `op` holds on each device of `cfg`: its parameter shard's model state, its kept
        output tile's activations, and unfused attention's scores."""
        out_shapes = tuple(t.shape for t in op.outputs)
        kept_share = sum(out_tiles) / sum(math.prod(s) for s in out_shapes) if kept else 0.0
        memory = (shard_params * self.parameter_bytes()
                  + op.activation_bytes * self.activation_scale(op) * kept_share)
        if op.op_type == OpType.ATTENTION and not self.fused_attention(op):
            memory += attention_score_memory(self._score_elements(graph, op, cfg), self.element_bytes(op.dtype_bytes),
                                             self._attention_dropout(op))
        return memory

    def compute_seconds(self, graph: Graph, op: Operator, cfg: ParallelConfig, layout: OpLayout,
                        out_tiles: Sequence[int], q_x: float) -> float:
        """(1 + BACKWARD_FACTOR) x compute_time(forward FLOPs per device, HBM bytes per device):
        the forward kernel plus a backward of two kernels its size (dX, dW). HBM bytes = input
        tiles + output tiles (activation dtype) + weight shard (parameter dtype; an Embedding reads
        only the rows it gathers)."""
        if self.cluster.w_override is not None:  # hand-calibrated s/FLOP: the first model's w x q_x
            return self.cluster.w * q_x
        if op.op_type in NO_KERNEL_OPS:
            return 0.0
        if op.op_type == OpType.ATTENTION:
            return sum(self._attention_from_tiles(graph, op, cfg, layout, out_tiles))
        element = self.element_bytes(op.dtype_bytes)
        in_tiles = self._input_tiles(graph, op, cfg, layout)
        if op.op_type == OpType.SOFTMAX_CE and self.kernels.loss_kernel_bytes_per_logit:
            return sum(self._loss_from_tiles(op, cfg, in_tiles[0]))
        weights = op.params / math.prod(cfg.degree(name) for name in layout.weight_dims)
        if op.op_type == OpType.EMBEDDING:  # a lookup reads the rows it gathers, not the whole table
            weights = min(weights, sum(out_tiles))
        weight_bytes = weights * self.precision.parameters.bytes
        kind = elementwise_kind(op)
        if op.op_type == OpType.CONV2D:
            return self._conv_seconds(graph, op, cfg, in_tiles[0] * element, sum(out_tiles), element, weight_bytes)
        if kind is not None:
            return self._elementwise_seconds(op, kind, in_tiles[0] * element, sum(out_tiles), element, weight_bytes)
        hbm = (sum(in_tiles) + sum(out_tiles)) * element + weight_bytes
        forward = compute_time(self.cluster, op.flops / cfg.num_shards, hbm, unit=unit_of(op.op_type),
                               dtype=self.precision.compute)
        return (1.0 + BACKWARD_FACTOR) * forward

    @staticmethod
    def _output_tiles(op: Operator, cfg: ParallelConfig, layout: OpLayout) -> list[int]:
        """Elements of each output's tile on the busiest device."""
        return [_busiest_volume(tile_boxes(cfg, layout.names, axes, t.shape))
                for axes, t in zip(layout.output_axes, op.outputs)]

    @staticmethod
    def _input_tiles(graph: Graph, op: Operator, cfg: ParallelConfig, layout: OpLayout) -> list[int]:
        """Elements of each input's tile on the busiest device."""
        return [_busiest_volume(tile_boxes(cfg, layout.names, axes, graph.tensor(t).shape))
                for axes, t in zip(layout.input_axes, op.inputs)]

    # --- attention -------------------------------------------------------------------------
    def fused_attention(self, op: Operator) -> bool:
        """Whether attention `op` runs as a fused kernel: the graph does not mark its scores
        materialized and the runtime has a fused kernel (`Kernels.flash_attention`)."""
        return op.attrs.get("scores") != "materialized" and self.kernels.flash_attention

    def _attention_dropout(self, op: Operator) -> bool:
        """Dropout on the probabilities of an unfused attention: the graph's, or the runtime's when
        the graph leaves the kernel to it."""
        return bool(op.attrs.get("dropout")) or (op.attrs.get("scores") != "materialized"
                                                 and self.kernels.attention_dropout)

    def attention_seconds(self, graph: Graph, op: Operator, cfg: ParallelConfig) -> tuple[float, float]:
        """(forward, backward) seconds of attention `op` under `cfg` on the busiest device, as this
        model's runtime kernels run it (`cost.attention`, the one definition); measured operators
        split their measured times. `compute_seconds` is their sum."""
        if op.measured is not None:
            shards = cfg.num_shards
            return op.measured.forward_s / shards, op.measured.backward_s / shards
        layout = op_layout(op, graph)
        out_tiles = self._output_tiles(op, cfg, layout)
        if self.cluster.w_override is not None:  # the first model's w x q_x, split 1 : 2
            total = self.compute_seconds(graph, op, cfg, layout, out_tiles,
                                         (1.0 + BACKWARD_FACTOR) * op.flops / cfg.num_shards)
            return total / 3.0, 2.0 * total / 3.0
        return self._attention_from_tiles(graph, op, cfg, layout, out_tiles)

    def _attention_from_tiles(self, graph: Graph, op: Operator, cfg: ParallelConfig, layout: OpLayout,
                              out_tiles: Sequence[int]) -> tuple[float, float]:
        """`cost.attention.attention_core_seconds` for `op`, its dense forward kernel priced on the
        q, k, v and output tiles (an attention has no weights): fp8 training keeps attention in the
        activation dtype (Transformer Engine's fp8 attention is off by default; torchao converts
        nn.Linear only)."""
        element = self.element_bytes(op.dtype_bytes)
        hbm = (sum(self._input_tiles(graph, op, cfg, layout)) + sum(out_tiles)) * element
        dense_forward_s = compute_time(self.cluster, op.flops / cfg.num_shards, hbm, unit=unit_of(op.op_type),
                                       dtype=self.precision.compute)
        dtype = self.precision.activations if self.precision.compute == Precision.FP8 else self.precision.compute
        return attention_core_seconds(
            self.cluster, flops=op.flops / cfg.num_shards, hbm_bytes=hbm, dense_forward_s=dense_forward_s,
            fused=self.fused_attention(op), causal_skip=bool(op.attrs.get("causal")) and self.kernels.causal_skip,
            backend=self.kernels.attention_backend, dtype=dtype, query_length=op.outputs[0].shape[1],
            score_elements=self._score_elements(graph, op, cfg), element_bytes=element,
            dropout=self._attention_dropout(op))

    # --- the loss --------------------------------------------------------------------------
    def loss_seconds(self, graph: Graph, op: Operator, cfg: ParallelConfig) -> tuple[float, float] | None:
        """(forward, backward) seconds of loss `op` under `cfg` on the busiest device where the runtime's
        loss kernels were counted (`Kernels.loss_kernel_bytes_per_logit`), else None (the graph's
        roofline, `compute_seconds`, which is their sum when they exist)."""
        if (op.op_type != OpType.SOFTMAX_CE or not self.kernels.loss_kernel_bytes_per_logit or op.measured is not None
                or self.cluster.w_override is not None):
            return None
        layout = op_layout(op, graph)
        return self._loss_from_tiles(op, cfg, self._input_tiles(graph, op, cfg, layout)[0])

    def _loss_from_tiles(self, op: Operator, cfg: ParallelConfig, logits: float) -> tuple[float, float]:
        """Each of the runtime's loss kernels as one memory-bound pass of its bytes a logit over the
        logits' tile on the busiest device (`logits` elements), with its launch (`compute_time`); the loss's
        FLOPs (`graph.ops`: 6 a logit) go with the first forward kernel, on the vector unit."""
        forward, backward = self.kernels.loss_kernel_bytes_per_logit
        flops = [op.flops / cfg.num_shards] + [0.0] * (len(forward) - 1)
        return (sum(compute_time(self.cluster, f, logits * b, unit="vector", dtype=self.precision.compute)
                    for f, b in zip(flops, forward)),
                sum(compute_time(self.cluster, 0.0, logits * b, unit="vector", dtype=self.precision.compute)
                    for b in backward))

    @staticmethod
    def _score_elements(graph: Graph, op: Operator, cfg: ParallelConfig) -> float:
        """Elements of the heads x Sq x Sk score matrix on the busiest device (batch x heads x Sq x
        Sk over the configuration's shards)."""
        (n, sq, _), (_, sk, _) = (graph.tensor(t).shape for t in op.inputs[:2])
        return n * op.attrs["heads"] * sq * sk / cfg.num_shards

    def _conv_seconds(self, graph, op, cfg, input_bytes, out_elements, element, weight_bytes) -> float:
        """Forward kernel `kernels.conv_kernel` (Winograd FLOPs on fp32 SIMT units, input read per
        filter tap, narrow dimension the channels per group on each device, NCHW transposes on tensor
        cores), backward the same kernel twice (dX, dW), once when the input needs no gradient."""
        a = op.attrs
        (kh, kw), (sh, sw) = a["kernel"], a["stride"]
        # the busiest device's share of the operator's FLOPs, as op.flops / shards elsewhere
        shards = cfg.num_shards
        # channels on each device: splitting out_channel or in_channel narrows its GEMMs
        cin = max(1, a["in_channels"] // cfg.degree("in_channel"))
        cout = max(1, a["out_channels"] // cfg.degree("out_channel"))
        groups = max(1, a.get("groups", 1) // cfg.degree("out_channel")) if a.get("groups", 1) > 1 else 1
        work = conv_kernel(out_elements, a["in_channels"], kh, kw, sh, sw, a.get("groups", 1), input_bytes,
                           out_elements * element, weight_bytes, self.precision.compute == Precision.FP32,
                           nchw=self.memory_format == "nchw")
        flops = work.flops * (op.flops / shards) / max(1e-30, 2.0 * out_elements * a["in_channels"]
                                                        / a.get("groups", 1) * kh * kw)
        forward = compute_time(self.cluster, flops, work.hbm_bytes, unit="matrix", dtype=self.precision.compute,
                               narrow=channels_narrow(cin, cout, groups))
        return forward * (1 + (2 if needs_gradient(graph, op, 0) else 1))

    def _elementwise_seconds(self, op, kind, input_bytes, out_elements, element, weight_bytes) -> float:
        """The forward and backward kernels of `kernels.elementwise_kernels` (HBM passes per phase)."""
        window = math.prod(op.attrs.get("kernel", (1,))) if kind in WINDOWED else 1
        total = 0.0
        for kernel in elementwise_kernels(kind, out_elements * element, input_bytes, weight_bytes,
                                          out_elements, window):
            if kernel is not None:
                total += compute_time(self.cluster, kernel.flops, kernel.hbm_bytes, unit="vector",
                                      dtype=self.precision.compute)
        return total

    def _allreduce(self, cfg, layout: OpLayout, over: tuple[int, ...], nbytes: float) -> tuple[float, float]:
        """(ring bytes per device, seconds) of one all-reduce of `nbytes` in every group over `over`."""
        shape = group_shape(self.cluster, cfg, layout.names, over)
        if shape.size <= 1 or nbytes <= 0:
            return 0.0, 0.0
        return (ring_allreduce_bytes(nbytes, shape.size),
                collective_time(self.cluster, "all_reduce", nbytes, shape.size, shape.per_node))

    def _collectives(self, op, cfg, layout: OpLayout, out_tiles, in_shapes, grads) -> tuple[float, float]:
        volume = seconds = 0.0
        element = self.element_bytes(op.dtype_bytes)
        for tile in out_tiles:
            v, s = self._allreduce(cfg, layout, layout.reduction_dims, tile * element)
            volume, seconds = volume + v, seconds + s
        for axes, shape, grad in zip(layout.input_axes, in_shapes, grads):
            if not grad:
                continue
            over = layout.dims_off(axes)
            if group_shape(self.cluster, cfg, layout.names, over).size > 1:
                tile = _busiest_volume(tile_boxes(cfg, layout.names, axes, shape))
                v, s = self._allreduce(cfg, layout, over, tile * element)
                volume, seconds = volume + v, seconds + s
        return volume, seconds

    def _parameter_sync(self, op, cfg, layout: OpLayout) -> tuple[float, float, float]:
        """(q_p bytes, seconds, parameters per device)."""
        if op.params == 0:
            return 0.0, 0.0, 0.0
        shard = op.params / math.prod(cfg.degree(name) for name in layout.weight_dims)
        grad_bytes = shard * self.precision.gradients.bytes
        # Gradients are all-reduced in buckets (PyTorch DDP, Horovod fusion), not one message per
        # operator: this tensor pays its share of the bucket latencies, not 2(n-1) of its own.
        group = group_shape(self.cluster, cfg, layout.names, layout.replica_dims)
        if group.size <= 1:
            return 0.0, 0.0, shard
        seconds = gradient_sync_time(self.cluster, grad_bytes, group.size, group.per_node, self.bucket_bytes)
        if self.cluster.gradient_sync.owner_based:  # every other replica copies its gradient to the owner
            return (group.size - 1) * grad_bytes, seconds, shard
        return ring_allreduce_bytes(grad_bytes, group.size), seconds, shard

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
        element = self.element_bytes(tensor.dtype_bytes)
        elements, level = redistribution(self.cluster, dst_cfgs, needed, src_cfgs, held)
        q_r, seconds = self._transfer(elements.T, level.T, element)
        if grad:
            elements, level = redistribution(self.cluster, src_cfgs, held, dst_cfgs, needed)
            back_q, back_s = self._transfer(elements, level, element)
            q_r, seconds = q_r + back_q, seconds + back_s
        q_r.setflags(write=False)
        seconds.setflags(write=False)
        return q_r, seconds

    def _transfer(self, elements: np.ndarray, level: np.ndarray, dtype_bytes: int):
        """Point-to-point alpha + bytes x beta on each pair's link level (`collectives.p2p_time`)."""
        volume = elements.astype(float) * dtype_bytes
        seconds = self._g_by_level[level] * volume + self._latency_by_level[level] * (volume > 0)
        return volume, seconds
