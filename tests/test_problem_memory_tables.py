"""ConfigProblem's memory tables (least_memory_matrix, worst_memory_per_device) by hand on a tiny
problem, and their two routes (entries a chunk of nodes at once; node by node, where candidates use
many devices) giving the same bits on generated problems."""
from __future__ import annotations

import numpy as np
import pytest

from solver_plan.cost.config import ParallelConfig
from solver_plan.intra import problem as problem_module
from solver_plan.intra.problem import ConfigProblem
from solver_plan.suite import resolve_problem


def _tiny() -> ConfigProblem:
    """Node a: 5 bytes on {0, 1} or 3 on {1, 2}; node b: 2 bytes on {0} or 1 on {0, 1, 2}."""
    config = ParallelConfig((("sample", 1),), (0,))
    return ConfigProblem(names=("a", "b"), candidates=((config, config), (config, config)),
                         node_costs=(np.array([1.0, 2.0]), np.array([1.0, 2.0])),
                         node_memory=(np.array([5.0, 3.0]), np.array([2.0, 1.0])),
                         node_devices=(((0, 1), (1, 2)), ((0,), (0, 1, 2))),
                         edges=((0, 1),), edge_costs=(np.zeros((2, 2)),), num_devices=3)


@pytest.mark.parametrize("entries_a_candidate", [0, 64])  # 0: node by node; 64: entries at once
def test_memory_tables_by_hand(monkeypatch, entries_a_candidate):
    monkeypatch.setattr(problem_module, "ENTRIES_A_CANDIDATE", entries_a_candidate)
    problem = _tiny()
    # a must put its least (3) on device 1, the one both its candidates use; b its least (1) on device 0
    assert problem.least_memory_matrix().tolist() == [[0.0, 3.0, 0.0], [1.0, 0.0, 0.0]]
    # per device the largest a node may put there: a 5, 5, 3; b 2, 1, 1
    assert problem.worst_memory_per_device().tolist() == [7.0, 6.0, 4.0]


@pytest.mark.parametrize("spec", ["random-dag:nodes=400,candidates=4-30,seed=2,memory=binding,devices=16",
                                  "skip-chain:nodes=200,candidates=2-6,seed=1,devices=2",
                                  "series-parallel:nodes=300,candidates=2-126,seed=4,devices=32"])
def test_both_routes_give_the_same_bits(monkeypatch, spec):
    at_once, by_node = resolve_problem(spec), resolve_problem(spec)  # _worst_memory is cached per problem
    tables = []
    for problem, entries_a_candidate in ((at_once, 64), (by_node, 0)):
        monkeypatch.setattr(problem_module, "ENTRIES_A_CANDIDATE", entries_a_candidate)
        tables.append((problem.least_memory_matrix(), problem.worst_memory_per_device()))
    (least, worst), (least_by_node, worst_by_node) = tables
    assert np.array_equal(least, least_by_node) and worst.tobytes() == worst_by_node.tobytes()
    assert worst.max() > 0
