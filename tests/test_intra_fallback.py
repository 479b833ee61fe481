"""Warm starts, time limits, solver failures and the independent validator."""
from __future__ import annotations

import time
from dataclasses import replace

import pytest

from solver_plan.intra import isolated
from solver_plan.intra.greedy_plans import greedy_assignment
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import checked, solve
from solver_plan.intra.subprocess_guard import SUBPROCESS_GRACE_S, call_in_subprocess
from solver_plan.intra.validate import validate_config_result
from solver_plan.planners import load_builtin_planners
from solver_plan.result import ConfigResult, Status

HARD = random_problem(400, seed=7, shape="dag", extra_edge_ratio=1.5, max_candidates=8, memory_tightness=0.3)
load_builtin_planners()  # importing every planner package (ortools, pandas) is not the solve's time


@pytest.mark.parametrize("planner, options", [("milp", {}), ("cpsat", {}), ("milp", {"backend": "cbc"})])
def test_time_out_keeps_an_incumbent_no_worse_than_the_warm_start(planner, options):
    warm = greedy_assignment(HARD)
    started = time.perf_counter()
    result = solve(HARD, planner, time_limit=1.0, warm_start=warm, simplify=False, **options)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0 + SUBPROCESS_GRACE_S + isolated.GRACE_S + 1.0
    assert result.status.has_solution, result.notes
    assert validate_config_result(HARD, result) == []
    if HARD.memory_ok(warm):
        assert result.objective <= HARD.objective(warm) + 1e-9


def test_a_failing_solver_falls_back_to_the_heuristic(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("solver crashed")
    monkeypatch.setattr(isolated, "call", broken)
    problem = random_problem(30, seed=2, shape="dag")
    for planner in ("milp", "cpsat"):
        result = solve(problem, planner, simplify=False)
        assert result.status is Status.FEASIBLE
        assert any("solver failed; returned the" in note for note in result.notes), result.notes
        assert validate_config_result(problem, result) == []


def test_subprocess_guard_kills_an_overrunning_call():
    started = time.perf_counter()
    with pytest.raises(TimeoutError):
        call_in_subprocess(time.sleep, (30,), timeout=0.2)
    assert time.perf_counter() - started < 0.2 + SUBPROCESS_GRACE_S + 1.0


def test_validator_rejects_wrong_objective_memory_and_choices():
    problem = random_problem(5, seed=0, shape="chain")
    plan = (0, 0, 0, 0, 0)
    good = ConfigResult("x", Status.FEASIBLE, problem.objective(plan), None, 0.0, plan)
    assert validate_config_result(problem, good) == []
    assert validate_config_result(problem, replace(good, objective=good.objective + 1))
    assert validate_config_result(problem, replace(good, assignment=(0, 0, 0, 0)))
    assert validate_config_result(problem, replace(good, assignment=(0, 0, 0, 0, 99)))
    assert validate_config_result(problem, replace(good, lower_bound=good.objective + 1))
    assert validate_config_result(problem.with_memory_limit(1.0), good)
    assert validate_config_result(problem, replace(good, status=Status.OPTIMAL))  # no bound for OPTIMAL
    assert validate_config_result(problem, replace(good, status=Status.INFEASIBLE))  # plan with INFEASIBLE


def test_invalid_planner_output_becomes_an_error():
    problem = random_problem(5, seed=0, shape="chain")
    lying = ConfigResult("x", Status.FEASIBLE, -1.0, None, 0.0, (0, 0, 0, 0, 0))
    result = checked(problem, lying)
    assert result.status is Status.ERROR and result.assignment is None
    assert any(note.startswith("invalid:") for note in result.notes)


def test_validator_accepts_a_time_out_without_plan_but_not_a_feasible_one():
    problem = random_problem(5, seed=0, shape="chain")
    assert validate_config_result(problem, ConfigResult("x", Status.TIME_LIMIT, lower_bound=0.0)) == []
    assert validate_config_result(problem, ConfigResult("x", Status.FEASIBLE))
    assert validate_config_result(problem, ConfigResult("x", Status.OPTIMAL))
