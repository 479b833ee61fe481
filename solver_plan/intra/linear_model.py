"""Solver-neutral linear models (arrays only) and the one-hot configuration model built from a
`ConfigProblem`. Backends (HiGHS, PuLP/CBC, CP-SAT) translate a `LinearModel`; none of their types
appear here.

Configuration model: binary x[i, c] (node i takes candidate c), one per node; continuous edge
variables y[e, k, l] for edges with a non-zero residual (see normal_form), tied to both ends by
sum_l y[e, k, l] = x[u, k] and sum_k y[e, k, l] = x[v, l]; this marginal form is integral for
trees and usually for real graphs. Memory: for each device, the sum of memory of the chosen
candidates using it is at most the limit (rows that can never bind are left out).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from solver_plan.intra.answer import Answer
from solver_plan.intra.normal_form import normal_form
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import CONFIG_SCHEMA_VERSION, Envelope, Objective, Status


@dataclass(frozen=True, eq=False)
class LinearModel:
    """minimise cost @ v + offset s.t. row_lower <= A v <= row_upper, lower <= v <= upper."""
    cost: np.ndarray
    offset: float
    lower: np.ndarray
    upper: np.ndarray
    integer: np.ndarray  # bool per column
    rows: np.ndarray  # row index of each non-zero
    columns: np.ndarray  # column index of each non-zero
    values: np.ndarray  # coefficient of each non-zero
    row_lower: np.ndarray
    row_upper: np.ndarray
    num_decode_columns: int  # leading columns a decoder needs (the x variables)
    node_offsets: np.ndarray  # first x column of each node; node i owns [off[i], off[i+1])

    @property
    def num_columns(self) -> int:
        """Variables (columns) of the model."""
        return len(self.cost)

    @property
    def num_rows(self) -> int:
        """Constraints (rows) of the model."""
        return len(self.row_lower)


class _Rows:
    """Accumulates sparse rows in coordinate form."""

    def __init__(self):
        self.rows, self.columns, self.values, self.lower, self.upper = [], [], [], [], []

    def add(self, columns, values, lower: float, upper: float) -> None:
        index = len(self.lower)
        columns = np.asarray(columns, dtype=np.int64)
        self.rows.append(np.full(len(columns), index, dtype=np.int64))
        self.columns.append(columns)
        self.values.append(np.broadcast_to(np.asarray(values, dtype=float), columns.shape))
        self.lower.append(lower)
        self.upper.append(upper)

    def add_many(self, columns: np.ndarray, values: np.ndarray, lower: float, upper: float) -> None:
        """One row per row of the 2-D `columns` (same-length rows, same bounds)."""
        count, width = columns.shape
        first = len(self.lower)
        self.rows.append(np.repeat(np.arange(first, first + count, dtype=np.int64), width))
        self.columns.append(columns.ravel().astype(np.int64))
        self.values.append(np.broadcast_to(values, columns.shape).ravel().astype(float))
        self.lower.extend([lower] * count)
        self.upper.extend([upper] * count)

    def add_grouped(self, local_rows: np.ndarray, columns: np.ndarray, values: np.ndarray, count: int,
                    lower: float, upper: float) -> None:
        """`count` new rows; entry j goes to new row local_rows[j] (0 <= local_rows[j] < count)."""
        first = len(self.lower)
        self.rows.append(first + np.asarray(local_rows, dtype=np.int64))
        self.columns.append(np.asarray(columns, dtype=np.int64))
        self.values.append(np.asarray(values, dtype=float))
        self.lower.extend([lower] * count)
        self.upper.extend([upper] * count)

    def arrays(self):
        if not self.lower:
            empty = np.zeros(0)
            return empty.astype(np.int64), empty.astype(np.int64), empty, empty, empty
        return (np.concatenate(self.rows), np.concatenate(self.columns), np.concatenate(self.values),
                np.asarray(self.lower, dtype=float), np.asarray(self.upper, dtype=float))


def node_offsets(problem: ConfigProblem) -> np.ndarray:
    """First one-hot column of each node, plus the total: node i owns columns [off[i], off[i+1])."""
    return np.concatenate([[0], np.cumsum([len(c) for c in problem.node_costs])]).astype(np.int64)


def _one_hot_rows(rows: _Rows, offsets: np.ndarray) -> None:
    for start, stop in zip(offsets[:-1], offsets[1:]):
        rows.add(np.arange(start, stop), 1.0, 1.0, 1.0)


def _memory_entries(problem: ConfigProblem, offsets: np.ndarray):
    """Every non-zero (device, column, node, bytes) of the memory rows, sorted by device then column,
    as flat arrays (a per-device Python loop took minutes on 1,024 devices)."""
    lengths, columns, nodes, amounts, devices = [], [], [], [], []
    for node in range(problem.num_nodes):
        for choice, used in enumerate(problem.node_devices[node]):
            lengths.append(len(used))
            columns.append(int(offsets[node]) + choice)
            nodes.append(node)
            amounts.append(float(problem.node_memory[node][choice]))
            devices.append(used)
    lengths = np.asarray(lengths, dtype=np.int64)
    device = np.fromiter(itertools.chain.from_iterable(devices), dtype=np.int64, count=int(lengths.sum()))
    column = np.repeat(np.asarray(columns, dtype=np.int64), lengths)
    node = np.repeat(np.asarray(nodes, dtype=np.int64), lengths)
    amount = np.repeat(np.asarray(amounts, dtype=float), lengths)
    keep = amount != 0.0
    device, column, node, amount = device[keep], column[keep], node[keep], amount[keep]
    order = np.lexsort((column, device))
    return device[order], column[order], node[order], amount[order]


def _memory_rows(rows: _Rows, problem: ConfigProblem, offsets: np.ndarray, limit: float,
                 peak_column: int | None = None) -> None:
    """Per device: sum of chosen memory <= limit (or <= the peak column when one is given). Rows
    that cannot bind (even the worst choice of every node fits) are left out."""
    device, column, node, amount = _memory_entries(problem, offsets)
    if not len(device):
        return
    starts = np.flatnonzero(np.r_[True, device[1:] != device[:-1]])
    stops = np.r_[starts[1:], len(device)]
    if peak_column is None:
        # worst case per device: each node's largest amount there (entries are grouped by device, then node)
        key = device * problem.num_nodes + node
        group = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        worst = np.bincount(device[group], weights=np.maximum.reduceat(amount, group),
                            minlength=problem.num_devices)
    for start, stop in zip(starts, stops):
        if peak_column is not None:
            rows.add(np.append(column[start:stop], peak_column), np.append(amount[start:stop], -1.0), -np.inf, 0.0)
        elif worst[device[start]] > limit:
            rows.add(column[start:stop], amount[start:stop], -np.inf, limit)


# Seconds per element of `config_model_elements` to build the model (arrays, in this module) and hand
# it to HiGHS: measured 0.13 us building random-dag:nodes=10000,candidates=10-30 (19.5 M elements,
# 2.6 s, shared 2-core machine); doubled for the copy to the solver's worker and a loaded machine.
S_PER_MODEL_ELEMENT = 2.6e-7
CHECK_EVERY_EDGES = 1000  # the wall-clock safety net looks at the deadline this often


class ModelBuildCut(Exception):
    """The wall clock ran out while building a model (the safety net, not the planned decision)."""


def config_model_elements(problem: ConfigProblem) -> int:
    """Columns plus non-zeros of `config_model(problem)`, from the problem's sizes alone (an upper
    bound: every edge counted as if its residual were non-zero, every memory entry as if its row
    could bind): x columns + one-hot entries (2 per candidate) + per edge of k_u x k_v entries,
    k_u x k_v y columns and 2 k_u k_v + k_u + k_v marginal entries + per candidate its devices."""
    candidates = sum(len(costs) for costs in problem.node_costs)
    edges = sum(3 * matrix.size + matrix.shape[0] + matrix.shape[1] for matrix in problem.edge_costs)
    memory = 0 if problem.memory_limit is None else sum(
        len(devices) for node in problem.node_devices for devices in node)
    return 2 * candidates + edges + memory


def config_model_seconds(problem: ConfigProblem) -> float:
    """Estimated seconds to build `config_model(problem)` and hand it to the solver."""
    return S_PER_MODEL_ELEMENT * config_model_elements(problem)


def config_model(problem: ConfigProblem, deadline=None, closed_pairs=None) -> LinearModel:
    """The one-hot configuration MILP of `problem` (variables, constraints, objective). With a
    `deadline`, raises ModelBuildCut once it has expired (looked at every CHECK_EVERY_EDGES edges).
    `closed_pairs` (per edge of `problem`, a bool matrix or None): pairs of candidates given no edge
    variable, so no plan of the model uses them (see lp_fixing; their reduced cost proves them in no
    better plan)."""
    late = (lambda: False) if deadline is None else deadline.expired
    if late():
        raise ModelBuildCut("no time left to build the MILP")
    form = normal_form(problem, closed_pairs=closed_pairs)
    offsets = node_offsets(problem)
    num_x = int(offsets[-1])
    pairs = [None if opened is None else np.nonzero(opened) for opened in form.open_pairs]  # row-major
    sizes = [r.size if p is None else len(p[0]) for r, p in zip(form.residuals, pairs)]
    edge_offsets = num_x + np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    num_columns = int(edge_offsets[-1])
    edge_cost = (r.ravel() if p is None else r[p] for r, p in zip(form.residuals, pairs))
    cost = np.concatenate([*form.node_costs, *edge_cost]) if num_columns else np.zeros(0)
    integer = np.zeros(num_columns, dtype=bool)
    integer[:num_x] = True
    rows = _Rows()
    _one_hot_rows(rows, offsets)
    for position, ((u, v), residual, opened, start) in enumerate(
            zip(form.edges, form.residuals, pairs, edge_offsets[:-1])):
        if position % CHECK_EVERY_EDGES == 0 and late():
            raise ModelBuildCut(f"the wall clock ran out building the MILP ({position} of {len(form.edges)} edges)")
        k_u, k_v = residual.shape
        if opened is None:
            grid = start + np.arange(k_u * k_v).reshape(k_u, k_v)
            # sum_l y[k, l] - x[u, k] = 0 for every k, and sum_k y[k, l] - x[v, l] = 0 for every l
            source_rows = np.hstack([grid, (offsets[u] + np.arange(k_u))[:, None]])
            target_rows = np.hstack([grid.T, (offsets[v] + np.arange(k_v))[:, None]])
            rows.add_many(source_rows, np.append(np.ones(k_v), -1.0), 0.0, 0.0)
            rows.add_many(target_rows, np.append(np.ones(k_u), -1.0), 0.0, 0.0)
        else:  # the same rows over the open pairs only
            k, l = opened
            columns = start + np.arange(len(k))
            rows.add_grouped(np.concatenate([k, np.arange(k_u)]),
                             np.concatenate([columns, offsets[u] + np.arange(k_u)]),
                             np.concatenate([np.ones(len(k)), -np.ones(k_u)]), k_u, 0.0, 0.0)
            rows.add_grouped(np.concatenate([l, np.arange(k_v)]),
                             np.concatenate([columns, offsets[v] + np.arange(k_v)]),
                             np.concatenate([np.ones(len(l)), -np.ones(k_v)]), k_v, 0.0, 0.0)
    if problem.memory_limit is not None:
        _memory_rows(rows, problem, offsets, float(problem.memory_limit))
    if late():
        raise ModelBuildCut("the wall clock ran out building the MILP's rows")
    row_index, column_index, values, row_lower, row_upper = rows.arrays()
    return LinearModel(cost, 0.0, np.zeros(num_columns), np.ones(num_columns), integer, row_index,
                       column_index, values, row_lower, row_upper, num_x, offsets)


def min_peak_memory_model(problem: ConfigProblem) -> LinearModel:
    """Choose one candidate per node to minimise the memory of the busiest device (last column)."""
    offsets = node_offsets(problem)
    num_x = int(offsets[-1])
    peak = num_x
    rows = _Rows()
    _one_hot_rows(rows, offsets)
    _memory_rows(rows, problem, offsets, np.inf, peak_column=peak)
    cost = np.zeros(num_x + 1)
    cost[peak] = 1.0
    integer = np.ones(num_x + 1, dtype=bool)
    integer[peak] = False
    upper = np.ones(num_x + 1)
    upper[peak] = np.inf
    row_index, column_index, values, row_lower, row_upper = rows.arrays()
    return LinearModel(cost, 0.0, np.zeros(num_x + 1), upper, integer, row_index, column_index, values,
                       row_lower, row_upper, num_x, offsets)


def encode(model: LinearModel, problem: ConfigProblem, assignment, closed_pairs=None) -> np.ndarray:
    """Column values of a full plan (for warm starts): x from the plan, y from x, peak from memory.
    `closed_pairs`: those the model was built with (the plan must use open pairs only)."""
    values = np.zeros(model.num_columns)
    offsets = model.node_offsets
    for node, choice in enumerate(assignment):
        values[offsets[node] + choice] = 1.0
    if model.num_columns == model.num_decode_columns + 1:  # min-peak model
        values[-1] = float(problem.device_memory(assignment).max())
        return values
    form = normal_form(problem, closed_pairs=closed_pairs)
    start = model.num_decode_columns
    for (u, v), residual, opened in zip(form.edges, form.residuals, form.open_pairs):
        k, l = assignment[u], assignment[v]
        if opened is None:
            values[start + k * residual.shape[1] + l] = 1.0
            start += residual.size
        else:
            flat = opened.ravel()
            if not flat[k * residual.shape[1] + l]:
                raise ValueError(f"the plan uses the closed pair ({k}, {l}) of edge ({u}, {v})")
            values[start + int(np.count_nonzero(flat[: k * residual.shape[1] + l]))] = 1.0
            start += int(np.count_nonzero(flat))
    return values


def decode(model: LinearModel, x_values: np.ndarray) -> tuple[int, ...]:
    """The candidate with the largest x of every node."""
    offsets = model.node_offsets
    return tuple(int(np.argmax(x_values[start:stop])) for start, stop in zip(offsets[:-1], offsets[1:]))


def is_integral(model: LinearModel, x_values: np.ndarray, tolerance: float = 1e-6) -> bool:
    """Whether the decoded (x) columns of a solution are all within `tolerance` of 0 or 1."""
    head = x_values[: model.num_decode_columns]
    return bool(np.all(np.minimum(np.abs(head), np.abs(1 - head)) <= tolerance))


@dataclass(frozen=True, eq=False)
class SolveOutcome:
    """What a backend found, in model terms. `status` is a `Status` (the lowercase names backends
    used to give, "optimal", "time_limit", are read as the same); `x_values` holds the first
    `num_decode_columns` column values of the best solution (None without one); `bound` is a proven
    lower bound on the model objective (None if unknown)."""
    status: Status
    x_values: np.ndarray | None = None
    objective: float | None = None
    bound: float | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "status", Status.parse(self.status))

    @property
    def envelope(self) -> Envelope:
        """In the model's own objective (the backend sees no plan, no runtime and no question)."""
        return Envelope("config", CONFIG_SCHEMA_VERSION, self.status, Objective("model", self.objective),
                        self.bound, None, self.notes)


@dataclass(frozen=True, eq=False)
class LpSolution:
    """A backend's LP relaxation of a model: every column's value and every row's dual (None unless
    `status` is OPTIMAL), in the model's rows as built (reduced costs are cost - A^T row_duals)."""
    status: Status
    column_values: np.ndarray | None = None
    row_duals: np.ndarray | None = None
    objective: float | None = None
    work_limit: bool = False  # stopped by its deterministic work limit (not the wall clock)


def outcome_answer(model: LinearModel, outcome: SolveOutcome):
    """Translate a backend outcome into the harness' Answer (decoding x to a plan)."""
    assignment = decode(model, outcome.x_values) if outcome.x_values is not None else None
    return Answer(outcome.status, assignment, outcome.bound, outcome.notes)


SCALE_ROWS_ABOVE = 1e3  # rows with a larger coefficient (memory rows in bytes) are scaled
SMALLEST_SCALED = 1e-6  # HiGHS drops matrix entries below 1e-9 (small_matrix_value): stay well above


def row_scales(model: LinearModel) -> np.ndarray:
    """Row scaling for a floating-point solver (the HiGHS backend). For every row whose largest
    |coefficient| exceeds SCALE_ROWS_ABOVE: max(1 / largest, SMALLEST_SCALED / smallest), so its
    largest entry becomes 1 unless that would shrink its smallest below SMALLEST_SCALED (the min-peak model's -1 peak column beside bytes); other rows 1.
    Memory rows count bytes (1e9-1e11) beside 0/1 rows; with that range in one matrix HiGHS' MIP
    declared a plan 0.07% worse than a feasible one optimal (a 100-operator DAG of the standard
    suite, memory binding: 504.64 against 504.30), and agrees with CP-SAT once the rows are scaled."""
    magnitude = np.abs(model.values)
    largest = np.zeros(model.num_rows)
    np.maximum.at(largest, model.rows, magnitude)
    smallest = np.full(model.num_rows, np.inf)
    np.minimum.at(smallest, model.rows, magnitude)
    scale = np.maximum(1.0 / np.maximum(largest, 1e-300), SMALLEST_SCALED / np.maximum(smallest, 1e-300))
    return np.where(largest > SCALE_ROWS_ABOVE, np.minimum(scale, 1.0), 1.0)
