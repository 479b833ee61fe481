"""Front door of per-operator configuration planning: check the request, simplify exactly (unless
asked not to), run the named planner, decode, validate independently, return."""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.intra.harness import Deadline, checked, run_simplified
from solver_plan.intra.problem import ConfigProblem
from solver_plan.planners import get_planner
from solver_plan.result import ConfigResult


def check_request(problem: ConfigProblem, time_limit: float | None) -> None:
    Deadline(time_limit)  # raises InputError for a non-positive limit
    limit = problem.memory_limit
    if limit is not None and not limit > 0:
        raise InputError(f"memory limit must be positive bytes per device, got {limit!r}", "memory_limit")


def solve(problem: ConfigProblem, planner: str = "milp", time_limit: float | None = None, seed: int = 0,
          warm_start=None, *, simplify: bool = True, **options) -> ConfigResult:
    """Plan `problem` with the named registered planner; every result is validated.
    `simplify=False` hands the planner the original problem (simplification is exact)."""
    info = get_planner(planner, "config")
    info.check_options(options)
    check_request(problem, time_limit)
    if simplify and info.simplify:
        result = run_simplified(problem, info.func, exact=info.exact, time_limit=time_limit, seed=seed,
                                warm_start=warm_start, options=options)
    else:
        result = info.func(problem, time_limit=time_limit, seed=seed, warm_start=warm_start, **options)
    return checked(problem, result)
