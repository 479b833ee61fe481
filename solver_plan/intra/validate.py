"""Validator for `ConfigResult`s, independent of every planner: it recomputes everything from the
problem's arrays and trusts nothing the planner says except the plan itself.

The arrays and the problem's objective function are what the planners used, so a cost error in
them would pass that check. Where the problem knows its graph and cost model
(`ConfigProblem.context`: every problem built from a graph, restricted or not), the plan is also
re-priced from the graph and the cluster without them (`cost.plan_price.price_plan`: each
operator's and each tensor's cost afresh) and a disagreement beyond `RELATIVE_TOLERANCE` with the
reported objective (sum planners) or the problem's costs (load planners, whose objective reads
them), or with the problem's memory per device, is a validation error."""
from __future__ import annotations

import math

import numpy as np

from solver_plan.cost.model import CostModel
from solver_plan.cost.plan_price import price_plan
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import ConfigResult, Status
from solver_plan.units import format_bytes

RELATIVE_TOLERANCE = 1e-6


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RELATIVE_TOLERANCE * max(1.0, abs(a), abs(b))


def _plan_problems(problem: ConfigProblem, assignment) -> list[str]:
    if len(assignment) != problem.num_nodes:
        return [f"plan has {len(assignment)} choices for {problem.num_nodes} operators"]
    problems = []
    for node, choice in enumerate(assignment):
        count = len(problem.node_costs[node])
        if not isinstance(choice, int) or isinstance(choice, bool) or not 0 <= choice < count:
            problems.append(f"operator {problem.names[node]!r}: choice {choice!r} is not one of its {count} candidates")
    return problems


def _objective_name(planner: str) -> str:
    from solver_plan.planners import planners
    info = planners("config").get(planner)
    return "sum" if info is None else info.objective


def _objective_of(planner: str):
    """The objective the planner reports: the sum, or the load objective for planners registered
    with objective="load" (recomputed here from the problem, like the sum)."""
    if _objective_name(planner) == "load":
        from solver_plan.intra.load_objective import load_objective
        return load_objective
    return ConfigProblem.objective


def _pricing_context(problem: ConfigProblem):
    """(graph, cost model) when the problem has one node per operator of the graph it was built
    from; None for synthetic problems and for problems whose nodes are not the graph's operators."""
    context = problem.context
    if not (isinstance(context, tuple) and len(context) == 3 and isinstance(context[2], CostModel)):
        return None
    graph = context[0]
    order = getattr(graph, "topological_order", None)
    if order is None or len(order) != problem.num_nodes or set(order) != set(problem.names):
        return None
    return graph, context[2]


def _repriced_problems(problem: ConfigProblem, result: ConfigResult) -> list[str]:
    """The plan re-priced from the graph and the cluster against what the planner reports and the
    problem's arrays hold (module text); nothing for problems without a graph."""
    found = _pricing_context(problem)
    if found is None:
        return []
    graph, cost_model = found
    assignment = result.assignment
    price = price_plan(graph, cost_model, {name: problem.candidates[i][c]
                                           for i, (name, c) in enumerate(zip(problem.names, assignment))})
    priced = (f"re-priced from the graph and cluster the plan costs {price.total_s!r} s (operators "
              f"{price.operators_s!r} s, redistribution {price.redistribution_s!r} s)")
    problems = []
    if _objective_name(result.planner) == "sum":
        if result.objective is not None and not _close(price.total_s, result.objective):
            problems.append(f"{priced}, the reported objective {result.objective!r} s")
    else:
        arrays = sum(problem.breakdown(assignment))
        if not _close(price.total_s, arrays):
            problems.append(f"{priced}, the problem's costs {arrays!r} s")
    memory = problem.device_memory(assignment)
    worst = int(np.argmax(np.abs(price.device_memory - memory))) if len(memory) else 0
    if len(memory) and not _close(float(price.device_memory[worst]), float(memory[worst])):
        problems.append(f"re-priced from the graph and cluster device {worst} holds {price.device_memory[worst]:.6g} B, "
                        f"the problem's memory {memory[worst]:.6g} B")
    return problems


def validate_config_result(problem: ConfigProblem, result: ConfigResult) -> list[str]:
    """Every way `result` is wrong for `problem`; an empty list means it is valid."""
    if not isinstance(result.status, Status):
        return [f"status {result.status!r} is not a Status"]
    if not result.status.has_solution:
        return [] if result.assignment is None else [f"status {result.status.value} but a plan is given"]
    if result.assignment is None:
        # a time-out may stop before any plan is found (with a memory limit no heuristic met)
        return [] if result.status is Status.TIME_LIMIT else [f"status {result.status.value} but no plan"]
    problems = _plan_problems(problem, result.assignment)
    if problems:
        return problems
    if problem.memory_limit is not None and not problem.memory_ok(result.assignment):
        peak = problem.device_memory(result.assignment).max()
        problems.append(f"busiest device holds {format_bytes(peak)} ({peak:.6g} B), above the limit "
                        f"{format_bytes(problem.memory_limit)}")
    recomputed = _objective_of(result.planner)(problem, result.assignment)
    if result.objective is None or not _close(recomputed, result.objective):
        problems.append(f"reported objective {result.objective!r} but the plan costs {recomputed!r}")
    if result.lower_bound is not None:
        if math.isnan(result.lower_bound) or result.lower_bound > recomputed * (1 + RELATIVE_TOLERANCE) + 1e-9:
            problems.append(f"lower bound {result.lower_bound!r} exceeds the plan's cost {recomputed!r}")
    if result.status is Status.OPTIMAL and (result.lower_bound is None or not _close(result.lower_bound, recomputed)):
        gap = result.gap
        if gap is None or gap > 1e-4:
            problems.append(f"status OPTIMAL but bound {result.lower_bound!r} does not match objective {recomputed!r}")
    return problems + _repriced_problems(problem, result)
