"""CP-SAT planner: the one-hot model of linear_model solved by OR-Tools CP-SAT with integer-scaled
costs, hinted with the best heuristic plan; reports CP-SAT's proven bound (minus rounding). Under a
memory limit that can bind (option lagrangian, default on) the model holds only the candidates the
Lagrangian relaxation leaves open (lagrangian_fixing), hinted with its plan, with its bound."""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.deadline import GRACE_S, WALL_CLOCK_STOP, Deadline
from solver_plan.intra import isolated
from solver_plan.intra.answer import Answer
from solver_plan.intra.context import Context
from solver_plan.intra.failures import failure_note
from solver_plan.intra.harness import run_planner
from solver_plan.intra.lagrangian_fixing import lagrangian_restriction
from solver_plan.intra.linear_model import config_model, config_model_seconds, encode, outcome_answer
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import Status
from solver_plan.work import MIN_CALL_WORK, WORK_PER_SECOND


# Nominal seconds a CP-SAT call costs before it searches at all: under a time limit it runs in a
# worker of its own (isolated.py), a fresh interpreter importing OR-Tools (measured 0.40-0.45 s CPU,
# 0.55-0.8 s wall on the shared 2-core machine), then gets the model shipped and loaded. A budget
# smaller than that cannot buy any search; the call is skipped by the budget (the same decision on
# an idle or a loaded machine), not started and killed by the clock (gpt3-175B on 1,024 devices at
# --time-limit 1 ended at 1.9-2.4 s when it was).
CPSAT_START_S = 0.5


def cpsat_call_seconds(problem: ConfigProblem) -> float:
    """Nominal seconds a CP-SAT call on `problem` costs before its search: the worker's start-up
    (CPSAT_START_S) and building and shipping the model (`config_model_seconds`)."""
    return CPSAT_START_S + config_model_seconds(problem)


def check_cpsat_options(options: dict) -> None:
    """Option values, checked by the registry before any work."""
    if not isinstance(options.get("lagrangian", True), bool):
        raise InputError(f"must be true or false, got {options['lagrangian']!r}", "lagrangian")


def _not_run(why: str) -> Answer:
    return Answer(Status.TIME_LIMIT, notes=(f"CP-SAT not run: {why}",))


def _cpsat_core(problem: ConfigProblem, context: Context) -> Answer:
    budget = context.deadline.nominal_left()  # the budget decides first, so a loaded machine decides alike
    if budget is not None and budget < CPSAT_START_S:
        return _not_run(f"its worker's start-up (about {CPSAT_START_S:.2f} s) exceeds the {budget:.2f} s budget left")
    if context.deadline.overrun(GRACE_S):  # the safety net (marks the answer cut short); the budget decided above
        return Answer(Status.TIME_LIMIT, notes=("no time left for CP-SAT after the heuristics",))
    restriction = None
    if context.options.get("lagrangian", True):
        restriction = lagrangian_restriction(problem, context.deadline, context.incumbent, context.seed)
    if restriction is None:
        return _solve(problem, context.incumbent, context)
    if restriction.source == "Lagrangian" and restriction.incumbent is not None:
        context.incumbent, context.incumbent_source = restriction.incumbent, "Lagrangian"
    start = restriction.encode(restriction.incumbent) if restriction.incumbent is not None else None
    try:
        answer = _solve(restriction.problem, start, context)
    except TimeoutError as exc:  # killed at the wall clock: the Lagrangian bound and plan still count
        context.deadline.mark_cut_short()
        answer = Answer(Status.TIME_LIMIT, notes=(failure_note("cpsat", exc),))
    return restriction.widen(problem, answer)


def _solve(problem: ConfigProblem, incumbent, context: Context) -> Answer:
    """CP-SAT limited by deterministic work (solver_plan/work.py: WORK_PER_SECOND of the nominal
    budget left), so the answer does not depend on the machine's load; the wall clock left is the
    safety net. Skipped, by the nominal budget, when that cannot pay for the call's start-up."""
    budget, start_up = context.deadline.nominal_left(), cpsat_call_seconds(problem)
    if budget is not None and budget < start_up:
        return _not_run(f"its start-up (worker and model, about {start_up:.2f} s) exceeds the "
                        f"{budget:.2f} s budget left")
    model = config_model(problem)
    start = encode(model, problem, incumbent) if incumbent is not None else None
    remaining = context.deadline.remaining()
    if remaining is not None and remaining < 0.05:
        context.deadline.mark_cut_short()
        return Answer(Status.TIME_LIMIT, notes=("no time left for CP-SAT after building the model",))
    work = None if budget is None else max(MIN_CALL_WORK, WORK_PER_SECOND * budget)
    # CP-SAT's limit excludes shipping the model to its worker and loading it: keep a margin
    solver_limit = None if remaining is None else max(0.05, 0.85 * remaining - 0.1)
    outcome = isolated.call("ortools", "solver_plan.intra.backends.cpsat", "solve_with_cpsat", timeout=remaining,
                            killable=True, model=model, time_limit=solver_limit, work=work, start_values=start,
                            seed=context.seed, workers=context.options.get("workers", 1))
    if any(WALL_CLOCK_STOP in note for note in outcome.notes):
        context.deadline.mark_cut_short()
    return outcome_answer(model, outcome)


def plan_cpsat(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None, **options):
    """Planner "cpsat": the one-hot model solved by OR-Tools CP-SAT (options: lagrangian, workers)."""
    return run_planner("cpsat", problem, _cpsat_core, exact=True, deadline=deadline, seed=seed,
                       warm_start=warm_start, options=options)
