"""The smallest memory with which the chain can be pipelined at all, reported with INFEASIBLE.

Any pattern keeps at least one batch per stage in flight, so a processor holding a stage needs
at least M(k, l, 1). The smallest M that admits a contiguous allocation on at most P processors
is a min-max partition, solved by a DP over (first layer, stages left).
"""
from __future__ import annotations

import math
import time

import numpy as np

from solver_plan.pipeline.allocation import Allocation, AllocationResult, Stage
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status
from solver_plan.units import format_bytes


def minimal_memory(problem: ChainProblem, in_flight=lambda stages_from_here: 1) -> float:
    """Least M for which a contiguous allocation fits when a stage followed by p - 1 others keeps
    in_flight(p) batches (1 by default: any schedule, long period)."""
    return least_memory_allocation(problem, in_flight)[0]


class DiagnosisCut(Exception):
    """The deadline passed before the least memory was found."""


def least_memory_allocation(problem: ChainProblem, in_flight=lambda stages_from_here: 1, deadline=None):
    """(least M, the contiguous allocation achieving it) by a min-max DP over (first layer, stages left).
    Each first layer's stage memories are computed once per distinct in_flight(p) (one vector for
    the default, not one per p: 30x fewer on 400 layers x 32). Raises DiagnosisCut when `deadline`
    (looked at once per first layer) passes."""
    L, P = problem.layers, problem.processors
    best = np.full((L + 1, P + 1), np.inf)
    choice = np.full((L + 1, P + 1), -1, dtype=np.int64)
    best[L, 0] = 0.0
    flights = [in_flight(p) for p in range(P + 1)]
    for k in range(L - 1, -1, -1):
        if deadline is not None and deadline.expired():
            raise DiagnosisCut(f"the time limit ran out finding the least memory ({L - 1 - k} of {L} layers)")
        memory = {}
        for p in range(1, P + 1):
            if flights[p] not in memory:
                memory[flights[p]] = problem.stage_memory_from(k, flights[p])
            value = np.maximum(memory[flights[p]], best[k + 1:, p - 1])
            i = int(np.argmin(value))
            best[k, p], choice[k, p] = value[i], k + i
    need, stages = min((float(best[0, p]), p) for p in range(1, P + 1))
    if not math.isfinite(need):
        return need, None
    spans, k = [], 0
    for p in range(stages, 0, -1):
        last = int(choice[k, p])
        spans.append(Stage(k, last, len(spans)))
        k = last + 1
    return need, Allocation(tuple(spans))


def shortfall(problem: ChainProblem, allocation: Allocation, least: dict[int, float] | None = None) -> str | None:
    """Which processor (and its stages) is short of memory with one batch in flight per stage, and
    by how much; None when every processor fits. The one wording every planner and schedule uses."""
    least = least if least is not None else allocation.least_memory(problem)
    p, need = max(least.items(), key=lambda item: item[1] - problem.memory)
    if need <= problem.memory * (1 + 1e-12):
        return None
    stages = ", ".join(f"layers {s.first}..{s.last}" for s in allocation.stages if s.processor == p)
    return (f"processor {p} ({stages}) needs {format_bytes(need)} ({need:.0f} B) with one batch in flight per "
            f"stage: {format_bytes(need - problem.memory)} ({need - problem.memory:.0f} B) more than "
            f"M = {format_bytes(problem.memory)}")


def infeasible_result(planner: str, problem: ChainProblem, begin: float, why: str,
                      in_flight=lambda stages_from_here: 1, deadline=None) -> AllocationResult:
    """INFEASIBLE with the least memory any schedule needs (one batch per stage, the same figure for
    every planner and schedule), the stage that is short and by how much. When `deadline` passes
    first: INFEASIBLE with `why` and no least memory (the note says the limit cut the diagnosis)."""
    try:
        need, allocation = least_memory_allocation(problem, deadline=deadline)
    except DiagnosisCut as exc:
        return AllocationResult(planner, Status.INFEASIBLE, runtime_s=time.perf_counter() - begin,
                                notes=(f"{why}; {exc}",))
    if need <= problem.memory:
        note = (f"{why}; one batch in flight per stage needs only {format_bytes(need)} ({need:.0f} B) <= M = "
                f"{format_bytes(problem.memory)}, so other planners (madpipe) find a slower plan")
    else:
        note = (f"{why}; M = {format_bytes(problem.memory)} is too small: any allocation and schedule needs at "
                f"least {format_bytes(need)} ({need:.0f} B)")
        if allocation is not None and shortfall(problem, allocation):
            note += f"; the least-memory allocation's {shortfall(problem, allocation)}"
    return AllocationResult(planner, Status.INFEASIBLE, runtime_s=time.perf_counter() - begin,
                            min_memory=need, notes=(note,))
