"""The root LP of a one-hot model (linear_model.config_model) by column generation, and the safe
bound of any row duals (issue 28; measured first in scripts/probe_root_lp.py, session 37).

Safe bound. For any row duals pi of min c z, lo <= A z <= up, 0 <= z <= 1, with reduced costs
r = c - A^T pi, every solution z satisfies
    c z = pi (A z) + r z >= sum_i (pi_i lo_i if pi_i > 0 else pi_i up_i) + sum_j min(0, r_j) =: B,
pi_i taken as 0 where its sign would need a side the row lacks (Neumaier and Shcherbina 2004). B is
computed from the model's own arrays, so it is a proven bound whatever duals it is given and
whatever the LP solver's tolerances did.

Column generation. The LP on a few candidates per node (the `SEED_CHEAPEST` cheapest, the one of
least memory and the incumbent's, so that a plan fits in it) and the edge pairs between them, solved
by an LP that keeps its basis as columns join (`ColumnLp`, backends/highs.py). Its duals say nothing
about the marginal rows it left empty (sum_l y[k, l] - x[u, k] = 0 of a candidate k not in it): each
is set to the least reduced cost of its pair columns without it (`complete_duals`: as a
min-marginal, so that no pair column there is negative and x[u, k] pays what any plan using it must
pay on that edge); then every column of the whole model is priced by the safe bound's reduced
costs, and the candidates of negative reduced cost (of a pair column: its two ends) join, with
every pair between the candidates in. It stops when the whole model's safe bound reaches the
restricted LP's optimum, which is then the LP's optimum (priced out: no column of the whole model
has a negative reduced cost under the duals that bound uses), or at its work limit. The duals it
returns are those of that bound, so reduced-cost fixing (lp_fixing) uses exactly the duals whose
bound it proves. Cold re-solves instead of warm ones stalled at 1,000 operators (session 37: other
degenerate duals each time, the bound oscillating), so the LP must keep its basis.
"""
from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from solver_plan.intra.linear_model import LinearModel, LpSolution
from solver_plan.result import Status

SEED_CHEAPEST = 2  # cheapest candidates per node in the first LP (3: slower at 10,000 operators, s37)
COMPLETION_PASSES = 2  # of complete_duals: the bound after the second pass was the better (s37)
ADD_LIMIT = 50_000  # negative columns priced in per round, most negative first
MAX_ROUNDS = 40  # rounds at most (6 at 10,000 operators, 4-6 at 30-3,000: s37, s38)
# A column joins when its reduced cost is below this (HiGHS' dual feasibility tolerance is 1e-7: the
# LP's own columns may sit that far below 0, and re-adding them would loop)
ADD_BELOW = -1e-7
PRICED_OUT_GAP = 1e-7  # relative: the safe bound this close to the restricted LP's optimum is its optimum
# Work units (deadline.WORK_UNIT_S) of one pricing round per non-zero of the model: the safe bound
# and the dual completion (COMPLETION_PASSES x 2 + 1 passes over the non-zeros); measured s38
# (scripts/probe_root_lp.py --methods colgen: each round's pricing CPU over the model's non-zeros,
# random-dag:30-3000 and alpa-chain:1000-10000 binding, shared 2-core machine, load ~2.5) 0.05-0.18
# us, taken 0.25 (s37's rounds at 10,000 operators: ~2 s for 9.4 M non-zeros, 0.21 us).
PRICING_UNITS_PER_NONZERO = 0.25


class ColumnLp(Protocol):
    """An LP on every row of a model and the columns added so far, re-solved from its last basis."""

    iterations: int  # simplex iterations of every solve so far

    def add_columns(self, columns: np.ndarray) -> None:
        """The model's `columns` (indices, none added before) join the LP."""

    def solve(self, iteration_limit: int | None = None, time_limit: float | None = None) -> LpSolution:
        """The LP on the columns added so far: column values in the model's columns (0 for those not
        added), row duals in its unscaled rows; TIME_LIMIT with work_limit at `iteration_limit`."""


def safe_bound(model: LinearModel, row_duals: np.ndarray) -> tuple[float, np.ndarray]:
    """The bound B of the module docstring and the reduced costs r, from `row_duals` (any values)."""
    duals = np.where((row_duals > 0) & np.isinf(model.row_lower), 0.0, row_duals)
    duals = np.where((duals < 0) & np.isinf(model.row_upper), 0.0, duals)
    reduced = model.cost - np.bincount(model.columns, weights=model.values * duals[model.rows],
                                       minlength=model.num_columns)
    side = np.where(duals > 0, model.row_lower, model.row_upper)
    rows = float(np.sum(np.where(duals != 0, duals * np.where(np.isfinite(side), side, 0.0), 0.0)))
    columns = float(np.sum(np.where(reduced < 0, reduced * model.upper, reduced * model.lower)))
    return model.offset + rows + columns, reduced


def marginal_x(model: LinearModel) -> np.ndarray:
    """Per row, the x column of a marginal row (its -1 entry: sum_l y[k, l] - x[u, k] = 0), else -1."""
    marginal = (model.columns < model.num_decode_columns) & (model.values == -1.0)
    row_x = np.full(model.num_rows, -1, dtype=np.int64)
    row_x[model.rows[marginal]] = model.columns[marginal]
    return row_x


def pair_ends(model: LinearModel, row_x: np.ndarray) -> np.ndarray:
    """Per y column (after the x columns), the x columns of its two ends: a y column sits in one
    marginal row of each end (config_model), the source end's first."""
    pair = model.columns >= model.num_decode_columns
    order = np.argsort(model.columns[pair], kind="stable")
    return row_x[model.rows[pair][order]].reshape(-1, 2)


def complete_duals(model: LinearModel, duals: np.ndarray, rows: np.ndarray, ends: np.ndarray,
                   row_x: np.ndarray, passes: int = COMPLETION_PASSES) -> tuple[np.ndarray, float, np.ndarray]:
    """Duals of the marginal `rows` the restricted LP left empty, each set to the least reduced cost
    of its pair columns without it (module text); a pair column sits in one row of each end, so the
    rows at the edges' source ends are set first, then those at their target ends, `passes` times.
    Any duals give a valid bound, so this only decides how tight it is. Returns the best duals,
    their safe bound and reduced costs."""
    duals = duals.copy()
    chosen = np.zeros(model.num_rows, dtype=bool)
    chosen[rows] = True
    entries = chosen[model.rows] & (model.columns >= model.num_decode_columns)
    e_rows, e_columns = model.rows[entries], model.columns[entries]
    source = row_x[e_rows] == ends[e_columns - model.num_decode_columns, 0]
    best, reduced = safe_bound(model, duals)
    best_duals, best_reduced = duals.copy(), reduced
    for _ in range(passes):
        for side in (source, ~source):
            own = reduced[e_columns[side]] + duals[e_rows[side]]  # the pair's reduced cost without this row
            least = np.full(model.num_rows, np.inf)
            np.minimum.at(least, e_rows[side], own)
            touched = np.isfinite(least)
            duals[touched] = least[touched]
            bound, reduced = safe_bound(model, duals)
            if bound > best:
                best, best_duals, best_reduced = bound, duals.copy(), reduced
    return best_duals, best, best_reduced


def seed_candidates(model: LinearModel, start: np.ndarray | None) -> np.ndarray:
    """The first LP's x columns: per node its SEED_CHEAPEST cheapest, the one of least memory (its
    coefficients summed over the inequality rows, the memory rows) and `start`'s (x columns of a
    plan that fits, if known)."""
    num_x = model.num_decode_columns
    keep = np.zeros(num_x, dtype=bool)
    inequality = model.row_lower[model.rows] < model.row_upper[model.rows]
    memory = np.bincount(model.columns, weights=np.where(inequality, model.values, 0.0),
                         minlength=model.num_columns)[:num_x]
    offsets = model.node_offsets
    for start_, stop in zip(offsets[:-1], offsets[1:]):
        keep[start_ + np.argsort(model.cost[start_:stop], kind="stable")[:SEED_CHEAPEST]] = True
        keep[start_ + int(np.argmin(memory[start_:stop]))] = True
    if start is not None:
        keep[np.asarray(start, dtype=np.int64)] = True
    return keep


def column_generation(model: LinearModel, lp: ColumnLp, *, start: np.ndarray | None = None,
                      iteration_limit: int | None = None, pricing_iterations: int = 0,
                      time_left=lambda: None, report=None) -> tuple[LpSolution, int]:
    """The LP relaxation of `model` by column generation on `lp` (module text), from `start` (x
    columns of a plan that fits, or None). Work limit: `iteration_limit` simplex iterations, each
    pricing round charged `pricing_iterations` of them (None: unlimited); `time_left()` the wall
    clock's seconds (None: unlimited), the safety net. Returns the LP solution (OPTIMAL once priced
    out: the row duals are the completed ones whose safe bound is the LP's optimum, the column values
    the restricted LP's, 0 elsewhere; INFEASIBLE when the restricted LP is, which does not prove the
    whole model infeasible; TIME_LIMIT with work_limit when the work limit stopped it) and the
    rounds done. `report` (None: none) is given each round's figures as a dict (the probe's log)."""
    num_x = model.num_decode_columns
    row_x = marginal_x(model)
    ends = pair_ends(model, row_x)
    keep_x = seed_candidates(model, start)
    in_lp = np.zeros(model.num_columns, dtype=bool)
    equality = model.row_lower == model.row_upper
    charged = 0  # iterations charged for pricing
    for round_ in range(1, MAX_ROUNDS + 1):
        keep = np.concatenate([keep_x, keep_x[ends[:, 0]] & keep_x[ends[:, 1]]])
        lp.add_columns(np.flatnonzero(keep & ~in_lp))
        in_lp |= keep
        left = None if iteration_limit is None else iteration_limit - lp.iterations - charged
        if left is not None and left <= 0:
            return LpSolution(Status.TIME_LIMIT, work_limit=True), round_
        seconds = time_left()
        if seconds is not None and seconds <= 0:
            return LpSolution(Status.TIME_LIMIT), round_
        solution = lp.solve(left, seconds)
        if solution.status is not Status.OPTIMAL:
            return solution, round_
        assert solution.row_duals is not None and solution.objective is not None
        has_entry = np.zeros(model.num_rows, dtype=bool)
        has_entry[model.rows[in_lp[model.columns]]] = True
        empty = np.flatnonzero(~has_entry & equality & (row_x >= 0))
        pricing = time.process_time()
        duals, bound, reduced = complete_duals(model, solution.row_duals, empty, ends, row_x)
        charged += pricing_iterations
        negative = np.flatnonzero((reduced < ADD_BELOW) & ~in_lp)
        if report is not None:
            report({"round": round_, "candidates": int(keep_x.sum()), "columns": int(in_lp.sum()),
                    "objective": solution.objective, "bound": bound, "negative": len(negative),
                    "iterations": lp.iterations, "pricing_cpu": time.process_time() - pricing})
        if bound >= solution.objective - PRICED_OUT_GAP * (1.0 + abs(solution.objective)) or not len(negative):
            # priced out (or within the LP's own tolerances: the bound is valid either way)
            return LpSolution(Status.OPTIMAL, solution.column_values, duals, solution.objective), round_
        worst = negative[np.argsort(reduced[negative], kind="stable")[:ADD_LIMIT]]
        add = np.zeros(num_x, dtype=bool)
        add[worst[worst < num_x]] = True
        add[ends[worst[worst >= num_x] - num_x].ravel()] = True
        keep_x |= add
        if iteration_limit is not None and lp.iterations + charged >= iteration_limit:
            return LpSolution(Status.TIME_LIMIT, work_limit=True), round_
    return LpSolution(Status.TIME_LIMIT, work_limit=True), MAX_ROUNDS
