"""OR-Tools CP-SAT backend for a 0/1 `LinearModel`.

CP-SAT needs integers: objective costs are scaled by a power of two chosen so the total fits well
inside 64 bits, and rounded; the reported bound subtracts the largest possible rounding error, so it
stays valid. Rows with fractional coefficients (memory) are scaled and rounded conservatively
(coefficients up, limits down), so any plan CP-SAT accepts truly fits; a note says when this
happened. Bytes are usually integers, and then nothing is rounded.
"""
from __future__ import annotations

import math
import time

import numpy as np
from ortools.sat.python import cp_model

from solver_plan.deadline import WALL_CLOCK_STOP
from solver_plan.intra.linear_model import LinearModel, SolveOutcome
from solver_plan.result import Status

OBJECTIVE_RANGE = 2.0 ** 45
ROW_RANGE = 2.0 ** 40


def _variables(solver_model: cp_model.CpModel, model: LinearModel) -> list:
    if np.any(model.lower < 0) or np.any(model.upper > 1):
        raise ValueError("the CP-SAT backend handles 0/1 columns only")
    return [solver_model.NewBoolVar(f"v{j}") for j in range(model.num_columns)]


def _integral(values: np.ndarray) -> bool:
    return bool(np.all(values == np.round(values)) and np.all(np.abs(values) < ROW_RANGE))


def _row_in_integers(coefficients: np.ndarray, low: float, up: float):
    """Integer coefficients and bounds for one row; exact when the coefficients are integers (a
    fractional bound is then rounded inwards, which loses nothing). Otherwise scaled and rounded
    conservatively (coefficients up, upper bound down); returns whether that happened."""
    scale, rounded = 1.0, False
    if not _integral(coefficients):
        scale, rounded = ROW_RANGE / max(1.0, float(np.abs(coefficients).sum())), True
    integer = np.ceil(coefficients * scale - 1e-9).astype(np.int64) if rounded else coefficients.astype(np.int64)
    lower = math.ceil(low * scale - 1e-9) if np.isfinite(low) else None
    upper = math.floor(up * scale + 1e-9) if np.isfinite(up) else None
    return integer, lower, upper, rounded


def _constraints(solver_model: cp_model.CpModel, model: LinearModel, variables: list) -> bool:
    """Add every row; returns whether some row had to be rounded."""
    any_rounded = False
    order = np.argsort(model.rows, kind="stable")
    bounds = np.searchsorted(model.rows[order], np.arange(model.num_rows + 1))
    for row in range(model.num_rows):
        chosen = order[bounds[row]:bounds[row + 1]]
        integer, lower, upper, rounded = _row_in_integers(model.values[chosen], model.row_lower[row],
                                                          model.row_upper[row])
        any_rounded |= rounded
        expression = cp_model.LinearExpr.WeightedSum([variables[model.columns[j]] for j in chosen],
                                                     [int(c) for c in integer])
        if lower is not None and lower == upper:
            solver_model.Add(expression == lower)
            continue
        if lower is not None:
            solver_model.Add(expression >= lower)
        if upper is not None:
            solver_model.Add(expression <= upper)
    return any_rounded


def _objective(solver_model: cp_model.CpModel, model: LinearModel, variables: list) -> float:
    """Minimise the scaled, rounded costs; returns the scale."""
    total = float(np.abs(model.cost).sum())
    scale = 2.0 ** math.floor(math.log2(OBJECTIVE_RANGE / total)) if total > 0 else 1.0
    integer = np.round(model.cost * scale).astype(np.int64)
    used = np.flatnonzero(integer)
    solver_model.Minimize(cp_model.LinearExpr.WeightedSum([variables[j] for j in used], [int(integer[j]) for j in used]))
    return scale


def _decode(solver: cp_model.CpSolver, status, model: LinearModel, variables: list, scale: float,
            hit_time_limit: bool, notes: tuple) -> SolveOutcome:
    if status == cp_model.INFEASIBLE:
        return SolveOutcome(Status.INFEASIBLE, notes=notes)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolveOutcome(Status.TIME_LIMIT if hit_time_limit else Status.ERROR,
                            notes=notes + (f"CP-SAT: {solver.StatusName(status)}",))
    values = np.array([solver.Value(v) for v in variables], dtype=float)
    # Every plan sets the same number of columns to 1; each rounding was at most half a unit.
    error = 0.5 * float(values.sum()) / scale
    bound = solver.BestObjectiveBound() / scale - error + model.offset
    objective = float(model.cost @ values) + model.offset
    kind = Status.OPTIMAL if status == cp_model.OPTIMAL else (Status.TIME_LIMIT if hit_time_limit else Status.FEASIBLE)
    return SolveOutcome(kind, values[: model.num_decode_columns], objective, min(bound, objective), notes)


def solve_with_cpsat(model: LinearModel, *, time_limit: float | None = None, work: float | None = None,
                     start_values=None, seed: int = 0, workers: int = 1) -> SolveOutcome:
    """Solve with at most `work` units of CP-SAT's deterministic time (the limit that decides the
    answer: with one worker and a fixed seed the same on any machine) and `time_limit` seconds of
    wall clock (the safety net; a note says when it stopped the search first)."""
    started = time.perf_counter()
    solver_model = cp_model.CpModel()
    variables = _variables(solver_model, model)
    rounded = _constraints(solver_model, model, variables)
    scale = _objective(solver_model, model, variables)
    if start_values is not None:
        for variable, value in zip(variables, start_values):
            solver_model.AddHint(variable, int(round(value)))
    solver = cp_model.CpSolver()
    solver.parameters.num_search_workers = int(workers)
    solver.parameters.random_seed = int(seed)
    # The one-hot model's LP relaxation is nearly tight: full linearisation proves bounds fast,
    # and a single LP-based worker beat the 2-worker portfolio on 2 cores (measured).
    solver.parameters.linearization_level = 2
    if work is not None:
        solver.parameters.max_deterministic_time = max(1e-3, float(work))
    if time_limit is not None:  # building the model counts against the limit
        time_limit = max(0.01, float(time_limit) - (time.perf_counter() - started))
        solver.parameters.max_time_in_seconds = time_limit
    status = solver.Solve(solver_model)
    hit_wall = time_limit is not None and solver.WallTime() >= 0.95 * time_limit
    hit_work = work is not None and solver.deterministic_time >= 0.99 * work
    hit_time_limit = hit_wall or hit_work
    notes = ("memory rows rounded conservatively for CP-SAT",) if rounded else ()
    if hit_wall and not hit_work and status != cp_model.OPTIMAL:
        notes += (f"CP-SAT {WALL_CLOCK_STOP} ({solver.deterministic_time:.3g} of {work:.3g} units)"
                  if work is not None else "CP-SAT stopped by the wall clock",)
    return _decode(solver, status, model, variables, scale, hit_time_limit, notes)
