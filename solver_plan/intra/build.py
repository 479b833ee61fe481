"""Build a `ConfigProblem` from graph + cluster + cost model (the only place the three meet).

Building counts against the command's deadline, deterministically: before any cost is computed, the
work of the build (candidates costed + redistribution-matrix entries, at measured seconds per unit)
is compared with `BUILD_SHARE` of the command's nominal time limit, and the candidates per operator
are capped (one cap for all, the largest that fits, at least `FEW_CANDIDATES`; each operator keeps its
least-memory candidate, `capped_choice`) until it fits, and the problem says so (`capped_candidates`:
a proof on it holds for the candidates built, not for the request, `intra.solve`). The cap
depends only on the instance and the limit (fixed seconds per unit of work, never measured on this
machine), so the same command builds the same problem on an idle or a loaded machine. The wall
clock only stops: a build still running `grace_s` (BUILD_GRACE_S + BUILD_GRACE_SHARE of the
limit, within the slack a command's limit allows) after the command's deadline raises
`BuildStopped` carrying the one plan the build can still give (`one_candidate_problem`: each operator's
least-memory candidate; the front door answers it TIME_LIMIT, or no plan where it does not fit, saying
how far the build got); it never changes which candidates are built. A build finished in its grace leaves the planner no
time: it answers its first plan (TIME_LIMIT, cut short), which beats none.
"""
from __future__ import annotations

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.cost.enumerate import DEFAULT_MAX_CANDIDATES, enumerate_configs
from solver_plan.cost.model import CostModel
from solver_plan.deadline import GRACE_S, Deadline
from solver_plan.graph.ir import Graph
from solver_plan.intra.problem import ConfigProblem

__all__ = ["BUILD_SHARE", "DEFAULT_MAX_CANDIDATES", "BuildStopped", "build_config_problem", "candidate_cap"]

BUILD_SHARE = 0.25  # of the command's time limit, for the planned (deterministic) work
FEW_CANDIDATES = 4  # the least cap the budget imposes
BUILD_GRACE_S, BUILD_GRACE_SHARE = GRACE_S, 0.1  # how long past the deadline a build may finish
# Seconds per unit of build work, measured once (gpt2-xl batch 16 on k80-16x4, 64 devices, 48
# candidates, idle 2-core machine): 0.24 s for 27,807 candidates costed, 1.01 s for 1,754,064
# redistribution entries. Validated on t5-large (estimate 1.67 s, measured 3.0 s) and gpt3-175B
# (2.54 s vs 1.64 s) on the same cluster: within 2x, which BUILD_SHARE leaves room for.
# A redistribution entry costs more on more devices (its pieces are located device by device):
# scaled by devices / 64 above 64, it predicts gpt3-175B at 2.3 us per entry on 256 devices
# (measured 1.06 us) and 9.3 us on 1,024 (measured 5.4 us): conservative, as a budget should be.
S_PER_CANDIDATE = 8.7e-6
S_PER_EDGE_ENTRY = 5.8e-7
CALIBRATION_DEVICES = 64


class BuildStopped(Exception):
    """The command's deadline passed while the problem was being built: there is no problem to plan
    on. The message says how far the build got and why (the front door's TIME_LIMIT note);
    `problem` is what the build can still give (`one_candidate_problem`)."""

    def __init__(self, message: str, problem: ConfigProblem):
        super().__init__(message)
        self.problem = problem


def prefix_cannot_fit(enumerated, priced, cap: int, memory_limit: float) -> bool:
    """Whether no plan over each operator's first `cap` enumerated candidates fits `memory_limit` on
    device 0, which most placements start at: sum over operators of the least memory any of those
    candidates puts there (0 for one not on device 0) is a lower bound on device 0's memory, and this
    says whether it exceeds the limit. (A sufficient test, not the exact one: cheap, one pass.)"""
    floor = 0.0
    for configs, node_costs in zip(enumerated, priced):
        floor += min((cost.memory_bytes if 0 in cfg.devices else 0.0)
                     for cfg, cost in zip(configs[:cap], node_costs[:cap]))
        if floor > memory_limit:
            return True
    return False


def capped_choice(memory_bytes, cap: int) -> list[int]:
    """Which of an operator's enumerated candidates (in the enumeration's order, whose prefix holds
    the required single-device and data-parallel ones) a build capped at `cap` keeps when the first
    `cap` cannot fit (`prefix_cannot_fit`): those, except that the one needing the least memory per
    device takes the last place when it is not among them. The enumeration's order knows nothing of
    memory (at 3,072 devices megatron-1T's first 4 split its q, k, v by input features, each device
    holding the whole output: no plan fit 80 GB where the 6th candidate, split by output features,
    fits). Only then: where the first `cap` can fit, swapping one out for memory's sake gave worse
    plans (gpt3-175B on 1,024 devices at 1 s: 22.3 s against 19.1 s)."""
    least = min(range(len(memory_bytes)), key=lambda j: (memory_bytes[j], j))
    return list(range(cap)) if least < cap else [*range(cap - 1), least]


def build_seconds(counts: np.ndarray, edge_pairs: np.ndarray, cap: int, devices: int = CALIBRATION_DEVICES) -> float:
    """Estimated build time with at most `cap` candidates per operator (`counts`: each operator's
    enumerated candidates; `edge_pairs`: (source, destination) operator indices, one per tensor)."""
    kept = np.minimum(counts, cap).astype(float)
    entries = float(np.dot(kept[edge_pairs[:, 0]], kept[edge_pairs[:, 1]])) if len(edge_pairs) else 0.0
    per_entry = S_PER_EDGE_ENTRY * max(1.0, devices / CALIBRATION_DEVICES)
    return S_PER_CANDIDATE * float(kept.sum()) + per_entry * entries


def candidate_cap(counts: np.ndarray, edge_pairs: np.ndarray, max_candidates: int, budget_s: float | None,
                  devices: int = CALIBRATION_DEVICES) -> int:
    """The largest cap (FEW_CANDIDATES at least) whose estimated build time fits `budget_s`."""
    if budget_s is None or build_seconds(counts, edge_pairs, max_candidates, devices) <= budget_s:
        return max_candidates
    for cap in range(min(max_candidates, int(counts.max(initial=2))) - 1, FEW_CANDIDATES, -1):
        if build_seconds(counts, edge_pairs, cap, devices) <= budget_s:
            return cap
    return min(FEW_CANDIDATES, max_candidates)


def build_config_problem(graph: Graph, cluster: Cluster, memory_limit: float | None = None,
                         max_candidates: int = DEFAULT_MAX_CANDIDATES,
                         cost_model: CostModel | None = None, deadline: Deadline | None = None, *,
                         all_devices: bool = False) -> ConfigProblem:
    """One node per operator (topological order), one edge per connected operator pair.

    `all_devices=True`: every operator is split or replicated over all devices (Alpa's ILP setting).

    Several tensors between the same pair of operators (e.g. q, k and v from one producer) become
    one edge whose matrix is the sum of their redistribution costs.

    Raises `BuildStopped` when `deadline`'s wall clock passes its end by more than the build's grace
    during the build (the only thing the clock does here: the candidates built are decided by the
    nominal budget alone).
    """
    limit = None if deadline is None else deadline.nominal_s
    grace_s = BUILD_GRACE_S + BUILD_GRACE_SHARE * (limit or 0.0)
    stopped = (lambda: False) if deadline is None else (lambda: deadline.overrun(grace_s))  # the clock only stops
    cost_model = cost_model or CostModel(cluster)
    order = graph.topological_order
    index = {name: i for i, name in enumerate(order)}
    enumerated = [enumerate_configs(graph.op(name), graph, cluster.num_devices, max_candidates=max_candidates,
                                    all_devices=all_devices) for name in order]
    edge_pairs = np.array([(index[e.src], index[e.dst]) for e in graph.edges], dtype=np.int64).reshape(-1, 2)
    counts = np.array([len(configs) for configs in enumerated], dtype=np.int64)
    planned = candidate_cap(counts, edge_pairs, max_candidates, None if limit is None else BUILD_SHARE * limit,
                            cluster.num_devices)
    estimate_s = build_seconds(counts, edge_pairs, planned, cluster.num_devices)
    if deadline is not None:  # the solver plans with what the build's estimate leaves, idle or loaded
        deadline.spend(estimate_s)
    priced = []
    for done, (name, configs) in enumerate(zip(order, enumerated)):
        if stopped():
            why = _stopped_note(f"{done} of {len(order)} operators costed", estimate_s)
            raise BuildStopped(why, _least_memory_problem(graph, cluster, cost_model, enumerated, memory_limit, why))
        priced.append(cost_model.nodes(graph, graph.op(name), configs[:planned]))
    # the enumeration's first candidates, unless no plan of theirs can fit: then each operator's
    # least-memory candidate takes the last place, found by pricing every candidate's memory (the
    # extra work charged as candidates costed, decided by the costs alone)
    if memory_limit is not None and prefix_cannot_fit(enumerated, priced, planned, memory_limit):
        if deadline is not None:
            deadline.spend(S_PER_CANDIDATE * float((counts - np.minimum(counts, planned)).sum()))
        for done, (name, configs) in enumerate(zip(order, enumerated)):
            if stopped():
                why = _stopped_note(f"{done} of {len(order)} operators' other candidates costed", estimate_s)
                raise BuildStopped(why, _least_memory_problem(graph, cluster, cost_model, enumerated, memory_limit,
                                                              why))
            if len(configs) > planned:
                op = graph.op(name)
                kept = capped_choice(cost_model.node_memory(graph, op, configs), planned)
                enumerated[done] = tuple(configs[j] for j in kept)
                priced[done] = cost_model.nodes(graph, op, enumerated[done])
    candidates = [tuple(configs[:planned]) for configs in enumerated]
    costs, memory = _cost_arrays(priced)
    def check(done: int) -> None:
        if stopped():
            why = _stopped_note(f"{done} of {len(graph.edges)} tensors' redistribution priced", estimate_s)
            raise BuildStopped(why, one_candidate_problem(graph, cluster, cost_model, candidates, costs, memory,
                                                          memory_limit, why))
    pairs, edge_costs = _redistributions(graph, cost_model, candidates, check)
    notes: tuple[str, ...] = ()
    if planned < max_candidates:
        notes += (f"at most {planned} candidates per operator (not {max_candidates}): the estimated build work "
                  f"({build_seconds(counts, edge_pairs, max_candidates, cluster.num_devices):.1f} s) exceeds {BUILD_SHARE:.0%} of the "
                  f"{limit:g} s time limit",)
    return ConfigProblem(
        names=tuple(order), candidates=tuple(candidates), node_costs=tuple(costs),
        node_memory=tuple(memory), node_devices=tuple(tuple(cfg.devices for cfg in c) for c in candidates),
        edges=pairs, edge_costs=edge_costs, num_devices=cluster.num_devices, memory_limit=memory_limit,
        name=graph.name, context=(graph, cluster, cost_model), notes=notes,
        capped_candidates=planned if bool((counts > planned).any()) else None)


def _least_memory_problem(graph: Graph, cluster: Cluster, cost_model: CostModel, enumerated, memory_limit,
                          why: str) -> ConfigProblem:
    """What a build stopped while costing operators can still give (`one_candidate_problem`): each
    operator's least-memory candidate of all it has (`CostModel.node_memory`, memory alone, a fraction
    of full pricing; memoised for those already priced), then that one priced. The plan likeliest to
    fit, found by the costs alone."""
    chosen, priced = [], []
    for name, configs in zip(graph.topological_order, enumerated):
        op = graph.op(name)
        best = (configs[int(np.argmin(cost_model.node_memory(graph, op, configs)))],)
        chosen.append(best)
        priced.append(cost_model.nodes(graph, op, best))
    return one_candidate_problem(graph, cluster, cost_model, chosen, *_cost_arrays(priced), memory_limit, why)


def _cost_arrays(priced) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Each operator's candidates' seconds and bytes as arrays, from their `NodeCost`s."""
    return ([np.array([c.seconds for c in node_costs], dtype=float) for node_costs in priced],
            [np.array([c.memory_bytes for c in node_costs], dtype=float) for node_costs in priced])


def _redistributions(graph: Graph, cost_model: CostModel, candidates, check=None):
    """(operator pairs, their seconds matrices) of every tensor between `candidates` (per operator, in
    topological order): several tensors between one pair summed into one matrix; `check(done)` is
    called before each tensor (the build's clock check)."""
    index = {name: i for i, name in enumerate(graph.topological_order)}
    edge_matrices: dict[tuple[int, int], np.ndarray] = {}
    for done, edge in enumerate(graph.edges):
        if check is not None:
            check(done)
        u, v = index[edge.src], index[edge.dst]
        matrix = cost_model.edge_matrix(graph, edge, candidates[u], candidates[v])
        edge_matrices[(u, v)] = edge_matrices[(u, v)] + matrix if (u, v) in edge_matrices else matrix
    pairs = tuple(sorted(edge_matrices))
    return pairs, tuple(np.asarray(edge_matrices[p], dtype=float) for p in pairs)


def one_candidate_problem(graph: Graph, cluster: Cluster, cost_model: CostModel, candidates, costs, memory,
                          memory_limit: float | None, why: str) -> ConfigProblem:
    """What a build stopped by the clock can still give: each operator's least-memory candidate among
    `candidates` (the plan likeliest to fit; `costs` and `memory` their priced seconds and bytes: the
    build's own, or one candidate each from `_least_memory_problem`), and its tensors priced one pair each (an
    edge is k^2 times less work than its k x k matrix, so this ends within the slack the limit allows;
    no work budget is left to decide by). One candidate: its only plan is TIME_LIMIT at best, never a
    proof (`capped_candidates` = 1)."""
    pick = [int(np.argmin(m)) for m in memory]
    chosen = [(configs[j],) for configs, j in zip(candidates, pick)]
    pairs, edge_costs = _redistributions(graph, cost_model, chosen)
    return ConfigProblem(
        names=tuple(graph.topological_order), candidates=tuple(chosen),
        node_costs=tuple(c[[j]] for c, j in zip(costs, pick)), node_memory=tuple(m[[j]] for m, j in zip(memory, pick)),
        node_devices=tuple((c[0].devices,) for c in chosen), edges=pairs, edge_costs=edge_costs,
        num_devices=cluster.num_devices,
        memory_limit=memory_limit, name=graph.name, context=(graph, cluster, cost_model),
        notes=(why.replace(": no plan", "") + ": one candidate per operator kept, its least-memory one",),
        capped_candidates=1)


def _stopped_note(progress: str, estimate_s: float) -> str:
    """Why there is no plan: the wall clock passed the deadline during a build budgeted at
    `estimate_s` nominal seconds (this machine ran slower than the fixed per-unit costs)."""
    return (f"time limit reached while building the problem ({progress}; budgeted at {estimate_s:.2f} s of "
            "work, the wall clock ran out first): no plan")
