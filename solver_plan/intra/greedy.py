"""Planner "greedy": the SMSG greedy plans of greedy_plans (the best memory-fitting one), run
through the harness."""
from __future__ import annotations

from solver_plan.deadline import Deadline
from solver_plan.intra.answer import Answer
from solver_plan.intra.clock import out_of_budget
from solver_plan.intra.context import REPAIR_HINT, Context
from solver_plan.intra.greedy_plans import heuristic_plans
from solver_plan.intra.harness import run_planner
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import Status


def _greedy_core(problem: ConfigProblem, context: Context) -> Answer:
    plans = heuristic_plans(problem, context.deadline, context.options.get("refine", True),
                            context.options.get(REPAIR_HINT))
    if context.incumbent is not None:
        plans.append(context.incumbent)
    if not plans:
        # the repairs that may make a plan always run: out of budget or cut by the clock
        status = Status.TIME_LIMIT if out_of_budget(context.deadline) else Status.ERROR
        return Answer(status, notes=("greedy found no plan within the memory limit",))
    return Answer(Status.FEASIBLE, min(plans, key=problem.objective))


def plan_greedy(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None, **options):
    """Planner "greedy": the best memory-fitting SMSG greedy plan (option refine, default on)."""
    return run_planner("greedy", problem, _greedy_core, exact=False, deadline=deadline, seed=seed,
                       warm_start=warm_start, options=options)
