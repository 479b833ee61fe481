"""The reference formulation (plain one-hot MILP in PuLP, as Alpa states it) against brute force,
and the promise that it is run as stated: nothing simplified, no warm start."""
from __future__ import annotations

import itertools

import pytest

from solver_plan.deadline import time_budget
from solver_plan.intra.reference import build_model, problem_data
from solver_plan.intra.solve import solve
from solver_plan.planners import get_planner
from solver_plan.suite import resolve_problem


def brute_force(problem):
    values = [problem.objective(plan) for plan in itertools.product(*(range(len(c)) for c in problem.node_costs))
              if problem.memory_ok(plan)]
    return min(values) if values else None


@pytest.mark.parametrize("planner", ["reference-cbc", "reference-highs"])
@pytest.mark.parametrize("memory", ["none", "binding"])
def test_reference_planners_find_the_brute_force_optimum(planner, memory):
    problem = resolve_problem(f"series-parallel:nodes=7,candidates=2-4,seed=5,devices=2,memory={memory}")
    result = solve(problem, planner, deadline=time_budget(30))
    assert result.status.value == "OPTIMAL"
    assert result.objective == pytest.approx(brute_force(problem), rel=1e-9)
    assert result.lower_bound == pytest.approx(result.objective, rel=1e-6)


@pytest.mark.parametrize("planner", ["reference-cbc", "reference-highs"])
def test_reference_planners_prove_infeasibility(planner):
    problem = resolve_problem("skip-chain:nodes=6,candidates=3,seed=1,devices=2,memory=infeasible")
    assert solve(problem, planner, deadline=time_budget(30)).status.value == "INFEASIBLE"


def test_the_model_is_the_plain_one_hot_model():
    problem = resolve_problem("random-dag:nodes=12,candidates=2-5,seed=2,devices=4,memory=binding")
    model, _ = build_model(problem_data(problem))
    pairs = sum(len(problem.node_costs[u]) * len(problem.node_costs[v]) for u, v in problem.edges)
    # a binary per candidate and per candidate pair of every edge, zero-cost pairs included
    assert model.numVariables() == problem.num_candidates + pairs
    assert all(variable.cat == "Integer" for variable in model.variables())
    rows_per_edge = [1 + len(problem.node_costs[u]) + len(problem.node_costs[v]) for u, v in problem.edges]
    assert model.numConstraints() == problem.num_nodes + sum(rows_per_edge) + problem.num_devices


def test_registered_without_simplification_or_warm_start():
    for name in ("reference-cbc", "reference-highs"):
        info = get_planner(name)
        assert info.simplify is False and info.exact is True and info.options == ()
    problem = resolve_problem("skip-chain:nodes=8,candidates=3,seed=4,devices=2")
    result = solve(problem, "reference-cbc", deadline=time_budget(30), warm_start=(0,) * 8)
    assert any(note.startswith("PuLP model:") for note in result.notes)
    assert not any("warm start" in note or "kept the" in note for note in result.notes)
