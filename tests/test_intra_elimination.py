"""DeePa elimination: exact on series-parallel graphs, honest about what it did elsewhere."""
from __future__ import annotations

import pytest

from solver_plan.intra.elimination import plan_elimination
from solver_plan.intra.milp import plan_milp
from solver_plan.intra.random_instances import random_problem
from solver_plan.result import Status


@pytest.mark.parametrize("seed", range(8))
def test_elimination_equals_the_proven_optimum_on_series_parallel_graphs(seed):
    problem = random_problem(20 + 15 * seed, seed=seed, shape="series_parallel", max_candidates=6)
    result = plan_elimination(problem)
    optimum = plan_milp(problem)
    assert optimum.status is Status.OPTIMAL
    assert result.status is Status.OPTIMAL
    assert result.objective == pytest.approx(optimum.objective, rel=1e-9)
    assert result.notes[0].startswith("fully eliminated")


def test_elimination_on_a_general_dag_says_it_solved_a_remainder():
    problem = random_problem(80, seed=4, shape="dag", extra_edge_ratio=0.8)
    result = plan_elimination(problem)
    assert result.status is Status.OPTIMAL
    assert "not fully eliminable" in result.notes[0]
    assert result.objective == pytest.approx(plan_milp(problem).objective, rel=1e-9)


def test_elimination_with_a_binding_memory_limit_stays_exact():
    problem = random_problem(40, seed=2, shape="series_parallel", memory_tightness=0.4)
    result = plan_elimination(problem)
    optimum = plan_milp(problem)
    assert result.status is optimum.status
    if optimum.status is Status.OPTIMAL:
        assert result.objective == pytest.approx(optimum.objective, rel=1e-9)
