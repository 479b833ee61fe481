"""Front door of question 1 (per-operator configuration): graph + cluster + planner -> `Plan`."""
from __future__ import annotations

from solver_plan.cluster import Cluster
from solver_plan.cost.model import CostModel
from solver_plan.errors import InputError, check_positive
from solver_plan.graph.ir import Graph
from solver_plan.intra.build import DEFAULT_MAX_CANDIDATES, build_config_problem
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.solve import solve
from solver_plan.plan import Plan, decode_plan

DEVICE_MEMORY = "device"  # memory limit = the cluster's device memory (the default)


def plan_configuration(graph: Graph, cluster: Cluster, planner: str = "milp", *,
                       time_limit: float | None = None, memory_limit: float | str | None = DEVICE_MEMORY,
                       seed: int = 0, max_candidates: int = DEFAULT_MAX_CANDIDATES, **options) -> Plan:
    """Plan with `planner`; memory_limit in bytes per device, DEVICE_MEMORY, or None (unlimited)."""
    check_positive(time_limit, "--time-limit")
    problem, cost_model = prepare_problem(graph, cluster, memory_limit, max_candidates)
    result = solve(problem, planner, time_limit=time_limit, seed=seed, **options)
    return decode_plan(graph, cluster, problem, result, cost_model)


def prepare_problem(graph: Graph, cluster: Cluster, memory_limit: float | str | None = DEVICE_MEMORY,
                    max_candidates: int = DEFAULT_MAX_CANDIDATES) -> tuple[ConfigProblem, CostModel]:
    if memory_limit == DEVICE_MEMORY:
        memory_limit = cluster.device.memory
    check_positive(memory_limit, "--memory-limit")
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, int) or max_candidates < 2:
        raise InputError(f"must be an integer of at least 2, got {max_candidates}", "--max-candidates")
    cost_model = CostModel(cluster)
    return build_config_problem(graph, cluster, memory_limit, max_candidates, cost_model), cost_model
