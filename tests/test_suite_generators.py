"""Generated problems of the standard suite: deterministic, validated specs, memory levels that mean
what they say, shapes that do not fold, and planners that agree with brute force on them."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from solver_plan.deadline import time_budget
from solver_plan.errors import InputError
from solver_plan.intra.simplify import simplify
from solver_plan.intra.solve import solve
from solver_plan.suite import is_problem_spec, parse_problem_spec, resolve_problem
from solver_plan.suite.generators import generate


def same(a, b) -> bool:
    return (a.edges == b.edges and a.memory_limit == b.memory_limit and a.node_devices == b.node_devices
            and all(np.array_equal(x, y) for x, y in zip(a.node_costs + a.edge_costs, b.node_costs + b.edge_costs))
            and all(np.array_equal(x, y) for x, y in zip(a.node_memory, b.node_memory)))


@pytest.mark.parametrize("family", ["random-dag", "series-parallel", "skip-chain"])
def test_a_spec_names_one_problem(family):
    spec = f"{family}:nodes=60,candidates=6-30,seed=4,memory=binding"
    first, again = resolve_problem(spec), resolve_problem(spec)
    assert same(first, again)
    assert not same(first, resolve_problem(spec.replace("seed=4", "seed=5")))
    assert first.num_nodes == 60 and first.name == f"{spec},devices=8"
    assert all(6 <= len(costs) <= 30 for costs in first.node_costs)
    # the memory level changes the limit only
    unlimited = resolve_problem(spec.replace("binding", "none"))
    assert unlimited.memory_limit is None and same(first.with_memory_limit(None), unlimited)


@pytest.mark.parametrize("family", ["random-dag", "series-parallel", "skip-chain"])
def test_shapes_are_connected_dags_that_do_not_fold(family):
    problem = resolve_problem(f"{family}:nodes=200,candidates=6-12,seed=1")
    assert all(u != v for u, v in problem.edges) and len(set(problem.edges)) == len(problem.edges)
    order = {}  # acyclic: a topological order exists
    import graphlib
    sorter = graphlib.TopologicalSorter({v: set() for v in range(problem.num_nodes)})
    for u, v in problem.edges:
        sorter.add(v, u)
    order = list(sorter.static_order())
    assert sorted(order) == list(range(problem.num_nodes))
    parent = list(range(problem.num_nodes))  # connected: union-find over the edges

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x
    for u, v in problem.edges:
        parent[find(u)] = find(v)
    assert len({find(v) for v in range(problem.num_nodes)}) == 1
    # exact simplification (DeePa elimination, dominated candidates) leaves most of the problem
    assert simplify(problem).problem.num_nodes >= 0.3 * problem.num_nodes


def brute_force(problem):
    best = None
    for plan in itertools.product(*(range(len(costs)) for costs in problem.node_costs)):
        if problem.memory_ok(plan):
            value = problem.objective(plan)
            best = value if best is None or value < best else best
    return best


def test_memory_levels_mean_what_they_say():
    spec = parse_problem_spec("random-dag:nodes=6,candidates=3,seed=2,devices=2,memory=binding")
    binding = generate(spec)
    spread = tuple(0 for _ in range(binding.num_nodes))  # every node on all devices
    least_peak = binding.device_memory(spread).max()
    assert np.allclose(binding.device_memory(spread), least_peak)
    peaks = [binding.device_memory(plan).max()
             for plan in itertools.product(*(range(len(c)) for c in binding.node_costs))]
    assert min(peaks) == least_peak  # spreading is the least possible peak, as the docstring argues
    cheapest = tuple(int(np.argmin(costs)) for costs in binding.node_costs)
    assert binding.memory_ok(spread) and not binding.memory_ok(cheapest)
    infeasible = generate(parse_problem_spec("random-dag:nodes=6,candidates=3,seed=2,devices=2,memory=infeasible"))
    assert infeasible.memory_limit < least_peak
    assert brute_force(infeasible) is None and solve(infeasible, "milp", deadline=time_budget(20)).status.value == "INFEASIBLE"


@pytest.mark.parametrize("family", ["random-dag", "series-parallel", "skip-chain"])
def test_milp_finds_the_brute_force_optimum_under_a_binding_limit(family):
    problem = resolve_problem(f"{family}:nodes=7,candidates=3,seed=3,devices=2,memory=binding")
    result = solve(problem, "milp", deadline=time_budget(20))
    assert result.status.value == "OPTIMAL" and result.objective == pytest.approx(brute_force(problem))


@pytest.mark.parametrize("spec, message", [
    ("random-dag:candidates=6", "needs nodes=N"),
    ("random-dag:nodes=10,memory=tight", "memory must be one of none, binding, infeasible"),
    ("random-dag:nodes=10,candidates=6-40", "candidates must be a range within 2..30 on 8 devices"),
    ("random-dag:nodes=10,candidates=9-6", "candidates must be a range"),
    ("skip-chain:nodes=10,devices=3", "devices must be one of"),
    ("skip-chain:nodes=1", "nodes must be in 2..20000"),
    ("skip-chain:nodes=ten", "nodes must be an integer"),
    ("skip-chain:nodes=10,width=3", "skip-chain has no option 'width'"),
    ("skip-chain:nodes=10,nodes=11", "'nodes' given twice"),
    ("skip-chain:nodes", "expected 'key=value' in 'nodes'"),
])
def test_bad_specs_say_what_is_wrong(spec, message):
    assert is_problem_spec(spec)
    with pytest.raises(InputError, match=message):
        parse_problem_spec(spec)


def test_other_model_specs_are_not_problem_specs():
    assert not is_problem_spec("gpt2:layers=2") and not is_problem_spec("data/x/graph.txt")
