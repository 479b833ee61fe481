"""Issue 13 follow-up: a time-out returns the best plan so far (never ERROR, never "no plan" when a
heuristic has one), greedy fits memory by construction when the least-memory plan does, and
milp-load runs on the harness clock (an expired caller's deadline is a time-out, not bad input)."""
from __future__ import annotations

import time

import pytest

from solver_plan.deadline import Deadline, time_budget
from solver_plan.intra import edge_drop
from solver_plan.intra.greedy_plans import greedy_assignment, heuristic_plans, least_memory_plan, reserving_greedy
from solver_plan.simulate import milp_load
from solver_plan.intra.load_objective import load_objective
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.result import Status
from solver_plan.suite.generators import resolve_problem

BINDING = [f"{family}:nodes=120,candidates=6-30,seed={seed},memory=binding"
           for family in ("random-dag", "skip-chain", "series-parallel") for seed in (1, 2)]


def _expired() -> Deadline:
    clock = Deadline(1e-6)
    time.sleep(1e-3)
    assert clock.expired()
    return clock


@pytest.mark.parametrize("spec", BINDING)
def test_reserving_greedy_fits_whenever_the_least_memory_plan_fits(spec):
    problem = resolve_problem(spec)
    reference = least_memory_plan(problem)
    assert problem.memory_ok(reference)  # "binding" instances: spreading every node fits
    plan = reserving_greedy(problem, reference)
    assert problem.memory_ok(plan)
    assert problem.objective(plan) <= problem.objective(reference) + 1e-9
    # past the deadline the rest keep their reference choice: still a fitting plan
    assert problem.memory_ok(reserving_greedy(problem, reference, _expired()))


def test_heuristics_fit_where_plain_greedy_breaks_memory():
    broken = [spec for spec in BINDING if not resolve_problem(spec).memory_ok(greedy_assignment(resolve_problem(spec)))]
    assert broken, "plain greedy fits on every instance: this test no longer covers the corner it is about"
    for spec in broken:
        problem = resolve_problem(spec)
        plans = heuristic_plans(problem, _expired())
        assert plans and all(problem.memory_ok(plan) for plan in plans)


@pytest.mark.parametrize("planner", ["greedy", "milp", "edge-drop"])
def test_an_expired_deadline_on_a_binding_instance_still_gives_a_plan(planner):
    problem = resolve_problem(BINDING[0])
    result = solve(problem, planner, deadline=_expired())
    assert result.status in (Status.TIME_LIMIT, Status.FEASIBLE), result.notes
    assert result.assignment is not None and problem.memory_ok(result.assignment)
    assert validate_config_result(problem, result) == []


def test_edge_drop_falls_back_to_greedy_when_the_relaxation_times_out(monkeypatch):
    problem = resolve_problem(BINDING[1])
    monkeypatch.setattr(edge_drop, "edge_dropping_relaxation", lambda problem, deadline: None)
    result = solve(problem, "edge-drop", deadline=time_budget(30))
    assert result.assignment is not None and problem.memory_ok(result.assignment)
    assert any("time out during the relaxation" in note for note in result.notes)
    assert validate_config_result(problem, result) == []


def test_milp_load_takes_an_expired_deadline_as_a_time_out():
    problem = resolve_problem("series-parallel:nodes=40,candidates=6,seed=1,memory=binding")
    result = solve(problem, "milp-load", deadline=_expired())
    assert result.status is Status.TIME_LIMIT, result.notes
    assert result.assignment is not None and problem.memory_ok(result.assignment)
    assert result.objective == pytest.approx(load_objective(problem, result.assignment))
    assert validate_config_result(problem, result) == []


def test_milp_load_skips_a_model_too_big_to_build_and_returns_its_best_seed(monkeypatch):
    problem = resolve_problem("random-dag:nodes=60,candidates=6,seed=1,memory=none")
    monkeypatch.setattr(milp_load, "MAX_MODEL_ENTRIES", 10)
    built = []
    monkeypatch.setattr(milp_load, "load_model", lambda *args: built.append(1))
    result = solve(problem, "milp-load", deadline=time_budget(20))
    assert not built
    assert result.assignment is not None and result.lower_bound is None
    assert any("load MILP not built" in note for note in result.notes)
    assert result.objective == pytest.approx(load_objective(problem, result.assignment))
    assert validate_config_result(problem, result) == []


def test_milp_load_with_time_builds_the_model_and_proves_a_bound():
    problem = resolve_problem("series-parallel:nodes=20,candidates=6,seed=1,memory=none")
    result = solve(problem, "milp-load", deadline=time_budget(20))
    assert result.assignment is not None and result.lower_bound is not None
    assert result.lower_bound <= result.objective + 1e-9
    assert validate_config_result(problem, result) == []
