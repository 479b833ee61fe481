"""Front door: `plan_pipeline(problem, planner, schedule)` -> `PipelineResult`, and its JSON form.

The allocation planner runs first; the scheduler then gives each candidate allocation a periodic
pattern (a planner that schedules too, exact-joint, brings its own); every pattern is validated, and
the best valid period is kept.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from solver_plan.deadline import Deadline
from solver_plan.errors import InputError, check_positive
from solver_plan.planners import get_planner
from solver_plan.pipeline.allocation import Allocation, AllocationResult
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.schedule_result import ScheduleResult
from solver_plan.pipeline.validate import Validation, validate
from solver_plan.result import Status, relative_gap

MIN_LIMIT_S = 1e-3  # an expired clock still hands a solver a positive limit: it returns at once

JSON_VERSION = 1


@dataclass(frozen=True)
class PipelineResult:
    problem: ChainProblem
    planner: str
    scheduler: str
    status: Status
    allocation: AllocationResult
    schedule: ScheduleResult | None = None
    pattern: PeriodicPattern | None = None
    validation: Validation | None = None
    lower_bound_s: float | None = None
    runtime_s: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def valid(self) -> bool:
        return self.validation is not None and self.validation.valid

    @property
    def period_s(self) -> float | None:
        return self.pattern.period if self.valid else None

    @property
    def gap(self) -> float | None:
        return relative_gap(self.period_s, self.lower_bound_s)

    def to_dict(self) -> dict:
        problem = self.problem
        out = {
            "version": JSON_VERSION, "model": problem.name, "planner": self.planner, "scheduler": self.scheduler,
            "status": self.status.value, "period_s": self.period_s, "lower_bound_s": self.lower_bound_s,
            "planned_period_s": self.allocation.period_s, "valid": self.valid, "runtime_s": self.runtime_s,
            "processors": problem.processors, "memory_bytes": problem.memory, "bandwidth_bytes_per_s":
                None if problem.bandwidth == float("inf") else problem.bandwidth,
            "layers": problem.layers, "notes": list(self.allocation.notes + self.notes),
        }
        if self.allocation.min_memory is not None:
            out["min_memory_bytes"] = self.allocation.min_memory
        if self.allocation.allocation is not None:
            out["stages"] = self.allocation.allocation.to_dict(problem)
        if self.validation is not None:
            out["peak_memory_bytes"] = {str(p): m for p, m in sorted(self.validation.peak_memory.items())}
            out["violations"] = list(self.validation.violations)
        if self.pattern is not None:
            out["operations"] = self.pattern.rows()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def schedule_allocation(problem: ChainProblem, allocation: Allocation, scheduler: str, **options) -> ScheduleResult:
    info = get_planner(scheduler, "schedule", "--schedule")
    if scheduler == "1f1b*" and not allocation.is_contiguous:
        raise InputError("1f1b* schedules contiguous allocations only (one stage per processor); "
                         "use --schedule exact for this allocation", "--schedule")
    return info.func(problem, allocation, **options)


def _better(a: ScheduleResult | None, b: ScheduleResult) -> bool:
    return b.valid and (a is None or not a.valid or b.period_s < a.period_s)


def plan_pipeline(problem: ChainProblem, planner: str = "madpipe", schedule: str = "exact",
                  time_limit: float | None = None, planner_options: dict | None = None,
                  schedule_options: dict | None = None, *, deadline: Deadline | None = None) -> PipelineResult:
    """Allocate with `planner`, schedule every candidate allocation with `schedule`, keep the best
    valid pattern. `time_limit` (s from now) and/or a command's `deadline` bound everything; with
    neither, each exact solver keeps its own default. Once time is up, allocations not yet
    scheduled are skipped (the best pattern so far is kept)."""
    begin = time.perf_counter()
    info = get_planner(planner, "pipeline")
    get_planner(schedule, "schedule", "--schedule")  # fail early on a bad name
    check_positive(time_limit, "--time-limit")
    if time_limit is not None or deadline is not None:
        deadline = Deadline(time_limit, parent=deadline)
    options = dict(planner_options or {})
    if deadline is not None:
        options["time_limit"] = max(MIN_LIMIT_S, deadline.remaining())
    allocated = info.func(problem, **options)
    if not allocated.status.has_solution or allocated.allocation is None:
        return PipelineResult(problem, planner, schedule, allocated.status, allocated,
                              lower_bound_s=allocated.lower_bound_s, runtime_s=time.perf_counter() - begin)
    if allocated.pattern is not None:
        check = validate(allocated.pattern)
        status = allocated.status if check.valid else Status.ERROR
        return PipelineResult(problem, planner, planner, status, allocated, None, allocated.pattern, check,
                              allocated.lower_bound_s, time.perf_counter() - begin,
                              notes=("the planner schedules too: --schedule ignored",))
    candidates = [allocated.allocation, *allocated.alternatives]
    if schedule == "1f1b*":
        candidates = [a for a in candidates if a.is_contiguous] or candidates[:1]
    best: ScheduleResult | None = None
    for allocation in candidates:
        if best is not None and deadline is not None and deadline.expired():
            break
        options = dict(schedule_options or {})
        if deadline is not None:  # else each scheduler's own default limit applies
            options["time_limit"] = max(MIN_LIMIT_S, deadline.remaining())
        if schedule == "exact":
            options.setdefault("period_guess", allocated.period_s)
        scheduled = schedule_allocation(problem, allocation, schedule, **options)
        if best is None or _better(best, scheduled):
            best = scheduled
    status = Status.FEASIBLE if best.valid else (best.status if best.status != Status.OPTIMAL else Status.ERROR)
    chosen = best.pattern.allocation if best.pattern is not None else allocated.allocation
    if chosen != allocated.allocation:
        from dataclasses import replace
        allocated = replace(allocated, allocation=chosen,
                            notes=allocated.notes + ("scheduled best: the alternative allocation",))
    return PipelineResult(problem, planner, schedule, status, allocated, best, best.pattern if best.valid else None,
                          best.validation, allocated.lower_bound_s, time.perf_counter() - begin,
                          notes=best.notes)
