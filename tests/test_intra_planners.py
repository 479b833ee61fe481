"""Shared cases on every registered configuration planner: valid results, statuses that mean what
they say, and no heuristic below a proven bound."""
from __future__ import annotations

import pytest

from intra_cases import medium_cases, tiny_cases
from solver_plan.deadline import time_budget
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.milp import plan_milp
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.planners import planners
from solver_plan.result import Status

# planners of the sum objective (ConfigProblem.objective); others (milp-load: busiest device /
# critical path) are compared on their own objective by their own tests
PLANNERS = sorted(name for name, info in planners("config").items() if info.objective == "sum")
TINY = tiny_cases(seeds=4)
MEDIUM = medium_cases()


@pytest.mark.parametrize("planner", PLANNERS)
def test_every_planner_gives_valid_results_never_below_the_optimum(planner):
    for case_id, problem in TINY:
        oracle = plan_brute(problem)
        result = solve(problem, planner, deadline=time_budget(30))
        assert validate_config_result(problem, result) == [], case_id
        if result.status.has_solution:
            assert oracle.status is Status.OPTIMAL, case_id
            assert result.objective >= oracle.objective - 1e-7, case_id
            if result.lower_bound is not None:
                assert result.lower_bound <= oracle.objective + 1e-7, case_id
        if result.status is Status.OPTIMAL:
            assert result.objective == pytest.approx(oracle.objective), case_id
        if result.status is Status.INFEASIBLE and planners("config")[planner].exact:
            assert oracle.status is Status.INFEASIBLE, case_id


@pytest.mark.parametrize("planner", PLANNERS)
def test_every_planner_on_medium_cases_stays_above_the_milp_optimum(planner):
    for case_id, problem in MEDIUM:
        optimum = plan_milp(problem)
        assert optimum.status is Status.OPTIMAL
        result = solve(problem, planner, deadline=time_budget(20))
        assert validate_config_result(problem, result) == [], case_id
        if result.status.has_solution:
            assert result.objective >= optimum.lower_bound - 1e-6, case_id


def test_greedy_is_close_to_the_optimum_on_medium_cases():
    for case_id, problem in MEDIUM:
        optimum = plan_milp(problem).objective
        assert solve(problem, "greedy").objective <= 1.10 * optimum, case_id


def test_registry_lists_the_issue_planners():
    assert {"milp", "cpsat", "elimination", "greedy", "brute"} <= set(PLANNERS)
    assert planners("config")["milp"].exact and not planners("config")["greedy"].exact
