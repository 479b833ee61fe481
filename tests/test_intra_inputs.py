"""Bad input gives a clear InputError; impossible memory limits give INFEASIBLE with a diagnosis."""
from __future__ import annotations

import pytest

from solver_plan.deadline import time_budget
from solver_plan.errors import InputError
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.result import Status

PROBLEM = random_problem(6, seed=1, shape="dag")


def test_unknown_planner_is_an_input_error():
    with pytest.raises(InputError, match="unknown planner 'nope'"):
        solve(PROBLEM, "nope")


@pytest.mark.parametrize("time_limit", [0, -1, 0.0])
def test_non_positive_time_limit_is_an_input_error(time_limit):
    with pytest.raises(InputError, match="time limit must be"):
        solve(PROBLEM, "greedy", deadline=time_budget(time_limit))


@pytest.mark.parametrize("memory", [0, -5.0])
def test_non_positive_memory_limit_is_an_input_error(memory):
    with pytest.raises(InputError, match="memory limit must be positive"):
        solve(PROBLEM.with_memory_limit(memory), "milp")


def test_unknown_milp_backend_is_an_input_error():
    with pytest.raises(InputError, match="unknown MILP backend"):
        solve(PROBLEM, "milp", backend="gurobi")


def test_unknown_random_shape_is_an_input_error():
    with pytest.raises(InputError, match="unknown shape"):
        random_problem(5, shape="tree")


@pytest.mark.parametrize("planner", ["milp", "cpsat", "elimination", "greedy", "brute", "milp-load"])
def test_impossible_memory_limit_is_infeasible_with_the_least_peak(planner):
    problem = PROBLEM.with_memory_limit(1.0)
    result = solve(problem, planner)
    assert result.status is Status.INFEASIBLE
    assert result.assignment is None
    assert any("least possible memory on the busiest device" in note and "(exactly) vs limit 1 B" in note
               for note in result.notes), result.notes


def test_brute_force_refuses_large_instances():
    problem = random_problem(40, seed=0, shape="dag")
    result = plan_brute(problem)
    assert result.status is Status.ERROR
    assert "brute force refuses" in result.notes[0]
