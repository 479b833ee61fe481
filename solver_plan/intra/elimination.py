"""DeePa node/edge elimination: fold leaves and degree-2 nodes (see simplify) until nothing folds,
solve what remains exactly, then undo the folds in reverse order. On series-parallel graphs the
remainder is a single node per component and the answer is exact by construction; otherwise the
remainder is solved exactly (brute force when tiny, else the MILP planner) and the note says so."""
from __future__ import annotations

import math

from solver_plan.deadline import Deadline
from solver_plan.intra.answer import Answer
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.clock import time_for_passes
from solver_plan.intra.context import Context
from solver_plan.intra.harness import run_planner
from solver_plan.intra.milp import plan_milp
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplify import simplify
from solver_plan.result import ConfigResult, Status

BRUTE_FORCE_PLANS = 20_000


def _solve_remainder(remainder: ConfigProblem, context: Context):
    if math.prod(len(c) for c in remainder.node_costs) <= BRUTE_FORCE_PLANS:
        return plan_brute(remainder), "brute force"
    if context.deadline.expired():  # the caller keeps its heuristic plan
        return ConfigResult("milp", Status.TIME_LIMIT, notes=("no time left to solve the remainder",)), "nothing"
    return plan_milp(remainder, deadline=context.deadline, seed=context.seed), "the MILP planner"


def _elimination_core(problem: ConfigProblem, context: Context) -> Answer:
    if not time_for_passes(context.deadline, problem, 2):  # the harness keeps its heuristic plan
        return Answer(Status.TIME_LIMIT, notes=("too little time left to eliminate",))
    reduced = simplify(problem, deadline=context.deadline)
    remainder = reduced.problem
    result, how = _solve_remainder(remainder, context)
    components = _component_count(remainder)
    if remainder.num_nodes <= components:
        note = f"fully eliminated ({reduced.describe()}); remainder solved by {how}"
    else:
        note = (f"not fully eliminable: {remainder.num_nodes} nodes remain ({reduced.describe()}); "
                f"remainder solved exactly by {how}")
    assignment = reduced.decode(result.assignment) if result.assignment is not None else None
    return Answer(result.status, assignment, result.lower_bound, (note,) + result.notes)


def _component_count(problem: ConfigProblem) -> int:
    parent = list(range(problem.num_nodes))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for u, v in problem.edges:
        parent[root(u)] = root(v)
    return len({root(node) for node in range(problem.num_nodes)})


def plan_elimination(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None, **options):
    """Planner "elimination": DeePa node and edge elimination, exact on series-parallel graphs (DeePa,
    ../shared/papers/deepa-layerwise-parallelism.md)."""
    return run_planner("elimination", problem, _elimination_core, exact=True, deadline=deadline, seed=seed,
                       warm_start=warm_start, options=options)
