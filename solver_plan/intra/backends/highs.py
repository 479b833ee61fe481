"""HiGHS backend (highspy, in process) for a `LinearModel`.

Work limits (deterministic): `iteration_limit`, simplex iterations of the LP relaxation (HiGHS'
`simplex_iteration_limit`), and `check_limit`, the MIP's limit checks. HiGHS' MIP solver ignores
the iteration limit and its node limit does not bound the root, where the one-hot models spend
most of their time; but it calls a MIP interrupt callback at each of its limit checks (between root
cut rounds and heuristics, and at each node), in the same order on every run: so a callback counting
them and interrupting at the `check_limit`-th stops HiGHS at the same point, with the same answer,
on an idle and a loaded machine (highspy 1.16 gives the callback no iteration count, only nodes and
bounds). What no check covers: the MIP's presolve and first root LP, and the stretch between two
checks (measured up to seconds, a restart's root); a caller sizes the limit from its nominal budget
and the model's size, and the wall clock stops what runs longer.
Wall clock (the safety net): HiGHS' own `time_limit`, plus a watchdog timer that interrupts HiGHS
if it overruns it by more than a grace period. The LP relaxation is solved first; an integral LP
optimum is accepted as proven optimal without branching. `ColumnLp` is the one stateful object: an
LP whose columns join between warm solves, for column generation (`solve_lp_by_columns`, whose
iteration limit covers all its solves and pricing rounds together).
"""
from __future__ import annotations

import threading
import time
from dataclasses import replace

import highspy
import numpy as np

from solver_plan.intra.highs_work import LP_ITERATION_UNITS, LP_ITERATION_UNITS_PER_NONZERO, WORK_LIMIT_NOTE
from solver_plan.intra.linear_model import LinearModel, LpSolution, SolveOutcome, is_integral, row_scales
from solver_plan.result import Status

WATCHDOG_GRACE_S = 0.5
# One thread, in every call of a worker (HiGHS fixes its thread count for the process at its first
# solve): HiGHS calls the MIP interrupt callback only outside its parallel sections, so with more
# threads how many checks a MIP makes follows the threads' timing (measured: 145 and 435 checks in
# two 11 s runs of one model; one thread: 1,000 and 1,000), and the work limit would not be
# deterministic. The dual simplex runs one thread either way.
THREADS = 1
FEASIBILITY_TOLERANCE = 1e-7  # HiGHS' primal_feasibility_tolerance default
# A MIP stopped by its time limit or an interrupt (kHighsInterrupt, a keyboard interrupt: highspy 1.13 has it, 1.11 not)
_STOPPED = tuple(getattr(highspy.HighsModelStatus, name) for name in ("kTimeLimit", "kInterrupt", "kHighsInterrupt")
                 if hasattr(highspy.HighsModelStatus, name))


def _scaled_rows(model: LinearModel, infinity: float):
    """HiGHS' row bounds and column-wise matrix (starts, indices, values) of `model`, rows with large
    coefficients scaled (`row_scales`); a scaled inequality's non-zero bounds are tightened by HiGHS'
    feasibility tolerance, so a plan HiGHS accepts keeps the unscaled memory limit exactly."""
    order = np.lexsort((model.rows, model.columns))
    columns = model.columns[order]
    starts = np.searchsorted(columns, np.arange(model.num_columns + 1)).astype(np.int32)
    scale = row_scales(model)
    # tighten inequality rows with a non-zero bound (memory limits); equality rows and rows
    # bounded by 0 (the min-peak model's peak rows, whose value is a reported bound) stay as they are
    inequality = (scale != 1.0) & (model.row_lower < model.row_upper)
    row_lower = model.row_lower * scale + np.where(inequality & (model.row_lower != 0), FEASIBILITY_TOLERANCE, 0.0)
    row_upper = model.row_upper * scale - np.where(inequality & (model.row_upper != 0), FEASIBILITY_TOLERANCE, 0.0)
    row_lower = np.where(np.isinf(model.row_lower), -infinity, row_lower)
    row_upper = np.where(np.isinf(model.row_upper), infinity, row_upper)
    return row_lower, row_upper, starts, model.rows[order].astype(np.int32), model.values[order] * scale[model.rows[order]]


def _variables_and_constraints(highs: highspy.Highs, model: LinearModel) -> None:
    """The whole model, rows scaled as `_scaled_rows` says."""
    infinity = highs.getInfinity()
    row_lower, row_upper, starts, index, value = _scaled_rows(model, infinity)
    lp = highspy.HighsLp()
    lp.num_col_ = model.num_columns
    lp.num_row_ = model.num_rows
    lp.col_lower_ = model.lower
    lp.col_upper_ = np.where(np.isinf(model.upper), infinity, model.upper)
    lp.row_lower_ = row_lower
    lp.row_upper_ = row_upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = starts
    lp.a_matrix_.index_ = index
    lp.a_matrix_.value_ = value
    _objective(lp, model)
    highs.passModel(lp)


def _objective(lp: highspy.HighsLp, model: LinearModel) -> None:
    lp.col_cost_ = model.cost
    lp.offset_ = model.offset


def _set_integrality(highs: highspy.Highs, model: LinearModel, integer: bool) -> None:
    columns = np.flatnonzero(model.integer).astype(np.int32)
    kind = highspy.HighsVarType.kInteger if integer else highspy.HighsVarType.kContinuous
    if len(columns):
        highs.changeColsIntegrality(len(columns), columns, np.full(len(columns), kind))


def _run(highs: highspy.Highs, time_limit: float | None, stop: "_WorkStop | None" = None) -> None:
    """Run with HiGHS' time limit and a watchdog that interrupts a solver overrunning it."""
    if time_limit is None:
        highs.run()
        return
    highs.setOptionValue("time_limit", max(0.01, float(time_limit)))
    # highspy 1.7 has no cancelSolve: HiGHS' own time limit is then the LP's only stop
    cancel = getattr(highs, "cancelSolve", None) if stop is None else stop.cancel
    if cancel is None:
        highs.run()
        return
    watchdog = threading.Timer(time_limit + WATCHDOG_GRACE_S, cancel)
    watchdog.daemon = True
    watchdog.start()
    try:
        highs.run()
    finally:
        watchdog.cancel()


def _decode(highs: highspy.Highs, model: LinearModel, status, mip: bool) -> SolveOutcome:
    info = highs.getInfo()
    model_status = highspy.HighsModelStatus
    if status == model_status.kInfeasible:
        return SolveOutcome(Status.INFEASIBLE)
    has_solution = info.primal_solution_status == 2  # kSolutionStatusFeasible
    x_values = np.asarray(highs.getSolution().col_value)[: model.num_decode_columns] if has_solution else None
    objective = info.objective_function_value if has_solution else None
    if not mip:
        bound = objective if status == model_status.kOptimal else None
        kind = Status.OPTIMAL if status == model_status.kOptimal else Status.TIME_LIMIT
        return SolveOutcome(kind, x_values, objective, bound)
    bound = info.mip_dual_bound if np.isfinite(info.mip_dual_bound) else None
    if status == model_status.kOptimal:
        return SolveOutcome(Status.OPTIMAL, x_values, objective, bound)
    if status in _STOPPED:
        return SolveOutcome(Status.TIME_LIMIT, x_values, objective, bound)
    return SolveOutcome(Status.ERROR if x_values is None else Status.FEASIBLE, x_values, objective, bound,
                        (f"HiGHS stopped with {highs.modelStatusToString(status)}",))


def _out_of_iterations(what: str, iteration_limit: int | None) -> SolveOutcome:
    """`what` (an LP) stopped by its simplex iteration limit: the work limit, not the clock."""
    return SolveOutcome(Status.TIME_LIMIT, notes=(f"{WORK_LIMIT_NOTE}: {what} used its {iteration_limit} simplex iterations",))


class _WorkStop:
    """The MIP's deterministic stop: a MIP interrupt callback that interrupts HiGHS at its
    `limit`-th limit check (None: only at the watchdog's `cancel`, the wall clock). Subscribed
    through highspy's callback events where they exist (1.8 and later), else through `setCallback` /
    `startCallback` (1.7). It must never raise: an exception in a callback fails the solve."""

    def __init__(self, highs: highspy.Highs, limit: int | None):
        self.limit, self.checks, self.cancelled = limit, 0, False
        if hasattr(highs, "cbMipInterrupt"):
            highs.cbMipInterrupt.subscribe(self._event)
        else:  # highspy 1.7: one user callback, the callback kinds started by type
            highs.setCallback(self._callback, None)
            highs.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)

    @property
    def reached(self) -> bool:
        """Whether the work limit was reached (not the wall clock)."""
        return self.limit is not None and self.checks >= self.limit and not self.cancelled

    def _interrupts(self) -> bool:
        self.checks += 1
        return self.cancelled or (self.limit is not None and self.checks >= self.limit)

    def _event(self, event) -> None:
        # the flag itself: highspy 1.8-1.9's events have no interrupt() (1.10 added it, setting this flag)
        if self._interrupts() and event.data_in is not None:
            event.data_in.user_interrupt = True

    def _callback(self, callback_type, message, data_out, data_in, user_data) -> None:
        if self._interrupts() and data_in is not None:
            data_in.user_interrupt = True

    def cancel(self) -> None:
        """The watchdog's stop (the wall clock): interrupt at HiGHS' next check."""
        self.cancelled = True


def solve_with_highs(model: LinearModel, *, time_limit: float | None = None, start_values=None,
                     relax_first: bool = True, seed: int = 0, mip_rel_gap: float = 1e-7,
                     threads: int | None = THREADS, presolve: bool = True,
                     iteration_limit: int | None = None, check_limit: int | None = None) -> SolveOutcome:
    """Solve `model` within `time_limit` seconds in total (LP phase and MILP phase together), the
    safety net, and the deterministic work limits (module text; None: none): `iteration_limit`
    simplex iterations for the LP relaxation (or the model itself, without integer columns),
    `check_limit` limit checks for the MIP. A stop by a work limit is TIME_LIMIT with WORK_LIMIT_NOTE
    among its notes, so the caller knows the wall clock did not decide.
    `presolve=False` for a model already reduced by reduced-cost fixing (lp_fixing): HiGHS' presolve
    then removes little and its restarts solve the root LP again (measured on the fixed model of
    random-dag:100 binding: 11.7 s -> 4.9 s of CPU, the same optimum). Measured and not kept on
    that model: RINS and RENS off (5.1 -> 3.35 s and 4.6 -> 4.1 s of CPU on two fixed models of
    random-dag:100, but 4.8 -> 11.9 s on one of random-dag:1000), mip_heuristic_effort 0 or 0.2,
    symmetry detection off, no restarts, pscost_minreliable 0 or 2, no cuts at nodes, the incumbent
    as objective_bound (all within 0.3 s); the root reduced-cost heuristic is what finds the
    optimum (off: 12.6 s)."""
    started = time.perf_counter()
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    if not presolve:
        highs.setOptionValue("presolve", "off")
    highs.setOptionValue("random_seed", int(seed))
    highs.setOptionValue("mip_rel_gap", mip_rel_gap)
    if threads is not None:
        highs.setOptionValue("threads", int(threads))
    _variables_and_constraints(highs, model)
    if time_limit is not None:  # building the model counts against the limit
        time_limit = max(0.01, time_limit - (time.perf_counter() - started))
        started = time.perf_counter()
    if iteration_limit is not None:  # the LP relaxation's (a MIP ignores it; a model without integers keeps it)
        highs.setOptionValue("simplex_iteration_limit", max(1, int(iteration_limit)))
    lp_bound = None  # the LP relaxation's optimum: a bound where the MIP stops before proving one
    if relax_first:
        _run(highs, time_limit)
        status = highs.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return SolveOutcome(Status.INFEASIBLE, notes=("LP relaxation infeasible",))
        if status == highspy.HighsModelStatus.kIterationLimit:
            return _out_of_iterations("the LP relaxation", iteration_limit)
        relaxed = _decode(highs, model, status, mip=False)
        if relaxed.status == Status.OPTIMAL and is_integral(model, relaxed.x_values):
            return SolveOutcome(Status.OPTIMAL, relaxed.x_values, relaxed.objective, relaxed.objective,
                                ("LP relaxation integral",))
        if time_limit is not None:
            time_limit -= time.perf_counter() - started
            if time_limit <= 0:
                return SolveOutcome(Status.TIME_LIMIT, None, None, relaxed.bound, ("time out after the LP relaxation",))
        lp_bound = relaxed.bound
        if iteration_limit is not None and model.integer.any():
            highs.setOptionValue("simplex_iteration_limit", highspy.kHighsIInf)
    _set_integrality(highs, model, True)
    if start_values is not None:
        solution = highspy.HighsSolution()
        solution.col_value = list(map(float, start_values))
        highs.setSolution(solution)
    stop = _WorkStop(highs, check_limit)
    _run(highs, time_limit, stop)
    if highs.getModelStatus() == highspy.HighsModelStatus.kIterationLimit:  # a model without integers
        return _out_of_iterations("the LP", iteration_limit)
    outcome = _decode(highs, model, highs.getModelStatus(), mip=True)
    if outcome.bound is None and lp_bound is not None and outcome.status is not Status.INFEASIBLE:
        outcome = replace(outcome, bound=lp_bound)
    if stop.reached and outcome.status is Status.TIME_LIMIT:
        outcome = replace(outcome, notes=outcome.notes + (
            f"{WORK_LIMIT_NOTE}: {stop.checks} limit checks, {highs.getInfo().mip_node_count} nodes",))
    return outcome


def _lp_highs(seed: int, threads: int | None) -> highspy.Highs:
    """HiGHS for an LP relaxation: no output, no presolve (solve_lp_relaxation says why)."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.setOptionValue("presolve", "off")
    highs.setOptionValue("random_seed", int(seed))
    if threads is not None:
        highs.setOptionValue("threads", int(threads))
    return highs


def solve_lp_relaxation(model: LinearModel, *, time_limit: float | None = None, seed: int = 0,
                        threads: int | None = THREADS, iteration_limit: int | None = None) -> LpSolution:
    """The LP relaxation of `model` (integrality dropped) by dual simplex: column values and row duals
    in the model's own (unscaled) rows, so that cost - A^T duals are the reduced costs; OPTIMAL only
    when HiGHS proved the LP optimal (stopped by its time limit, HiGHS' duals are of the presolved LP's
    last basis, measured useless: a bound of 0 at 1,000 operators). Without presolve: the one-hot
    model has little for it to remove, and dual simplex on the model as it is took 0.49 s of CPU
    instead of 1.28 s (random-dag:100 binding) and 5.5 s instead of 12.6 s (random-dag:1000), the
    same optimum; the duals are then the model's own rows' directly."""
    highs = _lp_highs(seed, threads)
    if iteration_limit is not None:  # the deterministic work limit (the wall clock: the safety net)
        highs.setOptionValue("simplex_iteration_limit", max(1, int(iteration_limit)))
    _variables_and_constraints(highs, model)
    _run(highs, time_limit)
    return _lp_answer(highs, model.num_columns, np.arange(model.num_columns), row_scales(model))


def _lp_answer(highs: highspy.Highs, num_columns: int, columns: np.ndarray, scale: np.ndarray) -> LpSolution:
    """The LP HiGHS just ran: OPTIMAL with the values of the model's `columns` (HiGHS' columns, in
    order; the model's others 0) and the row duals unscaled (HiGHS saw row i times `scale[i]`), or
    INFEASIBLE, or TIME_LIMIT (work_limit: its simplex iteration limit, else the wall clock)."""
    status = highs.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return LpSolution(Status.INFEASIBLE)
    if status == highspy.HighsModelStatus.kIterationLimit:
        return LpSolution(Status.TIME_LIMIT, work_limit=True)
    if status != highspy.HighsModelStatus.kOptimal:
        return LpSolution(Status.TIME_LIMIT)
    solution = highs.getSolution()
    values = np.zeros(num_columns)
    values[columns] = np.asarray(solution.col_value)
    return LpSolution(Status.OPTIMAL, values, np.asarray(solution.row_dual) * scale,
                      highs.getInfo().objective_function_value)


class ColumnLp:
    """The LP relaxation of `model` on all its rows and the columns added so far
    (`column_generation.ColumnLp`): the rows are handed to HiGHS once (scaled as the whole model's,
    `_scaled_rows`), columns join with addCols, and each solve starts from the last one's basis (the
    new columns enter non-basic at 0, so that basis stays primal feasible). Column values and row
    duals come back in the model's own columns (0 for those not added) and unscaled rows. Work limit:
    `solve`'s iteration limit, simplex iterations of that solve; `iterations` counts them all."""

    def __init__(self, model: LinearModel, *, seed: int = 0, threads: int | None = THREADS):
        self.model, self.iterations = model, 0
        self.highs = _lp_highs(seed, threads)
        infinity = self.highs.getInfinity()
        row_lower, row_upper, self._starts, self._index, self._value = _scaled_rows(model, infinity)
        self._scale = row_scales(model)
        self._upper = np.where(np.isinf(model.upper), infinity, model.upper)
        self._added = np.zeros(0, dtype=np.int64)  # model columns, in the LP's order
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = 0, model.num_rows
        lp.row_lower_, lp.row_upper_ = row_lower, row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.zeros(1, dtype=np.int32)
        lp.offset_ = model.offset
        self.highs.passModel(lp)

    def add_columns(self, columns: np.ndarray) -> None:
        """The model's `columns` (indices, none added before) join the LP."""
        columns = np.asarray(columns, dtype=np.int64)
        if not len(columns):
            return
        lengths = self._starts[columns + 1] - self._starts[columns]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
        take = np.repeat(self._starts[columns] - starts, lengths) + np.arange(int(lengths.sum()))
        self.highs.addCols(len(columns), self.model.cost[columns], self.model.lower[columns], self._upper[columns],
                           int(lengths.sum()), starts, self._index[take], self._value[take])
        self._added = np.concatenate([self._added, columns])

    def solve(self, iteration_limit: int | None = None, time_limit: float | None = None) -> LpSolution:
        """The LP on the columns added so far, from the last basis: OPTIMAL, INFEASIBLE, or TIME_LIMIT
        (work_limit when `iteration_limit` simplex iterations stopped it, else the wall clock's
        `time_limit` seconds)."""
        self.highs.setOptionValue("simplex_iteration_limit",
                                  highspy.kHighsIInf if iteration_limit is None else max(1, int(iteration_limit)))
        _run(self.highs, time_limit)
        self.iterations += int(self.highs.getInfo().simplex_iteration_count)
        return _lp_answer(self.highs, self.model.num_columns, self._added, self._scale)


def solve_lp_by_columns(model: LinearModel, *, time_limit: float | None = None, seed: int = 0,
                        threads: int | None = THREADS, iteration_limit: int | None = None,
                        start=None) -> LpSolution:
    """`solve_lp_relaxation`'s answer by column generation (column_generation.py) on a `ColumnLp`,
    from `start` (x columns of a plan that fits, or None): OPTIMAL with the completed duals whose safe
    bound is the LP's optimum. Work limit: `iteration_limit` simplex iterations, each pricing round
    charged its `PRICING_UNITS_PER_NONZERO` in iterations (highs_work's rate on the whole model);
    `time_limit` the safety net. Where the first restricted LP is infeasible (no `start` and its
    seed candidates do not fit), the whole LP by `solve_lp_relaxation` with what is left."""
    from solver_plan.intra import column_generation  # pure numpy; here so that the worker alone imports it
    started = time.perf_counter()
    time_left = (lambda: None) if time_limit is None else (lambda: time_limit - (time.perf_counter() - started))
    per_iteration = LP_ITERATION_UNITS + LP_ITERATION_UNITS_PER_NONZERO * len(model.values)
    pricing = int(np.ceil(column_generation.PRICING_UNITS_PER_NONZERO * len(model.values) / per_iteration))
    lp = ColumnLp(model, seed=seed, threads=threads)
    solution, _ = column_generation.column_generation(
        model, lp, start=None if start is None else np.asarray(start), iteration_limit=iteration_limit,
        pricing_iterations=pricing, time_left=time_left)
    if solution.status is not Status.INFEASIBLE:
        return solution
    return solve_lp_relaxation(model, time_limit=time_left(), seed=seed, threads=threads,
                               iteration_limit=None if iteration_limit is None else max(1, iteration_limit - lp.iterations))
