"""One-hot MILP planner (see linear_model for the formulation).

Backends (option backend=): "highs" (default; highspy in its worker, see isolated: work limits sized
from the nominal budget, `highs_work`, decide where it stops; HiGHS' time limit, a watchdog and the
worker's kill are the safety net, and a stop by them marks the answer cut short) and "cbc" (PuLP +
CBC, in a forked subprocess whose process group is killed at the wall-clock limit, because CBC can
overrun its own limit). Both solve the LP relaxation first and accept an integral LP optimum as proven.

Under a memory limit that can bind (option lagrangian, default on) a relaxation runs first: the root
LP (lp_fixing, option root_lp, default on) where its estimated time fits half the budget, else the
Lagrangian relaxation of the memory rows (lagrangian_fixing). Either gives a bound, a plan as
incumbent, and the model built on what its reduced costs leave open only (candidates; for the LP
also pairs of candidates on an edge).
"""
from __future__ import annotations

from solver_plan.errors import InputError
from dataclasses import replace
from typing import Any

import numpy as np

from solver_plan.deadline import GRACE_S, Deadline
from solver_plan.intra import isolated
from solver_plan.intra.answer import Answer
from solver_plan.intra.clock import start_clock
from solver_plan.intra.context import Context
from solver_plan.intra.failures import failure_note
from solver_plan.intra.harness import run_planner
from solver_plan.intra.highs_work import lp_iteration_limit, mip_check_limit, stopped_by_clock
from solver_plan.intra.subprocess_guard import call_in_subprocess
from solver_plan.intra.warm_start import BINDING_HEURISTIC_SHARE
from solver_plan.intra.lagrangian_fixing import LARGE_MODEL_ENTRIES, Restriction, lagrangian_restriction
from solver_plan.intra.linear_model import ModelBuildCut, config_model, config_model_seconds, encode, outcome_answer
from solver_plan.intra.lp_fixing import lp_fits, lp_restriction, lp_values
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplify import memory_can_bind
from solver_plan.result import Status

PULP_SOLVERS = {"cbc": "PULP_CBC_CMD"}
# Under a binding limit the MILP runs in two stages: the first (this share of its time) finds a
# better plan, whose cost removes more candidates (measured: 1,980 -> 1,199 open on random-dag:100
# binding); the second solves what is then left, started from that plan.
FIRST_STAGE_SHARE = 0.3
MIN_SOLVER_S = 0.05  # below this a solver cannot even load the model: keep the heuristic plan
BACKENDS = ("highs", *PULP_SOLVERS)
# A model whose estimated build (config_model_seconds, from its size) exceeds this share of the
# command's nominal time limit is not built: the incumbent is the answer. Decided by size and limit,
# not the clock, so an idle and a loaded machine decide alike; the build's own deadline checks are
# the safety net. (random-dag:nodes=10000: 19.5 M elements, ~5 s estimated: built from a 20 s limit.)
MODEL_BUILD_SHARE = 0.25


def _solve_in_child(model, solver_name, time_limit, start_values):
    from solver_plan.intra.backends.pulp_cbc import solve_with_pulp
    return solve_with_pulp(model, solver=solver_name, time_limit=time_limit, start_values=start_values)


def check_milp_options(options: dict) -> None:
    """Option values, checked by the registry before any work."""
    backend = options.get("backend", "highs")
    if backend not in BACKENDS:
        raise InputError(f"unknown MILP backend {backend!r}; expected one of {', '.join(BACKENDS)}", "backend")
    for flag in ("relax_first", "lagrangian", "root_lp"):
        if not isinstance(options.get(flag, True), bool):
            raise InputError(f"must be true or false, got {options[flag]!r}", flag)


def root_lp_planned(problem: ConfigProblem, deadline: Deadline | None, options: dict) -> bool:
    """Whether the root LP route is planned for `problem` (options allow it and the LP fits what the
    heuristics leave of the nominal budget; lp_restriction still checks that a device can bind)."""
    if not (options.get("lagrangian", True) and options.get("root_lp", True)):
        return False
    nominal = None if deadline is None else deadline.nominal_left()
    return lp_fits(problem, None if nominal is None else (1.0 - BINDING_HEURISTIC_SHARE) * nominal)


def memory_free_first(problem: ConfigProblem, deadline: Deadline | None, options: dict) -> bool:
    """Whether solve() should first plan `problem` without its memory limit: not when the root LP
    route will run, whose LP holds the memory rows and is integral at root where the limit does not
    bind (the pass cost 17 s of 60 at 1,000 operators)."""
    return not root_lp_planned(problem, deadline, options)


def _milp_core(problem: ConfigProblem, context: Context) -> Answer:
    backend = context.options.get("backend", "highs")
    if backend not in BACKENDS:
        raise InputError(f"unknown MILP backend {backend!r}; expected one of {', '.join(BACKENDS)}", "backend")
    nominal = context.deadline.nominal_left()
    if nominal is not None and nominal < MIN_SOLVER_S:  # the budget decides, idle or loaded
        return Answer(Status.TIME_LIMIT, notes=("no budget left for the MILP after the heuristics",))
    if context.deadline.overrun(GRACE_S):  # the safety net (marks the answer cut short)
        return Answer(Status.TIME_LIMIT, notes=("no time left for the MILP after the heuristics",))
    restriction = None
    if context.options.get("lagrangian", True):
        def solve_sub(sub: ConfigProblem, start, deadline, gap: float | None = None) -> Answer:
            return _solve_model(sub, start, deadline, context, backend, gap=gap)
        if context.options.get("root_lp", True):
            restriction = lp_restriction(problem, context.deadline, context.incumbent, context.seed, solve_sub)
        def relax_sub(sub: ConfigProblem, deadline):  # the LP values of a sub-problem (HiGHS only)
            return lp_values(sub, deadline, context.seed)
        if restriction is None:
            restriction = lagrangian_restriction(problem, context.deadline, context.incumbent, context.seed, solve_sub,
                                                 relax_sub if backend == "highs" else None)
    if restriction is None:
        return _solve_model(problem, context.incumbent, context.deadline, context, backend)
    if restriction.source != "given" and restriction.incumbent is not None:
        # the harness keeps it should the solver fail
        context.incumbent, context.incumbent_source = restriction.incumbent, restriction.source
    if restriction.incumbent is not None and restriction.open_count() == problem.num_nodes:  # nothing to solve
        return restriction.widen(problem, Answer(Status.OPTIMAL, restriction.encode(restriction.incumbent),
                                                 restriction.outside_bound))
    if context.deadline.nominal_s is not None and restriction.open_entries() > LARGE_MODEL_ENTRIES:
        # in a time limit such a model would only be built to be killed (without one it is solved)
        return restriction.widen(problem, Answer(Status.TIME_LIMIT, notes=(
            f"MILP not built: {restriction.open_entries()} edge entries left open, over the "
            f"{LARGE_MODEL_ENTRIES} a MILP can do anything with in time",)))
    first = _solve_restricted(problem, restriction, context.deadline.share(FIRST_STAGE_SHARE), context, backend)
    left = context.deadline.nominal_left()  # the budget decides; the clock only past its grace
    if (first.status is Status.OPTIMAL or first.assignment is None or (left is not None and left < MIN_SOLVER_S)
            or context.deadline.overrun(GRACE_S)):
        return first
    tighter = restriction.tightened(problem, first.assignment, "first MILP stage")
    second = _solve_restricted(problem, tighter, context.deadline, context, backend)
    bound = max(b for b in (first.lower_bound, second.lower_bound, -np.inf) if b is not None)
    if second.assignment is None or problem.objective(first.assignment) < problem.objective(second.assignment):
        return replace(first, status=Status.TIME_LIMIT if second.status is Status.TIME_LIMIT else first.status,
                       lower_bound=bound, notes=first.notes + ("second MILP stage found nothing better",))
    return replace(second, lower_bound=bound, notes=("first MILP stage: " + "; ".join(first.notes),) + second.notes)


def _solve_restricted(problem: ConfigProblem, restriction: Restriction, deadline, context: Context,
                      backend: str) -> Answer:
    start = restriction.encode(restriction.incumbent) if restriction.incumbent is not None else None
    try:
        answer = _solve_model(restriction.problem, start, deadline, context, backend, restriction.closed_pairs)
    except TimeoutError as exc:  # killed at the wall clock: the Lagrangian bound and plan still count
        answer = Answer(Status.TIME_LIMIT, notes=(failure_note("milp", exc),))
    return restriction.widen(problem, answer)


def too_big_note(problem: ConfigProblem, limit: float | None) -> str | None:
    """Why the model of `problem` is not built under a nominal `limit` (None: it is built)."""
    estimate = config_model_seconds(problem)
    if limit is None or estimate <= MODEL_BUILD_SHARE * limit:
        return None
    return (f"MILP not built: its model (estimated {estimate:.1f} s to build from its size) exceeds "
            f"{MODEL_BUILD_SHARE:.0%} of the {limit:g} s time limit")


def _solve_model(problem: ConfigProblem, incumbent, deadline, context: Context, backend: str,
                 closed_pairs=None, gap: float | None = None) -> Answer:
    """The MILP of `problem` from `incumbent` within `deadline`, stopped within the relative `gap`
    of its bound where one is given (HiGHS only: CBC ignores it; None: proven optimal)."""
    skip = too_big_note(problem, context.deadline.nominal_s)
    if skip is not None:
        return Answer(Status.TIME_LIMIT, notes=(skip,))
    try:
        model = config_model(problem, deadline, closed_pairs)
    except ModelBuildCut as exc:
        return Answer(Status.TIME_LIMIT, notes=(str(exc),))
    start = encode(model, problem, incumbent, closed_pairs) if incumbent is not None else None
    remaining = deadline.remaining()
    if remaining is not None and remaining < MIN_SOLVER_S:
        deadline.mark_cut_short()
        return Answer(Status.TIME_LIMIT, notes=("no time left for the MILP after building it",))
    if backend == "highs":
        # keep a margin for shipping the model to the worker and the answer back
        solver_limit = None if remaining is None else max(0.05, 0.9 * remaining - 0.2)
        # a model reduced by the root LP's reduced costs: its LP optimum is known not to be integral,
        # and presolve finds little left to do (see solve_with_highs)
        fixed = closed_pairs is not None
        relax_first = context.options.get("relax_first", True) and not fixed
        # the work limits from the nominal budget left after the build: they decide; the clock stops
        nominal = deadline.nominal_left()
        budget = None if nominal is None else nominal - config_model_seconds(problem)
        stop: dict[str, Any] = {} if gap is None else {"mip_rel_gap": gap}  # else solve_with_highs' default
        try:
            outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs",
                                    timeout=remaining, model=model, time_limit=solver_limit, start_values=start,
                                    seed=context.seed, relax_first=relax_first, presolve=not fixed,
                                    iteration_limit=lp_iteration_limit(model, budget),
                                    check_limit=mip_check_limit(model, budget), **stop)
        except TimeoutError:  # the worker killed at the wall clock: the clock decided
            deadline.mark_cut_short()
            raise
        if stopped_by_clock(outcome.status, outcome.notes):
            deadline.mark_cut_short()
        return outcome_answer(model, outcome)
    try:
        outcome = call_in_subprocess(_solve_in_child, (model, PULP_SOLVERS[backend], remaining, start), remaining)
    except TimeoutError as exc:
        return Answer(Status.TIME_LIMIT, notes=(f"{backend}: {exc}",))
    return outcome_answer(model, outcome)


def plan_milp(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None, **options):
    """Planner "milp", the per-operator default: the one-hot MILP on HiGHS or CBC (options: backend,
    lagrangian, root_lp, relax_first)."""
    # where the root LP will run, the edge-dropping relaxation of the warm start is not made: its
    # bound ignores memory (the LP's is higher) and the plan from the LP's support replaces its plan
    # (random-dag:100 binding: 0.3-0.4 s of 6 s saved, the same plans after the support MILP)
    lp_route = memory_can_bind(problem) and root_lp_planned(problem, start_clock(deadline), options)
    return run_planner("milp", problem, _milp_core, exact=True, deadline=deadline, seed=seed,
                       warm_start=warm_start, options=options, seed_relaxation=not lp_route)
