"""A chain of layers for pipelining, and the linearisation of a DAG into one.

`LayerChain` holds, per layer i (0-based): forward and backward time (s), weight bytes, `output`
(bytes the layer produces), `cut` (bytes crossing the cut after layer i, i.e. a_i of the MadPipe
paper), and `inner` (bytes produced inside a layer that was merged from several, kept for its
backward). `input_bytes` is a_0, the network input.

A stage of layers k..l (inclusive) keeps per batch in flight
    abar(k, l) = cut[k-1] + sum(inner[k..l]) + sum(output[k..l-1])
which for a true chain (output == cut, inner == 0) is the paper's sum of a_{i-1} over the stage.

Linearising a DAG: layers in topological order; the cut after position i costs every activation
produced at or before i and consumed after i (skip connections cross several cuts). Nodes without
inputs described as `Input...` (PipeDream) or of type INPUT give `input_bytes` and take no time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph, Operator
from solver_plan.graph.ops import OpType

Times = Callable[[Operator], tuple[float, float]]


def _check_values(name: str, field: str, values: Sequence[float], labels: Sequence[str]) -> None:
    for label, value in zip(labels, values):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(f"{field} must be a non-negative finite number, got {value!r}",
                             f"chain {name!r}, layer {label!r}")


@dataclass(frozen=True)
class LayerChain:
    name: str
    layer_names: tuple[str, ...]
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    weight_bytes: tuple[float, ...]
    output: tuple[float, ...]
    cut: tuple[float, ...]
    inner: tuple[float, ...]
    input_bytes: float = 0.0

    def __post_init__(self):
        n = len(self.layer_names)
        if n == 0:
            raise InputError("a chain needs at least one layer", f"chain {self.name!r}")
        for field in ("forward_s", "backward_s", "weight_bytes", "output", "cut", "inner"):
            values = getattr(self, field)
            if len(values) != n:
                raise InputError(f"{field} has {len(values)} values for {n} layers", f"chain {self.name!r}")
            _check_values(self.name, field, values, self.layer_names)
        _check_values(self.name, "input_bytes", (self.input_bytes,), ("input",))

    def __len__(self) -> int:
        return len(self.layer_names)

    @staticmethod
    def simple(name: str, forward_s, backward_s, weight_bytes, activation_bytes, input_bytes: float = 0.0,
               layer_names: Sequence[str] | None = None) -> "LayerChain":
        """A true chain: each layer's output is what crosses the cut after it."""
        n = len(forward_s)
        names = tuple(layer_names) if layer_names is not None else tuple(f"L{i}" for i in range(n))
        acts = tuple(float(a) for a in activation_bytes)
        return LayerChain(name, names, tuple(map(float, forward_s)), tuple(map(float, backward_s)),
                          tuple(map(float, weight_bytes)), acts, acts, (0.0,) * len(acts), float(input_bytes))


def _is_input(op: Operator) -> bool:
    if op.inputs:
        return False
    return op.op_type == OpType.INPUT or str(op.attr("description", "")).startswith("Input")


def _measured_times(op: Operator) -> tuple[float, float]:
    if op.measured is None:
        raise InputError("has no measured times; give a cost model for the layer times", f"operator {op.name!r}")
    return op.measured.forward_s, op.measured.backward_s


def linearize(graph: Graph, times: Times | None = None) -> LayerChain:
    """The graph's operators in topological order as a chain (see the module docstring)."""
    times = times or _measured_times
    order = list(graph.topological_order)
    inputs = {n for n in order if _is_input(graph.op(n))}
    layers = [n for n in order if n not in inputs]
    if not layers:
        raise InputError("the graph has no layers besides its inputs", f"graph {graph.name!r}")
    position = {n: i for i, n in enumerate(layers)}
    position.update({n: -1 for n in inputs})
    # An activation born at position b and last used at d > b crosses cuts b..d-1 (inputs: 0..d-1).
    diff = [0.0] * (len(layers) + 1)
    input_bytes = 0.0
    for n in order:
        size = graph.op(n).activation_bytes
        born = position[n]
        dies = max((position[s] for s in graph.successors(n)), default=born)
        if born < 0:
            input_bytes += size
        if dies > born:
            diff[max(born, 0)] += size
            diff[dies] -= size
    cut, running = [], 0.0
    for i in range(len(layers)):
        running += diff[i]
        cut.append(max(0.0, running))
    ops = [graph.op(n) for n in layers]
    fwd, bwd = zip(*(times(op) for op in ops))
    output = [op.activation_bytes for op in ops]
    cut[-1] = output[-1]  # nothing crosses after the last layer; keep its output for reference
    return LayerChain(graph.name, tuple(layers), tuple(fwd), tuple(bwd),
                      tuple(float(op.param_bytes) for op in ops), tuple(output), tuple(cut),
                      (0.0,) * len(layers), input_bytes)



def coarsen(chain: LayerChain, max_layers: int) -> LayerChain:
    """Merge adjacent layers until at most `max_layers` remain.

    Greedy: repeatedly merge the adjacent pair with the smallest combined load, weighted up when
    the cut between them is small (small cuts are the good places to keep for pipelining).
    """
    if max_layers < 1:
        raise InputError(f"must be at least 1, got {max_layers}", "max_layers")
    groups = [[i] for i in range(len(chain))]
    load = [chain.forward_s[i] + chain.backward_s[i] for i in range(len(chain))]
    mean_cut = (sum(chain.cut[:-1]) / max(1, len(chain) - 1)) or 1.0
    while len(groups) > max_layers:
        def score(j: int) -> float:
            combined = sum(load[i] for i in groups[j]) + sum(load[i] for i in groups[j + 1])
            return combined * (1.0 + chain.cut[groups[j][-1]] / mean_cut) ** -1
        best = min(range(len(groups) - 1), key=score)
        groups[best:best + 2] = [groups[best] + groups[best + 1]]
    return merge_layers(chain, [(g[0], g[-1]) for g in groups])


def merge_layers(chain: LayerChain, spans: Sequence[tuple[int, int]]) -> LayerChain:
    """The chain whose layers are the given consecutive inclusive spans of this chain's layers."""
    expected = 0
    for first, last in spans:
        if first != expected or last < first:
            raise InputError(f"spans must cover the layers in order, got {list(spans)}", f"chain {chain.name!r}")
        expected = last + 1
    if expected != len(chain):
        raise InputError(f"spans cover {expected} of {len(chain)} layers", f"chain {chain.name!r}")

    def total(values, first, last):
        return float(sum(values[first:last + 1]))
    return LayerChain(
        chain.name,
        tuple(chain.layer_names[f] if f == l else f"{chain.layer_names[f]}..{chain.layer_names[l]}" for f, l in spans),
        tuple(total(chain.forward_s, f, l) for f, l in spans),
        tuple(total(chain.backward_s, f, l) for f, l in spans),
        tuple(total(chain.weight_bytes, f, l) for f, l in spans),
        tuple(chain.output[l] for f, l in spans),
        tuple(chain.cut[l] for f, l in spans),
        tuple(total(chain.inner, f, l) + total(chain.output, f, l - 1) for f, l in spans),
        chain.input_bytes)
