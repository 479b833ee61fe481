"""1F1B*: the grouping schedule of MadPipe section 4.1 for contiguous allocations.

Transfers are extra stages between the compute stages (forward CF_s, backward CB_s), so a
pipeline of N stages becomes a sequence of up to 2N - 1 "virtual" stages. Groups are formed from
the end: add virtual stages while the group's total load (forward + backward) is at most T. Group g
(g = 1 holds the last stage) runs its forwards in sequence, then its backwards in reverse, with
shift h for forwards and h + g - 1 for backwards; all forwards form one chain from time 0. Every
stage of group g keeps g batches in flight, which is the least any pattern of period T can keep
(Proposition 1). `min_period` finds the smallest T at which that memory fits in M: the grouping
only changes where T equals the load of a run of consecutive virtual stages, so those loads are
the only candidates.
"""
from __future__ import annotations

import time

from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.operations import PipelineOps, pipeline_operations
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.schedule_result import ScheduleResult, finish, memory_infeasible, not_applicable
from solver_plan.result import Status

REL_TOL = 1e-12


def virtual_stages(ops: PipelineOps) -> list[tuple[int, int]]:
    """(forward op, backward op) pairs in chain order: compute stages and transfers between them."""
    sequence = []
    for s in range(len(ops.stage_processor)):
        sequence.append((ops.index(f"F{s}"), ops.index(f"B{s}")))
        if any(op.name == f"CF{s}" for op in ops.operations):
            sequence.append((ops.index(f"CF{s}"), ops.index(f"CB{s}")))
    return sequence


def _loads(ops: PipelineOps, sequence) -> list[float]:
    return [ops.operations[f].duration + ops.operations[b].duration for f, b in sequence]


def groups(loads: list[float], period: float) -> list[int]:
    """Group number of each virtual stage (1 for the group holding the last one)."""
    number, total, result = 1, 0.0, [0] * len(loads)
    for i in range(len(loads) - 1, -1, -1):
        if total > 0 and total + loads[i] > period * (1 + REL_TOL):
            number, total = number + 1, 0.0
        total += loads[i]
        result[i] = number
    return result


def _grouping(problem: ChainProblem, allocation: Allocation, period: float):
    """(operations, virtual stage sequence, group of each virtual stage) at period T, or None when
    some stage or transfer is longer than T."""
    ops = pipeline_operations(problem, allocation)
    sequence = virtual_stages(ops)
    loads = _loads(ops, sequence)
    if max(loads) > period * (1 + REL_TOL):
        return None
    return ops, sequence, groups(loads, period)


def pattern(problem: ChainProblem, allocation: Allocation, period: float) -> PeriodicPattern | None:
    """The 1F1B* pattern of period T, or None when some stage or transfer is longer than T."""
    grouping = _grouping(problem, allocation, period)
    if grouping is None:
        return None
    ops, sequence, group = grouping
    start = [0.0] * len(ops.operations)
    shift = [0] * len(ops.operations)
    clock = 0.0
    for i, (f, _) in enumerate(sequence):
        start[f] = clock
        clock += ops.operations[f].duration
        # the last stage of a group turns back: its backwards run right after its forward
        if i == len(sequence) - 1 or group[i + 1] != group[i]:
            back = clock
            for j in range(i, -1, -1):
                if group[j] != group[i]:
                    break
                b = sequence[j][1]
                start[b], shift[b] = back, group[i] - 1
                back += ops.operations[b].duration
    return PeriodicPattern(allocation, ops, period, tuple(start), tuple(shift), "1f1b*").normalised()


def in_flight(problem: ChainProblem, allocation: Allocation, period: float) -> list[int] | None:
    """Batches kept by each compute stage under 1F1B* at period T (its group number)."""
    grouping = _grouping(problem, allocation, period)
    if grouping is None:
        return None
    ops, sequence, group = grouping
    return [g for (f, _), g in zip(sequence, group) if ops.operations[f].kind == "F"]


def peak_memory(problem: ChainProblem, allocation: Allocation, period: float) -> dict[int, float] | None:
    """Bytes per processor under 1F1B* at period T, or None when some stage or transfer is longer than T.
    """
    counts = in_flight(problem, allocation, period)
    if counts is None:
        return None
    memory = allocation.static_memory(problem)
    for stage, g in zip(allocation.stages, counts):
        memory[stage.processor] += g * problem.stored(stage.first, stage.last)
    return memory


def candidate_periods(problem: ChainProblem, allocation: Allocation) -> list[float]:
    """The periods at which the 1F1B* grouping can change: loads of runs of consecutive virtual stages,
    at least the longest one, in increasing order."""
    ops = pipeline_operations(problem, allocation)
    loads = _loads(ops, virtual_stages(ops))
    floor = max(loads)
    sums = {sum(loads[i:j]) for i in range(len(loads)) for j in range(i + 1, len(loads) + 1)}
    return sorted(t for t in sums if t >= floor)


def min_period(problem: ChainProblem, allocation: Allocation) -> float | None:
    """Smallest T whose 1F1B* memory fits in M on every processor; None if none does.

    Bisection over the candidates: a virtual stage's group number is the number of greedy groups of
    its suffix, which never grows with T, so neither does the memory."""
    candidates = candidate_periods(problem, allocation)

    def fits(t: float) -> bool:
        return max(peak_memory(problem, allocation, t).values()) <= problem.memory * (1 + 1e-12)

    if not candidates or not fits(candidates[-1]):
        return None
    low, high = 0, len(candidates) - 1  # candidates[high] fits
    while low < high:
        mid = (low + high) // 2
        if fits(candidates[mid]):
            high = mid
        else:
            low = mid + 1
    return candidates[high]


def schedule(problem: ChainProblem, allocation: Allocation, *, period: float | None = None,
             time_limit: float | None = None, **options) -> ScheduleResult:
    """Scheduler "1f1b*" (MadPipe section 4.1): the grouping pattern at `period`, or at the least period
    whose memory fits; ERROR on a non-contiguous allocation."""
    begin = time.perf_counter()
    if not allocation.is_contiguous:
        return not_applicable("1f1b*", "1F1B* needs a contiguous allocation (one stage per processor)", begin)
    bound = allocation.load_bound(problem)
    short = memory_infeasible("1f1b*", problem, allocation, bound, begin)
    if short is not None:
        return short
    if period is None:
        period = min_period(problem, allocation)
        if period is None:  # only by rounding: one group at the longest period holds one batch per stage
            return ScheduleResult("1f1b*", Status.INFEASIBLE, lower_bound_s=bound, runtime_s=time.perf_counter() - begin,
                                  notes=("no 1F1B* period fits the memory",))
    result = pattern(problem, allocation, period)
    if result is None:
        return ScheduleResult("1f1b*", Status.INFEASIBLE, lower_bound_s=bound, runtime_s=time.perf_counter() - begin,
                              notes=(f"period {period:.6g} s is below the longest stage or transfer",))
    return finish("1f1b*", result, bound, begin)
