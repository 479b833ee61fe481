"""Exact planners agree with brute force on random tiny instances (series-parallel and not, with
and without binding memory limits), with and without simplification."""
from __future__ import annotations

import pytest

from intra_cases import tiny_cases
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.result import Status

CASES = tiny_cases()
IDS = [case_id for case_id, _ in CASES]
EXACT = [("milp", {"backend": "highs"}), ("milp", {"backend": "cbc"}), ("cpsat", {}), ("elimination", {})]


def _agrees(problem, result, oracle):
    assert validate_config_result(problem, result) == []
    assert result.status is oracle.status, result.notes
    if oracle.status is Status.OPTIMAL:
        assert result.objective == pytest.approx(oracle.objective, rel=1e-7, abs=1e-9)
        assert result.lower_bound == pytest.approx(oracle.objective, rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("planner, options", EXACT, ids=[f"{n}-{o.get('backend', '')}" for n, o in EXACT])
def test_exact_planners_match_brute_force(planner, options):
    for case_id, problem in CASES:
        oracle = plan_brute(problem)
        # CBC runs in a subprocess per solve; once per case keeps the suite fast
        for simplify in ((False,) if options.get("backend") == "cbc" else (False, True)):
            result = solve(problem, planner, simplify=simplify, **options)
            try:
                _agrees(problem, result, oracle)
            except AssertionError as error:
                raise AssertionError(f"{case_id} simplify={simplify}: {error}") from error


def test_brute_force_is_its_own_oracle_through_solve():
    for _, problem in CASES[:20]:
        assert solve(problem, "brute").objective == plan_brute(problem).objective


def test_infeasible_cases_carry_a_memory_diagnosis():
    infeasible = [p for _, p in CASES if plan_brute(p).status is Status.INFEASIBLE]
    assert infeasible, "the shared cases should include infeasible memory limits"
    for problem in infeasible:
        result = solve(problem, "milp")
        assert result.status is Status.INFEASIBLE
        assert any("least possible memory on the busiest device" in note and "vs limit" in note
                   for note in result.notes), result.notes
