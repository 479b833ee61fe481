"""Root LP relaxation under a binding memory limit: a proven bound, a plan close to it, and the model
restricted to the candidates and candidate pairs the LP's reduced costs leave open (exact).

For any row duals pi of the one-hot model min c z, lo <= A z <= up, 0 <= z <= 1 (linear_model), with
reduced costs r = c - A^T pi, the safe bound B (column_generation.safe_bound) is computed from the
model's own arrays and the LP solver's duals, so it is a proven bound whatever the solver's
tolerances did (a safe dual bound: Neumaier and Shcherbina 2004). Fixing column j at 1
raises it by max(0, r_j), at 0 by max(0, -r_j); so a candidate (x column, with its node's other
candidates at 0) or a pair of candidates on an edge (y column, with both ends) whose raised bound
reaches a known plan's cost is in no cheaper plan: reduced-cost fixing, as MILP solvers do it at
their root, but done before the model is built, so the edge variables of closed pairs never exist
(measured on random-dag:nodes=100,candidates=6-30,seed=1,memory=binding: 29% of the x and 39% of
the y columns closed by a plan 0.11% above the LP bound, and HiGHS proves the rest optimal at its
root or in a few nodes, where the whole model took 500 nodes).

The plan: the MILP on the candidates the LP solution uses (its support, ~1.6 per node, with the
incumbent's: support_plan), a few hundred columns stopped within SUPPORT_GAP of their bound in well
under a second, then local search, pair exchanges and forest search.
The LP is solved when its estimated time (from the model's size) fits LP_SHARE of the nominal
budget; larger models take the Lagrangian route (lagrangian_fixing), whose bound needs no LP. Where
the nodes have COLGEN_MIN_MEAN_CANDIDATES or more candidates on average the LP is solved by column
generation (column_generation.py, in the HiGHS worker), else by dual simplex on the whole model:
the same LP optimum, proven by the safe bound of the duals it returns, the duals the fixing uses;
in less time there (measured in the constants' text).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
import numpy as np

from solver_plan.intra import highs_work, isolated
from solver_plan.intra.column_generation import safe_bound
from solver_plan.intra.forest_dp import spanning_forest
from solver_plan.intra.lagrangian import ROUNDING_SLACK, binding_devices, candidates_below, fixing_threshold
from solver_plan.intra.lagrangian_fixing import Restriction, best_plan, restrict_by
from solver_plan.intra.linear_model import (LinearModel, LpSolution, ModelBuildCut, config_model, config_model_elements,
                                           config_model_seconds)
from solver_plan.intra.normal_form import normal_form
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.support_plan import SolveModel, support_plan
from solver_plan.result import Status
from solver_plan.units import format_seconds

# Seconds of dual simplex per element of config_model_elements: measured 7.6 us (random-dag:100
# binding, 0.17 M elements, 1.3 s) and 8.3 us (random-dag:1000, 1.35 M elements, 11.2 s) of CPU on
# the shared 2-core machine; taken 1.5x for the load and the superlinear growth of simplex. Those were
# with HiGHS' presolve; without it (solve_lp_relaxation, issue 28) 3.0 us and 4.3 us (0.49 s, 5.1-5.8
# s): kept, so the LP route covers the same sizes as before (a larger one is unmeasured).
S_PER_LP_ELEMENT = 1.2e-5
# Column generation instead of dual simplex on the whole model where the nodes have this many
# candidates on average: measured s38 (CPU of the LP alone, one thread, shared 2-core machine at load
# ~2.5), column generation against dual simplex: random DAGs of 2-8 candidates (mean 5; 10-5,000
# nodes) 1.2-1.9x slower (2.8 against 1.7 ms at 10 nodes, 2.9 against 2.5 s at 5,000), of 2-16
# (mean 9, 2,000 nodes) 1.8 against 2.4 s, random-dag's 6-30 (mean 16-18) 1.1-2.2x faster from 10
# to 3,000 nodes (0.3 against 0.5 s at 100, 2.9 against 5.1 s at 1,000, 18.5 against session 37's
# 34.8 s at 3,000), alpa-chain's (mean 9) the same (0.3 s at 1,000, 8.3 and 8.2 s at 10,000).
COLGEN_MIN_MEAN_CANDIDATES = 8.0
# Its seconds per element of config_model_elements: measured 2.1 us (random-dag:1000), 4.4 us
# (random-dag:3000) and 5.1 us (random-dag:10000, s37) of CPU; taken 5 us, so that random-dag:3000
# (4.2 M elements) fits half of a 60 s budget and random-dag:10000 does not fit half of 120 s.
S_PER_COLGEN_ELEMENT = 5e-6
LP_SHARE = 0.5  # of the nominal time: the LP (and the plan from its support) must fit in it
SUPPORT_SHARE = 0.25  # of the time left after the LP, for the MILP on the LP's support
IMPROVE_SHARE = 0.15  # of the time left then, for repair, local and forest search of its plan
SUPPORT_VALUE = 1e-6  # an LP value above this puts the candidate in the support
# The MILP on the LP's support stops once its plan is within this relative gap of its own bound: its
# plan is only the incumbent for the fixing, which local search and pair exchanges then improve, and
# its proof was most of its time (random-dag:100 binding: 1.2-1.6 s to prove 454.310 optimal on the
# support, 0.41-0.58 s to stop at 454.336 in its root; pair exchanges reach the optimum 454.185 from
# either, seeds 0-3; random-dag:1000: 1.2 -> 0.8 s, the same plan). Not for the Lagrangian's support
# at 10,000 operators, whose MILP is stopped by the clock well short of such a gap.
SUPPORT_GAP = 2e-3
# The LP's iteration limit is its share of the nominal budget (less the model's build) at
# `highs_work.LP_ITERATION_UNITS` an iteration, so whether the LP finishes, and so which route the
# planner takes, is decided by work; HiGHS' time limit is the safety net.


@dataclass(frozen=True, eq=False)
class LpRelaxation:
    """The root LP's outcome: a proven bound, per-candidate and per-pair bounds for fixing, and the
    candidates the LP solution uses."""
    bound: float  # no plan costs less
    candidate_bounds: tuple[np.ndarray, ...]  # per node and candidate: no plan using it costs less
    pair_bounds: tuple[np.ndarray | None, ...]  # per edge (None: no edge variables): per pair likewise
    values: tuple[np.ndarray, ...]  # per node, the LP value of each candidate

    @property
    def num_candidates(self) -> int:
        """Candidates of the problem (all of them, open or not)."""
        return sum(len(b) for b in self.candidate_bounds)

    @property
    def support(self) -> tuple[np.ndarray, ...]:
        """Per node, the candidates the LP solution uses."""
        return tuple(np.flatnonzero(v > SUPPORT_VALUE) for v in self.values)

    def open_candidates(self, upper_bound: float, keep=None) -> tuple[np.ndarray, ...]:
        """Per node, the candidates that may be in a plan cheaper than `upper_bound` (plus `keep`'s)."""
        return candidates_below(self.candidate_bounds, upper_bound, keep)

    def closed_pairs(self, problem: ConfigProblem, upper_bound: float, keep=None) -> tuple[np.ndarray | None, ...]:
        """Per edge, the pairs of candidates in no plan cheaper than `upper_bound` (never `keep`'s)."""
        threshold = fixing_threshold(upper_bound)
        closed: list[np.ndarray | None] = []
        for (u, v), bounds in zip(problem.edges, self.pair_bounds):
            if bounds is None:
                closed.append(None)
                continue
            matrix = bounds >= threshold
            if keep is not None:
                matrix[keep[u], keep[v]] = False
            closed.append(matrix)
        return tuple(closed)


def lp_relaxation(problem: ConfigProblem, model: LinearModel, solution: LpSolution) -> LpRelaxation:
    """Bounds from an optimal LP `solution` of `model` (= config_model(problem), no closed pairs).
    Columns are 0 <= z <= 1, so fixing z_j = 1 adds max(0, r_j) and z_j = 0 adds max(0, -r_j)."""
    assert solution.row_duals is not None and solution.column_values is not None
    bound, reduced = safe_bound(model, solution.row_duals)
    rounding = ROUNDING_SLACK * (1.0 + abs(bound)) + 1e-12 * float(np.abs(reduced).sum())
    bound -= rounding
    offsets = model.node_offsets
    up, down = np.maximum(reduced, 0.0), np.maximum(-reduced, 0.0)
    candidate_extra = []
    for start, stop in zip(offsets[:-1], offsets[1:]):  # this candidate at 1, its node's others at 0
        candidate_extra.append(up[start:stop] + down[start:stop].sum() - down[start:stop])
    pair_bounds: list[np.ndarray | None] = [None] * len(problem.edges)
    column = model.num_decode_columns
    form = normal_form(problem)
    for (u, v), residual, edge in zip(form.edges, form.residuals, form.edge_index):
        pairs = up[column: column + residual.size].reshape(residual.shape)
        pair_bounds[edge] = bound + pairs + candidate_extra[u][:, None] + candidate_extra[v][None, :]
        column += residual.size
    x = solution.column_values
    values = tuple(x[start:stop] for start, stop in zip(offsets[:-1], offsets[1:]))
    return LpRelaxation(bound, tuple(bound + extra for extra in candidate_extra), tuple(pair_bounds), values)


def by_columns(problem: ConfigProblem) -> bool:
    """Whether the root LP is solved by column generation (COLGEN_MIN_MEAN_CANDIDATES) or dual simplex."""
    return problem.num_candidates >= COLGEN_MIN_MEAN_CANDIDATES * max(1, problem.num_nodes)


def lp_fits(problem: ConfigProblem, nominal_s: float | None) -> bool:
    """Whether the root LP's estimated time (from the model's size) fits LP_SHARE of `nominal_s`: at
    column generation's rate where `by_columns` and the graph has a cycle, else at dual simplex's.
    On a forest the Lagrangian route's inner minimum is exact, and it beat the LP route where only
    column generation's rate let the LP in (alpa-chain:10000 binding at 60 s, s38: proven optimal
    in 21.4 s against 30.6 s), so there the routes stay as dual simplex's estimate chose them."""
    if nominal_s is None:
        return True
    # as many edges as nodes or more: a cycle, without the spanning forest's pass over the edges
    cycle = by_columns(problem) and (len(problem.edges) >= problem.num_nodes or not spanning_forest(
        problem.num_nodes, problem.edges, problem.edge_costs).all())
    rate = S_PER_COLGEN_ELEMENT if cycle else S_PER_LP_ELEMENT
    return rate * config_model_elements(problem) <= LP_SHARE * nominal_s


def lp_iteration_limit(problem: ConfigProblem, model: LinearModel, nominal_s: float | None) -> int | None:
    """Simplex iterations `nominal_s` pays for after building the model (`config_model_seconds`), at
    `highs_work.lp_iteration_limit`'s rate (None: unlimited)."""
    return None if nominal_s is None else highs_work.lp_iteration_limit(
        model, max(0.0, nominal_s - config_model_seconds(problem)))


def lp_restriction(problem: ConfigProblem, deadline, incumbent, seed: int, solve: SolveModel) -> Restriction | None:
    """The LP route (None when the memory limit cannot bind, the LP does not fit the nominal budget,
    or the LP was not solved to optimality: the caller then takes the Lagrangian route). `solve`
    solves a (sub)problem's MILP from a start plan within a deadline."""
    if problem.memory_limit is None or not binding_devices(problem).any():
        return None
    if not lp_fits(problem, deadline.nominal_left()):
        return None
    started = time.perf_counter()
    clock = deadline.share(LP_SHARE)
    try:
        model = config_model(problem, clock)
    except ModelBuildCut:
        return None
    columns = by_columns(problem)
    # the incumbent's candidates in column generation's first LP: a plan fits in it
    start = None if not columns or incumbent is None else [
        int(model.node_offsets[node]) + int(choice) for node, choice in enumerate(incumbent)]
    solution = _solved_lp(problem, model, clock, seed, columns, start)
    if solution is None:  # not optimal: the Lagrangian route with what is left
        return None
    relaxation = lp_relaxation(problem, model, solution)
    lp_seconds = time.perf_counter() - started
    # the plan's own shares of what the LP left: a slow LP (a loaded machine) must not starve them
    found = support_plan(problem, relaxation.support, incumbent, deadline.share(SUPPORT_SHARE), solve, SUPPORT_GAP)
    if found is None:  # no plan fits on the support: the LP's largest values, repaired to fit
        found = tuple(int(np.argmax(relaxation.values[node])) for node in range(problem.num_nodes))
    plan = best_plan(problem, [found], incumbent, deadline.work_share(IMPROVE_SHARE), seed)  # sized by work
    source = "given" if incumbent is not None and plan is not None and plan == tuple(incumbent) else "LP support"
    note = (f"root LP{' by column generation' if columns else ''}: bound {relaxation.bound:.10g} in "
            f"{format_seconds(lp_seconds)}, plan from its support "
            f"in {format_seconds(time.perf_counter() - started - lp_seconds)}")
    return restrict_by(problem, relaxation, plan, source, note)


def _solved_lp(problem: ConfigProblem, model: LinearModel, clock, seed: int, columns: bool = False,
               start=None) -> LpSolution | None:
    """The LP relaxation of `model` (= config_model(problem)) in the HiGHS worker, by column generation
    (from the `start` columns) or dual simplex, its iterations `clock`'s nominal budget (the work
    limit decides; the wall clock only stops it, marking `clock` cut short), or None where it is not
    optimal (infeasible, stopped, or the worker killed at the wall clock)."""
    extra: dict = {} if start is None else {"start": start}
    remaining = clock.remaining()
    try:
        solution = isolated.call("highspy", "solver_plan.intra.backends.highs",
                                 "solve_lp_by_columns" if columns else "solve_lp_relaxation",
                                 timeout=remaining, model=model, seed=seed,
                                 iteration_limit=lp_iteration_limit(problem, model, clock.nominal_left()),
                                 time_limit=None if remaining is None else max(0.05, 0.9 * remaining - 0.2),
                                 **extra)
    except TimeoutError:  # the wall clock (a loaded machine)
        clock.mark_cut_short()
        return None
    if solution.status is not Status.OPTIMAL:  # infeasible, or stopped by its work limit or the wall clock
        if solution.status is Status.TIME_LIMIT and not solution.work_limit:
            clock.mark_cut_short()
        return None
    return solution


def lp_values(problem: ConfigProblem, deadline, seed: int = 0) -> tuple[np.ndarray, ...] | None:
    """Per node, the LP relaxation's value of each candidate of `problem` (the whole one-hot model by
    dual simplex in the HiGHS worker, `_solved_lp`), or None where the model was not built or the LP
    not solved to optimality within `deadline`: for the neighbourhood of a relaxation's support
    (support_plan.neighbourhood_plan)."""
    try:
        model = config_model(problem, deadline)
    except ModelBuildCut:
        return None
    solution = _solved_lp(problem, model, deadline, seed)
    if solution is None or solution.column_values is None:
        return None
    offsets, x = model.node_offsets, solution.column_values
    return tuple(x[start:stop] for start, stop in zip(offsets[:-1], offsets[1:]))
