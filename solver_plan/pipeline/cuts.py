"""DAG-aware stage boundaries: cuts at any antichain of the graph, not just at one topological order.

A contiguous pipeline of a DAG is a chain of ideals (prefix-closed node sets, PipeDream's antichain
"states") {} = I_0 < I_1 < ... < I_s = V; stage t holds I_t minus I_(t-1). The tensors crossing the
boundary after I are those produced in I and consumed outside it, each counted once:
    cut(I) = sum of activation bytes of v in I with a successor outside I.
`best_order` enumerates the ideals reachable by adding one node at a time (breadth first, capped at
`max_states`), and runs the straight-pipeline DP of PipeDream's optimizer over pairs K < J:
    best[J][p] = min over K < J of max(best[K][p-1], U(J \\ K), 2 cut(K) / beta [K nonempty])
(U = forward + backward time; the cut after the last stage carries nothing). Cost: O(S^2 N) for the
subset test (one matrix product) and O(S^2 P) for the DP, S ideals, N nodes, P processors.
The optimal chain of ideals becomes one topological order (stage by stage, each in the base order),
so every chain planner sees those boundaries with their exact cut bytes. With `memory` the DP also
applies PipeDream's filter (a stage followed by q others keeps q + 1 batches:
f W + (q + 1) (cut(K) + activations of the stage) + 2 (cut(K) + cut(J)) <= M, with f W the model
state of `pipeline.memory`: `state_factor` = f, 3 for PipeDream's own rule), and drops it when no
chain passes (the chain planners then report the memory shortage themselves).

When the ideals exceed the cap, series chains (a node whose only predecessor has it as only
successor) are merged first and the enumeration retried: boundaries inside a merged run stay
available in the order, only the choice among parallel branches is coarser. Beyond that the base
order is kept (and said so).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

MAX_STATES = 3000  # ideals enumerated; the subset matrix is S^2 bytes


@dataclass(frozen=True)
class CutDag:
    """The layers of a graph (inputs removed) with what the DP needs, in a base topological order."""
    names: tuple[str, ...]
    preds: tuple[tuple[int, ...], ...]  # indices of layer predecessors
    succs: tuple[tuple[int, ...], ...]
    load: tuple[float, ...]  # forward + backward seconds
    weights: tuple[float, ...]  # bytes
    act: tuple[float, ...]  # output bytes used by later nodes (what a cut carries)
    kept: tuple[float, ...]  # activation bytes kept for the backward (all outputs of the node's layers)
    input_bytes: float = 0.0


@dataclass(frozen=True)
class OrderChoice:
    """The topological order `best_order` chose, the DP period behind it, the ideals it enumerated and a
    note."""
    order: tuple[str, ...]
    period_s: float | None  # the DP's period for the chosen chain of ideals (None: base order kept)
    states: int
    note: str


def _grow(starts: Sequence[int], grow, max_states: int) -> list[int] | None:
    """Breadth-first: the empty ideal, `starts`, and everything `grow(ideal)` (an iterable of larger
    ideals) reaches from them, in discovery order; None once more than `max_states` are seen."""
    frontier = list(dict.fromkeys(starts))
    seen = {0, *frontier}
    out = list(dict.fromkeys([0, *frontier]))
    while frontier:
        nxt = []
        for ideal in frontier:
            for grown in grow(ideal):
                if grown not in seen:
                    seen.add(grown)
                    nxt.append(grown)
                    if len(seen) > max_states:
                        return None
        out.extend(nxt)
        frontier = nxt
    return out


def _ideals(preds_mask: Sequence[int], max_states: int) -> list[int] | None:
    """Every ideal reachable from the empty set by adding one ready node, as bitmasks; None past the cap."""
    n = len(preds_mask)

    def add_one_ready_node(ideal: int):
        for v in range(n):
            if not ideal >> v & 1 and preds_mask[v] & ~ideal == 0:
                yield ideal | 1 << v
    return _grow([0], add_one_ready_node, max_states)


def _closure_ideals(preds_mask: Sequence[int], succs: Sequence[Sequence[int]], max_states: int) -> list[int] | None:
    """PipeDream's states: from the closure of each source, grow by the closure of one successor of
    the ideal (a node and all its ancestors); None past the cap."""
    n = len(preds_mask)
    closure = [0] * n
    for v in range(n):  # base order is topological: predecessors' closures are ready
        mask = 1 << v
        for u in range(n):
            if preds_mask[v] >> u & 1:
                mask |= closure[u]
        closure[v] = mask

    def add_one_successor_closure(ideal: int):
        for u in range(n):
            if ideal >> u & 1:
                for v in succs[u]:
                    if not ideal >> v & 1:
                        yield ideal | closure[v]
    out = _grow([closure[v] for v in range(n) if preds_mask[v] == 0], add_one_successor_closure, max_states)
    if out is not None and (1 << n) - 1 not in set(out):
        out.append((1 << n) - 1)  # several sinks: the whole graph closes the last stage
    return out


def _groups(dag: CutDag, series: bool) -> list[list[int]]:
    """Nodes that may share one state bit: a free dead end (no successor, one predecessor, no time
    and no weights; e.g. an unused LSTM hidden state) goes with its predecessor at no loss, as
    PipeDream drops such sinks; with `series` (lossy, only past the cap), also a node whose only
    predecessor has it as only successor."""
    head = list(range(len(dag.names)))
    for v in range(len(dag.names)):  # base order is topological: a predecessor's head is final
        free_sink = not dag.succs[v] and dag.load[v] == 0 and dag.weights[v] == 0
        if len(dag.preds[v]) == 1 and (free_sink or (series and len(dag.succs[dag.preds[v][0]]) == 1)):
            head[v] = head[dag.preds[v][0]]
    groups: dict[int, list[int]] = {}
    for v in range(len(dag.names)):
        groups.setdefault(head[v], []).append(v)
    return list(groups.values())


def _group_masks(dag: CutDag, groups: list[list[int]]) -> list[int]:
    index = {v: g for g, members in enumerate(groups) for v in members}
    masks = []
    for members in groups:
        mask = 0
        for v in members:
            for u in dag.preds[v]:
                if index[u] != index[v]:
                    mask |= 1 << index[u]
        masks.append(mask)
    return masks


def _group_succs(preds_mask: Sequence[int]) -> list[list[int]]:
    succs: list[list[int]] = [[] for _ in preds_mask]
    for v, mask in enumerate(preds_mask):
        for u in range(len(preds_mask)):
            if mask >> u & 1:
                succs[u].append(v)
    return succs


def _cut_bytes(dag: CutDag, member: np.ndarray) -> np.ndarray:
    """cut(I) for every ideal (rows of the S x N membership matrix)."""
    n = len(dag.names)
    leaves = np.zeros((n, n), dtype=np.float32)  # leaves[u, v] = 1: edge u -> v
    for u in range(n):
        for v in dag.succs[u]:
            leaves[u, v] = 1.0
    outside = 1.0 - member
    crosses = (member * ((outside @ leaves.T) > 0)).astype(np.float64)  # u in I with a successor outside
    return crosses @ np.asarray(dag.act, dtype=np.float64)


def best_order(dag: CutDag, processors: int, bandwidth: float = math.inf, memory: float | None = None,
               max_states: int = MAX_STATES, deadline=None, state_factor: float | None = None) -> OrderChoice:
    """The topological order whose contiguous splits include the best chain of ideals (module docstring).
    `state_factor`: model-state bytes per byte of weights in the memory filter (default: the one of
    `pipeline.memory.DEFAULT_STATE`, fp32 Adam); chain problems pass their `state.weight_factor`.
    Its work is bounded by `max_states` (deterministic); `deadline` is only the safety net of a
    machine far slower than expected: when it runs out the base order is kept, and the note says so."""
    n = len(dag.names)
    base = tuple(dag.names)
    if processors < 2 or n < 2:
        return OrderChoice(base, None, 0, "one stage: the base topological order")
    groups = _groups(dag, series=False)
    preds_mask = _group_masks(dag, groups)
    masks, how = _ideals(preds_mask, max_states), ""
    if masks is None:
        succs = _group_succs(preds_mask)
        masks, how = _closure_ideals(preds_mask, succs, max_states), " (PipeDream's antichain moves)"
    if masks is None:
        groups = _groups(dag, series=True)
        masks, how = _ideals(_group_masks(dag, groups), max_states), " (series runs merged)"
    if masks is None:
        return OrderChoice(base, None, max_states, f"more than {max_states} antichain states: cuts follow the "
                                                   f"base topological order")
    member = np.zeros((len(masks), n), dtype=np.float32)
    for s, mask in enumerate(masks):
        for g, members in enumerate(groups):
            if mask >> g & 1:
                member[s, members] = 1.0
    masks_sorted = np.argsort(member.sum(axis=1), kind="stable")
    member = member[masks_sorted]
    load = member @ np.asarray(dag.load, dtype=np.float64)
    if state_factor is None:
        from solver_plan.pipeline.memory import DEFAULT_STATE
        state_factor = DEFAULT_STATE.weight_factor
    state = state_factor * (member @ np.asarray(dag.weights, dtype=np.float64))  # model state per ideal
    act = member @ np.asarray(dag.kept, dtype=np.float64)
    cut = _cut_bytes(dag, member)
    comm = np.zeros_like(cut) if math.isinf(bandwidth) else 2.0 * cut / bandwidth
    comm[0] = 0.0  # nothing is sent into the first stage
    subset = (member @ (1.0 - member).T) == 0  # subset[k, j]: ideal k inside ideal j
    np.fill_diagonal(subset, False)
    period, choice = _dp(load, state, act, cut, comm, subset, processors, memory, deadline)
    if memory is not None and not np.isfinite(period) and choice is not None:
        period, choice = _dp(load, state, act, cut, comm, subset, processors, None, deadline)
    if choice is None:
        return OrderChoice(base, None, len(masks), f"the time limit ran out while choosing cuts among {len(masks)} "
                                                   f"antichain states (wall-clock safety net): base topological order")
    if not np.isfinite(period):
        return OrderChoice(base, None, len(masks), "no chain of ideals found: base topological order")
    order = _order_from(choice, member, base)
    return OrderChoice(order, float(period), len(masks),
                       f"stage boundaries at antichains: {len(masks)} states{how}, DP period {period:.6g} s")


def _dp(load, state, act, cut, comm, subset, processors, memory, deadline=None):
    """best[j, p] over ideals j (sorted by size) with p stages (`state`: model-state bytes of each
    ideal, so a stage keeps state[j] - state[k]); returns (period, chain of ideals),
    or (inf, None) when `deadline` (the wall-clock safety net) runs out first."""
    S = len(load)
    full = S - 1  # the largest ideal is the whole graph
    best = np.full((S, processors + 1), np.inf)
    arg = np.full((S, processors + 1), -1, dtype=np.int64)
    best[0, 0] = 0.0
    # p stages up to here, so processors - p may follow: PipeDream's in-flight estimate (per column p)
    flight = (processors - np.arange(1, processors + 1) + 1.0)[None, :]
    for j in range(1, S):
        if deadline is not None and j % 256 == 1 and deadline.expired():  # from the first ideal on
            return np.inf, None
        ks = np.flatnonzero(subset[:, j])
        if not ks.size:
            continue
        stage = np.maximum(load[j] - load[ks], comm[ks])
        if j != full:
            stage = np.maximum(stage, comm[j])
        value = np.maximum(best[ks, :processors], stage[:, None])  # all p at once: column p - 1
        if memory is not None:
            stored = (cut[ks] + act[j] - act[ks])[:, None]
            need = (state[j] - state[ks] + 2 * (cut[ks] + (cut[j] if j != full else 0)))[:, None] \
                + flight * stored
            value = np.where(need <= memory, value, np.inf)
        i = np.argmin(value, axis=0)  # first minimum, as one p at a time did
        best[j, 1:] = value[i, np.arange(processors)]
        arg[j, 1:] = ks[i]
    p = int(np.argmin(best[full, 1:])) + 1
    period = best[full, p]
    chain, j = [full], full
    while j > 0 and np.isfinite(period):
        j = int(arg[j, p])
        p -= 1
        chain.append(j)
    return period, chain[::-1]


def _order_from(chain: list[int], member: np.ndarray, base: tuple[str, ...]) -> tuple[str, ...]:
    order, placed = [], np.zeros(member.shape[1], dtype=bool)
    for j in chain[1:]:
        fresh = np.flatnonzero((member[j] > 0) & ~placed)
        order.extend(base[v] for v in fresh)  # flatnonzero keeps the base order inside the stage
        placed[fresh] = True
    return tuple(order)
