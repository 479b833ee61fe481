"""Pair exchanges (pair_search): never worse, memory kept, never below the brute-force optimum; a
hand-computed case where local search is stuck and one pair reaches the optimum; an adjacent pair
whose shared edge makes the exchange dearer is not taken."""
from __future__ import annotations

import itertools

import numpy as np

from intra_cases import tiny_cases
from solver_plan.cost.config import ParallelConfig
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.local_search import improve
from solver_plan.intra.pair_search import improve_by_pairs
from solver_plan.intra.problem import ConfigProblem


def _two_nodes(edge_cost: float | None) -> ConfigProblem:
    """Two nodes on one device, limit 10 bytes. a: (cost 5, 5 B) or (1, 8 B); b: (1, 5 B) or (2, 2 B).
    From (a0, b0) (cost 6, 10 B) a alone to a1 breaks the limit (13 B) and b alone to b1 costs more
    (7): local search is stuck. Together (a1, b1) cost 3 in 10 B, unless an edge a-b costs
    `edge_cost` there (other pairs 0)."""
    device = (0,)
    edges, edge_costs = (), ()
    if edge_cost is not None:
        edges, edge_costs = ((0, 1),), (np.array([[0.0, 0.0], [0.0, edge_cost]]),)
    config = ParallelConfig((("sample", 1),), device)
    return ConfigProblem(names=("a", "b"), candidates=((config, config), (config, config)),
                         node_costs=(np.array([5.0, 1.0]), np.array([1.0, 2.0])),
                         node_memory=(np.array([5.0, 8.0]), np.array([5.0, 2.0])),
                         node_devices=((device, device), (device, device)), edges=edges,
                         edge_costs=edge_costs, num_devices=1, name="two-nodes").with_memory_limit(10)


def test_local_search_is_stuck_where_one_pair_reaches_the_optimum():
    problem = _two_nodes(None)
    start = (0, 0)
    assert problem.objective(start) == 6.0 and problem.memory_ok(start)
    assert improve(problem, start) == start
    plan = improve_by_pairs(problem, start)
    assert plan == (1, 1) and problem.objective(plan) == 3.0 and problem.memory_ok(plan)
    assert problem.objective(plan) == plan_brute(problem).objective


def test_an_adjacent_pair_made_dearer_by_its_edge_is_not_taken():
    # the two changes' separate cost changes add to -3, but the edge adds 10 at (a1, b1): 13 > 6
    problem = _two_nodes(10.0)
    assert improve_by_pairs(problem, (0, 0)) == (0, 0)
    # with the edge at 1 the pair costs 4 < 6: taken (the optimum)
    cheaper = _two_nodes(1.0)
    plan = improve_by_pairs(cheaper, (0, 0))
    assert plan == (1, 1) and cheaper.objective(plan) == plan_brute(cheaper).objective == 4.0


def test_never_worse_memory_kept_and_never_below_the_optimum():
    improved = 0
    for case_id, problem in tiny_cases(seeds=6, max_nodes=6):
        if problem.memory_limit is None:
            continue
        optimum = plan_brute(problem).objective
        plans = itertools.product(*(range(len(c)) for c in problem.node_costs))
        for start in itertools.islice((p for p in plans if problem.memory_ok(p)), 40):
            plan = improve_by_pairs(problem, start)
            assert problem.memory_ok(plan), (case_id, start)
            assert problem.objective(plan) <= problem.objective(start) + 1e-12, (case_id, start)
            assert problem.objective(plan) >= optimum - 1e-9, (case_id, start)
            improved += problem.objective(plan) < problem.objective(start) - 1e-9
    assert improved >= 20


def test_without_a_memory_limit_the_plan_comes_back_as_it_is():
    problem = _two_nodes(None).with_memory_limit(None)
    assert improve_by_pairs(problem, (0, 0)) == (0, 0)
