"""`milp-load`: the one-hot MILP with the load-aware objective (`load_objective.py`) instead of the
sum, so concurrent branches on disjoint devices pay off.

Registered with simplify=False: node and edge elimination are exact for a sum only (a folded node
forgets which devices its members ran on). Warm start: the cheaper under the load objective of the
sum optimum (`milp`, given a share of the time) and the greedy plans; HiGHS then improves it. The
reported objective and bound are those of the load objective, which the validator recomputes
(`objective="load"` in the registry).
"""
from __future__ import annotations

from solver_plan.deadline import Deadline
from solver_plan.intra import isolated
from solver_plan.intra.harness import _usable, best_heuristic_plan
from solver_plan.intra.linear_model import decode
from solver_plan.intra.load_objective import encode_load, load_breakdown, load_model, topological_order
from solver_plan.intra.problem import ConfigProblem
from solver_plan.planners import register
from solver_plan.result import ConfigResult, Status

SUM_SHARE = 0.25  # of the time limit for the sum optimum that seeds the search
NAME = "milp-load"


def _seeds(problem: ConfigProblem, warm_start, deadline: Deadline) -> list[tuple[tuple[int, ...], str]]:
    from solver_plan.intra.solve import solve
    seeds = []
    if warm_start is not None and _usable(problem, tuple(int(c) for c in warm_start)):
        seeds.append((tuple(int(c) for c in warm_start), "warm start"))
    share = deadline.share(SUM_SHARE)
    summed = solve(problem, "milp", time_limit=share.remaining())
    if summed.assignment is not None:
        seeds.append((tuple(summed.assignment), "sum optimum (milp)"))
    plan, source = best_heuristic_plan(problem, None, deadline)
    if plan is not None:
        seeds.append((plan, source))
    return seeds


@register(NAME, "config", options=("relax_first",), exact=True, simplify=False, objective="load",
          description="one-hot MILP minimising the busiest device / critical path (load objective), not the sum")
def plan_milp_load(problem: ConfigProblem, *, time_limit=None, seed=0, warm_start=None, **options) -> ConfigResult:
    deadline = Deadline(time_limit)
    if topological_order(problem) is None:
        return ConfigResult(NAME, Status.ERROR, runtime_s=deadline.elapsed(),
                            notes=("the load objective needs acyclic edges (a critical path)",))
    seeds = _seeds(problem, warm_start, deadline)
    load = load_model(problem)
    incumbent, source = None, ""
    if seeds:
        incumbent, source = min(seeds, key=lambda s: load_breakdown(problem, s[0], load.split).objective)
    notes: list[str] = []
    assignment, bound, status = incumbent, None, Status.FEASIBLE if incumbent is not None else Status.ERROR
    remaining = deadline.remaining()
    if remaining is None or remaining > 0.1:
        solver_limit = None if remaining is None else max(0.05, 0.97 * remaining - 0.2)
        start = encode_load(load, problem, incumbent) if incumbent is not None else None
        try:
            outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs",
                                    timeout=remaining, model=load.model, time_limit=solver_limit,
                                    start_values=start, seed=seed, relax_first=options.get("relax_first", True))
        except Exception as exc:  # a failing solver must not lose the seed plan
            outcome = None
            notes.append(f"HiGHS failed: {exc!r}")
        if outcome is not None:
            notes.extend(outcome.notes)
            bound = outcome.bound
            found = decode(load.model, outcome.x_values) if outcome.x_values is not None else None
            if found is not None and _usable(problem, found) and (
                    incumbent is None or load_breakdown(problem, found, load.split).objective
                    <= load_breakdown(problem, incumbent, load.split).objective):
                assignment, source = found, "HiGHS"
            status = {"optimal": Status.OPTIMAL, "time_limit": Status.TIME_LIMIT,
                      "infeasible": Status.INFEASIBLE}.get(outcome.status, Status.FEASIBLE)
    else:
        status = Status.TIME_LIMIT
    if assignment is None:
        if status is Status.OPTIMAL:
            status = Status.ERROR
        return ConfigResult(NAME, status, None, None, deadline.elapsed(), None, tuple(notes))
    parts = load_breakdown(problem, assignment, load.split)
    if bound is not None:
        bound = min(float(bound), parts.objective)
    if status is Status.INFEASIBLE:  # the seed fits memory, so the solver's claim is wrong
        status, bound = Status.FEASIBLE, None
    if status is Status.OPTIMAL and (bound is None or parts.objective - bound > 1e-6 * max(1.0, parts.objective)):
        status = Status.FEASIBLE
    notes += [f"plan from {source}", parts.describe()]
    return ConfigResult(NAME, status, parts.objective, bound, deadline.elapsed(), tuple(assignment), tuple(notes))
