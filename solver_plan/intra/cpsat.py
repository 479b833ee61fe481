"""CP-SAT planner: the one-hot model of linear_model solved by OR-Tools CP-SAT with integer-scaled
costs, hinted with the best heuristic plan; reports CP-SAT's proven bound (minus rounding)."""
from __future__ import annotations

from solver_plan.intra import isolated
from solver_plan.intra.harness import Answer, Context, run_planner
from solver_plan.intra.linear_model import config_model, encode, outcome_answer
from solver_plan.intra.problem import ConfigProblem
from solver_plan.planners import register
from solver_plan.result import Status


def _cpsat_core(problem: ConfigProblem, context: Context) -> Answer:
    if context.deadline.expired():
        return Answer(Status.TIME_LIMIT, notes=("no time left for CP-SAT after the heuristics",))
    model = config_model(problem)
    start = encode(model, problem, context.incumbent) if context.incumbent is not None else None
    remaining = context.deadline.remaining()
    if remaining is not None and remaining < 0.05:
        return Answer(Status.TIME_LIMIT, notes=("no time left for CP-SAT after building the model",))
    # CP-SAT's limit excludes shipping the model to its worker and loading it: keep a margin
    solver_limit = None if remaining is None else max(0.05, 0.85 * remaining - 0.1)
    outcome = isolated.call("ortools", "solver_plan.intra.backends.cpsat", "solve_with_cpsat", timeout=remaining,
                            killable=True, model=model, time_limit=solver_limit, start_values=start, seed=context.seed,
                            workers=context.options.get("workers", 1))
    return outcome_answer(model, outcome)


@register("cpsat", "config", options=("workers",), exact=True, description="one-hot model in OR-Tools CP-SAT, hinted by the heuristic")
def plan_cpsat(problem: ConfigProblem, *, time_limit=None, seed=0, warm_start=None, **options):
    return run_planner("cpsat", problem, _cpsat_core, exact=True, time_limit=time_limit, seed=seed,
                       warm_start=warm_start, options=options)
