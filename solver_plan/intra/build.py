"""Build a `ConfigProblem` from graph + cluster + cost model (the only place the three meet)."""
from __future__ import annotations

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.cost.enumerate import DEFAULT_MAX_CANDIDATES, enumerate_configs
from solver_plan.cost.model import CostModel
from solver_plan.graph.ir import Graph
from solver_plan.intra.problem import ConfigProblem

__all__ = ["DEFAULT_MAX_CANDIDATES", "build_config_problem"]


def build_config_problem(graph: Graph, cluster: Cluster, memory_limit: float | None = None,
                         max_candidates: int = DEFAULT_MAX_CANDIDATES,
                         cost_model: CostModel | None = None) -> ConfigProblem:
    """One node per operator (topological order), one edge per connected operator pair.

    Several tensors between the same pair of operators (e.g. q, k and v from one producer) become
    one edge whose matrix is the sum of their redistribution costs.
    """
    cost_model = cost_model or CostModel(cluster)
    order = graph.topological_order
    index = {name: i for i, name in enumerate(order)}
    candidates, costs, memory, devices = [], [], [], []
    for name in order:
        op = graph.op(name)
        configs = enumerate_configs(op, graph, cluster.num_devices, max_candidates=max_candidates)
        node_costs = [cost_model.node(graph, op, cfg) for cfg in configs]
        candidates.append(tuple(configs))
        costs.append(np.array([c.seconds for c in node_costs], dtype=float))
        memory.append(np.array([c.memory_bytes for c in node_costs], dtype=float))
        devices.append(tuple(cfg.devices for cfg in configs))
    edge_matrices: dict[tuple[int, int], np.ndarray] = {}
    for edge in graph.edges:
        u, v = index[edge.src], index[edge.dst]
        matrix = cost_model.edge_matrix(graph, edge, candidates[u], candidates[v])
        edge_matrices[(u, v)] = edge_matrices[(u, v)] + matrix if (u, v) in edge_matrices else matrix
    pairs = tuple(sorted(edge_matrices))
    return ConfigProblem(
        names=tuple(order), candidates=tuple(candidates), node_costs=tuple(costs),
        node_memory=tuple(memory), node_devices=tuple(devices), edges=pairs,
        edge_costs=tuple(np.asarray(edge_matrices[p], dtype=float) for p in pairs),
        num_devices=cluster.num_devices, memory_limit=memory_limit, name=graph.name,
        context=(graph, cluster, cost_model))
