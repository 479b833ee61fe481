"""Build a `ConfigProblem` from graph + cluster + cost model (the only place the three meet).

Building counts against the command's deadline: it may use `BUILD_SHARE` of what is left. Past that
it keeps going with few candidates per operator (`FEW_CANDIDATES`: the single-device and
data-parallel configurations, the least-memory and the fastest one), so a plan still comes back in
time; the problem's notes say how many operators were cut.
"""
from __future__ import annotations

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.cost.enumerate import DEFAULT_MAX_CANDIDATES, enumerate_configs
from solver_plan.cost.model import CostModel
from solver_plan.deadline import Deadline
from solver_plan.graph.ir import Graph
from solver_plan.intra.problem import ConfigProblem

__all__ = ["BUILD_SHARE", "DEFAULT_MAX_CANDIDATES", "build_config_problem"]

BUILD_SHARE = 0.4  # of the time left when building starts; solvers keep the rest
FEW_CANDIDATES = 4


def _few(configs, costs: np.ndarray, memory: np.ndarray) -> np.ndarray:
    """Indices kept once the build budget is spent: the first two (enumeration puts single-device
    and data-parallel there), the least memory and the cheapest."""
    keep = {0, min(1, len(configs) - 1), int(np.argmin(memory)), int(np.argmin(costs))}
    return np.array(sorted(keep), dtype=np.int64)


def build_config_problem(graph: Graph, cluster: Cluster, memory_limit: float | None = None,
                         max_candidates: int = DEFAULT_MAX_CANDIDATES,
                         cost_model: CostModel | None = None, deadline: Deadline | None = None, *,
                         all_devices: bool = False) -> ConfigProblem:
    """One node per operator (topological order), one edge per connected operator pair.

    `all_devices=True`: every operator is split or replicated over all devices (Alpa's ILP setting).

    Several tensors between the same pair of operators (e.g. q, k and v from one producer) become
    one edge whose matrix is the sum of their redistribution costs.
    """
    budget = None if deadline is None else deadline.share(BUILD_SHARE)
    late = (lambda: False) if budget is None else budget.expired
    cost_model = cost_model or CostModel(cluster)
    order = graph.topological_order
    index = {name: i for i, name in enumerate(order)}
    candidates, costs, memory = [], [], []
    capped = 0
    for name in order:
        op = graph.op(name)
        cap = max_candidates
        if late() and max_candidates > FEW_CANDIDATES:
            cap, capped = FEW_CANDIDATES, capped + 1
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
    notes = ()
    if capped or kept:
        notes = (f"building the problem used its share of the time limit ({BUILD_SHARE:.0%} of it): "
                 f"{capped + len(kept)} of {len(order)} operators kept at most {FEW_CANDIDATES} candidates "
                 f"(single device, data parallel, least memory, fastest)",)
    return ConfigProblem(
        names=tuple(order), candidates=tuple(candidates), node_costs=tuple(costs),
        node_memory=tuple(memory), node_devices=tuple(tuple(cfg.devices for cfg in c) for c in candidates),
        edges=pairs, edge_costs=tuple(np.asarray(edge_matrices[p], dtype=float) for p in pairs),
        num_devices=cluster.num_devices, memory_limit=memory_limit, name=graph.name,
        context=(graph, cluster, cost_model), notes=notes)
