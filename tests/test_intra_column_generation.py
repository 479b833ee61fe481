"""The root LP by column generation (column_generation, backends/highs.py's ColumnLp): the same LP
optimum as dual simplex on the whole model, fixing with its duals never cuts a fitting plan (brute
force), its work limit, and milp's answers with it against reference-highs."""
from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest

from intra_cases import tiny_cases
from test_intra_lp_fixing import assert_bounds_below_plans
from solver_plan.deadline import time_budget
from solver_plan.intra import isolated
from solver_plan.intra.column_generation import safe_bound, seed_candidates
from solver_plan.intra.linear_model import config_model, config_model_elements
from solver_plan.intra.lp_fixing import (LP_SHARE, S_PER_COLGEN_ELEMENT, S_PER_LP_ELEMENT, by_columns, lp_fits,
                                         lp_relaxation)
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.result import Status

BACKEND = "solver_plan.intra.backends.highs"


def _lp(model, function, **kwargs):
    return isolated.call("highspy", BACKEND, function, model=model, **kwargs)


def _binding(nodes: int, seed: int, tightness: float, shape: str = "dag", candidates=(2, 8)):
    return random_problem(nodes, seed=seed, shape=shape, memory_tightness=tightness,
                          min_candidates=candidates[0], max_candidates=candidates[1])


def _small_binding_problems():
    """20-60 nodes of 2-8 or 8-16 candidates, limits that bind (some infeasible), three shapes."""
    return [(f"{shape}-n{n}-s{seed}-t{t}-k{k}", _binding(n, seed, t, shape, k))
            for (shape, n), seed, t, k in itertools.product(
                (("dag", 40), ("series_parallel", 30), ("chain", 60), ("dag", 20)), range(2), (0.3, 0.5),
                ((2, 8), (8, 16)))]


def _plans(problem):
    return itertools.product(*(range(len(c)) for c in problem.node_costs))


def test_column_generation_reaches_the_whole_lps_optimum():
    """Its optimum equals dual simplex's on the whole model, its duals' safe bound proves it, and it
    needed more than its seed candidates somewhere (so pricing is exercised)."""
    checked = grew = 0
    for case_id, problem in _small_binding_problems():
        model = config_model(problem)
        whole = _lp(model, "solve_lp_relaxation")
        by_columns = _lp(model, "solve_lp_by_columns")
        assert by_columns.status is whole.status, case_id
        if whole.status is not Status.OPTIMAL:
            continue
        assert by_columns.objective == pytest.approx(whole.objective, rel=1e-7, abs=1e-7), case_id
        bound, _ = safe_bound(model, by_columns.row_duals)
        assert bound == pytest.approx(whole.objective, rel=1e-6, abs=1e-6), case_id
        assert bound <= whole.objective + 1e-6 * (1 + abs(whole.objective)), case_id
        x = by_columns.column_values[: model.num_decode_columns]
        grew += bool((x > 1e-9)[~seed_candidates(model, None)].any())
        checked += 1
    assert checked >= 10 and grew >= 1


def test_column_generation_from_a_start_plan():
    """With a plan's x columns as start, the same optimum (the plan's candidates join the first LP)."""
    for case_id, problem in _small_binding_problems()[::4]:
        model = config_model(problem)
        whole = _lp(model, "solve_lp_relaxation")
        if whole.status is not Status.OPTIMAL:
            continue
        plan = solve(problem, "milp", deadline=time_budget(30)).assignment
        start = [int(model.node_offsets[node]) + int(choice) for node, choice in enumerate(plan)]
        by_columns = _lp(model, "solve_lp_by_columns", start=start)
        assert by_columns.status is Status.OPTIMAL, case_id
        assert by_columns.objective == pytest.approx(whole.objective, rel=1e-7, abs=1e-7), case_id


def test_dual_simplex_where_nodes_have_few_candidates():
    assert not by_columns(_binding(40, 0, 0.3))
    assert by_columns(_binding(40, 0, 0.3, candidates=(8, 16)))


@pytest.mark.parametrize("shape", ["chain", "dag"])
def test_lp_route_sized_at_column_generations_rate_only_off_forests(shape):
    """lp_fits takes column generation's rate where it is used and the graph has a cycle; on a forest
    (a chain) dual simplex's, so the routes there stay as before (the Lagrangian is exact there)."""
    problem = _binding(40, 0, 0.3, shape, (8, 16))
    assert by_columns(problem)
    # a budget whose LP share fits column generation's estimate but not dual simplex's
    nominal = config_model_elements(problem) * (S_PER_LP_ELEMENT + S_PER_COLGEN_ELEMENT) / 2 / LP_SHARE
    assert lp_fits(problem, nominal) is (shape == "dag")


def test_work_limit_stops_column_generation_the_same_way_each_time():
    problem = _binding(60, 1, 0.4)
    model = config_model(problem)
    first = _lp(model, "solve_lp_by_columns", iteration_limit=5)
    second = _lp(model, "solve_lp_by_columns", iteration_limit=5)
    assert first.status is second.status is Status.TIME_LIMIT and first.work_limit and second.work_limit


def test_fixing_with_column_generation_duals_never_cuts_a_fitting_plan():
    """lp_relaxation's bound, per-candidate and per-pair bounds from column generation's duals stay at
    or below the cost of every fitting plan using them (brute force on tiny binding instances)."""
    checked = 0
    for case_id, problem in tiny_cases(seeds=6, max_nodes=6):
        if problem.memory_limit is None:
            continue
        model = config_model(problem)
        solution = _lp(model, "solve_lp_by_columns")
        if solution.status is not Status.OPTIMAL:
            continue
        relaxation = lp_relaxation(problem, model, solution)
        feasible = [plan for plan in _plans(problem) if problem.memory_ok(plan)]
        assert_bounds_below_plans(problem, relaxation, feasible, case_id)
        checked += bool(feasible)
    assert checked >= 10


_TWO_BATCHES = """
import sys
import numpy as np
from solver_plan.intra.backends.highs import ColumnLp, solve_lp_relaxation
from solver_plan.intra.linear_model import config_model, config_model_elements
from solver_plan.intra.random_instances import random_problem
from solver_plan.result import Status
model = config_model(random_problem(40, seed=2, shape="dag", memory_tightness=0.4, max_candidates=8))
whole = solve_lp_relaxation(model)
lp = ColumnLp(model)
order = np.random.default_rng(0).permutation(model.num_columns)
lp.add_columns(order[: model.num_columns // 2])
first = lp.solve()
lp.add_columns(order[model.num_columns // 2:])
before = lp.iterations
second = lp.solve()
assert second.status is Status.OPTIMAL, second.status
assert abs(second.objective - whole.objective) <= 1e-7 * (1 + abs(whole.objective)), (second.objective, whole.objective)
values = np.asarray(second.column_values)
assert abs(model.cost @ values + model.offset - second.objective) <= 1e-6 * (1 + abs(whole.objective))
assert lp.iterations > before
print("ok", first.status.value, before, lp.iterations)
"""


def test_column_lp_adds_columns_and_resolves_warm():
    """ColumnLp (in a process of its own: highspy is never imported in the planner's process): every
    column added in two batches, in a random order, gives the whole LP's optimum and column values
    in the model's own order."""
    run = subprocess.run([sys.executable, "-c", _TWO_BATCHES], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]


@pytest.mark.parametrize("seed", range(3))
def test_milp_with_column_generation_agrees_with_reference_highs(seed):
    """milp's LP route (column generation: 8-16 candidates a node, over COLGEN_MIN_MEAN_CANDIDATES)
    proves the optimum reference-highs proves, on binding instances of 20-30 operators."""
    problem = _binding(20 + 5 * seed, seed, 0.35, candidates=(8, 16))
    assert by_columns(problem)
    ours = solve(problem, "milp", deadline=time_budget(60))
    reference = solve(problem, "reference-highs", deadline=time_budget(60))
    assert ours.status is reference.status, (ours.notes, reference.notes)
    if reference.status is Status.OPTIMAL:
        assert ours.objective == pytest.approx(reference.objective, rel=1e-6)
        assert any("column generation" in note for note in ours.notes), ours.notes
        assert np.isfinite(ours.lower_bound)
