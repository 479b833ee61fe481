"""Build a `ConfigProblem` from graph + cluster + cost model (the only place the three meet).

Building counts against the command's deadline, deterministically: before any cost is computed, the
work of the build (candidates costed + redistribution-matrix entries, at measured seconds per unit)
is compared with `BUILD_SHARE` of the command's nominal time limit, and the candidates per operator
are capped (one cap for all, the largest that fits, at least `FEW_CANDIDATES`) until it fits. The cap
depends only on the instance and the limit, so the same command builds the same problem on an idle
or a loaded machine. The wall clock is only a safety net: past `SAFETY_SHARE` of the time left, the
build goes on with few candidates per operator (single-device and data-parallel configurations,
the least-memory and the fastest one) and its note says the clock cut it short.
"""
from __future__ import annotations

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.cost.enumerate import DEFAULT_MAX_CANDIDATES, enumerate_configs
from solver_plan.cost.model import CostModel
from solver_plan.deadline import Deadline
from solver_plan.graph.ir import Graph
from solver_plan.intra.problem import ConfigProblem

__all__ = ["BUILD_SHARE", "DEFAULT_MAX_CANDIDATES", "build_config_problem", "candidate_cap"]

BUILD_SHARE = 0.25  # of the command's time limit, for the planned (deterministic) work
SAFETY_SHARE = 0.7  # of the time left when building starts: past it the wall clock cuts the build
FEW_CANDIDATES = 4
# Seconds per unit of build work, measured once (gpt2-xl batch 16 on k80-16x4, 64 devices, 48
# candidates, idle 2-core machine): 0.24 s for 27,807 candidates costed, 1.01 s for 1,754,064
# redistribution entries. Validated on t5-large (estimate 1.67 s, measured 3.0 s) and gpt3-175B
# (2.54 s vs 1.64 s) on the same cluster: within 2x, which BUILD_SHARE / SAFETY_SHARE leave room for.
# A redistribution entry costs more on more devices (its pieces are located device by device):
# scaled by devices / 64 above 64, it predicts gpt3-175B at 2.3 us per entry on 256 devices
# (measured 1.06 us) and 9.3 us on 1,024 (measured 5.4 us): conservative, as a budget should be.
S_PER_CANDIDATE = 8.7e-6
S_PER_EDGE_ENTRY = 5.8e-7
CALIBRATION_DEVICES = 64


def _few(configs, costs: np.ndarray, memory: np.ndarray) -> np.ndarray:
    """Indices kept once the build budget is spent: the first two (enumeration puts single-device
    and data-parallel there), the least memory and the cheapest."""
    keep = {0, min(1, len(configs) - 1), int(np.argmin(memory)), int(np.argmin(costs))}
    return np.array(sorted(keep), dtype=np.int64)


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
    """
    safety = None if deadline is None else deadline.safety_net(SAFETY_SHARE)
    late = (lambda: False) if safety is None else safety.expired
    cost_model = cost_model or CostModel(cluster)
    order = graph.topological_order
    index = {name: i for i, name in enumerate(order)}
    enumerated = [enumerate_configs(graph.op(name), graph, cluster.num_devices, max_candidates=max_candidates,
                                    all_devices=all_devices) for name in order]
    limit = None if deadline is None else deadline.nominal_s
    edge_pairs = np.array([(index[e.src], index[e.dst]) for e in graph.edges], dtype=np.int64).reshape(-1, 2)
    counts = np.array([len(configs) for configs in enumerated], dtype=np.int64)
    planned = candidate_cap(counts, edge_pairs, max_candidates, None if limit is None else BUILD_SHARE * limit,
                            cluster.num_devices)
    if deadline is not None:  # the solver plans with what the build's estimate leaves, idle or loaded
        deadline.spend(build_seconds(counts, edge_pairs, planned, cluster.num_devices))
    candidates, costs, memory = [], [], []
    capped = 0  # operators cut by the wall clock (the safety net)
    for name, configs in zip(order, enumerated):
        op = graph.op(name)
        cap = planned
        if late() and planned > FEW_CANDIDATES:
            cap, capped = FEW_CANDIDATES, capped + 1
        if len(configs) > cap:
            configs = enumerate_configs(op, graph, cluster.num_devices, max_candidates=cap, all_devices=all_devices)
        node_costs = [cost_model.node(graph, op, cfg) for cfg in configs]
        candidates.append(tuple(configs))
        costs.append(np.array([c.seconds for c in node_costs], dtype=float))
        memory.append(np.array([c.memory_bytes for c in node_costs], dtype=float))
    kept: dict[int, np.ndarray] = {}  # nodes cut to a few candidates (indices into their full lists)
    computed: list[tuple[int, int, np.ndarray, int, int]] = []  # (u, v, matrix, cut u?, cut v?)
    swept = False
    for position, edge in enumerate(graph.edges):
        u, v = index[edge.src], index[edge.dst]
        if not swept and late():  # cut every node that still has edges to price, once
            swept = True
            for later in graph.edges[position:]:
                for node in (index[later.src], index[later.dst]):
                    if node not in kept and len(candidates[node]) > FEW_CANDIDATES:
                        kept[node] = _few(candidates[node], costs[node], memory[node])
        rows = kept.get(u)
        cols = kept.get(v)
        src = candidates[u] if rows is None else tuple(candidates[u][i] for i in rows)
        dst = candidates[v] if cols is None else tuple(candidates[v][i] for i in cols)
        computed.append((u, v, cost_model.edge_matrix(graph, edge, src, dst), rows is not None, cols is not None))
    edge_matrices: dict[tuple[int, int], np.ndarray] = {}
    for u, v, matrix, u_cut, v_cut in computed:
        if u in kept and not u_cut:
            matrix = matrix[kept[u], :]
        if v in kept and not v_cut:
            matrix = matrix[:, kept[v]]
        edge_matrices[(u, v)] = edge_matrices[(u, v)] + matrix if (u, v) in edge_matrices else matrix
    for node, keep in kept.items():
        candidates[node] = tuple(candidates[node][i] for i in keep)
        costs[node], memory[node] = costs[node][keep], memory[node][keep]
    pairs = tuple(sorted(edge_matrices))
    notes: tuple[str, ...] = ()
    if planned < max_candidates:
        notes += (f"at most {planned} candidates per operator (not {max_candidates}): the estimated build work "
                  f"({build_seconds(counts, edge_pairs, max_candidates, cluster.num_devices):.1f} s) exceeds {BUILD_SHARE:.0%} of the "
                  f"{limit:g} s time limit",)
    if capped or kept:
        notes += (f"the wall clock cut the build short ({SAFETY_SHARE:.0%} of the time left, a slower machine "
                  f"than the measured budget): {capped + len(kept)} of {len(order)} operators kept at most "
                  f"{FEW_CANDIDATES} candidates (single device, data parallel, least memory, fastest)",)
    return ConfigProblem(
        names=tuple(order), candidates=tuple(candidates), node_costs=tuple(costs),
        node_memory=tuple(memory), node_devices=tuple(tuple(cfg.devices for cfg in c) for c in candidates),
        edges=pairs, edge_costs=tuple(np.asarray(edge_matrices[p], dtype=float) for p in pairs),
        num_devices=cluster.num_devices, memory_limit=memory_limit, name=graph.name,
        context=(graph, cluster, cost_model), notes=notes)
