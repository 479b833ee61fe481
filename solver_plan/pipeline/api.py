"""Front door: `plan_pipeline(problem, planner, schedule)` -> `PipelineResult`, and its JSON form.

The allocation planner runs first; the scheduler then gives each candidate allocation a periodic
pattern (a planner that schedules too, exact-joint, brings its own); every pattern is validated, and
the best valid period is kept.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace

from solver_plan.deadline import MIN_LIMIT_S, Deadline, time_budget
from solver_plan.errors import InputError, check_positive
from solver_plan.planners import get_planner
from solver_plan.pipeline.chain import coarsen
from solver_plan.pipeline.allocation import Allocation, AllocationResult
from solver_plan.pipeline.granularity import madpipe_layers
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.schedule_result import ScheduleResult
from solver_plan.pipeline.validate import Validation, validate
from solver_plan.result import Envelope, Objective, Status, relative_gap, with_envelope

EXACT_JOINT_LAYERS = 12  # the joint CP-SAT model's default resolution (merged layers)
BASELINE = ("pipedream", "1f1b*")  # every answer is compared with it at full granularity
# Shares of the nominal time limit, turned into deterministic work limits: the allocation planner
# (MadPipe-DP through its coarsening, exact-joint through CP-SAT work) and all schedules together.
PLANNER_SHARE = 0.45
SCHEDULE_SHARE = 0.3
# The baseline runs only when its estimated work fits this share of the nominal limit (decided by
# the chain's size and the limit, so an idle and a loaded machine decide alike; the DP's deadline
# checks are the safety net). PipeDream's DP and the INFEASIBLE diagnosis cost about 30 us per
# (first layer, stages) cell (measured: 400 layers x 32 processors, 12,304 cells, 0.29-0.38 s on a
# shared 2-core machine): 0.37 s there, so it runs from a 2 s limit up.
BASELINE_SHARE = 0.2
BASELINE_S_PER_CELL = 3e-5

SCHEMA_VERSION = 1  # pipeline JSON (docs/schemas/pipeline.v1.schema.json); files before the envelope: `version`


@dataclass(frozen=True)
class PipelineResult:
    """The answer to a pipeline question: the allocation planner's answer, the chosen scheduler's pattern
    and its validation; the objective is the validated period (seconds per batch)."""
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
    compared: tuple[dict, ...] = ()  # the plans the front door chose among (planner, period, layers)

    @property
    def valid(self) -> bool:
        """Whether a pattern was found and passed the validator."""
        return self.validation is not None and self.validation.valid

    @property
    def period_s(self) -> float | None:
        """The validated pattern's period in seconds, None without a valid pattern."""
        return self.pattern.period if self.valid else None

    @property
    def gap(self) -> float | None:
        """Relative gap between the validated period and the lower bound (None without both)."""
        return relative_gap(self.period_s, self.lower_bound_s)

    @property
    def all_notes(self) -> tuple[str, ...]:
        """The chain's, the allocation's and the front door's notes, in that order."""
        return self.problem.chain.notes + self.allocation.notes + self.notes

    @property
    def envelope(self) -> Envelope:
        """The result envelope shared by every kind of answer: kind "pipeline", objective "period"."""
        return Envelope("pipeline", SCHEMA_VERSION, self.status, Objective("period", self.period_s),
                        self.lower_bound_s, self.runtime_s, self.all_notes)

    def to_dict(self) -> dict:
        """The plan's JSON object: the envelope, the problem's sizes and model state, the allocation, the
        pattern and its validation."""
        problem = self.problem
        out = with_envelope(self.envelope, {
            "version": SCHEMA_VERSION,  # deprecated: schema_version's name before the result envelope
            "model": problem.name, "planner": self.planner, "scheduler": self.scheduler,
            "status": self.status.value, "period_s": self.period_s, "lower_bound_s": self.lower_bound_s,
            "planned_period_s": self.allocation.period_s, "valid": self.valid, "runtime_s": self.runtime_s,
            "processors": problem.processors, "memory_bytes": problem.memory, "bandwidth_bytes_per_s":
                None if problem.bandwidth == float("inf") else problem.bandwidth,
            "layers": problem.layers, "notes": list(self.all_notes),
            **problem.state.to_dict(),  # precision, optimizer and the model state per parameter memory charges
        })
        if self.allocation.min_memory is not None:
            out["min_memory_bytes"] = self.allocation.min_memory
        if self.allocation.allocation is not None:
            out["stages"] = self.allocation.allocation.to_dict(problem)
        if self.validation is not None:
            out["peak_memory_bytes"] = {str(p): m for p, m in sorted(self.validation.peak_memory.items())}
            out["violations"] = list(self.validation.violations)
        if self.pattern is not None:
            out["operations"] = self.pattern.rows()
        if self.schedule is not None:  # the scheduler's own status: OPTIMAL = the best period for this allocation
            out["schedule_status"] = self.schedule.status.value
        if self.compared:
            out["compared"] = [dict(c) for c in self.compared]
        return out

    def to_json(self) -> str:
        """`to_dict` as indented JSON with sorted keys."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def schedule_allocation(problem: ChainProblem, allocation: Allocation, scheduler: str, **options) -> ScheduleResult:
    """Schedule `allocation` with the scheduler registered as `scheduler` (kind "schedule"); InputError
    for 1F1B* on a non-contiguous allocation."""
    info = get_planner(scheduler, "schedule", "--schedule")
    if scheduler == "1f1b*" and not allocation.is_contiguous:
        raise InputError("1f1b* schedules contiguous allocations only (one stage per processor); "
                         "use --schedule exact for this allocation", "--schedule")
    return info.func(problem, allocation, **options)


def baseline_seconds(problem: ChainProblem) -> float:
    """Estimated seconds of the baseline's DP: BASELINE_S_PER_CELL per (first layer k, stages p <= L - k) cell."""
    L, P = problem.layers, problem.processors
    cells = sum(min(P, L - k) for k in range(L))
    return BASELINE_S_PER_CELL * cells


def _better(a: ScheduleResult | None, b: ScheduleResult) -> bool:
    return b.valid and (a is None or not a.valid or b.period_s < a.period_s)


def plan_pipeline(problem: ChainProblem, planner: str = "madpipe", schedule: str = "exact",
                  time_limit: float | None = None, planner_options: dict | None = None,
                  schedule_options: dict | None = None, *, deadline: Deadline | None = None,
                  compare_baseline: bool = True, max_layers: int | None = None) -> PipelineResult:
    """The best plan of `planner` + `schedule` and of the baseline, PipeDream + 1F1B*, at full granularity.

    The baseline (cheap, polynomial) runs first on the whole chain. MadPipe then runs on the chain
    coarsened to what its time share allows (`granularity.madpipe_layers`, or `max_layers`), with
    the baseline's period as the first target of its bisection. Whichever valid period is shorter
    is returned; `planner`/`scheduler` of the result name the winner, its notes say why and
    `compared` lists both. `time_limit` (s) and/or a command's `deadline` bound everything: the work
    limits of the DP and the solvers come from the nominal limit, so the same command gives the
    same plan on a loaded or an idle machine; the deadline is a safety net (results say when it cut
    a search short). With neither, each exact solver keeps its own default and nothing is coarsened.
    """
    begin = time.perf_counter()
    get_planner(planner, "pipeline")
    get_planner(schedule, "schedule", "--schedule")  # fail early on a bad name
    check_positive(time_limit, "--time-limit")
    nominal = time_limit if time_limit is not None else (deadline.nominal_left() if deadline is not None else None)
    if time_limit is not None:
        deadline = time_budget(time_limit, within=deadline)
    elif deadline is not None:
        deadline = deadline.child()  # a clock of its own within the caller's
    baseline, notes = None, []
    if compare_baseline and (planner, schedule) != BASELINE:
        estimate = baseline_seconds(problem)
        if nominal is not None and estimate > BASELINE_SHARE * nominal:
            notes.append(f"not compared with {' + '.join(BASELINE)}: its DP on {problem.layers} layers x "
                         f"{problem.processors} processors (estimated {estimate:.2f} s) exceeds "
                         f"{BASELINE_SHARE:.0%} of the {nominal:g} s time limit")
        elif deadline is not None and deadline.expired():
            notes.append(f"not compared with {' + '.join(BASELINE)}: no time left")
        else:
            baseline = _plan_one(problem, *BASELINE, None, None, None, deadline)
    reuse = None  # the requested planner is the baseline's, on the same chain: its allocation is the same
    if planner == BASELINE[0] and not planner_options and baseline is not None:
        reuse = baseline.allocation
    work = problem
    if planner in ("madpipe", "exact-joint"):
        if max_layers is not None:
            layers = max_layers
        elif planner == "madpipe":
            layers = madpipe_layers(problem, nominal and nominal * PLANNER_SHARE)
        else:
            layers = EXACT_JOINT_LAYERS
        if problem.layers > layers:
            # the baseline's stage boundaries stay cuts of the merged chain, so MadPipe can find its
            # allocation again; an explicit --max-layers below P is refused by ChainProblem
            keep = ([s.last for s in baseline.allocation.allocation.stages[:-1]]
                    if baseline is not None and baseline.valid and max_layers is None else [])
            work = problem.with_(chain=coarsen(problem.chain, layers if max_layers is not None
                                               else max(layers, problem.processors), keep))
            name = "MadPipe" if planner == "madpipe" else planner
            why = ("--max-layers" if max_layers is not None else
                   "what its time share allows" if planner == "madpipe" else "the joint model's default resolution")
            notes.append(f"{name} ran on {work.layers} merged layers of {problem.layers} ({why})")
        if planner == "madpipe" and baseline is not None and baseline.valid:
            planner_options = {"period_hint": baseline.period_s, **(planner_options or {})}
    result = _plan_one(work, planner, schedule, nominal, planner_options, schedule_options, deadline,
                       allocated=reuse)
    result = replace(result, notes=tuple(notes) + result.notes)
    if work is not problem and result.lower_bound_s is not None:
        # a bound of the merged chain bounds only plans cutting at its boundaries; min with the full
        # chain's load bound is a bound of the chain the user gave
        full = problem.load_bound
        if result.lower_bound_s > full:
            result = replace(result, lower_bound_s=full, notes=result.notes + (
                f"lower bound: the full chain's load bound {full:.6g} s (the merged chain's "
                f"{result.lower_bound_s:.6g} s bounds only plans cutting at its boundaries)",))
    if baseline is None:
        return replace(result, runtime_s=time.perf_counter() - begin)
    return _pick(result, baseline, begin)


def _summary(result: PipelineResult) -> dict:
    return {"planner": result.planner, "scheduler": result.scheduler, "status": result.status.value,
            "schedule_status": None if result.schedule is None else result.schedule.status.value,
            "period_s": result.period_s, "layers": result.problem.layers,
            "processors_used": (len(result.allocation.allocation.processors_used)
                                if result.allocation.allocation is not None else None)}


def _pick(result: PipelineResult, baseline: PipelineResult, begin: float) -> PipelineResult:
    """The better valid period (ties to the requested planner), saying which and why."""
    compared = (_summary(result), _summary(baseline))
    mine = f"{result.planner} + {result.scheduler}"
    theirs = f"{baseline.planner} + {baseline.scheduler} on all {baseline.problem.layers} layers"
    if baseline.valid and (not result.valid or baseline.period_s < result.period_s * (1 - 1e-9)):
        why = (f"returned {theirs}: period {baseline.period_s:.6g} s, better than {mine} "
               f"({'%.6g s' % result.period_s if result.valid else result.status.value})")
        chosen = baseline
    else:
        other = f"{baseline.period_s:.6g} s" if baseline.valid else baseline.status.value
        why = f"returned {mine}" + (f": {theirs} gives {other}" if result.valid else f"; {theirs}: {other}")
        chosen = result
    notes = (why,) + chosen.notes
    used = compared[0 if chosen is result else 1]["processors_used"]
    if chosen.valid and used is not None and used < chosen.problem.processors:
        notes += (f"uses {used} of {chosen.problem.processors} processors: no plan found on all of them is faster",)
    if chosen is baseline:  # why the requested planner lost: its coarsening, estimates and schedule notes
        notes += tuple(f"{result.planner}: {n}" for n in result.notes + result.allocation.notes[:1])
    return replace(chosen, notes=notes, compared=compared, runtime_s=time.perf_counter() - begin)


def _plan_one(problem: ChainProblem, planner: str, schedule: str, nominal: float | None,
              planner_options: dict | None, schedule_options: dict | None, deadline: Deadline | None, *,
              allocated: AllocationResult | None = None) -> PipelineResult:
    """Allocate with `planner` (or take `allocated`, its answer already found), schedule every
    candidate allocation with `schedule`, keep the best valid pattern. Work limits come from the
    nominal limit (seconds; deterministic), `deadline` is the safety net. Once it is up, allocations
    not yet scheduled are skipped (and said so)."""
    begin = time.perf_counter()
    if allocated is None:
        info = get_planner(planner, "pipeline")
        options = dict(planner_options or {})
        if nominal is not None:
            options.setdefault("time_limit", nominal * PLANNER_SHARE)
        if deadline is not None:
            options.setdefault("deadline", deadline)
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
    else:  # contiguous ones first: scheduled optimally at once (Proposition 1), they never wait for time
        candidates.sort(key=lambda a: not a.is_contiguous)
    best: ScheduleResult | None = None
    skipped = 0
    for allocation in candidates:
        if best is not None and deadline is not None and deadline.expired():
            skipped += 1
            continue
        options = dict(schedule_options or {})
        if nominal is not None:  # else each scheduler's own default limit applies
            options.setdefault("time_limit", max(MIN_LIMIT_S, nominal * SCHEDULE_SHARE / len(candidates)))
        if deadline is not None:
            options.setdefault("deadline", deadline)
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
    notes = best.notes + ((f"the time limit ran out before {skipped} alternative allocation(s) were scheduled",)
                          if skipped else ())
    return PipelineResult(problem, planner, schedule, status, allocated, best, best.pattern if best.valid else None,
                          best.validation, allocated.lower_bound_s, time.perf_counter() - begin,
                          notes=notes)
