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

import numpy as np

from solver_plan.pipeline.allocation import Allocation, AllocationResult, Stage
from solver_plan.pipeline.minimal_memory import infeasible_result
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status


class DPCut(Exception):
    """The deadline passed during the DP."""


def contiguous_dp(problem: ChainProblem, fits, deadline=None) -> tuple[float, Allocation | None]:
    """Min-period contiguous allocation with stages accepted by fits(first, lasts, stages_from_here),
    a boolean vector over the candidate last layers (numpy: O(L^2 P) work in O(L P) vector steps).
    Raises DPCut when `deadline` (looked at once per first layer) passes."""
    L, P = problem.layers, problem.processors
    best = np.full((L + 1, P + 1), np.inf)
    choice = np.full((L + 1, P + 1), -1, dtype=np.int64)
    best[L, 0] = 0.0
    comm = np.array([problem.comm_load(l) if l < L - 1 else 0.0 for l in range(L)])
    for k in range(L - 1, -1, -1):
        if deadline is not None and deadline.expired():
            raise DPCut(f"the time limit ran out in PipeDream's DP ({L - 1 - k} of {L} layers)")
        lasts = np.arange(k, L)
        stage = np.maximum(problem.loads_from(k), comm[k:])
        for p in range(1, min(P, L - k) + 1):
            rest = best[lasts + 1, p - 1]
            value = np.where(fits(k, lasts, p), np.maximum(stage, rest), np.inf)
            i = int(np.argmin(value))
            if np.isfinite(value[i]):
                best[k, p], choice[k, p] = value[i], lasts[i]
    period, stages_count = min((best[0, p], p) for p in range(1, P + 1))
    if not np.isfinite(period):
        return math.inf, None
    stages, k = [], 0
    for p in range(stages_count, 0, -1):
        l = int(choice[k, p])
        stages.append(Stage(k, l, len(stages)))
        k = l + 1
    return float(period), Allocation(tuple(stages))


def plan(problem: ChainProblem, *, time_limit: float | None = None, seed: int = 0,
         memory_filter: bool = True, deadline=None, **options) -> AllocationResult:
    """`deadline` (the command's clock) is the safety net: once it passes, TIME_LIMIT without an
    allocation (the DP is polynomial; the front door decides by size whether it runs at all)."""
    begin = time.perf_counter()
    if memory_filter:
        def fits(k, lasts, stages_from_here):
            return problem.stage_memory_from(k, stages_from_here) <= problem.memory
    else:
        def fits(k, lasts, stages_from_here):
            return True
    try:
        period, allocation = contiguous_dp(problem, fits, deadline)
    except DPCut as exc:
        return AllocationResult("pipedream", Status.TIME_LIMIT, runtime_s=time.perf_counter() - begin, notes=(str(exc),))
    if allocation is None:
        return infeasible_result("pipedream", problem, begin, "no contiguous allocation passes PipeDream's memory filter",
                                 (lambda stages_from_here: stages_from_here) if memory_filter else (lambda _: 1),
                                 deadline=deadline)
    return AllocationResult("pipedream", Status.FEASIBLE, allocation, period, problem.total_load / problem.processors,
                            time.perf_counter() - begin)
