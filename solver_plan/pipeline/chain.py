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

import heapq
import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph, Operator
from solver_plan.graph.ops import OpType
from solver_plan.pipeline.cuts import CutDag

Times = Callable[[Operator], tuple[float, float]]
# (weight bytes, activation bytes) of an operator; the default is the graph's declared sizes.
Sizes = Callable[[Operator], tuple[float, float]]


def declared_sizes(op: Operator) -> tuple[float, float]:
    """(parameter bytes, activation bytes) of an operator as its graph declares them."""
    return float(op.param_bytes), float(op.activation_bytes)


def _check_values(name: str, field: str, values: Sequence[float], labels: Sequence[str]) -> None:
    for label, value in zip(labels, values):
        if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(f"{field} must be a non-negative finite number, got {value!r}",
                             f"chain {name!r}, layer {label!r}")


@dataclass(frozen=True)
class LayerChain:
    """Per-layer times and sizes of a chain to pipeline (see the module text for each field)."""
    name: str
    layer_names: tuple[str, ...]
    forward_s: tuple[float, ...]
    backward_s: tuple[float, ...]
    weight_bytes: tuple[float, ...]
    output: tuple[float, ...]
    cut: tuple[float, ...]
    inner: tuple[float, ...]
    input_bytes: float = 0.0
    notes: tuple[str, ...] = field(default=(), compare=False)  # how the chain was made (cuts, blocks)

    def __post_init__(self):
        n = len(self.layer_names)
        if n == 0:
            raise InputError("a chain needs at least one layer", f"chain {self.name!r}")
        for name in ("forward_s", "backward_s", "weight_bytes", "output", "cut", "inner"):
            values = getattr(self, name)
            if len(values) != n:
                raise InputError(f"{name} has {len(values)} values for {n} layers", f"chain {self.name!r}")
            _check_values(self.name, name, values, self.layer_names)
        _check_values(self.name, "input_bytes", (self.input_bytes,), ("input",))

    def __len__(self) -> int:
        return len(self.layer_names)

    def with_notes(self, notes: tuple[str, ...]) -> "LayerChain":
        """The same chain with `notes` added to how it was made."""
        return replace(self, notes=self.notes + tuple(notes))

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


def layer_order(graph: Graph) -> tuple[list[str], set[str]]:
    """(layers in the graph's topological order, names of the input nodes)."""
    order = list(graph.topological_order)
    inputs = {n for n in order if _is_input(graph.op(n))}
    layers = [n for n in order if n not in inputs]
    if not layers:
        raise InputError("the graph has no layers besides its inputs", f"graph {graph.name!r}")
    return layers, inputs


def linearize(graph: Graph, times: Times | None = None, order: Sequence[str] | None = None,
              sizes: Sizes | None = None) -> LayerChain:
    """The graph's operators as a chain (see the module docstring), in `order` (a topological order
    of the layers, e.g. from `pipeline.cuts.best_order`) or the graph's own topological order;
    `sizes` gives each operator's (weight, activation) bytes (default: as declared)."""
    times = times or _measured_times
    sizes = sizes or declared_sizes
    layers, inputs = layer_order(graph)
    if order is not None:
        if sorted(order) != sorted(layers):
            raise InputError("the order must list every layer of the graph once", f"graph {graph.name!r}")
        layers = list(order)
    order = [*inputs, *layers]
    position = {n: i for i, n in enumerate(layers)}
    position.update({n: -1 for n in inputs})
    for n in layers:
        if any(position[p] >= position[n] for p in graph.predecessors(n)):
            raise InputError(f"the order puts {n!r} before one of its inputs", f"graph {graph.name!r}")
    # An activation born at position b and last used at d > b crosses cuts b..d-1 (inputs: 0..d-1).
    diff = [0.0] * (len(layers) + 1)
    input_bytes = 0.0
    for n in order:
        size = sizes(graph.op(n))[1]
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
    weights, output = zip(*(sizes(op) for op in ops))
    output = list(output)
    cut[-1] = output[-1]  # nothing crosses after the last layer; keep its output for reference
    return LayerChain(graph.name, tuple(layers), tuple(fwd), tuple(bwd),
                      tuple(float(w) for w in weights), tuple(output), tuple(cut),
                      (0.0,) * len(layers), input_bytes)



def coarsen(chain: LayerChain, max_layers: int, keep: Sequence[int] = ()) -> LayerChain:
    """Merge adjacent layers until at most `max_layers` remain, never across a cut in `keep`
    (indices i of cuts after layer i, e.g. a known good allocation's stage boundaries).

    Greedy: repeatedly merge the adjacent pair with the smallest combined load, weighted up when
    the cut between them is small (small cuts are the good places to keep for pipelining).
    """
    if max_layers < 1:
        raise InputError(f"must be at least 1, got {max_layers}", "max_layers")
    kept = set(keep)
    groups = [[i] for i in range(len(chain))]
    load = [chain.forward_s[i] + chain.backward_s[i] for i in range(len(chain))]
    mean_cut = (sum(chain.cut[:-1]) / max(1, len(chain) - 1)) or 1.0
    while len(groups) > max(max_layers, len(kept) + 1):
        def score(j: int) -> float:
            if groups[j][-1] in kept:
                return math.inf
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
        chain.input_bytes, chain.notes)


BLOCK = re.compile(r"^block\d+$")


def block_key(name: str) -> str | None:
    """The block an operator belongs to: its name up to the first `blockN` scope
    ("encoder/block3/mlp/fc1" -> "encoder/block3"), None outside blocks."""
    parts = name.split("/")
    for i, part in enumerate(parts[:-1]):
        if BLOCK.match(part):
            return "/".join(parts[:i + 1])
    return None


def is_transformer(graph: Graph) -> bool:
    """Transformer models (attention inside `blockN` scopes) are cut at block boundaries by default."""
    return any(graph.op(n).op_type == OpType.ATTENTION and block_key(n) is not None for n in graph.topological_order)


def layer_groups(graph: Graph, by_block: bool) -> list[list[str]]:
    """Layers in base topological order, grouped: one group per block when `by_block` (its members
    in base order), else one group per layer. Groups are listed in order of their first member."""
    layers, _ = layer_order(graph)
    if not by_block:
        return [[n] for n in layers]
    groups: dict[str, list[str]] = {}
    for n in layers:
        groups.setdefault(block_key(n) or n, []).append(n)
    return list(groups.values())


def cut_dag(graph: Graph, times: Times | None = None, groups: Sequence[Sequence[str]] | None = None,
            sizes: Sizes | None = None):
    """The layers of the graph (inputs removed) as a `pipeline.cuts.CutDag` for DAG-aware cutting;
    with `groups`, each group is one node (times and weights summed, its output the bytes of its
    members used outside it); `sizes` as for `linearize`. Returns None when the groups make a cycle."""
    times = times or _measured_times
    sizes = sizes or declared_sizes
    layers, inputs = layer_order(graph)
    groups = [list(g) for g in groups] if groups is not None else [[n] for n in layers]
    owner = {n: g for g, members in enumerate(groups) for n in members}
    preds: list[set[int]] = [set() for _ in groups]
    succs: list[set[int]] = [set() for _ in groups]
    act = [0.0] * len(groups)
    for g, members in enumerate(groups):
        for n in members:
            outside = [owner[s] for s in graph.successors(n) if s in owner and owner[s] != g]
            if outside or not graph.successors(n):
                act[g] += sizes(graph.op(n))[1]
            for h in outside:
                succs[g].add(h)
                preds[h].add(g)
    rank = _topological_rank(preds, succs)
    if rank is None:  # blocks that feed each other both ways
        return None
    order = sorted(range(len(groups)), key=rank.__getitem__)
    renumber = {g: i for i, g in enumerate(order)}
    groups = [groups[g] for g in order]
    preds = [{renumber[h] for h in preds[g]} for g in order]
    succs = [{renumber[h] for h in succs[g]} for g in order]
    act = [act[g] for g in order]
    load = [sum(sum(times(graph.op(n))) for n in members) for members in groups]
    return CutDag(tuple("|".join(m) for m in groups), tuple(tuple(sorted(p)) for p in preds),
                  tuple(tuple(sorted(s)) for s in succs), tuple(float(x) for x in load),
                  tuple(float(sum(sizes(graph.op(n))[0] for n in m)) for m in groups), tuple(act),
                  tuple(float(sum(sizes(graph.op(n))[1] for n in m)) for m in groups),
                  float(sum(sizes(graph.op(n))[1] for n in inputs)))


def _topological_rank(preds: list[set[int]], succs: list[set[int]]) -> list[int] | None:
    """Kahn's order of the groups, ties by index (the base order); None when there is a cycle."""
    waiting = [len(p) for p in preds]
    ready = [g for g, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    rank = [-1] * len(preds)
    for position in range(len(preds)):
        if not ready:
            return None
        g = heapq.heappop(ready)
        rank[g] = position
        for h in succs[g]:
            waiting[h] -= 1
            if waiting[h] == 0:
                heapq.heappush(ready, h)
    return rank
