"""Planner "edge-drop": the edge-dropping relaxation (see relaxation) as a fast planner that also
proves a lower bound; its plan is repaired to fit memory if needed, then locally improved (one node at
a time, then by exact re-solves on random forests)."""
from __future__ import annotations

from solver_plan.intra.forest_search import improve_by_forests
from solver_plan.intra.harness import Answer, Context, run_planner, time_for_passes
from solver_plan.intra.local_search import improve
from solver_plan.intra.memory_repair import repair_memory
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.relaxation import edge_dropping_relaxation
from solver_plan.planners import register
from solver_plan.result import Status


def _edge_drop_core(problem: ConfigProblem, context: Context) -> Answer:
    if not time_for_passes(context.deadline, problem, 3):
        from solver_plan.intra.greedy import heuristic_plans
        plans = heuristic_plans(problem, context.deadline, refine=False)
        if not plans:
            return Answer(Status.TIME_LIMIT, notes=("too little time for the relaxation or a greedy plan",))
        return Answer(Status.TIME_LIMIT, min(plans, key=problem.objective), None,
                      ("too little time for the relaxation: the greedy plan, no bound",))
    relaxation = edge_dropping_relaxation(problem, context.deadline)
    if relaxation is None:
        return Answer(Status.TIME_LIMIT, notes=("time out during the relaxation",))
    plan = repair_memory(problem, relaxation.assignment, context.deadline)
    if plan is None and context.deadline.expired():
        return Answer(Status.TIME_LIMIT, None, relaxation.lower_bound,
                      ("time out while repairing the relaxation's plan to fit memory",))
    if plan is None:
        return Answer(Status.ERROR, notes=("the relaxation's plan could not be repaired to fit memory",))
    plan = improve(problem, plan, context.deadline)
    plan = improve_by_forests(problem, plan, context.deadline, seed=context.seed)
    note = f"dropped {relaxation.dropped_edges} edge(s) to fold the graph completely"
    return Answer(Status.FEASIBLE, plan, relaxation.lower_bound, (note,))


@register("edge-drop", "config", options=(), exact=False,
          description="delete the cheapest residual edges until the graph folds: a plan and a proven bound")
def plan_edge_drop(problem: ConfigProblem, *, time_limit=None, seed=0, warm_start=None, **options):
    return run_planner("edge-drop", problem, _edge_drop_core, exact=False, time_limit=time_limit, seed=seed,
                       warm_start=warm_start, options=options)
