"""`run_planner`: the shared plumbing every configuration planner runs its core through.

A planner module only writes a *core*: core(problem, context) -> Answer. `run_planner` does the rest:
- exact planners get the best heuristic plan (`context.incumbent`, warm_start.py) as a warm start,
  and never return anything worse than it; if the solver fails or is missing, the heuristic plan
  comes back FEASIBLE with a note; the heuristics get at most HEURISTIC_SHARE of the time, and a
  note says where the time went ("time: relaxation 0.41 s, heuristics 1.20 s, milp 8.10 s");
- every objective is recomputed from the problem (planners' own numbers are never reported);
- a plan that breaks the memory limit is discarded; without a plan, the least busiest-device
  memory is computed (diagnose.py), so an INFEASIBLE result always says why.
The pieces it uses (answer, context, clock, warm_start, diagnose, failures, subprocess_guard) sit
below it and below every planner; none of them imports a planner.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from solver_plan.deadline import Deadline
from solver_plan.errors import InputError
from solver_plan.intra import progress
from solver_plan.intra.answer import Answer
from solver_plan.intra.clock import PhaseTimes, start_clock
from solver_plan.intra.context import Context, SolverUnavailable
from solver_plan.intra.diagnose import diagnose
from solver_plan.intra.memory import can_fit
from solver_plan.intra.failures import failure_note, log_traceback
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.warm_start import seed_exact, usable_plan
from solver_plan.result import ConfigResult, Status
from solver_plan.units import format_seconds


def _finish(problem: ConfigProblem, name: str, answer: Answer, deadline: Deadline) -> ConfigResult:
    if answer.assignment is None:
        return ConfigResult(name, answer.status, None, None, deadline.elapsed(), None, answer.notes)
    objective = problem.objective(answer.assignment)
    bound = answer.lower_bound
    if bound is not None:
        bound = min(float(bound), objective)  # solver tolerance can put a bound a hair above
    status = answer.status
    if status is Status.OPTIMAL and (bound is None or (objective - bound) > 1e-6 * max(1.0, abs(objective))):
        status = Status.FEASIBLE
    return ConfigResult(name, status, objective, bound, deadline.elapsed(), tuple(answer.assignment),
                        answer.notes + (cost_breakdown_note(problem, answer.assignment),))


def cost_breakdown(problem: ConfigProblem, assignment) -> dict[str, float]:
    """Seconds spent in operators (compute, intra-op communication, gradient sync) and in
    redistribution between operators."""
    operators, redistribution = problem.breakdown(assignment)
    return {"operators_s": operators, "redistribution_s": redistribution}


def cost_breakdown_note(problem: ConfigProblem, assignment) -> str:
    """The note splitting a plan's sum objective into operator and redistribution seconds."""
    parts = cost_breakdown(problem, assignment)
    return (f"cost breakdown: operators {format_seconds(parts['operators_s'])} + "
            f"redistribution {format_seconds(parts['redistribution_s'])}")


def _keep_incumbent_if_better(problem: ConfigProblem, answer: Answer, incumbent, source: str) -> Answer:
    """Exact planners never return worse than their warm start."""
    if incumbent is None:
        return answer
    if answer.assignment is not None and problem.objective(answer.assignment) <= problem.objective(incumbent):
        return answer
    if answer.status in (Status.ERROR, Status.INFEASIBLE):
        why = "solver failed" if answer.status is Status.ERROR else "solver claimed INFEASIBLE (rounding?)"
        return Answer(Status.FEASIBLE, incumbent, None, answer.notes + (f"{why}; returned the {source} plan",))
    status = answer.status if answer.status in (Status.OPTIMAL, Status.TIME_LIMIT) else Status.FEASIBLE
    return Answer(status, incumbent, answer.lower_bound, answer.notes + (f"kept the {source} plan (no better found)",))


def run_planner(name: str, problem: ConfigProblem, core: Callable[[ConfigProblem, Context], Answer], *,
                exact: bool, deadline: Deadline | None = None, seed: int = 0, warm_start=None,
                options: dict | None = None, seed_relaxation: bool = True) -> ConfigResult:
    """Run `core` with the shared plumbing and return a `ConfigResult` (not yet validated).
    `deadline` is the caller's budget (None: no limit); `seed_relaxation=False` skips the
    edge-dropping relaxation of an exact planner's warm start (warm_start.seed_exact)."""
    deadline = start_clock(deadline)
    if not can_fit(problem):
        # each node's unavoidable bytes already overflow a device: no plan exists, so no search (it
        # could only run until the clock stopped it: megatron-1T on 3,072 devices at 1 s) and the
        # diagnosis proves INFEASIBLE with the time
        answer = diagnose(problem, deadline, Answer(Status.TIME_LIMIT, notes=(
            f"{name} not run: no plan can fit the memory limit",)), name)
        return _finish(problem, name, answer, deadline)
    context = Context(deadline, seed, None, dict(options or {}))
    timings = PhaseTimes()
    relaxation = None
    if exact:
        relaxation = seed_exact(problem, context, warm_start, timings, seed_relaxation)
    elif warm_start is not None:
        context.incumbent = tuple(int(c) for c in warm_start) if usable_plan(problem, warm_start) else None
    if context.incumbent is not None:
        progress.report(incumbent=problem.objective(context.incumbent))
    failure = None  # why the solver failed (never a time-out): reported, never silently replaced
    try:
        with timings.phase(name):
            answer = core(problem, context)
    except InputError:
        raise
    except SolverUnavailable as exc:
        failure = f"{name}: solver unavailable: {exc}"
        answer = Answer(Status.ERROR, notes=(f"solver unavailable: {exc}",))
    except TimeoutError as exc:  # a solver killed at the wall clock: the incumbent still counts
        answer = Answer(Status.TIME_LIMIT, notes=(failure_note(name, exc),))
    except Exception as exc:  # a failing backend must not lose the heuristic answer
        log_traceback(name)
        failure = failure_note(name, exc)
        answer = Answer(Status.ERROR, notes=(failure,))
    if answer.assignment is not None and not usable_plan(problem, answer.assignment):
        answer = Answer(Status.ERROR, None, answer.lower_bound,
                        answer.notes + ("the planner's plan is invalid or breaks the memory limit; discarded",))
    if failure is None and answer.status is Status.ERROR and exact:
        # an exact solver that answered ERROR failed; a heuristic without a plan did not (diagnosed below)
        failure = f"{name} failed ({'; '.join(answer.notes) or 'no message'})"
    if exact:
        answer = _keep_incumbent_if_better(problem, answer, context.incumbent, context.incumbent_source)
        answer = replace(answer, notes=answer.notes + (timings.note(),))
    if answer.assignment is None:
        answer = diagnose(problem, deadline, answer, name)
    if relaxation is not None and answer.assignment is not None and (
            answer.lower_bound is None or answer.lower_bound < relaxation.lower_bound):
        answer = replace(answer, lower_bound=relaxation.lower_bound,
                         notes=answer.notes + ("bound from the edge-dropping relaxation",))
    result = _finish(problem, name, answer, deadline)
    if failure is not None:
        result = replace(result, solver_failure=failure)
    progress.report(result.objective, result.lower_bound)
    return result
