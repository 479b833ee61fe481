"""Exact periodic schedule with each stage's backward split into B and W ("exact-zb").

The CP-SAT model of pipeline/exact_schedule.py on the operations of pipeline/split_backward.py:
W_s after B_s of the same batch, on the same processor, and the batch's abar_s held until W_s ends.
The period is minimised by bisection under the memory limit, as for the unsplit schedule.

Seed: the unsplit exact schedule with every W_s started right after its B_s is a valid split
pattern of the same period (same busy time on every resource, same memory lifetimes), so the
answer is never longer than the unsplit exact period; the tick model then searches below it.
"""
from __future__ import annotations

import time

from solver_plan.pipeline import exact_schedule
from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.operations import PipelineOps
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.period_search import search_period
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.schedule_result import ScheduleResult, finish, memory_infeasible
from solver_plan.pipeline.split_backward import EQUAL_PASSES, split_operations
from solver_plan.pipeline.ticks import tick_for, to_ticks
from solver_plan.work import WorkBudget
from solver_plan.result import Status

NAME = "exact-zb"
SEED_SHARE = 0.25  # of the time limit for the unsplit schedule that seeds the search


class _SplitInstance(exact_schedule._TickedInstance):
    def __init__(self, problem, allocation, tick, budget, weight_share: float):
        self.weight_share = weight_share
        super().__init__(problem, allocation, tick, budget)

    def operations(self, problem: ChainProblem, allocation: Allocation) -> PipelineOps:
        return split_operations(problem, allocation, self.weight_share)


def split_seed(unsplit: PeriodicPattern, ops: PipelineOps) -> PeriodicPattern:
    """`unsplit` on the split operations: every operation where it was, W_s right after B_s."""
    start, shift = list(unsplit.start), list(unsplit.shift)
    for op in ops.operations[len(start):]:
        b = ops.index(f"B{op.stage}")
        start.append(start[b] + ops.operations[b].duration)
        shift.append(shift[b])
    return PeriodicPattern(unsplit.allocation, ops, unsplit.period, tuple(start), tuple(shift), NAME).normalised()


def schedule(problem: ChainProblem, allocation: Allocation, *, weight_share: float = EQUAL_PASSES,
             time_limit: float | None = 60.0, resolution: int = 200, tick: float | None = None,
             **options) -> ScheduleResult:
    """Scheduler "exact-zb": the least period with each backward split into B and W, seeded by the
    unsplit exact schedule (never longer than it; see the module text)."""
    begin = time.perf_counter()
    bound = allocation.load_bound(problem)
    short = memory_infeasible(NAME, problem, allocation, bound, begin)  # one batch per stage: as unsplit
    if short is not None:
        return short
    tick = tick or tick_for(bound, resolution)
    options.pop("period", None)  # no fixed-period mode: the period is what this scheduler minimises
    unsplit = exact_schedule.schedule(problem, allocation, time_limit=None if time_limit is None
                                      else SEED_SHARE * time_limit, tick=tick, **options)
    if unsplit.pattern is None:
        return unsplit
    budget = WorkBudget(None if time_limit is None else time_limit * (1 - SEED_SHARE), options.get("deadline"))
    inst = _SplitInstance(problem, allocation, tick, budget, weight_share)
    seed = split_seed(unsplit.pattern, inst.ops)
    T_seed = to_ticks(seed.period, tick) + len(inst.ops.operations)  # slack for rounded durations
    ok, incumbent = inst.try_period(T_seed, budget.share(), seed)
    if not ok:
        incumbent = (T_seed, None, None)
    outcome = search_period(inst.lower, incumbent[0], incumbent, inst.try_period, budget)
    proven = outcome.bound * tick
    notes = (f"tick {tick:.4g} s; at that resolution no pattern is shorter than {proven:.6g} s",
             f"unsplit exact period {unsplit.period_s:.6g} s")
    pattern = seed
    if outcome.solution[1] is not None and outcome.period * tick < seed.period:
        pattern = inst.pattern(*outcome.solution).replace(scheduler=NAME)
    # optimal: the tick model proved its bound with no duration rounded, and the answer reaches it
    optimal = outcome.proven and inst.exact_ticks and pattern.period <= proven * (1 + 1e-9)
    status = Status.OPTIMAL if optimal else (Status.FEASIBLE if outcome.proven else Status.TIME_LIMIT)
    if pattern.period <= bound * (1 + 1e-9):
        status = Status.OPTIMAL  # at the load bound: nothing can be shorter
    lower = max(bound, proven) if inst.exact_ticks else bound
    return finish(NAME, pattern, lower, begin, status, notes=notes)
