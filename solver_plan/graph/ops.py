"""Operator types and their semantics: output shapes, forward FLOPs and parameter count.

`infer(op_type, input_shapes, attrs)` is the single source of truth: the builder uses it to make
operators, and `Graph` re-runs it on construction so a hand-made graph with inconsistent shapes is
rejected with the operator's name. FLOPs count a multiply-add as 2; backward is taken as 2x forward.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass

Shape = tuple[int, ...]


class OpType(str, enum.Enum):
    """The operator types a graph may hold; each has shape, FLOP and parameter rules in `infer`."""
    INPUT = "Input"
    LINEAR = "Linear"
    MATMUL = "MatMul"
    CONV2D = "Conv2d"
    POOL2D = "Pool2d"
    BATCHNORM = "BatchNorm"
    LAYERNORM = "LayerNorm"
    UNARY = "Unary"  # attrs kind: relu, gelu, tanh, sigmoid, dropout, scale, identity
    BINARY = "Binary"  # attrs kind: add, mul
    SOFTMAX = "Softmax"
    EMBEDDING = "Embedding"
    LSTM = "LSTM"
    ATTENTION = "Attention"  # scaled dot-product attention core over q, k, v (projections apart)
    CONCAT = "Concat"
    SPLIT = "Split"
    RESHAPE = "Reshape"
    TRANSPOSE = "Transpose"
    SOFTMAX_CE = "SoftmaxCrossEntropy"
    PROFILED = "Profiled"  # a measured layer from a profile: outputs given, semantics opaque


UNARY_FLOPS_PER_ELEMENT = {"relu": 1, "gelu": 8, "tanh": 4, "sigmoid": 4, "dropout": 2,
                           "scale": 1, "identity": 0}
BINARY_KINDS = ("add", "mul")


class ShapeError(ValueError):
    """Raised by `infer`; the caller adds the operator's name."""


@dataclass(frozen=True)
class OpSemantics:
    """What `infer` derives for an operator: output shapes, forward FLOPs for the whole minibatch, parameters.
    """
    outputs: tuple[Shape, ...]
    flops: float
    params: int


def numel(shape: Shape) -> int:
    """Number of elements of a shape."""
    return math.prod(shape)


def _arity(input_shapes, count: int, what: str) -> None:
    if len(input_shapes) != count:
        raise ShapeError(f"{what} takes {count} input(s), got {len(input_shapes)}")


def _rank(shape: Shape, ranks, what: str) -> None:
    if len(shape) not in ranks:
        raise ShapeError(f"{what} expects rank {'/'.join(map(str, ranks))}, got shape {shape}")


def _conv_out(size: int, kernel: int, stride: int, padding: int, what: str) -> int:
    if kernel < 1 or stride < 1 or padding < 0:
        raise ShapeError(f"{what}: kernel {kernel} and stride {stride} must be positive, padding {padding} "
                         "non-negative")
    out = (size + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ShapeError(f"{what}: kernel {kernel} larger than padded input {size + 2 * padding}")
    return out


def _broadcast(a: Shape, b: Shape) -> Shape:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        da = a[-i] if i <= len(a) else 1
        db = b[-i] if i <= len(b) else 1
        if da != db and 1 not in (da, db):
            raise ShapeError(f"shapes {a} and {b} do not broadcast")
        out.append(max(da, db))
    return tuple(reversed(out))


def infer(op_type: OpType, input_shapes: tuple[Shape, ...], attrs: dict) -> OpSemantics:
    """Output shapes, FLOPs and parameters of an operator from its type, input shapes and attributes;
    ShapeError for inconsistent shapes.
    """
    kind = OpType(op_type)
    shapes = tuple(tuple(s) for s in input_shapes)
    handler = _HANDLERS[kind]
    return handler(shapes, attrs)


def _input(shapes, attrs):
    _arity(shapes, 0, "Input")
    return OpSemantics((tuple(attrs["shape"]),), 0, 0)


def _linear(shapes, attrs):
    _arity(shapes, 1, "Linear")
    (x,) = shapes
    in_features = attrs["in_features"]
    if x[-1] != in_features:
        raise ShapeError(f"Linear expects last dimension {in_features}, got shape {x}")
    out_f = attrs["out_features"]
    rows = numel(x[:-1])
    bias = attrs.get("bias", True)
    flops = 2 * rows * in_features * out_f + (rows * out_f if bias else 0)
    weights = 0 if attrs.get("tied_to") else in_features * out_f  # tied: the embedding owns them
    return OpSemantics((x[:-1] + (out_f,),), flops, weights + (out_f if bias else 0))


def _matmul(shapes, attrs):
    _arity(shapes, 2, "MatMul")
    a, b = shapes
    if len(a) < 2 or len(b) < 2:
        raise ShapeError(f"MatMul needs rank >= 2, got {a} and {b}")
    if a[-1] != b[-2]:
        raise ShapeError(f"MatMul inner dimensions differ: {a} x {b}")
    batch = _broadcast(a[:-2], b[:-2])
    m, k, n = a[-2], a[-1], b[-1]
    return OpSemantics((batch + (m, n),), 2 * numel(batch) * m * k * n, 0)


def _conv2d(shapes, attrs):
    _arity(shapes, 1, "Conv2d")
    (x,) = shapes
    _rank(x, (4,), "Conv2d")
    n, c, h, w = x
    groups = attrs.get("groups", 1)
    if c != attrs["in_channels"]:
        raise ShapeError(f"Conv2d expects {attrs['in_channels']} input channels, got shape {x}")
    if c % groups or attrs["out_channels"] % groups:
        raise ShapeError(f"Conv2d channels {c}->{attrs['out_channels']} not divisible by groups {groups}")
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    ho = _conv_out(h, kh, sh, ph, "Conv2d")
    wo = _conv_out(w, kw, sw, pw, "Conv2d")
    o = attrs["out_channels"]
    per_out = (c // groups) * kh * kw
    bias = attrs.get("bias", True)
    flops = 2 * n * o * ho * wo * per_out + (n * o * ho * wo if bias else 0)
    return OpSemantics(((n, o, ho, wo),), flops, o * per_out + (o if bias else 0))


def _pool2d(shapes, attrs):
    _arity(shapes, 1, "Pool2d")
    (x,) = shapes
    _rank(x, (4,), "Pool2d")
    n, c, h, w = x
    if attrs.get("global_pool"):
        return OpSemantics(((n, c, 1, 1),), n * c * h * w, 0)
    (kh, kw), (sh, sw), (ph, pw) = attrs["kernel"], attrs["stride"], attrs["padding"]
    ho = _conv_out(h, kh, sh, ph, "Pool2d")
    wo = _conv_out(w, kw, sw, pw, "Pool2d")
    return OpSemantics(((n, c, ho, wo),), n * c * ho * wo * kh * kw, 0)


def _batchnorm(shapes, attrs):
    _arity(shapes, 1, "BatchNorm")
    (x,) = shapes
    _rank(x, (2, 3, 4), "BatchNorm")
    return OpSemantics((x,), 4 * numel(x), 2 * x[1])


def _layernorm(shapes, attrs):
    """Mean, variance, normalise, scale and shift: 5 FLOPs an element, 2H parameters. With
    `rms` (RMSNorm, Zhang & Sennrich 2019; LLaMA, T5): no mean and no shift, 4 FLOPs, H parameters."""
    _arity(shapes, 1, "LayerNorm")
    (x,) = shapes
    if attrs.get("rms"):
        return OpSemantics((x,), 4 * numel(x), x[-1])
    return OpSemantics((x,), 5 * numel(x), 2 * x[-1])


def _unary(shapes, attrs):
    _arity(shapes, 1, "Unary")
    (x,) = shapes
    return OpSemantics((x,), UNARY_FLOPS_PER_ELEMENT[attrs["kind"]] * numel(x), 0)


def _binary(shapes, attrs):
    _arity(shapes, 2, "Binary")
    out = _broadcast(*shapes)
    if out != shapes[0]:
        raise ShapeError(f"{attrs['kind']}: second operand {shapes[1]} must broadcast to the first {shapes[0]}")
    return OpSemantics((out,), numel(out), 0)


def _softmax(shapes, attrs):
    _arity(shapes, 1, "Softmax")
    return OpSemantics((shapes[0],), 5 * numel(shapes[0]), 0)


def _embedding(shapes, attrs):
    _arity(shapes, 1, "Embedding")
    (ids,) = shapes
    dim = attrs["embedding_dim"]
    weights = 0 if attrs.get("tied_to") else attrs["num_embeddings"] * dim  # tied: counted once
    return OpSemantics((ids + (dim,),), numel(ids) * dim, weights)


def _lstm(shapes, attrs):
    _arity(shapes, 1, "LSTM")
    (x,) = shapes
    _rank(x, (3,), "LSTM")
    n, s, i = x
    h = attrs["hidden_size"]
    if i != attrs["input_size"]:
        raise ShapeError(f"LSTM expects input size {attrs['input_size']}, got shape {x}")
    params = 4 * h * (i + h) + 8 * h  # input and recurrent weights, two bias vectors (PyTorch)
    flops = n * s * (2 * 4 * h * (i + h) + 4 * 4 * h)  # gate matmuls + gate nonlinearities
    return OpSemantics(((n, s, h),), flops, params)


def _attention(shapes, attrs):
    _arity(shapes, 3, "Attention")
    q, k, v = shapes
    _rank(q, (3,), "Attention")
    # grouped-query attention (Ainslie et al. 2023): `kv_heads` key/value heads shared by the
    # query heads, so k and v are kv_heads/heads as wide as q; the FLOPs are those of q's heads
    kv_heads = attrs.get("kv_heads", attrs["heads"])
    if k != v or q[0] != k[0] or k[2] * attrs["heads"] != q[2] * kv_heads:
        raise ShapeError(f"Attention expects q (N,Sq,H), k = v (N,Sk,H*kv_heads/heads); got {q}, {k}, {v}")
    n, sq, hidden = q
    sk = k[1]
    if hidden % attrs["heads"] or attrs["heads"] % kv_heads:
        raise ShapeError(f"Attention hidden {hidden} not divisible by heads {attrs['heads']}, "
                         f"or heads not a multiple of kv_heads {kv_heads}")
    flops = 2 * n * sq * sk * hidden * 2 + 5 * n * attrs["heads"] * sq * sk
    return OpSemantics(((n, sq, hidden),), flops, 0)


def _concat(shapes, attrs):
    if len(shapes) < 1:
        raise ShapeError("Concat needs at least one input")
    axis = attrs["axis"]
    first = shapes[0]
    for other in shapes[1:]:
        if len(other) != len(first) or any(a != b for d, (a, b) in enumerate(zip(first, other)) if d != axis):
            raise ShapeError(f"Concat inputs differ outside axis {axis}: {first} vs {other}")
    total = sum(s[axis] for s in shapes)
    return OpSemantics((first[:axis] + (total,) + first[axis + 1:],), 0, 0)


def _split(shapes, attrs):
    _arity(shapes, 1, "Split")
    (x,) = shapes
    axis, sizes = attrs["axis"], tuple(attrs["sizes"])
    if sum(sizes) != x[axis]:
        raise ShapeError(f"Split sizes {sizes} do not add up to dimension {axis} of {x}")
    return OpSemantics(tuple(x[:axis] + (s,) + x[axis + 1:] for s in sizes), 0, 0)


def _reshape(shapes, attrs):
    _arity(shapes, 1, "Reshape")
    (x,) = shapes
    target = tuple(attrs["shape"])
    if numel(target) != numel(x):
        raise ShapeError(f"Reshape {x} -> {target} changes the element count")
    return OpSemantics((target,), 0, 0)


def _transpose(shapes, attrs):
    _arity(shapes, 1, "Transpose")
    (x,) = shapes
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(len(x))):
        raise ShapeError(f"Transpose permutation {perm} does not fit shape {x}")
    return OpSemantics((tuple(x[p] for p in perm),), 0, 0)


def _softmax_ce(shapes, attrs):
    _arity(shapes, 1, "SoftmaxCrossEntropy")
    (logits,) = shapes
    return OpSemantics(((logits[0],),), 6 * numel(logits), 0)


def _profiled(shapes, attrs):
    return OpSemantics(tuple(tuple(s) for s in attrs["output_shapes"]), attrs.get("flops", 0), attrs.get("params", 0))


_HANDLERS = {
    OpType.INPUT: _input, OpType.LINEAR: _linear, OpType.MATMUL: _matmul, OpType.CONV2D: _conv2d,
    OpType.POOL2D: _pool2d, OpType.BATCHNORM: _batchnorm, OpType.LAYERNORM: _layernorm,
    OpType.UNARY: _unary, OpType.BINARY: _binary, OpType.SOFTMAX: _softmax,
    OpType.EMBEDDING: _embedding, OpType.LSTM: _lstm, OpType.ATTENTION: _attention,
    OpType.CONCAT: _concat, OpType.SPLIT: _split, OpType.RESHAPE: _reshape,
    OpType.TRANSPOSE: _transpose, OpType.SOFTMAX_CE: _softmax_ce, OpType.PROFILED: _profiled,
}
