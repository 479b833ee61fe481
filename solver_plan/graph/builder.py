"""`GraphBuilder`: the one way to make graphs. Each method adds an operator and returns its output.

Shapes follow PyTorch conventions: images NCHW, sequences (batch, seq, features); axis 0 is always
the sample (batch) dimension. Names are optional; `scope()` prefixes names of repeated blocks.
"""
from __future__ import annotations

import contextlib
from typing import Any, Sequence

from solver_plan.errors import GraphError
from solver_plan.graph.ir import Graph, Measured, Operator, Tensor, freeze_attrs
from solver_plan.graph.ops import BINARY_KINDS, UNARY_FLOPS_PER_ELEMENT, OpType, ShapeError, infer


def _pair(value) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else tuple(value)


class GraphBuilder:
    """Builds a `Graph` operator by operator: each method adds one operator, infers its output shapes, FLOPs
    and parameters (`graph.ops.infer`) and returns its output tensor(s). Unnamed operators get numbered
    names; `scope` prefixes names with a path.
    """
    def __init__(self, name: str, dtype_bytes: int = 4):
        self.name = name
        self.dtype_bytes = dtype_bytes
        self._ops: list[Operator] = []
        self._tensors: dict[str, Tensor] = {}
        self._counts: dict[str, int] = {}
        self._prefix: list[str] = []

    # --- plumbing --------------------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self, prefix: str):
        """Context manager under which operator names get `prefix/` in front (scopes nest)."""
        self._prefix.append(prefix)
        try:
            yield self
        finally:
            self._prefix.pop()

    def _name(self, name: str | None, default: str) -> str:
        if name is None:
            count = self._counts.get(default, 0)
            self._counts[default] = count + 1
            name = f"{default}{count}"
        return "/".join(self._prefix + [name])

    def add(self, op_type: OpType, inputs: Sequence[Tensor], attrs: dict[str, Any], name: str | None = None,
            measured: Measured | None = None, activation_bytes: float | None = None,
            default_name: str | None = None) -> tuple[Tensor, ...]:
        """Add any operator; returns its output tensors."""
        op_name = self._name(name, default_name or op_type.value.lower())
        for t in inputs:
            if self._tensors.get(t.name) is not t and self._tensors.get(t.name) != t:
                raise GraphError(f"input tensor {t.name!r} was not made by this builder", f"operator {op_name!r}")
        try:
            sem = infer(op_type, tuple(t.shape for t in inputs), attrs)
        except ShapeError as exc:
            raise GraphError(str(exc), f"operator {op_name!r}") from None
        if len(sem.outputs) == 1:
            outputs = (Tensor(op_name, sem.outputs[0], self.dtype_bytes),)
        else:
            outputs = tuple(Tensor(f"{op_name}:{i}", s, self.dtype_bytes) for i, s in enumerate(sem.outputs))
        for t in outputs:
            if t.name in self._tensors:
                raise GraphError("duplicate operator name", f"operator {op_name!r}")
            self._tensors[t.name] = t
        self._ops.append(Operator(op_name, op_type, tuple(t.name for t in inputs), outputs,
                                  freeze_attrs(attrs), float(sem.flops), int(sem.params), self.dtype_bytes,
                                  measured, activation_bytes))
        return outputs

    def _one(self, op_type, inputs, attrs, name, default_name: str | None = None) -> Tensor:
        return self.add(op_type, inputs, attrs, name, default_name=default_name)[0]

    def build(self) -> Graph:
        """The `Graph` of the operators added so far."""
        return Graph(self.name, tuple(self._ops))

    # --- operators -------------------------------------------------------------------------
    def input(self, shape: Sequence[int], name: str | None = None) -> Tensor:
        """A model input of `shape` (no FLOPs, no parameters)."""
        return self._one(OpType.INPUT, (), {"shape": tuple(shape)}, name, "input")

    def linear(self, x: Tensor, out_features: int, bias: bool = True, name: str | None = None) -> Tensor:
        """Fully connected layer over the last axis of `x` to `out_features`, with an optional bias."""
        return self._one(OpType.LINEAR, (x,), {"in_features": x.shape[-1], "out_features": out_features,
                                               "bias": bias}, name)

    def matmul(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        """Batched matrix product `a @ b` of two activations (no parameters)."""
        return self._one(OpType.MATMUL, (a, b), {}, name)

    def conv2d(self, x: Tensor, out_channels: int, kernel, stride=1, padding=0, groups: int = 1,
               bias: bool = False, name: str | None = None) -> Tensor:
        """2-D convolution of an NCHW tensor; `kernel`, `stride` and `padding` are an int or a pair."""
        return self._one(OpType.CONV2D, (x,), {
            "in_channels": x.shape[1], "out_channels": out_channels, "kernel": _pair(kernel),
            "stride": _pair(stride), "padding": _pair(padding), "groups": groups, "bias": bias}, name)

    def pool2d(self, x: Tensor, kind: str, kernel=None, stride=None, padding=0, global_pool: bool = False,
               name: str | None = None) -> Tensor:
        """2-D max or average pooling of an NCHW tensor; `stride` defaults to `kernel`; `global_pool` pools
        each channel to 1x1. GraphError for another kind.
        """
        if kind not in ("max", "avg"):
            raise GraphError(f"pool kind must be 'max' or 'avg', got {kind!r}")
        attrs: dict[str, Any] = {"kind": kind, "global_pool": global_pool}
        if not global_pool:
            attrs.update(kernel=_pair(kernel), stride=_pair(stride if stride is not None else kernel),
                         padding=_pair(padding))
        return self._one(OpType.POOL2D, (x,), attrs, name, f"{kind}pool")

    def global_avg_pool(self, x: Tensor, name: str | None = None) -> Tensor:
        """Global average pooling: each channel to 1x1."""
        return self.pool2d(x, "avg", global_pool=True, name=name)

    def batchnorm(self, x: Tensor, name: str | None = None) -> Tensor:
        """Batch normalisation (a scale and shift per channel)."""
        return self._one(OpType.BATCHNORM, (x,), {}, name)

    def layernorm(self, x: Tensor, name: str | None = None) -> Tensor:
        """Layer normalisation over the last axis."""
        return self._one(OpType.LAYERNORM, (x,), {}, name)

    def unary(self, x: Tensor, kind: str, name: str | None = None) -> Tensor:
        """Element-wise operator of a known kind (UNARY_FLOPS_PER_ELEMENT: relu, gelu, dropout, ...);
        GraphError for another kind.
        """
        if kind not in UNARY_FLOPS_PER_ELEMENT:
            raise GraphError(f"unknown unary kind {kind!r}; known: {', '.join(UNARY_FLOPS_PER_ELEMENT)}")
        return self._one(OpType.UNARY, (x,), {"kind": kind}, name, kind)

    def relu(self, x: Tensor, name: str | None = None) -> Tensor:
        """Element-wise ReLU."""
        return self.unary(x, "relu", name)

    def gelu(self, x: Tensor, name: str | None = None) -> Tensor:
        """Element-wise GELU."""
        return self.unary(x, "gelu", name)

    def dropout(self, x: Tensor, name: str | None = None) -> Tensor:
        """Dropout, an element-wise operator."""
        return self.unary(x, "dropout", name)

    def binary(self, a: Tensor, b: Tensor, kind: str, name: str | None = None) -> Tensor:
        """Element-wise operator of two activations, of a kind in BINARY_KINDS (add, mul); GraphError for
        another kind.
        """
        if kind not in BINARY_KINDS:
            raise GraphError(f"unknown binary kind {kind!r}; known: {', '.join(BINARY_KINDS)}")
        return self._one(OpType.BINARY, (a, b), {"kind": kind}, name, kind)

    def add_(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        """Element-wise sum `a + b` (named with a trailing underscore: `add` adds any operator)."""
        return self.binary(a, b, "add", name)

    def mul(self, a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
        """Element-wise product `a * b`."""
        return self.binary(a, b, "mul", name)

    def softmax(self, x: Tensor, axis: int = -1, name: str | None = None) -> Tensor:
        """Softmax along `axis`."""
        return self._one(OpType.SOFTMAX, (x,), {"axis": axis}, name)

    def embedding(self, ids: Tensor, num_embeddings: int, embedding_dim: int, name: str | None = None) -> Tensor:
        """Table lookup of integer `ids` in a `num_embeddings` x `embedding_dim` table."""
        return self._one(OpType.EMBEDDING, (ids,), {"num_embeddings": num_embeddings,
                                                    "embedding_dim": embedding_dim}, name)

    def lstm(self, x: Tensor, hidden_size: int, name: str | None = None) -> Tensor:
        """One LSTM layer over a (batch, seq, features) sequence, `hidden_size` wide."""
        return self._one(OpType.LSTM, (x,), {"input_size": x.shape[-1], "hidden_size": hidden_size}, name)

    def attention(self, q: Tensor, k: Tensor, v: Tensor, heads: int, name: str | None = None, *,
                  scores: str = "fused", dropout: bool = False, causal: bool = False) -> Tensor:
        """Scaled dot-product attention. `scores="materialized"`: an implementation without a fused
        kernel writes the heads x Sq x Sk scores and probabilities to memory (priced by
        `cost.kernels.attention_score_traffic`); `dropout`: dropout on the probabilities; `causal`:
        each query attends to the keys before it only (a decoder's self-attention), which a fused
        kernel exploits by skipping the masked tiles (`cost.attention`)."""
        if scores not in ("fused", "materialized"):
            raise GraphError(f"attention scores must be 'fused' or 'materialized', got {scores!r}")
        attrs = {"heads": heads}
        if scores != "fused":  # defaults stay out of the attributes: existing graphs keep their signature
            attrs["scores"] = scores
        if dropout:
            attrs["dropout"] = True
        if causal:
            attrs["causal"] = True
        return self._one(OpType.ATTENTION, (q, k, v), attrs, name)

    def concat(self, xs: Sequence[Tensor], axis: int, name: str | None = None) -> Tensor:
        """Concatenation of `xs` along `axis`."""
        return self._one(OpType.CONCAT, tuple(xs), {"axis": axis}, name)

    def split(self, x: Tensor, sizes: Sequence[int], axis: int, name: str | None = None) -> tuple[Tensor, ...]:
        """Split of `x` along `axis` into pieces of `sizes`; returns one tensor per piece."""
        return self.add(OpType.SPLIT, (x,), {"axis": axis, "sizes": tuple(sizes)}, name)

    def reshape(self, x: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
        """Reshape of `x` to `shape`; one -1 entry is inferred from the element count."""
        shape = list(shape)
        if shape.count(-1) == 1:
            known = 1
            for d in shape:
                known *= d if d != -1 else 1
            shape[shape.index(-1)] = x.numel // known if known else 0
        return self._one(OpType.RESHAPE, (x,), {"shape": tuple(shape)}, name)

    def flatten(self, x: Tensor, name: str | None = None) -> Tensor:
        """Reshape to (batch, everything else), named "flatten"."""
        return self._one(OpType.RESHAPE, (x,), {"shape": (x.shape[0], x.numel // x.shape[0])}, name, "flatten")

    def transpose(self, x: Tensor, perm: Sequence[int], name: str | None = None) -> Tensor:
        """Permutation of the axes of `x` by `perm`."""
        return self._one(OpType.TRANSPOSE, (x,), {"perm": tuple(perm)}, name)

    def softmax_cross_entropy(self, logits: Tensor, name: str | None = None) -> Tensor:
        """Softmax cross-entropy loss over `logits`, named "loss"."""
        return self._one(OpType.SOFTMAX_CE, (logits,), {}, name, "loss")
