"""Validator for `ConfigResult`s, independent of every planner: it recomputes everything from the
problem's arrays and trusts nothing the planner says except the plan itself."""
from __future__ import annotations

import math

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


def _objective_of(planner: str):
    """The objective the planner reports: the sum, or the load objective for planners registered
    with objective="load" (recomputed here from the problem, like the sum)."""
    from solver_plan.planners import planners
    info = planners("config").get(planner)
    if info is not None and info.objective == "load":
        from solver_plan.intra.load_objective import load_objective
        return load_objective
    return ConfigProblem.objective


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
    return problems
