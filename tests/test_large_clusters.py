"""Device sets of any size: clusters of 1, 63, 64, 65 and 4,096 nodes plan without overflow
(a node bitmask in int64 used to fail from 64 nodes on)."""
from __future__ import annotations

import numpy as np
import pytest

from solver_plan.deadline import time_budget
from solver_plan.cluster import Cluster, LinkLevel
from solver_plan.cluster.model import DeviceSpec, Link
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.redistribution import redistribution
from solver_plan.graph.zoo import build_model
from solver_plan.planning import plan_configuration


def _cluster(nodes: int, per_node: int = 1) -> Cluster:
    return Cluster(f"test-{nodes}x{per_node}", nodes, per_node, DeviceSpec("gpu", 1e14, 16e9),
                   Link(3e11), Link(1.25e10) if nodes > 1 else None)


@pytest.mark.parametrize("nodes", [1, 63, 64, 65, 4096])
def test_plan_runs_on_clusters_of_any_node_count(nodes):
    graph = build_model("mlp:layers=2,hidden=64,batch=64")
    plan = plan_configuration(graph, _cluster(nodes), "greedy", deadline=time_budget(30), max_candidates=4)
    assert plan.status.has_solution
    assert plan.objective_s is not None and np.isfinite(plan.objective_s)
    used = {d for op in plan.operators for d in op.devices}
    assert used and max(used) < nodes


@pytest.mark.parametrize("nodes", [63, 64, 65, 4096])
def test_redistribution_level_across_many_nodes(nodes):
    """A tensor moved from the last node to the first must cross nodes; kept in place it moves nothing."""
    cluster = _cluster(nodes)
    rank = 1
    box = np.array([[[0, 8]]] * 1, dtype=np.int64).reshape(1, rank, 2)
    first = ParallelConfig((("sample", 1),), (0,))
    last = ParallelConfig((("sample", 1),), (nodes - 1,))
    elements, level = redistribution(cluster, [first, last], [box, box], [last], [box])
    assert elements.shape == (2, 1) and level.shape == (2, 1)
    assert elements[0, 0] == 8 and level[0, 0] == int(LinkLevel.INTER_NODE)
    assert elements[1, 0] == 0 and level[1, 0] == int(LinkLevel.SAME_DEVICE)


@pytest.mark.parametrize("dense", [True, False])
def test_vectorised_memory_tables_match_the_per_node_definition(dense, monkeypatch):
    """least_memory_matrix / worst_memory_per_device (used on thousands of devices) against the
    per-node definitions they replace."""
    import solver_plan.intra.problem as problem_module
    from solver_plan.intra.memory_tracker import least_memory_per_device
    from solver_plan.intra.random_instances import random_problem
    if not dense:
        monkeypatch.setattr(problem_module, "DENSE_MEMORY_ENTRIES", 0)
    for seed in range(3):
        problem = random_problem(40, seed=seed, num_devices=8, memory_tightness=0.5)
        worst = np.zeros(problem.num_devices)
        for node in range(problem.num_nodes):
            per_device = np.zeros(problem.num_devices)
            for choice, devices in enumerate(problem.node_devices[node]):
                per_device[list(devices)] = np.maximum(per_device[list(devices)], problem.node_memory[node][choice])
            worst += per_device
        assert np.allclose(problem.worst_memory_per_device(), worst)
        table = problem.least_memory_matrix()
        if dense:
            assert np.allclose(table, [least_memory_per_device(problem, n) for n in range(problem.num_nodes)])
        else:
            assert table is None
