"""The smallest memory with which the chain can be pipelined at all, reported with INFEASIBLE.

Any pattern keeps at least one batch per stage in flight, so a processor holding a stage needs
at least M(k, l, 1). The smallest M that admits a contiguous allocation on at most P processors
is a min-max partition, solved by a DP over (first layer, stages left).
"""
from __future__ import annotations

import math
import time

from solver_plan.pipeline.allocation import AllocationResult
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status
from solver_plan.units import format_bytes


def minimal_memory(problem: ChainProblem, in_flight=lambda stages_from_here: 1) -> float:
    """Least M for which a contiguous allocation fits when a stage followed by p - 1 others keeps
    in_flight(p) batches (1 by default: any schedule, long period)."""
    L, P = problem.layers, problem.processors
    best = [[math.inf] * (P + 1) for _ in range(L + 1)]
    best[L][0] = 0.0
    for k in range(L - 1, -1, -1):
        for p in range(1, P + 1):
            best[k][p] = min(max(problem.stage_memory(k, l, in_flight(p)), best[l + 1][p - 1]) for l in range(k, L))
    return min(best[0][1:])


def infeasible_result(planner: str, problem: ChainProblem, begin: float, why: str,
                      in_flight=lambda stages_from_here: 1) -> AllocationResult:
    need = minimal_memory(problem, in_flight)
    note = (f"{why}; M = {format_bytes(problem.memory)} is too small: this planner needs at least "
            f"{format_bytes(need)} ({need:.0f} B)")
    return AllocationResult(planner, Status.INFEASIBLE, runtime_s=time.perf_counter() - begin,
                            min_memory=need, notes=(note,))
