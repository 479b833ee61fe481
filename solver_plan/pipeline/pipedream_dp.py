"""PipeDream's contiguous partitioning: a dynamic program minimising the period.

best[k][p] = the smallest period for layers k..L-1 on exactly p stages (one per processor):
    min over l of max(U(k, l), C(l) if l < L-1, best[l+1][p-1]).
With the memory filter (PipeDream's estimate), a stage followed by p-1 stages keeps p batches in
flight (straight 1F1B without transfers), and must fit: M(k, l, p) <= M. PipeDream ignores that
transfers lengthen the pipeline, which is why its allocations often need a longer period than
planned once scheduled with 1F1B* (MadPipe section 5).
"""
from __future__ import annotations

import math
import time

from solver_plan.planners import register
from solver_plan.pipeline.allocation import Allocation, AllocationResult, Stage
from solver_plan.pipeline.minimal_memory import infeasible_result
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status


def contiguous_dp(problem: ChainProblem, fits) -> tuple[float, Allocation | None]:
    """Min-period contiguous allocation with stages accepted by fits(first, last, stages_from_here)."""
    L, P = problem.layers, problem.processors
    inf = math.inf
    best = [[inf] * (P + 1) for _ in range(L + 1)]
    choice = [[-1] * (P + 1) for _ in range(L + 1)]
    best[L][0] = 0.0
    for k in range(L - 1, -1, -1):
        for p in range(1, min(P, L - k) + 1):
            for l in range(k, L - p + 1):
                rest = best[l + 1][p - 1]
                if rest == inf or not fits(k, l, p):
                    continue
                value = max(problem.load(k, l), problem.comm_load(l) if l < L - 1 else 0.0, rest)
                if value < best[k][p]:
                    best[k][p], choice[k][p] = value, l
    period, stages_count = min((best[0][p], p) for p in range(1, P + 1))
    if period == inf:
        return inf, None
    stages, k = [], 0
    for p in range(stages_count, 0, -1):
        l = choice[k][p]
        stages.append(Stage(k, l, len(stages)))
        k = l + 1
    return period, Allocation(tuple(stages))


@register("pipedream", "pipeline", exact=False,
          description="PipeDream contiguous DP minimising the period (memory filter on by default)")
def plan(problem: ChainProblem, *, time_limit: float | None = None, seed: int = 0,
         memory_filter: bool = True, **options) -> AllocationResult:
    begin = time.perf_counter()
    if memory_filter:
        def fits(k, l, stages_from_here):
            return problem.stage_memory(k, l, stages_from_here) <= problem.memory
    else:
        def fits(k, l, stages_from_here):
            return True
    period, allocation = contiguous_dp(problem, fits)
    if allocation is None:
        return infeasible_result("pipedream", problem, begin, "no contiguous allocation passes PipeDream's memory filter",
                                 (lambda stages_from_here: stages_from_here) if memory_filter else (lambda _: 1))
    return AllocationResult("pipedream", Status.FEASIBLE, allocation, period, problem.total_load / problem.processors,
                            time.perf_counter() - begin)
