"""Planner "edge-drop": the edge-dropping relaxation (see relaxation) as a fast planner that also
proves a lower bound; its plan is repaired to fit memory if needed, then locally improved (one node at
a time, then by exact re-solves on random forests)."""
from __future__ import annotations

from solver_plan.deadline import Deadline, WorkMeter
from solver_plan.intra.answer import Answer
from solver_plan.intra.clock import out_of_budget, time_for_passes
from solver_plan.intra.context import Context
from solver_plan.intra.forest_search import improve_by_forests
from solver_plan.intra.greedy_plans import heuristic_plans
from solver_plan.intra.harness import run_planner
from solver_plan.intra.local_search import improve
from solver_plan.intra.memory_repair import repair_memory
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.relaxation import edge_dropping_relaxation
from solver_plan.result import Status

REPAIR_SHARE = 0.5  # of the work budget left after the relaxation
IMPROVE_SHARE = 0.5  # of what the repair left, for local search; forest search gets the rest


def _greedy_fallback(problem: ConfigProblem, context: Context, why: str, bound=None) -> Answer:
    """The best greedy plan (a memory-fitting one exists whenever the least-memory plan fits, even
    past the deadline) with `why` as a note: a time-out never loses a plan a heuristic has."""
    plans = heuristic_plans(problem, context.deadline)  # their work budget sizes the improvement
    if context.incumbent is not None:
        plans.append(context.incumbent)
    # FEASIBLE: the work budget decided (the same loaded); where the wall clock stopped a step,
    # `solve` marks the answer cut short and TIME_LIMIT
    status = Status.FEASIBLE
    if not plans:  # the repairs that may make a plan always run: out of budget or cut by the clock
        return Answer(Status.TIME_LIMIT if out_of_budget(context.deadline) else Status.ERROR, None, bound,
                      (f"{why}; no greedy plan fits the memory limit",))
    return Answer(status, min(plans, key=problem.objective), bound, (f"{why}: returned the greedy plan",))


RELAXATION_PASSES = 3  # whole-problem passes (`clock.PASS_S_PER_NODE`) the relaxation is charged


def relaxation_fits(deadline: Deadline, problem: ConfigProblem) -> bool:
    """Whether `deadline`'s nominal budget left pays for the relaxation (`clock.time_for_passes`);
    without it edge-drop returns the greedy plans."""
    return time_for_passes(deadline, problem, RELAXATION_PASSES)


def _edge_drop_core(problem: ConfigProblem, context: Context) -> Answer:
    if not relaxation_fits(context.deadline, problem):
        return _greedy_fallback(problem, context, "too little time for the relaxation (no bound)")
    relaxation = edge_dropping_relaxation(problem, context.deadline)
    if relaxation is None:
        return _greedy_fallback(problem, context, "time out during the relaxation (no bound)")
    # repair can take seconds per thousand nodes: keep work for the greedy fallback (which runs the
    # repairs that may make the only fitting plan), so this one stops at its share of the budget
    meter = WorkMeter(context.deadline)
    plan = repair_memory(problem, relaxation.assignment, context.deadline, meter=meter.part(REPAIR_SHARE),
                         optional=True)
    if plan is None:
        why = "the relaxation's plan could not be repaired to fit memory in its share of the work budget"
        return _greedy_fallback(problem, context, why, relaxation.lower_bound)
    plan = improve(problem, plan, context.deadline, meter=meter.part(IMPROVE_SHARE))
    plan = improve_by_forests(problem, plan, context.deadline, seed=context.seed, meter=meter)
    note = f"dropped {relaxation.dropped_edges} edge(s) to fold the graph completely"
    return Answer(Status.FEASIBLE, plan, relaxation.lower_bound, (note,))


def plan_edge_drop(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None, **options):
    """Planner "edge-drop": the edge-dropping relaxation's plan, repaired and improved, with its proven
    bound."""
    return run_planner("edge-drop", problem, _edge_drop_core, exact=False, deadline=deadline, seed=seed,
                       warm_start=warm_start, options=options)
