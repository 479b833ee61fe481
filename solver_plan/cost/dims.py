"""Parallelisable dimensions of each operator type and how they map onto tensor axes.

A `Dimension` is one axis of an operator's iteration space that a configuration may split:
- `sample`: the batch (axis 0 of every tensor);
- `attribute`: a spatial or sequence axis (height, width, sequence, feature of elementwise ops);
- `parameter`: an axis that shards the weights (Linear `out`, Conv2d `out_channel`);
- `reduction`: a summed axis (Linear `in`, Conv2d `in_channel`); it appears on an input but not on
  the output, so splitting it leaves partial sums that must be all-reduced.

`OpLayout` adds, for each output and each input tensor, the axis each dimension indexes (None when
the tensor is not split by it, i.e. replicated along that dimension). Tiles are proportional: a
dimension of degree k cuts its axis into k nearly equal ranges, whatever the axis' own size (so a
Conv2d `height` split also cuts the taller input proportionally; halos are ignored). Only the
dimensions that tile correctly under this rule are offered: awkward cases (Reshape that moves the
batch, the concat/split/softmax axis, a LayerNorm's normalised axis) are simply not splittable.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from solver_plan.graph.ir import Graph, Operator
from solver_plan.graph.ops import OpType

DIMENSION_KINDS = ("sample", "attribute", "parameter", "reduction")
Shape = tuple[int, ...]
AxisMap = tuple["int | None", ...]  # one entry per dimension: the tensor axis it splits, or None


@dataclass(frozen=True)
class Dimension:
    """One iteration dimension of an operator: name, extent, and kind (one of DIMENSION_KINDS, e.g. a
    reduction dimension whose split needs an all-reduce of partial sums).
    """
    name: str
    size: int
    kind: str

    def __post_init__(self):
        if self.kind not in DIMENSION_KINDS:
            raise ValueError(f"dimension kind must be one of {DIMENSION_KINDS}, got {self.kind!r}")


@dataclass(frozen=True)
class OpLayout:
    """How an operator's iteration dimensions map onto its tensors: for each output and input, the axis each
    dimension indexes (None: the tensor does not vary along it), and the dimensions that shard its
    parameters.
    """
    dims: tuple[Dimension, ...]
    output_axes: tuple[AxisMap, ...]  # [output][dimension] -> axis of that output or None
    input_axes: tuple[AxisMap, ...]  # [input][dimension] -> axis of that input or None
    weight_dims: tuple[str, ...]  # dimensions that shard the parameters (others replicate them)

    @property
    def names(self) -> tuple[str, ...]:
        """Dimension names, in order."""
        return tuple(d.name for d in self.dims)

    def dims_off(self, axes: AxisMap) -> tuple[int, ...]:
        """Indices of the dimensions that do not split a tensor with this axis map."""
        return tuple(i for i, axis in enumerate(axes) if axis is None)

    @property
    def reduction_dims(self) -> tuple[int, ...]:
        """Indices of the reduction dimensions (splitting one leaves partial sums to all-reduce)."""
        return tuple(i for i, d in enumerate(self.dims) if d.kind == "reduction")

    @property
    def replica_dims(self) -> tuple[int, ...]:
        """Indices of the dimensions over which the parameters are replicated."""
        return tuple(i for i, d in enumerate(self.dims) if d.name not in self.weight_dims)


class _Collector:
    """Accumulates dimensions with their axis on each output and input."""

    def __init__(self, in_shapes: tuple[Shape, ...], out_shapes: tuple[Shape, ...]):
        self.in_shapes, self.out_shapes = in_shapes, out_shapes
        self.dims: list[Dimension] = []
        self.out_maps: list[list[int | None]] = [[] for _ in out_shapes]
        self.in_maps: list[list[int | None]] = [[] for _ in in_shapes]

    def add(self, name: str, size: int, kind: str, outputs, inputs) -> None:
        """`outputs`/`inputs`: one axis (or None) per output/input tensor."""
        self.dims.append(Dimension(name, size, kind))
        for axes, axis in zip(self.out_maps, outputs):
            axes.append(axis)
        for axes, axis in zip(self.in_maps, inputs):
            axes.append(axis)

    def pointwise(self, names: tuple[str, ...], skip: tuple[int, ...] = (), kinds: dict | None = None) -> None:
        """One dimension per output axis (outputs share a rank), mapped onto every input axis that
        lines up with it (right-aligned, not broadcast from size 1)."""
        out0 = self.out_shapes[0]
        for axis, size in enumerate(out0):
            if axis in skip:
                continue
            kind = (kinds or {}).get(axis, "sample" if axis == 0 else "attribute")
            self.add(names[axis], size, kind, [axis] * len(self.out_shapes),
                     [_aligned_axis(shape, out0, axis) for shape in self.in_shapes])

    def layout(self, weight_dims: tuple[str, ...] = ()) -> OpLayout:
        return OpLayout(tuple(self.dims), tuple(tuple(m) for m in self.out_maps),
                        tuple(tuple(m) for m in self.in_maps), weight_dims)


def _aligned_axis(shape: Shape, out: Shape, axis: int) -> int | None:
    in_axis = axis - (len(out) - len(shape))
    if in_axis < 0 or (shape[in_axis] == 1 and out[axis] != 1):
        return None
    return in_axis


def axis_names(rank: int) -> tuple[str, ...]:
    """Conventional names of a tensor's axes (PyTorch layouts: NCHW images, (N, S, F) sequences)."""
    known = {1: ("sample",), 2: ("sample", "feature"), 3: ("sample", "sequence", "feature"),
             4: ("sample", "channel", "height", "width")}
    return known.get(rank, ("sample",) + tuple(f"axis{i}" for i in range(1, rank)))


def leading_axis_names(rank: int) -> tuple[str, ...]:
    """Names of all but the last axis (the feature axis a Linear or Embedding owns)."""
    return axis_names(rank)[:rank - 1] if rank <= 3 else axis_names(rank + 1)[:rank - 1]


# --- per operator type ---------------------------------------------------------------------------
def _sample_only(c: _Collector, op: Operator) -> OpLayout:
    n = c.out_shapes[0][0]
    c.add("sample", n, "sample", [0] * len(c.out_shapes),
          [0 if shape[0] == n else None for shape in c.in_shapes])
    return c.layout()


def _elementwise(c: _Collector, op: Operator) -> OpLayout:
    c.pointwise(axis_names(len(c.out_shapes[0])))
    return c.layout()


def _except_axis(c: _Collector, op: Operator) -> OpLayout:
    """Softmax, Concat, Split: every axis but the one the op works along can be split."""
    rank = len(c.out_shapes[0])
    axis = op.attr("axis") % rank
    if axis == 0:  # working along the batch: a `sample` slice of the output needs whole inputs
        c.add("sample", c.out_shapes[0][0], "sample", [0] * len(c.out_shapes), [None] * len(c.in_shapes))
    c.pointwise(axis_names(rank), skip=(axis,))
    return c.layout()


def _layernorm(c: _Collector, op: Operator) -> OpLayout:
    rank = len(c.out_shapes[0])
    c.pointwise(axis_names(rank), skip=(rank - 1,) if rank > 1 else ())
    return c.layout()  # the 2H affine parameters are tiny: always replicated


def _linear(c: _Collector, op: Operator) -> OpLayout:
    out = c.out_shapes[0]
    rank = len(out)
    c.pointwise(leading_axis_names(rank), skip=(rank - 1,))
    c.add("out", out[-1], "parameter", [rank - 1], [None])
    c.add("in", c.in_shapes[0][-1], "reduction", [None], [rank - 1])
    return c.layout(("out", "in"))


def _matmul(c: _Collector, op: Operator) -> OpLayout:
    (a, b), out = c.in_shapes, c.out_shapes[0]
    rank = len(out)
    for axis in range(rank - 2):  # broadcast batch axes
        name = "sample" if axis == 0 else f"batch{axis}"
        c.add(name, out[axis], "sample" if axis == 0 else "attribute", [axis],
              [_aligned_axis(a, out, axis), _aligned_axis(b, out, axis)])
    c.add("sample" if rank == 2 else "rows", out[-2], "sample" if rank == 2 else "attribute",
          [rank - 2], [len(a) - 2, None])
    c.add("out", out[-1], "attribute", [rank - 1], [None, len(b) - 1])
    c.add("in", a[-1], "reduction", [None], [len(a) - 1, len(b) - 2])
    return c.layout()


def _conv2d(c: _Collector, op: Operator) -> OpLayout:
    n, o, h, w = c.out_shapes[0]
    grouped = op.attr("groups", 1) > 1
    c.add("sample", n, "sample", [0], [0])
    # grouped convolutions tie input channels to output channels: split them together
    c.add("out_channel", o, "parameter", [1], [1 if grouped else None])
    if not grouped:
        c.add("in_channel", c.in_shapes[0][1], "reduction", [None], [1])
    c.add("height", h, "attribute", [2], [2])
    c.add("width", w, "attribute", [3], [3])
    return c.layout(("out_channel",) if grouped else ("out_channel", "in_channel"))


def _pool2d(c: _Collector, op: Operator) -> OpLayout:
    n, ch, h, w = c.out_shapes[0]
    c.add("sample", n, "sample", [0], [0])
    c.add("channel", ch, "attribute", [1], [1])
    if not op.attr("global_pool"):
        c.add("height", h, "attribute", [2], [2])
        c.add("width", w, "attribute", [3], [3])
    return c.layout()


def _batchnorm(c: _Collector, op: Operator) -> OpLayout:
    # statistics are per shard (no synchronisation), as in ordinary data-parallel training
    rank = len(c.out_shapes[0])
    names = {2: ("sample", "channel"), 3: ("sample", "channel", "length"),
             4: ("sample", "channel", "height", "width")}[rank]
    c.pointwise(names, kinds={1: "parameter"})
    return c.layout(("channel",))


def _embedding(c: _Collector, op: Operator) -> OpLayout:
    out = c.out_shapes[0]
    rank = len(out)
    # ids (N, S) -> (N, S, D): the ids line up with the output's *leading* axes (left-aligned)
    for axis, name in enumerate(leading_axis_names(rank)):
        c.add(name, out[axis], "sample" if axis == 0 else "attribute", [axis], [axis])
    c.add("embedding", out[-1], "parameter", [rank - 1], [None])
    c.add("vocab", op.attr("num_embeddings"), "reduction", [None], [None])  # masked lookup + all-reduce
    return c.layout(("embedding", "vocab"))


def _attention(c: _Collector, op: Operator) -> OpLayout:
    n, sq, _ = c.out_shapes[0]
    c.add("sample", n, "sample", [0], [0, 0, 0])
    c.add("sequence", sq, "attribute", [1], [1, None, None])  # queries split, keys/values replicated
    c.add("heads", op.attr("heads"), "attribute", [2], [2, 2, 2])
    return c.layout()


def _transpose(c: _Collector, op: Operator) -> OpLayout:
    perm = op.attr("perm")
    for axis, size in enumerate(c.out_shapes[0]):
        c.add("sample" if axis == 0 else f"axis{axis}", size, "sample" if axis == 0 else "attribute",
              [axis], [perm[axis]])
    return c.layout()


_RULES: dict[OpType, Callable[[_Collector, Operator], OpLayout]] = {
    OpType.INPUT: _sample_only, OpType.LINEAR: _linear, OpType.MATMUL: _matmul,
    OpType.CONV2D: _conv2d, OpType.POOL2D: _pool2d, OpType.BATCHNORM: _batchnorm,
    OpType.LAYERNORM: _layernorm, OpType.UNARY: _elementwise, OpType.BINARY: _elementwise,
    OpType.SOFTMAX: _except_axis, OpType.EMBEDDING: _embedding, OpType.LSTM: _sample_only,
    OpType.ATTENTION: _attention, OpType.CONCAT: _except_axis, OpType.SPLIT: _except_axis,
    OpType.RESHAPE: _sample_only, OpType.TRANSPOSE: _transpose, OpType.SOFTMAX_CE: _sample_only,
    OpType.PROFILED: _sample_only,
}


def op_signature(op: Operator, graph: Graph) -> tuple:
    """What determines an operator's layout and costs, without its name (repeated blocks share it)."""
    return (op.op_type, op.attr_items, tuple(graph.tensor(t).shape for t in op.inputs),
            tuple(t.shape for t in op.outputs), op.dtype_bytes, op.flops, op.params)


@lru_cache(maxsize=None)
def _layout_for(op_type: OpType, attr_items: tuple, in_shapes: tuple, out_shapes: tuple) -> OpLayout:
    probe = Operator("probe", op_type, (), (), attr_items)
    return _RULES[op_type](_Collector(in_shapes, out_shapes), probe)


def op_layout(op: Operator, graph: Graph) -> OpLayout:
    """The `OpLayout` of an operator in a graph, from its type, attributes and tensor shapes."""
    return _layout_for(op.op_type, op.attr_items, tuple(graph.tensor(t).shape for t in op.inputs),
                       tuple(t.shape for t in op.outputs))


def op_dimensions(op: Operator, graph: Graph) -> tuple[Dimension, ...]:
    """The operator's iteration dimensions (`op_layout(op, graph).dims`)."""
    return op_layout(op, graph).dims
