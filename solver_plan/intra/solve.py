"""Front door of per-operator configuration planning: check the request, simplify exactly (unless
asked not to), run the named planner, decode, validate independently, return."""
from __future__ import annotations

from dataclasses import replace

from solver_plan.deadline import Deadline
from solver_plan.errors import InputError
from solver_plan.intra.clock import seconds_left, start_clock
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplified import run_simplified
from solver_plan.intra.validate import validate_config_result
from solver_plan.planners import get_planner
from solver_plan.result import ConfigResult, Status


def check_request(problem: ConfigProblem, time_limit: float | None) -> None:
    if not isinstance(time_limit, Deadline):
        Deadline(time_limit)  # raises InputError for a non-positive limit
    limit = problem.memory_limit
    if limit is not None and not limit > 0:
        raise InputError(f"memory limit must be positive bytes per device, got {limit!r}", "memory_limit")


def solve(problem: ConfigProblem, planner: str = "milp", time_limit: float | None = None, seed: int = 0,
          warm_start=None, *, simplify: bool = True, deadline: Deadline | None = None, **options) -> ConfigResult:
    """Plan `problem` with the named registered planner; every result is validated.
    `simplify=False` hands the planner the original problem (simplification is exact).
    `deadline` (a command's `Deadline`, so time already spent counts) and `time_limit` (seconds
    from now) may both be given: the earlier end wins. On a time-out the best plan found so far
    comes back (TIME_LIMIT or FEASIBLE) with its bound."""
    info = get_planner(planner, "config")
    info.check_options(options)
    check_request(problem, time_limit)
    clock = start_clock(deadline)
    if time_limit is not None:
        clock = time_limit if isinstance(time_limit, Deadline) else Deadline(time_limit, parent=clock)
    limit = clock if (deadline is not None or time_limit is not None) else None
    if simplify and info.simplify:
        result = run_simplified(problem, info.func, exact=info.exact, time_limit=limit, seed=seed,
                                warm_start=warm_start, options=options)
    else:
        result = info.func(problem, time_limit=seconds_left(limit), seed=seed, warm_start=warm_start, **options)
    if problem.notes:
        result = result.with_notes(*problem.notes)
    return checked(problem, replace(result, objective_kind=info.objective))  # what its objective measures


def checked(problem: ConfigProblem, result: ConfigResult) -> ConfigResult:
    """The result if the independent validator accepts it, else an ERROR result saying why."""
    problems = validate_config_result(problem, result)
    if not problems:
        return result
    return replace(result, status=Status.ERROR, objective=None, lower_bound=None, assignment=None,
                   notes=result.notes + tuple(f"invalid: {p}" for p in problems))
