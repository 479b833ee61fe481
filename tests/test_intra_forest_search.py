"""Forest re-solves: the chosen sets are forests, the plan never gets worse, memory is kept."""
from __future__ import annotations

import numpy as np

from intra_cases import tiny_cases
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.forest_search import improve_by_forests, random_forest
from solver_plan.intra.random_instances import random_problem


def test_chosen_nodes_induce_a_forest():
    problem = random_problem(200, seed=1, shape="dag", extra_edge_ratio=1.0)
    chosen = random_forest(problem.neighbours(), np.random.default_rng(0))
    inner = [(u, v) for u, v in problem.edges if chosen[u] and chosen[v]]
    assert len(inner) < chosen.sum()  # acyclic: fewer edges than nodes (checked fully below)
    parent = {node: node for node in np.flatnonzero(chosen)}

    def root(node):
        while parent[node] != node:
            node = parent[node]
        return node

    for u, v in inner:
        assert root(u) != root(v)
        parent[root(u)] = root(v)


def test_never_worse_than_the_start_and_memory_kept():
    rng = np.random.default_rng(0)
    for case_id, problem in tiny_cases(seeds=4):
        oracle = plan_brute(problem)
        start = oracle.assignment if oracle.assignment is not None else tuple(
            int(rng.integers(len(c))) for c in problem.node_costs)
        plan = improve_by_forests(problem, start, rounds=5)
        assert problem.objective(plan) <= problem.objective(start) + 1e-12, case_id
        if problem.memory_ok(start):
            assert problem.memory_ok(plan), case_id


def test_a_chain_is_solved_exactly_in_one_round():
    problem = random_problem(7, seed=2, shape="chain")
    start = tuple(0 for _ in problem.node_costs)
    plan = improve_by_forests(problem, start, rounds=1)
    assert abs(problem.objective(plan) - plan_brute(problem).objective) < 1e-9
