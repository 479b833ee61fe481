"""Exact periodic schedule of a given allocation (CP-SAT), the model of DESIGN.md "Pipelines".

For a fixed period T (ticks): start t_o in [0, T), shift h_o >= 0 with h(F_0) = 0;
- same-batch dependency o1 -> o2: T (h_o2 - h_o1) + t_o2 - t_o1 >= d_o1;
- cyclic no-overlap per resource: one NoOverlap over [t, t+d) and [t+T, t+T+d) of each operation;
- memory at every operation start o on processor p, with y(o, o') = [t_o' < t_o]:
  static(p) + sum over stages s on p of abar_s (h(B_s) - h(F_s) + y(o, F_s) - y(o, B_s)) <= M
  (y(F_s, F_s) = 1, y(B_s, B_s) = 0; W_s in place of B_s where the backward is split, exact-zb).
T is minimised by bisection from the load bound; 1F1B* (contiguous allocations) or the sequential
schedule gives the first feasible period and the hints.
"""
from __future__ import annotations

import time

from solver_plan.pipeline import modulo_greedy, onef1b
from solver_plan.pipeline.allocation import Allocation, processor_name
from solver_plan.pipeline.operations import PipelineOps, pipeline_operations
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.period_search import search_period
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.solvers import cp_model
from solver_plan.pipeline.schedule_result import ScheduleResult, finish, memory_infeasible
from solver_plan.pipeline.split_backward import release_index
from solver_plan.pipeline.ticks import limit_memory_units, memory_unit, tick_for, to_memory_units, to_ticks
from solver_plan.work import WorkBudget
from solver_plan.result import Status


# Along any dependency the shift grows by at most 2 without loss: with 3 or more, lowering the
# shift of everything downstream (forward) or upstream (backward) by one keeps every dependency,
# leaves the resources alone and never raises the batches in flight.
MAX_SHIFT_STEP = 2


class PeriodModel:
    """The CP-SAT model of one allocation at one period (in ticks)."""

    def __init__(self, ops: PipelineOps, durations: list[int], period: int, minimise_memory: bool = False):
        self.ops, self.period = ops, period
        m = self.model = cp_model().CpModel()
        max_shift = MAX_SHIFT_STEP * len(ops.dependencies)
        self.t = [m.new_int_var(0, period - 1, f"t_{op.name}") for op in ops.operations]
        self.h = [m.new_int_var(0, max_shift, f"h_{op.name}") for op in ops.operations]
        # Rotating every start by the same time (and relabelling batches) keeps a pattern valid.
        m.add(self.h[ops.index("F0")] == 0)
        m.add(self.t[ops.index("F0")] == 0)
        for a, b in ops.dependencies:
            m.add(period * (self.h[b] - self.h[a]) + self.t[b] - self.t[a] >= durations[a])
            m.add(self.h[b] - self.h[a] <= MAX_SHIFT_STEP)
        for members in ops.on_resource().values():
            intervals = []
            for i in members:
                if durations[i] > 0:
                    intervals.append(m.new_fixed_size_interval_var(self.t[i], durations[i], f"i_{i}"))
                    intervals.append(m.new_fixed_size_interval_var(self.t[i] + period, durations[i], f"j_{i}"))
            if len(intervals) > 2:
                m.add_no_overlap(intervals)
        self.peaks = self._memory(durations, minimise_memory)

    def _before(self, a: int, b: int):
        """A literal for t_a < t_b."""
        lit = self.model.new_bool_var(f"y_{a}_{b}")
        self.model.add(self.t[a] + 1 <= self.t[b]).only_enforce_if(lit)
        self.model.add(self.t[a] >= self.t[b]).only_enforce_if(~lit)
        return lit

    def _memory(self, durations, minimise: bool):
        ops, m = self.ops, self.model
        unit = memory_unit(ops.memory_limit)
        stored = [to_memory_units(a, unit) for a in ops.stored]
        limit = limit_memory_units(ops.memory_limit, unit)
        peaks = []
        for p, static in ops.static:
            stages = [s for s, q in enumerate(ops.stage_processor) if q == p]
            here = [i for i, op in enumerate(ops.operations) if op.resource == processor_name(p)]
            base = to_memory_units(static, unit)
            peak = m.new_int_var(0, limit, f"peak_{p}") if minimise else None
            for o in here:
                terms = []
                for s in stages:
                    f, b = self.ops.index(f"F{s}"), release_index(self.ops, s)  # W_s if split
                    y_f = 1 if o == f else self._before(f, o)
                    y_b = 0 if o == b else self._before(b, o)
                    terms.append(stored[s] * (self.h[b] - self.h[f] + y_f - y_b))
                usage = base + sum(terms)
                m.add(usage <= limit)
                if peak is not None:
                    m.add(peak >= usage)
            peaks.append(peak)
        if minimise:
            m.minimize(sum(peaks))
        return peaks

    def hint(self, starts: list[int], shifts: list[int]) -> None:
        """Hint the solver with known starts and shifts (ticks)."""
        for var, value in zip(self.t, starts):
            self.model.add_hint(var, value)
        for var, value in zip(self.h, shifts):
            self.model.add_hint(var, value)

    def solve(self, work: float | None, budget: WorkBudget | None = None):
        """Solve with `work` deterministic units (single thread, fixed seed: see solver_plan/work.py)."""
        cp = cp_model()
        solver = cp.CpSolver()
        budget = budget or WorkBudget(None)
        budget.configure(solver, work)
        status = solver.solve(self.model)
        budget.record(solver)
        if status in (cp.OPTIMAL, cp.FEASIBLE):
            return True, ([solver.value(v) for v in self.t], [solver.value(v) for v in self.h],
                          status == cp.OPTIMAL)
        if status == cp.INFEASIBLE:
            return False, None
        return None, None


def _ticked_hint(pattern: PeriodicPattern, tick: float, period: int):
    starts = [min(period - 1, int(round(t / tick))) for t in pattern.start]
    return starts, list(pattern.shift)


def _sequential(ops: PipelineOps, durations: list[int]):
    """One batch at a time through the whole chain: period = sum of all durations."""
    starts, clock = [0] * len(durations), 0
    for i in modulo_greedy.path_order(ops):
        starts[i] = clock
        clock += durations[i]
    return max(clock, 1), starts, [0] * len(durations)


def to_pattern(allocation, ops, tick, period, starts, shifts, name) -> PeriodicPattern:
    """A `PeriodicPattern` in seconds from a solution in ticks."""
    return PeriodicPattern(allocation, ops, period * tick, tuple(s * tick for s in starts), tuple(shifts), name)


def least_memory_pattern(problem: ChainProblem, allocation: Allocation, period: float, tick: float,
                         time_limit: float | None = 30.0):
    """The pattern of period T minimising the sum of peak memories (or None if none exists)."""
    ops = pipeline_operations(problem, allocation)
    durations = [to_ticks(op.duration, tick) for op in ops.operations]
    model = PeriodModel(ops, durations, to_ticks(period, tick), minimise_memory=True)
    budget = WorkBudget(time_limit)
    ok, found = model.solve(budget.remaining(), budget)
    if not ok:
        return None
    starts, shifts, _ = found
    return to_pattern(allocation, ops, tick, to_ticks(period, tick), starts, shifts, "exact")


def _probe(lower: int, incumbent, guess: float | None, tick: float, try_period, budget: WorkBudget):
    """Try the guess and then 25% longer periods until one is feasible or the incumbent is reached.
    Returns the proven lower bound (ticks) and the best incumbent (T, starts, shifts)."""
    if guess is None:
        return lower, incumbent
    candidate = max(lower, to_ticks(guess, tick))
    while candidate < incumbent[0]:
        ok, found = try_period(candidate, budget.share())
        if ok:
            return lower, found
        if ok is False:
            lower = max(lower, candidate + 1)
        if budget.exhausted():
            break
        candidate = max(candidate + 1, int(candidate * 1.25))
    return lower, incumbent


class _TickedInstance:
    """The allocation's operations with durations in ticks, and a solver for one period."""

    def __init__(self, problem: ChainProblem, allocation: Allocation, tick: float, budget: WorkBudget | None = None):
        self.allocation, self.tick = allocation, tick
        self.budget = budget or WorkBudget(None)
        self.ops = self.operations(problem, allocation)
        self.durations = [to_ticks(op.duration, tick) for op in self.ops.operations]
        loads: dict[str, int] = {}
        for op, d in zip(self.ops.operations, self.durations):
            loads[op.resource] = loads.get(op.resource, 0) + d
        self.lower = max(1, max(loads.values()))
        # the tick model's infeasibility proves a real bound only when no duration was rounded
        self.exact_ticks = all(abs(op.duration / tick - d) < 1e-9 for op, d in zip(self.ops.operations, self.durations))

    def operations(self, problem: ChainProblem, allocation: Allocation) -> PipelineOps:
        return pipeline_operations(problem, allocation)

    def try_period(self, T: int, limit: float | None, seed: PeriodicPattern | None = None):
        model = PeriodModel(self.ops, self.durations, T)
        if seed is not None:
            model.hint(*_ticked_hint(seed, self.tick, T))
        ok, found = model.solve(limit, self.budget)
        return ok, (None if not ok else (T, found[0], found[1]))

    def pattern(self, T: int, starts, shifts) -> PeriodicPattern:
        return to_pattern(self.allocation, self.ops, self.tick, T, starts, shifts, "exact")


def _fail(status: Status, bound: float, begin: float, note: str, min_memory: float | None = None) -> ScheduleResult:
    return ScheduleResult("exact", status, lower_bound_s=bound, runtime_s=time.perf_counter() - begin,
                          min_memory=min_memory, notes=(note,))


def _at_fixed_period(inst: _TickedInstance, period: float, bound: float, begin: float, time_limit) -> ScheduleResult:
    T = to_ticks(period, inst.tick)
    if T < inst.lower:
        return _fail(Status.INFEASIBLE, bound, begin, f"period {period:.6g} s is below the load of the busiest resource")
    ok, found = inst.try_period(T, time_limit)
    if not ok:
        return _fail(Status.INFEASIBLE if ok is False else Status.TIME_LIMIT, bound, begin,
                     f"no pattern of period {period:.6g} s found")
    return finish("exact", inst.pattern(*found), bound, begin)


def _contiguous_optimum(problem: ChainProblem, allocation: Allocation, bound: float, begin: float) -> ScheduleResult:
    """MadPipe Proposition 1: at every T, 1F1B* needs the least memory of any pattern, so its smallest
    fitting period is the optimum for a contiguous allocation (and needs no tick rounding)."""
    t1 = onef1b.min_period(problem, allocation)
    if t1 is None:
        return _fail(Status.INFEASIBLE, bound, begin, "no period fits the memory (MadPipe Proposition 1)")
    return finish("exact", onef1b.pattern(problem, allocation, t1).replace(scheduler="exact (1f1b*)"),
                  t1, begin, Status.OPTIMAL, notes=("contiguous: optimal by MadPipe Proposition 1",))


def _first_incumbent(problem, allocation, inst: _TickedInstance, seeds):
    """The sequential schedule, improved by the seed patterns re-solved in ticks with hints."""
    incumbent = _sequential(inst.ops, inst.durations)
    for seed in seeds:
        T_seed = to_ticks(seed.period, inst.tick) + len(inst.ops.operations)  # slack for rounded durations
        if T_seed < incumbent[0]:
            ok, found = inst.try_period(T_seed, inst.budget.share(), seed)
            if ok:
                incumbent = found
    return incumbent


def schedule(problem: ChainProblem, allocation: Allocation, *, period: float | None = None,
             time_limit: float | None = 60.0, resolution: int = 200, tick: float | None = None,
             period_guess: float | None = None, use_proposition1: bool = True, **options) -> ScheduleResult:
    """Seeds (greedy modulo schedule, 1F1B*) and then `period_guess` (e.g. the allocation planner's
    estimate) give a first pattern quickly; bisection then works below the best pattern found."""
    begin = time.perf_counter()
    bound = allocation.load_bound(problem)
    short = memory_infeasible("exact", problem, allocation, bound, begin)
    if short is not None:
        return short
    budget = WorkBudget(time_limit, options.get("deadline"))
    inst = _TickedInstance(problem, allocation, tick or tick_for(bound, resolution), budget)
    if period is not None:
        return _at_fixed_period(inst, period, bound, begin, budget.remaining())
    if allocation.is_contiguous and use_proposition1:
        return _contiguous_optimum(problem, allocation, bound, begin)
    greedy = modulo_greedy.scan(problem, allocation)
    seeds = [greedy] if greedy is not None else []
    if allocation.is_contiguous and onef1b.min_period(problem, allocation) is not None:
        seeds.append(onef1b.pattern(problem, allocation, onef1b.min_period(problem, allocation)))
    incumbent = _first_incumbent(problem, allocation, inst, seeds)
    lower, incumbent = _probe(inst.lower, incumbent, period_guess, inst.tick, inst.try_period, budget)
    outcome = search_period(lower, incumbent[0], incumbent, inst.try_period, budget)
    # proven in ticks; optimal in real time only when no duration was rounded up
    status = (Status.OPTIMAL if inst.exact_ticks else Status.FEASIBLE) if outcome.proven else Status.TIME_LIMIT
    proven = outcome.bound * inst.tick
    pattern = inst.pattern(*outcome.solution)
    notes = (f"tick {inst.tick:.4g} s; at that resolution no pattern is shorter than {proven:.6g} s",)
    if budget.cut_short:
        notes += ("the wall-clock safety net cut the search short (the machine was slower than the work "
                  "limit assumes): the answer may differ from an idle run",)
    if greedy is not None and greedy.period < pattern.period:  # tick rounding can lose to real time
        pattern, status = greedy.replace(scheduler="exact (greedy seed)"), Status.TIME_LIMIT
        notes += ("the greedy seed pattern beats the tick model's best",)
    if pattern.period <= bound * (1 + 1e-9):
        status = Status.OPTIMAL  # at the load bound: nothing can be shorter
    return finish("exact", pattern, max(bound, proven) if inst.exact_ticks else bound, begin, status, notes=notes)
