"""Frozen graph IR: `Tensor`, `Operator`, `Graph`.

A `Graph` validates itself on construction: duplicate names, unknown inputs, cycles and shape
mismatches (re-inferred from each operator's type and attributes) raise `GraphError` naming the
operator. Use `GraphBuilder` (graph/builder.py) to make graphs; inside the package graphs are trusted.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator

from solver_plan.errors import GraphError
from solver_plan.graph.ops import OpType, ShapeError, infer


def freeze_attrs(attrs: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Operator attributes as sorted (name, value) pairs with lists made tuples, so operators are hashable."""
    def freeze(value):
        if isinstance(value, (list, tuple)):
            return tuple(freeze(v) for v in value)
        return value
    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))


@dataclass(frozen=True)
class Tensor:
    """A tensor of the graph: its name, shape (positive integers, validated) and bytes per element."""
    name: str
    shape: tuple[int, ...]
    dtype_bytes: int = 4

    def __post_init__(self):
        if any((not isinstance(d, int)) or d < 1 for d in self.shape):
            raise GraphError(f"tensor {self.name!r} has a non-positive or non-integer dimension: {self.shape}")

    @property
    def numel(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def bytes(self) -> int:
        """Size in bytes, elements x bytes per element."""
        return self.numel * self.dtype_bytes


@dataclass(frozen=True)
class Measured:
    """Measured times of one operator for the whole minibatch on one device (seconds)."""
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class Operator:
    """One operator of the graph: type, input tensor names, output tensors, attributes, forward FLOPs and
    parameters for the whole minibatch, and optional measured times or activation size from a profile.
    """
    name: str
    op_type: OpType
    inputs: tuple[str, ...]  # tensor names
    outputs: tuple[Tensor, ...]
    attr_items: tuple[tuple[str, Any], ...] = ()
    flops: float = 0.0  # forward FLOPs for the whole minibatch
    params: int = 0  # parameter count
    dtype_bytes: int = 4
    measured: Measured | None = None
    activation_bytes_override: float | None = None  # e.g. a profile's measured activation size

    @property
    def attrs(self) -> dict[str, Any]:
        """Attributes as a dict."""
        return dict(self.attr_items)

    def attr(self, key: str, default: Any = None) -> Any:
        """The attribute `key`, or `default`."""
        for k, v in self.attr_items:
            if k == key:
                return v
        return default

    @property
    def output(self) -> Tensor:
        """The first (usually only) output tensor."""
        return self.outputs[0]

    @property
    def backward_flops(self) -> float:
        """Backward FLOPs, 2 x forward: a gradient for the input and one for the weights, each the forward's
        size (the usual estimate, e.g. Kaplan et al. 2020).
        """
        return 2.0 * self.flops

    @property
    def param_bytes(self) -> int:
        """Parameter bytes, parameters x bytes per element."""
        return self.params * self.dtype_bytes

    @property
    def activation_bytes(self) -> float:
        """Bytes of output kept for the backward pass (whole minibatch)."""
        if self.activation_bytes_override is not None:
            return self.activation_bytes_override
        return float(sum(t.bytes for t in self.outputs))


@dataclass(frozen=True)
class Edge:
    """A data dependency: tensor `tensor` from producer `src` into consumer `dst` at input position
    `input_index`.
    """
    src: str  # producer operator
    dst: str  # consumer operator
    tensor: str
    input_index: int  # position of the tensor among the consumer's inputs


@dataclass(frozen=True)
class Graph:
    """A computation graph: its operators, with lookups by name, edges and a topological order built and
    validated once at construction (GraphError for duplicate names, unknown inputs, cycles, or output
    shapes that disagree with `infer`).
    """
    name: str
    operators: tuple[Operator, ...]
    _index: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # filled by __post_init__

    def __post_init__(self):
        ops: dict[str, Operator] = {}
        producer: dict[str, str] = {}
        tensors: dict[str, Tensor] = {}
        for op in self.operators:
            if op.name in ops:
                raise GraphError("duplicate operator name", f"operator {op.name!r}")
            ops[op.name] = op
            for t in op.outputs:
                if t.name in tensors:
                    raise GraphError(f"tensor {t.name!r} produced twice", f"operator {op.name!r}")
                tensors[t.name] = t
                producer[t.name] = op.name
        for op in self.operators:
            for name in op.inputs:
                if name not in tensors:
                    raise GraphError(f"unknown input tensor {name!r}", f"operator {op.name!r}")
        order = self._topological_order(ops, producer)
        for op in self.operators:
            self._check_shapes(op, tensors)
        edges = tuple(Edge(producer[t], op.name, t, i)
                      for op in (ops[n] for n in order) for i, t in enumerate(op.inputs))
        consumers: dict[str, list[str]] = {n: [] for n in ops}
        preds: dict[str, list[str]] = {n: [] for n in ops}
        for e in edges:
            if e.dst not in consumers[e.src]:
                consumers[e.src].append(e.dst)
            if e.src not in preds[e.dst]:
                preds[e.dst].append(e.src)
        object.__setattr__(self, "_index", {
            "ops": ops, "tensors": tensors, "producer": producer, "order": order, "edges": edges,
            "succ": {k: tuple(v) for k, v in consumers.items()},
            "pred": {k: tuple(v) for k, v in preds.items()},
        })

    @staticmethod
    def _topological_order(ops: dict[str, Operator], producer: dict[str, str]) -> tuple[str, ...]:
        indegree = {name: 0 for name in ops}
        succ: dict[str, list[str]] = {name: [] for name in ops}
        for op in ops.values():
            for src in sorted({producer[t] for t in op.inputs}):
                succ[src].append(op.name)
                indegree[op.name] += 1
        ready = [n for n in ops if indegree[n] == 0]  # keeps the given order among ready nodes
        order: list[str] = []
        while ready:
            node = ready.pop(0)
            order.append(node)
            for nxt in succ[node]:
                indegree[nxt] -= 1
                if indegree[nxt] == 0:
                    ready.append(nxt)
        if len(order) != len(ops):
            stuck = next(n for n in ops if indegree[n] > 0)
            raise GraphError("the graph has a cycle through this operator", f"operator {stuck!r}")
        return tuple(order)

    @staticmethod
    def _check_shapes(op: Operator, tensors: dict[str, Tensor]) -> None:
        try:
            sem = infer(op.op_type, tuple(tensors[t].shape for t in op.inputs), op.attrs)
        except ShapeError as exc:
            raise GraphError(str(exc), f"operator {op.name!r}") from None
        except (KeyError, TypeError, IndexError) as exc:
            raise GraphError(f"missing or malformed attribute ({exc})", f"operator {op.name!r}") from None
        got = tuple(t.shape for t in op.outputs)
        if got != sem.outputs:
            raise GraphError(f"output shapes {got} do not match the inferred {sem.outputs}",
                             f"operator {op.name!r}")

    # --- queries ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.operators)

    def __iter__(self) -> Iterator[Operator]:
        return (self._index["ops"][n] for n in self._index["order"])

    def op(self, name: str) -> Operator:
        """The operator named `name`."""
        return self._index["ops"][name]

    def tensor(self, name: str) -> Tensor:
        """The tensor named `name`."""
        return self._index["tensors"][name]

    def producer(self, tensor: str) -> Operator:
        """The operator that outputs tensor `tensor`."""
        return self._index["ops"][self._index["producer"][tensor]]

    @property
    def topological_order(self) -> tuple[str, ...]:
        """Operator names in a topological order."""
        return self._index["order"]

    @property
    def edges(self) -> tuple[Edge, ...]:
        """Every data dependency of the graph."""
        return self._index["edges"]

    def successors(self, name: str) -> tuple[str, ...]:
        """Names of the operators that consume an output of operator `name`."""
        return self._index["succ"][name]

    def predecessors(self, name: str) -> tuple[str, ...]:
        """Names of the operators whose outputs operator `name` consumes."""
        return self._index["pred"][name]

    @property
    def total_params(self) -> int:
        """Total parameters of the model."""
        return sum(op.params for op in self.operators)

    @property
    def total_flops(self) -> float:
        """Total forward FLOPs of the minibatch."""
        return float(sum(op.flops for op in self.operators))

    @property
    def has_measured_times(self) -> bool:
        """Whether every operator but the inputs has measured times (a profile), so compute is not estimated.
        """
        return all(op.measured is not None for op in self.operators if op.op_type != OpType.INPUT)

    def to_networkx(self):
        """The operator graph as a networkx DiGraph (nodes are operator names)."""
        import networkx as nx
        g = nx.DiGraph()
        for name in self.topological_order:
            g.add_node(name)
        for e in self.edges:
            g.add_edge(e.src, e.dst)
        return g
