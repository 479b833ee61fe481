"""Exact periodic schedule of a given allocation as a MILP (PuLP + CBC), in real time (no ticks).

The formulation of DESIGN.md with big-M cyclic no-overlap: for operations o, o' on one resource a
binary y(o, o') = [t_o' < t_o] and
    t_o' - t_o + T y(o, o') >= d_o,    t_o - t_o' + T (1 - y(o, o')) >= d_o'.
Dependencies T (h_o2 - h_o1) + t_o2 - t_o1 >= d_o1 and memory at every operation start as in
`exact_schedule`. For a fixed T this is a MILP; T is found by bisection to a relative tolerance
between the load bound and a known feasible period (1F1B* or the sequential schedule).
"""
from __future__ import annotations

import time
import warnings

from solver_plan.deadline import time_budget
from solver_plan.pipeline import onef1b, solvers
from solver_plan.pipeline.allocation import Allocation, processor_name
from solver_plan.pipeline.operations import PipelineOps, pipeline_operations
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.exact_schedule import MAX_SHIFT_STEP
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.schedule_result import ScheduleResult, finish, memory_infeasible
from solver_plan.result import Status


NODES_PER_SECOND = 200  # CBC branch-and-bound nodes granted per second of time limit
MIN_NODES = 20
SCALE = 1e4  # time units per period inside the MILP
SLACK = 1e-2  # units added to every duration (1e-6 of the period)


def solve_at_period(ops: PipelineOps, period: float, time_limit: float | None, max_nodes: int | None = None):
    """(True, (starts, shifts)) | (False, None) proven infeasible | (None, None) undecided."""
    pulp = solvers.pulp()
    n = len(ops.operations)
    # Solved in units of T / SCALE with every duration lengthened by SLACK units: CBC's absolute
    # tolerances (~1e-7) then cannot produce a start at T or a dependency violated by rounding,
    # which the validator (relative 1e-9) would reject.
    unit = period / SCALE
    period = SCALE
    prob = pulp.LpProblem("periodic_schedule", pulp.LpMinimize)
    t = [prob.add_variable(f"t{i}", 0, period - SLACK) for i in range(n)]
    h = [prob.add_variable(f"h{i}", 0, MAX_SHIFT_STEP * len(ops.dependencies), cat="Integer") for i in range(n)]
    prob += pulp.lpSum(h)  # secondary objective: fewer batches in flight
    first = ops.index("F0")
    prob += h[first] == 0
    prob += t[first] == 0
    d = [op.duration / unit + SLACK for op in ops.operations]
    for a, b in ops.dependencies:
        prob += period * (h[b] - h[a]) + t[b] - t[a] >= d[a]
        prob += h[b] - h[a] <= MAX_SHIFT_STEP
    before = {}  # (o, o') -> expression of [t_o' < t_o]
    for members in ops.on_resource().values():
        for x, i in enumerate(members):
            for j in members[x + 1:]:
                y = prob.add_variable(f"y{i}_{j}", cat="Binary")
                prob += t[j] - t[i] + period * y >= d[i]
                prob += t[i] - t[j] + period * (1 - y) >= d[j]
                before[(i, j)], before[(j, i)] = y, 1 - y
    for p, static in ops.static:
        stages = [s for s, q in enumerate(ops.stage_processor) if q == p]
        for o in (i for i, op in enumerate(ops.operations) if op.resource == processor_name(p)):
            usage = static
            for s in stages:
                f, b = ops.index(f"F{s}"), ops.index(f"B{s}")
                y_f = 1 if o == f else before[(o, f)]
                y_b = 0 if o == b else before[(o, b)]
                usage = usage + ops.stored[s] * (h[b] - h[f] + y_f - y_b)
            prob += usage <= ops.memory_limit
    # CBC runs in its own process, so it cannot clash with ortools; HiGHS in process could.
    with warnings.catch_warnings():  # PuLP 3 deprecates the bundled-CBC class name; it is what is installed
        warnings.simplefilter("ignore", DeprecationWarning)
        # one thread and a node limit: the same answer on a loaded machine; the time limit is a safety net
        prob.solve(pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, threads=1,
                                     options=[] if max_nodes is None else [f"maxNodes {max_nodes}"]))
    status = pulp.LpStatus[prob.status]
    # PuLP may call a run stopped by the time limit "Optimal": trust only a solution that exists
    if status in ("Optimal", "Not Solved") and all(v.value() is not None for v in t):
        starts = [min(max(0.0, v.value()), period - SLACK) * unit for v in t]
        return True, (starts, [int(round(v.value())) for v in h])
    if status == "Infeasible":
        return False, None
    return None, None


def schedule(problem: ChainProblem, allocation: Allocation, *, period: float | None = None,
             time_limit: float | None = 60.0, tolerance: float = 1e-3, **options) -> ScheduleResult:
    """Scheduler "exact-milp": the least period of `allocation` by bisection on the MILP in real time, to
    relative `tolerance`; at a fixed `period`, a schedule of that period."""
    begin = time.perf_counter()
    clock = time_budget(time_limit, within=options.get("deadline"))  # the wall-clock safety net
    ops = pipeline_operations(problem, allocation)
    bound = allocation.load_bound(problem)
    short = memory_infeasible("exact-milp", problem, allocation, bound, begin)
    if short is not None:
        return short
    # deterministic work: a node budget per CBC call from the nominal limit (bisection ~ 12 calls)
    nodes = None if time_limit is None else max(MIN_NODES, int(time_limit * NODES_PER_SECOND / 12))
    cut_short = []

    def remaining():
        left = clock.remaining()
        return None if left is None else max(0.05, left)

    def solve(T):
        found = solve_at_period(ops, T, remaining(), nodes)
        if clock.expired():
            cut_short.append(T)
        return found

    def pattern(T, found) -> PeriodicPattern:
        starts, shifts = found
        return PeriodicPattern(allocation, ops, T, tuple(starts), tuple(shifts), "exact-milp")

    if period is not None:
        ok, found = solve(period)
        if not ok:
            return ScheduleResult("exact-milp", Status.INFEASIBLE if ok is False else Status.TIME_LIMIT,
                                  lower_bound_s=bound, runtime_s=time.perf_counter() - begin)
        return finish("exact-milp", pattern(period, found), bound, begin)
    room = 1 + 2 * len(ops.operations) * SLACK / SCALE  # the lengthened durations still fit
    high = sum(op.duration for op in ops.operations) * room
    best = None
    if allocation.is_contiguous and onef1b.min_period(problem, allocation) is not None:
        high = min(high, onef1b.min_period(problem, allocation) * room)
    ok, found = solve(high)
    if not ok:
        return ScheduleResult("exact-milp", Status.TIME_LIMIT, lower_bound_s=bound, runtime_s=time.perf_counter() - begin,
                              notes=("no first pattern within the time limit",))
    best, low, proven = (high, found), bound, bound
    candidate = bound
    while best[0] - low > tolerance * best[0]:
        if clock.expired():
            break
        ok, found = solve(candidate)
        if ok:
            best = (candidate, found)
        else:
            low = candidate
            if ok is False:
                proven = max(proven, candidate)
        candidate = 0.5 * (low + best[0])
    optimal = best[0] - proven <= tolerance * best[0]
    notes = (f"bisection to relative tolerance {tolerance:g}, at most {nodes} CBC nodes per period",)
    if cut_short:
        notes += ("the wall-clock safety net cut the search short: the answer may differ from an idle run",)
    return finish("exact-milp", pattern(*best), proven, begin, Status.OPTIMAL if optimal else Status.TIME_LIMIT,
                  notes=notes)
