"""The edge-dropping relaxation gives a proven lower bound (exact on series-parallel graphs)."""
from __future__ import annotations

import pytest

from intra_cases import tiny_cases
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.relaxation import edge_dropping_relaxation
from solver_plan.result import Status


def test_bound_never_exceeds_the_optimum_and_the_plan_is_priced_honestly():
    for case_id, problem in tiny_cases(seeds=6):
        oracle = plan_brute(problem)
        relaxation = edge_dropping_relaxation(problem)
        free = plan_brute(problem.with_memory_limit(None))
        assert relaxation.lower_bound <= free.objective + 1e-9, case_id
        assert problem.objective(relaxation.assignment) >= free.objective - 1e-9, case_id
        if oracle.status is Status.OPTIMAL:
            assert relaxation.lower_bound <= oracle.objective + 1e-9, case_id


@pytest.mark.parametrize("seed", range(5))
def test_relaxation_is_exact_on_series_parallel_graphs(seed):
    problem = random_problem(50, seed=seed, shape="series_parallel")
    relaxation = edge_dropping_relaxation(problem)
    assert relaxation.dropped_edges == 0
    assert problem.objective(relaxation.assignment) == pytest.approx(relaxation.lower_bound)
