"""Exact joint allocation and schedule for small chains (about 12 layers, 4 processors): CP-SAT.

Every layer is its own stage on a processor variable q_i; a transfer pair CF_i, CB_i exists on the
link {q_i, q_{i+1}} when the two differ (and costs nothing otherwise). The schedule constraints are
those of `exact_schedule` with presence literals: optional intervals per processor and per link,
and memory at every operation start counting only layers on the same processor (a big-M product
of the in-flight count and a same-processor literal). Layers of one processor may interleave, so
this is at least as general as any stage-based pattern of any allocation: its period is a lower
bound for every other planner at the same tick, and its proven optimum is the oracle of the tests.
Processors are numbered in order of first use (symmetry breaking).
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

from solver_plan.deadline import Deadline
from solver_plan.pipeline import exact_schedule, madpipe, pipedream_dp
from solver_plan.pipeline.solvers import cp_model
from solver_plan.pipeline.allocation import Allocation, AllocationResult, Stage
from solver_plan.pipeline.exact_schedule import MAX_SHIFT_STEP
from solver_plan.pipeline.minimal_memory import infeasible_result
from solver_plan.pipeline.operations import pipeline_operations
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.period_search import search_period
from solver_plan.work import WorkBudget
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.ticks import limit_memory_units, memory_unit, tick_for, to_memory_units, to_ticks
from solver_plan.pipeline.validate import validate
from solver_plan.result import Status


# Building the model in Python costs about 10-30 us per element of `model_elements` (measured on the
# 2-core development machine: 0.96 s at 50 layers x 8 processors, 10.4 s at 100 x 32, 105 s at
# 400 x 32); the planner builds one model per probed period.
BUILD_S_PER_ELEMENT = 20e-6
BUILD_SHARE = 0.25  # a model whose estimated build time exceeds this share of the limit is not built


def model_elements(layers: int, processors: int) -> int:
    """Variables and constraints of `JointModel`, to leading order: allocation and symmetry (8 L P),
    links between processor pairs (4 L P^2), same-processor literals (L^2 P / 2), memory terms (6 L^2)."""
    L, P = layers, processors
    return 8 * L * P + 4 * L * P * P + L * L * P // 2 + 6 * L * L


def build_seconds(problem: ChainProblem) -> float:
    """Estimated seconds to build the joint model of `problem`, from its size only (so deterministic)."""
    return model_elements(problem.layers, problem.processors) * BUILD_S_PER_ELEMENT


class BuildExpired(Exception):
    """The wall-clock safety net passed while a model was being built."""


class JointModel:
    """The CP-SAT model of allocation and schedule together at one period (ticks): processor literals per
    layer, optional intervals and memory rows with presence literals (see the module text)."""

    def __init__(self, problem: ChainProblem, tick: float, period: int, deadline: Deadline | None = None):
        self.problem, self.period = problem, period
        self.deadline = deadline
        m = self.model = cp_model().CpModel()
        L, P = problem.layers, problem.processors
        T = period
        self.fd = [to_ticks(problem.forward_time(i, i), tick) for i in range(L)]
        self.bd = [to_ticks(problem.backward_time(i, i), tick) for i in range(L)]
        self.cd = [to_ticks(problem.comm_time(i), tick) for i in range(L - 1)]
        H = MAX_SHIFT_STEP * (4 * L - 3)  # shifts grow by at most 2 along the 4L - 3 dependencies
        self.x = [[m.new_bool_var(f"x_{i}_{p}") for p in range(P)] for i in range(L)]
        for i in range(L):
            m.add_exactly_one(self.x[i])
        self._break_symmetry()
        self.cut = [m.new_bool_var(f"c_{i}") for i in range(L - 1)]
        for i in range(L - 1):
            together = [self._and(self.x[i][p], self.x[i + 1][p]) for p in range(P)]
            m.add(self.cut[i] + sum(together) == 1)
        new_t = lambda name: m.new_int_var(0, T - 1, name)
        new_h = lambda name: m.new_int_var(0, H, name)
        self.tf, self.tb = [new_t(f"tf{i}") for i in range(L)], [new_t(f"tb{i}") for i in range(L)]
        self.hf, self.hb = [new_h(f"hf{i}") for i in range(L)], [new_h(f"hb{i}") for i in range(L)]
        self.tcf, self.tcb = [new_t(f"tcf{i}") for i in range(L - 1)], [new_t(f"tcb{i}") for i in range(L - 1)]
        self.hcf, self.hcb = [new_h(f"hcf{i}") for i in range(L - 1)], [new_h(f"hcb{i}") for i in range(L - 1)]
        m.add(self.hf[0] == 0)
        m.add(self.tf[0] == 0)

        def precede(t1, h1, d1, t2, h2):
            m.add(T * (h2 - h1) + t2 - t1 >= d1)
            m.add(h2 - h1 <= MAX_SHIFT_STEP)
        for i in range(L - 1):
            precede(self.tf[i], self.hf[i], self.fd[i], self.tcf[i], self.hcf[i])
            precede(self.tcf[i], self.hcf[i], self.cd[i] * self.cut[i], self.tf[i + 1], self.hf[i + 1])
            precede(self.tb[i + 1], self.hb[i + 1], self.bd[i + 1], self.tcb[i], self.hcb[i])
            precede(self.tcb[i], self.hcb[i], self.cd[i] * self.cut[i], self.tb[i], self.hb[i])
        precede(self.tf[L - 1], self.hf[L - 1], self.fd[L - 1], self.tb[L - 1], self.hb[L - 1])
        self._no_overlap()
        self._memory(H)

    def _and(self, a, b):
        both = self.model.new_bool_var("")
        self.model.add_bool_and([a, b]).only_enforce_if(both)
        self.model.add_bool_or([~a, ~b]).only_enforce_if(~both)
        return both

    def _break_symmetry(self):
        m, L, P = self.model, self.problem.layers, self.problem.processors
        m.add(self.x[0][0] == 1)
        used = [[m.new_bool_var("") for _ in range(P)] for _ in range(L)]
        for i in range(L):
            for p in range(P):
                previous = used[i - 1][p] if i > 0 else 0
                m.add(used[i][p] >= self.x[i][p])
                m.add(used[i][p] >= previous)
                m.add(used[i][p] <= previous + self.x[i][p])
                if p > 0:  # processor p is first used after processor p - 1
                    m.add(self.x[i][p] <= (used[i - 1][p - 1] if i > 0 else 0))

    def _cyclic(self, start, duration, present, intervals):
        if duration > 0:
            intervals.append(self.model.new_optional_fixed_size_interval_var(start, duration, present, ""))
            intervals.append(self.model.new_optional_fixed_size_interval_var(start + self.period, duration, present, ""))

    def _check_clock(self) -> None:
        if self.deadline is not None and self.deadline.expired():
            raise BuildExpired()

    def _no_overlap(self):
        L, P = self.problem.layers, self.problem.processors
        for p in range(P):
            self._check_clock()
            intervals = []
            for i in range(L):
                self._cyclic(self.tf[i], self.fd[i], self.x[i][p], intervals)
                self._cyclic(self.tb[i], self.bd[i], self.x[i][p], intervals)
            if len(intervals) > 2:
                self.model.add_no_overlap(intervals)
        for p in range(P):
            self._check_clock()
            for q in range(p + 1, P):
                intervals = []
                for i in range(L - 1):
                    on_link = self.model.new_bool_var("")
                    self.model.add(on_link == self._and(self.x[i][p], self.x[i + 1][q])
                                   + self._and(self.x[i][q], self.x[i + 1][p]))
                    self._cyclic(self.tcf[i], self.cd[i], on_link, intervals)
                    self._cyclic(self.tcb[i], self.cd[i], on_link, intervals)
                if len(intervals) > 2:
                    self.model.add_no_overlap(intervals)

    def _before(self, a, b):
        """Literal for t_a < t_b."""
        lit = self.model.new_bool_var("")
        self.model.add(a + 1 <= b).only_enforce_if(lit)
        self.model.add(a >= b).only_enforce_if(~lit)
        return lit

    def _memory(self, H):
        problem, m, L, P = self.problem, self.model, self.problem.layers, self.problem.processors
        unit = memory_unit(problem.memory)
        size = lambda b: to_memory_units(b, unit)
        limit = limit_memory_units(problem.memory, unit)
        weights = [size(problem.state_memory(j, j)) for j in range(L)]  # model state per layer
        stored = [size(problem.stored(j, j)) for j in range(L)]
        buffer = [size(2 * problem.cut(i)) for i in range(L - 1)]
        same = {}
        for i in range(L):
            self._check_clock()
            for j in range(L):
                if i == j:
                    same[i, j] = 1
                elif j < i:
                    same[i, j] = same[j, i]
                else:
                    lit = m.new_bool_var("")
                    for p in range(P):
                        m.add(lit >= self.x[i][p] + self.x[j][p] - 1)
                    same[i, j] = lit
        for i in range(L):
            self._check_clock()
            for t_o, is_f in ((self.tf[i], True), (self.tb[i], False)):
                terms = [weights[j] * same[i, j] for j in range(L)]
                for j in range(L):
                    y_f = 1 if (j == i and is_f) else self._before(self.tf[j], t_o)
                    y_b = 0 if (j == i and not is_f) else self._before(self.tb[j], t_o)
                    in_flight = self.hb[j] - self.hf[j] + y_f - y_b
                    if j == i:
                        terms.append(stored[j] * in_flight)
                        continue
                    held = m.new_int_var(0, H + 1, "")
                    m.add(held >= in_flight - (H + 1) * (1 - same[i, j]))
                    terms.append(stored[j] * held)
                for b in range(L - 1):
                    for end in (b, b + 1):
                        if end == i:
                            terms.append(buffer[b] * self.cut[b])
                        else:
                            buf = m.new_bool_var("")
                            m.add(buf >= self.cut[b] + same[i, end] - 1)
                            terms.append(buffer[b] * buf)
                m.add(sum(terms) <= limit)

    def hint(self, solution) -> None:
        """Hint the solver with a solution as `solve` gives it (owner per layer, time and shift per
        operation)."""
        _, owner, times = solution
        m, L = self.model, self.problem.layers
        for i in range(L):
            for p in range(self.problem.processors):
                m.add_hint(self.x[i][p], int(owner[i] == p))
        named = {"F": (self.tf, self.hf), "B": (self.tb, self.hb), "CF": (self.tcf, self.hcf), "CB": (self.tcb, self.hcb)}
        for name, (t, h) in times.items():
            kind, index = name.rstrip("0123456789"), int(name.lstrip("FBC"))
            if t < self.period:
                m.add_hint(named[kind][0][index], t)
                m.add_hint(named[kind][1][index], h)

    def solve(self, work, budget: WorkBudget | None = None):
        """Solve with `work` deterministic units (single thread, fixed seed: see solver_plan/work.py)."""
        cp = cp_model()
        solver = cp.CpSolver()
        budget = budget or WorkBudget(None)
        budget.configure(solver, work)
        status = solver.solve(self.model)
        budget.record(solver)
        if status == cp.INFEASIBLE:
            return False, None
        if status not in (cp.OPTIMAL, cp.FEASIBLE):
            return None, None
        v = solver.value
        L = self.problem.layers
        owner = [next(p for p in range(self.problem.processors) if v(self.x[i][p])) for i in range(L)]
        times = {f"F{i}": (v(self.tf[i]), v(self.hf[i])) for i in range(L)}
        times.update({f"B{i}": (v(self.tb[i]), v(self.hb[i])) for i in range(L)})
        times.update({f"CF{i}": (v(self.tcf[i]), v(self.hcf[i])) for i in range(L - 1)})
        times.update({f"CB{i}": (v(self.tcb[i]), v(self.hcb[i])) for i in range(L - 1)})
        return True, (self.period, owner, times)


def _pattern(problem: ChainProblem, tick: float, solution) -> PeriodicPattern:
    period, owner, times = solution
    per_layer = Allocation(tuple(Stage(i, i, p) for i, p in enumerate(owner)))
    ops = pipeline_operations(problem, per_layer)
    start = tuple(times[op.name][0] * tick for op in ops.operations)
    shift = tuple(times[op.name][1] for op in ops.operations)
    return PeriodicPattern(per_layer, ops, period * tick, start, shift, "exact-joint")


def split_per_layer(allocation: Allocation) -> Allocation:
    """The same allocation with every layer its own stage (the joint model's view)."""
    return Allocation(tuple(Stage(i, i, s.processor) for s in allocation.stages for i in s.layers()))


def heuristic_seed(problem: ChainProblem, tick: float, time_limit: float | None,
                   deadline: Deadline | None = None) -> PeriodicPattern | None:
    """The best valid pattern of the heuristics' allocations, split into one stage per layer (so it
    is a solution of the joint model up to tick rounding). Work limits come from `time_limit`;
    `deadline` is the safety net: once it is up, allocations not yet scheduled are skipped."""
    candidates = []
    for result in (madpipe.plan(problem, deadline=deadline), pipedream_dp.plan(problem)):
        if result.allocation is not None:
            candidates += [result.allocation, *result.alternatives]
    best = None
    share = None if time_limit is None else time_limit / max(1, len(candidates))
    for allocation in candidates:
        if deadline is not None and deadline.expired():
            break
        scheduled = exact_schedule.schedule(problem, split_per_layer(allocation), tick=tick, time_limit=share,
                                            deadline=deadline)
        if scheduled.valid and (best is None or scheduled.pattern.period < best.period):
            best = scheduled.pattern
    return best


def _seed_solution(pattern: PeriodicPattern, tick: float, period: int):
    owner = [s.processor for s in pattern.allocation.stages]
    times = {op.name: (min(period - 1, int(round(t / tick))), h)
             for op, t, h in zip(pattern.ops.operations, pattern.start, pattern.shift)}
    return period, owner, times


def plan(problem: ChainProblem, *, time_limit: float | None = 120.0, seed: int = 0, resolution: int = 200,
         tick: float | None = None, **options) -> AllocationResult:
    """Planner "exact-joint": the least period over every allocation and schedule by bisection on the
    joint model, seeded by a heuristic pattern; OPTIMAL only where no duration was rounded to ticks.
    The `seed` argument is not used (the name is reused for the heuristic pattern)."""
    begin = time.perf_counter()
    L, P = problem.layers, problem.processors
    lower_s = max(problem.total_load / P, max(problem.load(i, i) for i in range(L)))
    tick = tick or tick_for(lower_s, resolution)
    lower = max(1, math.ceil(lower_s / tick - 1e-9))
    budget = WorkBudget(None if time_limit is None else 0.7 * time_limit, options.get("deadline"))

    def remaining():
        return budget.remaining()

    def try_period(T, limit, incumbent=None):
        try:
            model = JointModel(problem, tick, T, budget.deadline)
        except BuildExpired:
            budget.cut_short = True
            return None, None  # as a solve stopped by its limit
        if incumbent is not None:
            model.hint(incumbent)
        return model.solve(limit, budget)

    seed = heuristic_seed(problem, tick, None if time_limit is None else 0.3 * time_limit, options.get("deadline"))
    if time_limit is not None and build_seconds(problem) > BUILD_SHARE * time_limit:
        # decided by the size and the nominal limit, not the clock: the same answer idle or loaded
        why = (f"joint model not built: {L} layers x {P} processors take about {build_seconds(problem):.1f} s "
               f"to build, over {BUILD_SHARE:.0%} of the {time_limit:g} s limit")
        return _seed_only(problem, seed, lower_s, begin, why)
    start = None
    if seed is not None:  # re-solve the seed in the joint model's ticks, with slack for rounding
        T_seed = max(lower, math.ceil(seed.period / tick - 1e-9) + 2 * L)
        ok, found = try_period(T_seed, remaining(), _seed_solution(seed, tick, T_seed))
        start = (T_seed, found) if ok else None
    if start is None:
        return _probe_upwards(problem, tick, lower, try_period, remaining, begin, budget)
    incumbent = {"solution": start[1]}

    def hinted(T, limit):
        ok, found = try_period(T, limit, incumbent["solution"])
        if ok:
            incumbent["solution"] = found
        return ok, found

    outcome = search_period(lower, start[0], start[1], hinted, budget)
    result = _answer(problem, tick, outcome.solution, outcome.bound, outcome.proven, begin)
    if result.pattern is not None and seed.period < result.pattern.period:  # ticks rounded durations up
        result = replace(result, allocation=Allocation.from_processors([s.processor for s in seed.allocation.stages]),
                         period_s=seed.period, pattern=seed.replace(scheduler="exact-joint (heuristic seed)"),
                         status=Status.FEASIBLE, lower_bound_s=lower_s,
                         notes=result.notes + ("a heuristic pattern in real time beats the tick model's optimum",))
    return result


def _seed_only(problem: ChainProblem, seed: PeriodicPattern | None, lower_s: float, begin: float,
               why: str) -> AllocationResult:
    """The heuristics' best pattern (one stage per layer) as the answer, or TIME_LIMIT without one."""
    if seed is None:
        return AllocationResult("exact-joint", Status.TIME_LIMIT, lower_bound_s=lower_s,
                                runtime_s=time.perf_counter() - begin, notes=(why, "no heuristic pattern either"))
    return AllocationResult("exact-joint", Status.FEASIBLE,
                            Allocation.from_processors([s.processor for s in seed.allocation.stages]), seed.period,
                            lower_s, time.perf_counter() - begin,
                            pattern=seed.replace(scheduler="exact-joint (heuristic seed)"), notes=(why,))


def _probe_upwards(problem, tick, lower, try_period, remaining, begin, budget: WorkBudget) -> AllocationResult:
    """Without any heuristic incumbent: try periods upwards from the bound, then bisect. Each probe
    builds a model: once the work budget (or the safety-net deadline) is spent, probing stops."""
    L = problem.layers
    sequential = sum(to_ticks(problem.forward_time(i, i), tick) + to_ticks(problem.backward_time(i, i), tick)
                     + (2 * to_ticks(problem.comm_time(i), tick) if i < L - 1 else 0) for i in range(L))
    candidate, proven_infeasible = lower, lower - 1
    while True:
        if candidate > lower and budget.exhausted():
            why = ("the wall-clock safety net ran out (the machine was slower than the work limit assumes)"
                   if budget.cut_short else "the work limit ran out")
            return AllocationResult("exact-joint", Status.TIME_LIMIT, lower_bound_s=(proven_infeasible + 1) * tick,
                                    runtime_s=time.perf_counter() - begin,
                                    notes=(f"{why} before any feasible period was found; periods up to "
                                           f"{proven_infeasible * tick:.6g} s are proven infeasible",))
        ok, solution = try_period(candidate, remaining())
        if ok:
            outcome = search_period(proven_infeasible + 1, candidate, solution, try_period, _Budget(remaining))
            return _answer(problem, tick, outcome.solution, outcome.bound, outcome.proven, begin)
        if ok is None:
            return AllocationResult("exact-joint", Status.TIME_LIMIT, lower_bound_s=(proven_infeasible + 1) * tick,
                                    runtime_s=time.perf_counter() - begin,
                                    notes=("time limit reached before any feasible period was found",))
        proven_infeasible = candidate
        if candidate >= sequential:
            return infeasible_result("exact-joint", problem, begin, "no allocation and schedule fit in memory")
        candidate = min(sequential, max(candidate + 1, int(candidate * 1.25)))


class _Budget:
    """The shared budget seen through `remaining` (what `_probe_upwards` was given)."""

    def __init__(self, remaining):
        self.remaining = remaining

    def exhausted(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 1e-3

    def share(self, fraction: float = 1 / 3):
        left = self.remaining()
        return None if left is None else max(0.2, left * fraction)


def _exact_ticks(problem: ChainProblem, tick: float) -> bool:
    """No duration was rounded: the tick model's optimum and bounds hold in real time."""
    durations = [problem.forward_time(i, i) for i in range(problem.layers)]
    durations += [problem.backward_time(i, i) for i in range(problem.layers)]
    durations += [problem.comm_time(i) for i in range(problem.layers - 1)]
    return all(abs(d / tick - round(d / tick)) < 1e-9 for d in durations)


def _answer(problem, tick, solution, bound, proven, begin) -> AllocationResult:
    pattern = _pattern(problem, tick, solution)
    check = validate(pattern)
    allocation = Allocation.from_processors([s.processor for s in pattern.allocation.stages])
    exact = _exact_ticks(problem, tick)
    status = (Status.OPTIMAL if exact else Status.FEASIBLE) if proven else Status.TIME_LIMIT
    if not check.valid:
        status = Status.ERROR
    note = (f"tick {tick:.4g} s; optimal at that resolution" if proven else
            f"tick {tick:.4g} s; time limit: best {pattern.period:.6g} s, none below {bound * tick:.6g} s at that resolution")
    return AllocationResult("exact-joint", status, allocation, pattern.period,
                            bound * tick if exact else problem.load_bound, time.perf_counter() - begin, pattern=pattern,
                            notes=(note,) + check.violations)
