"""Forest DP, Lagrangian relaxation of the memory rows, fixing by its bounds, and the exact
planners' time budget, against brute force on tiny instances."""
from __future__ import annotations

import itertools
import time

import numpy as np
import pytest

from intra_cases import tiny_cases
from solver_plan.deadline import Deadline, time_budget
from solver_plan.intra import warm_start
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.forest_dp import Forest, solve_forest, spanning_forest
from solver_plan.intra.lagrangian import lagrangian_dual
from solver_plan.intra.lagrangian_fixing import lagrangian_restriction
from solver_plan.intra.cpsat import plan_cpsat
from solver_plan.intra.milp import plan_milp
from solver_plan.intra.random_instances import random_problem
from solver_plan.result import Status


def _plans(problem):
    return itertools.product(*(range(len(c)) for c in problem.node_costs))


def _binding_cases():
    return [(case_id, problem) for case_id, problem in tiny_cases(seeds=6, max_nodes=6)
            if problem.memory_limit is not None]


@pytest.mark.parametrize("shape", ["chain", "dag"])
@pytest.mark.parametrize("seed", range(4))
def test_forest_dp_is_exact_on_forests_and_a_lower_bound_elsewhere(shape, seed):
    problem = random_problem(5, seed=seed, shape=shape, extra_edge_ratio=0.6)
    solution = solve_forest(problem.node_costs, problem.edges, problem.edge_costs)
    is_forest = spanning_forest(problem.num_nodes, problem.edges, problem.edge_costs).all()
    least = {}  # (node, candidate) -> least objective of a plan using it
    for plan in _plans(problem):
        cost = problem.objective(plan)
        for node, choice in enumerate(plan):
            least[node, choice] = min(least.get((node, choice), np.inf), cost)
    optimum = min(least.values())
    assert solution.value <= optimum + 1e-9
    assert problem.objective(solution.plan) >= optimum - 1e-9
    for (node, choice), value in least.items():
        assert solution.min_marginals[node][choice] <= value + 1e-9
        if is_forest:
            assert solution.min_marginals[node][choice] == pytest.approx(value)
    if is_forest:
        assert solution.value == pytest.approx(optimum)
        assert problem.objective(solution.plan) == pytest.approx(optimum)


def test_level_wise_passes_equal_the_node_by_node_ones():
    from solver_plan.suite.generators import resolve_problem
    problem = resolve_problem("random-dag:nodes=400,candidates=2-9,seed=5")
    forest = Forest(problem.node_costs, problem.edges, problem.edge_costs)
    assert forest.levels is not None  # shallow: a random DAG's spanning tree
    costs = [c + 0.1 * np.arange(len(c)) for c in problem.node_costs]
    by_level = forest.solve(costs)
    forest.levels = None
    by_node = forest.solve(costs)
    assert by_level.value == pytest.approx(by_node.value)
    assert by_level.plan == by_node.plan
    for a, b in zip(by_level.min_marginals, by_node.min_marginals):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-9)


def test_lagrangian_bound_never_above_the_optimum_and_candidate_bounds_hold():
    checked = 0
    for case_id, problem in _binding_cases():
        relaxation = lagrangian_dual(problem)
        if relaxation is None:  # the limit cannot bind
            continue
        feasible = [plan for plan in _plans(problem) if problem.memory_ok(plan)]
        if not feasible:
            continue
        optimum = min(problem.objective(plan) for plan in feasible)
        assert relaxation.bound <= optimum + 1e-9, case_id
        for plan in feasible:
            cost = problem.objective(plan)
            for node, choice in enumerate(plan):
                assert relaxation.candidate_bounds[node][choice] <= cost + 1e-9, (case_id, plan)
        checked += 1
    assert checked >= 10


def test_restriction_keeps_an_optimal_plan_and_a_valid_bound():
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        restriction = lagrangian_restriction(problem, Deadline(None))
        if restriction is None or oracle.status is not Status.OPTIMAL:
            continue
        assert restriction.bound <= oracle.objective + 1e-9, case_id
        if restriction.incumbent is not None:
            assert problem.memory_ok(restriction.incumbent), case_id
        inner = plan_brute(restriction.problem)
        assert inner.status is Status.OPTIMAL, case_id
        assert problem.objective(restriction.decode(inner.assignment)) == pytest.approx(oracle.objective), case_id
        assert restriction.problem_bound(inner.objective) <= oracle.objective + 1e-9, case_id


@pytest.mark.parametrize("planner, options", [("milp", {}), ("milp", {"root_lp": False}),
                                              ("milp", {"lagrangian": False}), ("cpsat", {})])
def test_exact_planners_agree_with_brute_force_under_binding_memory(planner, options):
    plan = {"milp": plan_milp, "cpsat": plan_cpsat}[planner]
    for case_id, problem in _binding_cases()[::2]:
        oracle = plan_brute(problem)
        result = plan(problem, deadline=time_budget(30), **options)
        assert result.status is oracle.status, (case_id, result.notes)
        if oracle.status is Status.OPTIMAL:
            assert result.objective == pytest.approx(oracle.objective, rel=1e-6), case_id
            assert result.lower_bound <= oracle.objective + 1e-9, case_id
            assert problem.memory_ok(result.assignment), case_id


@pytest.mark.parametrize("root_lp", [False, True])
def test_lagrangian_proves_a_memory_bound_chain_optimal(root_lp):
    """The Lagrangian route (root_lp off; on, the root LP takes a model this small) and the LP route
    prove the same optimum."""
    problem = random_problem(60, seed=3, shape="chain", max_candidates=6, memory_tightness=0.45)
    result = plan_milp(problem, deadline=time_budget(30), root_lp=root_lp)
    assert result.status is Status.OPTIMAL, result.notes
    route = "root LP: " if root_lp else "lagrangian: "
    assert any(note.startswith(route) and (root_lp or "exact inner minimum" in note) for note in result.notes)
    assert result.lower_bound == pytest.approx(result.objective, rel=1e-6)


def test_slow_heuristics_leave_the_milp_its_turn(monkeypatch):
    """Heuristics that run until their clock ends (as repair did at 10,000 operators) get only
    their share: the MILP still runs and proves the optimum."""
    real = warm_start.heuristic_plans

    def slow_heuristics(problem, deadline=None, **kwargs):
        while deadline is not None and not deadline.expired():
            time.sleep(0.01)
        return real(problem, deadline, **kwargs)

    monkeypatch.setattr(warm_start, "heuristic_plans", slow_heuristics)
    problem = random_problem(8, seed=2, shape="dag", memory_tightness=0.6)
    oracle = plan_brute(problem)
    result = plan_milp(problem, deadline=time_budget(6))
    assert result.status is oracle.status, result.notes
    assert result.objective == pytest.approx(oracle.objective)
    (timing,) = [note for note in result.notes if note.startswith("time: ")]
    seconds = dict(part.rsplit(" ", 2)[:2] for part in timing[len("time: "):].split(", "))
    assert float(seconds["heuristics"]) <= 0.5 * 6
    assert "milp" in seconds


def test_a_failing_solver_under_binding_memory_is_reported_and_the_lagrangian_plan_kept(monkeypatch):
    from solver_plan.intra import milp
    from solver_plan.intra.linear_model import SolveOutcome

    monkeypatch.setattr(milp.isolated, "call", lambda *args, **kwargs: SolveOutcome("error", notes=("boom",)))
    problem = random_problem(30, seed=3, shape="chain", max_candidates=5, memory_tightness=0.5)
    result = plan_milp(problem, deadline=time_budget(20))
    assert result.solver_failure is not None and "boom" in result.solver_failure
    assert result.assignment is not None and problem.memory_ok(result.assignment)
    assert result.status is Status.FEASIBLE
