"""Exhaustive enumeration (the test oracle): the cost and the per-device memory of every plan are
built as n-dimensional arrays by broadcasting, so tiny instances are solved exactly and simply.
Refuses (status ERROR) above `max_plans` plans."""
from __future__ import annotations

import math

import numpy as np

from solver_plan.deadline import Deadline
from solver_plan.intra.answer import Answer
from solver_plan.intra.context import Context
from solver_plan.intra.harness import run_planner
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import Status

MAX_PLANS = 2_000_000


def _along(vector: np.ndarray, axis: int, dimensions: int) -> np.ndarray:
    shape = [1] * dimensions
    shape[axis] = len(vector)
    return np.asarray(vector, dtype=float).reshape(shape)


def _cost_grid(problem: ConfigProblem) -> np.ndarray:
    dimensions = problem.num_nodes
    shape = tuple(len(c) for c in problem.node_costs)
    total = np.zeros(shape)
    for node, costs in enumerate(problem.node_costs):
        total += _along(costs, node, dimensions)
    for (u, v), matrix in zip(problem.edges, problem.edge_costs):
        grid_shape = [1] * dimensions
        grid_shape[u], grid_shape[v] = matrix.shape
        block = matrix if u < v else matrix.T  # reshape needs the axes in increasing order
        grid_shape[min(u, v)], grid_shape[max(u, v)] = block.shape
        total += block.reshape(grid_shape)
    return total


def _memory_ok_grid(problem: ConfigProblem, shape) -> np.ndarray:
    fits = np.ones(shape, dtype=bool)
    if problem.memory_limit is None:
        return fits
    for device in range(problem.num_devices):
        load = np.zeros(shape)
        for node in range(problem.num_nodes):
            on_device = [problem.node_memory[node][c] if device in problem.node_devices[node][c] else 0.0
                         for c in range(len(problem.node_costs[node]))]
            load = load + _along(np.array(on_device), node, problem.num_nodes)
        fits &= load <= problem.memory_limit * (1 + 1e-9)
    return fits


def _brute_core(problem: ConfigProblem, context: Context) -> Answer:
    limit = int(context.options.get("max_plans", MAX_PLANS))
    count = math.prod(len(c) for c in problem.node_costs)
    if count > limit:
        return Answer(Status.ERROR, notes=(f"brute force refuses {count} plans (cap {limit}); use an exact solver",))
    costs = _cost_grid(problem)
    fits = _memory_ok_grid(problem, costs.shape)
    if not fits.any():
        return Answer(Status.INFEASIBLE, notes=("no plan fits in memory (enumerated)",))
    masked = np.where(fits, costs, np.inf)
    best = np.unravel_index(int(np.argmin(masked)), costs.shape)
    plan = tuple(int(c) for c in best)
    return Answer(Status.OPTIMAL, plan, float(masked[best]), (f"enumerated {count} plans",))


def plan_brute(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None, **options):
    """Planner "brute": exhaustive enumeration, the test oracle for tiny problems (ERROR above
    `max_plans`)."""
    return run_planner("brute", problem, _brute_core, exact=False, deadline=deadline, seed=seed,
                       warm_start=warm_start, options=options)
