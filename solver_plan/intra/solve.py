"""Front door of per-operator configuration planning: check the request, simplify exactly (unless
asked not to), run the named planner, decode, validate independently, return."""
from __future__ import annotations

from dataclasses import replace

from solver_plan.deadline import CUT_SHORT_NOTE, Deadline
from solver_plan.errors import InputError
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplified import run_simplified
from solver_plan.intra.validate import validate_config_result
from solver_plan.planners import get_planner
from solver_plan.result import ConfigResult, Status


def check_request(problem: ConfigProblem, deadline: Deadline | None) -> None:
    """Reject what no planner can answer: a deadline that is not a `Deadline` (TypeError) or a
    non-positive memory limit (InputError)."""
    if deadline is not None and not isinstance(deadline, Deadline):
        raise TypeError(f"solve takes a Deadline (solver_plan.deadline.time_budget), not {deadline!r}")
    limit = problem.memory_limit
    if limit is not None and not limit > 0:
        raise InputError(f"memory limit must be positive bytes per device, got {limit!r}", "memory_limit")


def solve(problem: ConfigProblem, planner: str = "milp", deadline: Deadline | None = None, seed: int = 0,
          warm_start=None, *, simplify: bool = True, **options) -> ConfigResult:
    """Plan `problem` with the named registered planner; every result is validated.
    `simplify=False` hands the planner the original problem (simplification is exact).
    `deadline` is the caller's budget (`time_budget(seconds)` where the request entered, so time
    already spent counts); None: each planner's own default. On a time-out the best plan found so
    far comes back (TIME_LIMIT or FEASIBLE) with its bound; a result the wall clock (not the work
    budget) cut short says so in its notes and is TIME_LIMIT unless proven (OPTIMAL, INFEASIBLE)."""
    info = get_planner(planner, "config")
    info.check_options(options)
    check_request(problem, deadline)
    clock = None if deadline is None else deadline.child()
    if simplify and info.simplify:
        memory_free = info.memory_free_first is None or info.memory_free_first(problem, clock, options)
        result = run_simplified(problem, info.func, exact=info.exact, deadline=clock, seed=seed,
                                memory_free_first=memory_free,
                                warm_start=warm_start, options=options)
    else:
        result = info.func(problem, deadline=clock, seed=seed, warm_start=warm_start, **options)
    if problem.notes:
        result = result.with_notes(*problem.notes)
    if problem.capped_candidates is not None:
        result = proven_for_candidates_built(problem, result)
    if clock is not None and clock.cut_short:  # the wall clock, not the work budget, ended some work:
        # an unproven plan is the best so far at the time limit (a proof stands whatever the clock)
        result = result.with_notes(CUT_SHORT_NOTE)
        if result.status is Status.FEASIBLE:
            result = replace(result, status=Status.TIME_LIMIT)
    return checked(problem, replace(result, objective_kind=info.objective))  # what its objective measures


def proven_for_candidates_built(problem: ConfigProblem, result: ConfigResult) -> ConfigResult:
    """A proof on a problem whose candidates the time limit capped (`capped_candidates`) holds for
    the candidates built, not for the request: INFEASIBLE becomes TIME_LIMIT (no plan fitted among
    them; more time builds more, and one of those may fit) and OPTIMAL becomes FEASIBLE without its
    bound (a bound over the candidates built is none over the request), each saying so."""
    built = f"at most {problem.capped_candidates} candidates per operator, all the time limit allowed to build"
    if result.status is Status.INFEASIBLE:
        return replace(result, status=Status.TIME_LIMIT, notes=(
            f"no plan within the time limit: none fits among the {built}; that proves nothing about the "
            "rest (a longer time limit builds more candidates), nor do the notes below",) + result.notes)
    if result.status is Status.OPTIMAL:
        return replace(result, status=Status.FEASIBLE, lower_bound=None).with_notes(
            f"optimal among the {built}; not a bound for the rest (a longer time limit builds more candidates)")
    return result


def checked(problem: ConfigProblem, result: ConfigResult) -> ConfigResult:
    """The result if the independent validator accepts it, else an ERROR result saying why."""
    problems = validate_config_result(problem, result)
    if not problems:
        return result
    return replace(result, status=Status.ERROR, objective=None, lower_bound=None, assignment=None,
                   notes=result.notes + tuple(f"invalid: {p}" for p in problems))
