"""Simplification is exact: the reduced optimum decodes to the original optimum."""
from __future__ import annotations

import numpy as np
import pytest

from intra_cases import tiny_cases
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.simplify import dominated_candidates, memory_can_bind, simplify
from solver_plan.result import Status


@pytest.mark.parametrize("case_id, problem", tiny_cases(seeds=6), ids=lambda value: value if isinstance(value, str) else "")
def test_reduced_optimum_decodes_to_the_original_optimum(case_id, problem):
    reduced = simplify(problem)
    oracle = plan_brute(problem)
    answer = plan_brute(reduced.problem)
    assert answer.status is oracle.status
    if oracle.status is Status.OPTIMAL:
        plan = reduced.decode(answer.assignment)
        assert problem.objective(plan) == pytest.approx(oracle.objective)
        assert answer.objective == pytest.approx(oracle.objective)  # reduced objective equals the original
        assert problem.memory_ok(plan)


def test_series_parallel_graphs_fold_to_one_node_without_memory_limit():
    for seed in range(10):
        problem = random_problem(60, seed=seed, shape="series_parallel")
        reduced = simplify(problem)
        assert reduced.problem.num_nodes == 1
        assert sorted(sum(reduced.problem.members, ())) == sorted(problem.names)


def test_every_reduced_plan_decodes_to_the_same_cost():
    problem = random_problem(40, seed=3, shape="dag")
    reduced = simplify(problem)
    rng = np.random.default_rng(0)
    for _ in range(20):
        plan = tuple(int(rng.integers(len(c))) for c in reduced.problem.node_costs)
        # the decoded plan is the best completion, so it costs exactly the reduced objective
        assert problem.objective(reduced.decode(plan)) == pytest.approx(reduced.problem.objective(plan))


def test_encode_inverts_decode_on_kept_nodes():
    problem = random_problem(30, seed=5, shape="dag")
    reduced = simplify(problem)
    plan = tuple(0 for _ in reduced.problem.node_costs)
    assert reduced.encode(reduced.decode(plan)) == plan


def test_dominated_candidate_is_dropped_and_identical_ones_keep_the_first():
    problem = random_problem(2, seed=0, shape="chain", min_candidates=3, max_candidates=3)
    costs = [np.array([1.0, 2.0, 1.0]), np.array([0.0, 0.0, 0.0])]
    edge = np.zeros((3, 3))
    from dataclasses import replace
    problem = replace(problem, node_costs=tuple(costs), edge_costs=(edge,))
    mask = dominated_candidates(problem, 0, problem.neighbours(), with_memory=False)
    assert mask.tolist() == [False, True, True]


def test_memory_that_cannot_bind_is_recognised():
    problem = random_problem(10, seed=1, shape="dag")
    assert not memory_can_bind(problem)
    assert not memory_can_bind(problem.with_memory_limit(1e12))
    assert memory_can_bind(problem.with_memory_limit(1.0))


def test_a_candidate_cheaper_in_every_context_dominates_under_binding_memory():
    """Candidate 1 costs 5 less than candidate 0 at node 0, and its edge row is worse by at most 3
    anywhere: with the same devices and no more memory it dominates, although no entrywise rule
    sees it; without the memory rule (limit cannot bind) the entrywise rule alone runs."""
    from dataclasses import replace
    problem = random_problem(2, seed=0, shape="chain", min_candidates=2, max_candidates=2)
    devices = ((0, 1), (0, 1))
    problem = replace(problem, node_costs=(np.array([10.0, 5.0]), np.array([0.0, 0.0])),
                      node_memory=(np.array([4.0, 4.0]), np.array([1.0, 1.0])), node_devices=(devices, devices),
                      edge_costs=(np.array([[0.0, 3.0], [3.0, 0.0]]),))
    adjacency = problem.neighbours()
    assert dominated_candidates(problem, 0, adjacency, with_memory=True).tolist() == [True, False]
    assert dominated_candidates(problem, 0, adjacency, with_memory=False).tolist() == [False, False]
    heavier = replace(problem, node_memory=(np.array([4.0, 5.0]), np.array([1.0, 1.0])))
    assert dominated_candidates(heavier, 0, adjacency, with_memory=True).tolist() == [False, False]


def test_dominance_under_binding_memory_keeps_the_optimum_of_generated_instances():
    from solver_plan.suite.generators import resolve_problem
    problem = resolve_problem("random-dag:nodes=8,candidates=3-4,seed=2,memory=binding,devices=4")
    reduced = simplify(problem)
    oracle = plan_brute(problem)
    answer = plan_brute(reduced.problem)
    assert oracle.status is Status.OPTIMAL and answer.objective == pytest.approx(oracle.objective)
