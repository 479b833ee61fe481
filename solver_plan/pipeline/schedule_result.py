"""`ScheduleResult`: a scheduler's answer for a given allocation, always validated."""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.validate import Validation, validate
from solver_plan.result import Status, relative_gap


@dataclass(frozen=True)
class ScheduleResult:
    """A scheduler's answer for one allocation: status, pattern, period, bound and validation."""
    scheduler: str
    status: Status
    pattern: PeriodicPattern | None = None
    period_s: float | None = None
    lower_bound_s: float | None = None
    runtime_s: float = 0.0
    validation: Validation | None = None
    min_memory: float | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def valid(self) -> bool:
        """Whether a pattern was found and passed the validator."""
        return self.validation is not None and self.validation.valid

    @property
    def gap(self) -> float | None:
        """Relative gap between the period and the lower bound (None without both)."""
        return relative_gap(self.period_s, self.lower_bound_s)


def finish(scheduler: str, pattern: PeriodicPattern, lower_bound: float, begin: float,
           status: Status = Status.FEASIBLE, notes: tuple[str, ...] = ()) -> ScheduleResult:
    """Validate the pattern; an invalid pattern is reported as ERROR, never passed on silently."""
    check = validate(pattern)
    if not check.valid:
        return ScheduleResult(scheduler, Status.ERROR, pattern, pattern.period, lower_bound,
                              time.perf_counter() - begin, check, notes=notes + check.violations)
    return ScheduleResult(scheduler, status, pattern, pattern.period, lower_bound,
                          time.perf_counter() - begin, check, notes=notes)


def not_applicable(scheduler: str, why: str, begin: float) -> ScheduleResult:
    """ERROR from `scheduler`, saying `why` it does not apply to the allocation."""
    return ScheduleResult(scheduler, Status.ERROR, runtime_s=time.perf_counter() - begin, notes=(why,))


def memory_infeasible(scheduler: str, problem, allocation, lower_bound: float, begin: float) -> ScheduleResult | None:
    """INFEASIBLE when some processor cannot hold one batch in flight per stage (no period helps),
    naming the processor, its stages and the bytes short; the same test and words in every
    scheduler, so their answers agree. None when the allocation fits at a long enough period."""
    from solver_plan.pipeline.minimal_memory import shortfall
    least = allocation.least_memory(problem)
    short = shortfall(problem, allocation, least)
    if short is None:
        return None
    return ScheduleResult(scheduler, Status.INFEASIBLE, lower_bound_s=lower_bound, runtime_s=time.perf_counter() - begin,
                          min_memory=max(least.values()), notes=(short,))
