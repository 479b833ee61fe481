"""The per-operator validator's independent cost check (issue 21): a plan re-priced from the graph
and the cluster (`cost.plan_price.price_plan`), not from the problem's arrays or objective function.

It must agree with the problem on the committed examples and on random graphs, and catch a
corrupted cost that the array check (the reported objective against `ConfigProblem.objective`)
cannot see, because the planner and that check read the same corrupted numbers."""
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.plan_price import price_plan
from solver_plan.graph import GraphBuilder
from solver_plan.graph.resolve import resolve_model
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.planning import prepare_problem
from solver_plan.result import Status


def _configs(problem, assignment):
    return {name: problem.candidates[i][c] for i, (name, c) in enumerate(zip(problem.names, assignment))}


def _priced(problem, assignment):
    graph, _, cost_model = problem.context
    return price_plan(graph, cost_model, _configs(problem, assignment))


# the README's example (resnet50 on v100x8-nvlink) and configs/jobs/quickstart.yaml's models
EXAMPLES = [("resnet50:batch=32", "v100x8-nvlink", 8, None, "greedy"),
            ("mlp:layers=4,hidden=1024,batch=64", "v100x8-nvlink", 4, None, "milp"),
            ("mlp:layers=4,hidden=1024,batch=64", "v100x8-nvlink", 8, "fp16", "milp-load"),
            ("lenet:batch=256", "p100-4x4", 4, None, "milp"),
            ("gpt2:layers=2,hidden=256,heads=4,seq=64,vocab=1000,batch=8", "a100x8-80gb", 8, "bf16", "milp")]


@pytest.mark.parametrize("model, cluster, devices, precision, planner", EXAMPLES)
def test_repricing_agrees_on_the_committed_examples(model, cluster, devices, precision, planner):
    graph, machine = resolve_model(model), resolve_cluster(cluster, devices)
    problem, _ = prepare_problem(graph, machine, "device", max_candidates=12, precision=precision)
    result = solve(problem, planner, time_limit=30)
    assert result.status.has_solution and result.assignment is not None
    assert validate_config_result(problem, result) == []
    price = _priced(problem, result.assignment)
    operators, edges = problem.breakdown(result.assignment)
    assert price.operators_s == pytest.approx(operators, rel=1e-9)
    assert price.redistribution_s == pytest.approx(edges, rel=1e-9)
    assert np.allclose(price.device_memory, problem.device_memory(result.assignment), rtol=1e-9)


@st.composite
def graphs(draw):
    """A small random DAG of linear, element-wise and residual operators (branches and joins)."""
    batch = draw(st.sampled_from([4, 8, 16]))
    hidden = draw(st.sampled_from([8, 16, 32]))
    b = GraphBuilder("random")
    tensors = [b.input((batch, hidden), name="x")]
    for k in range(draw(st.integers(2, 7))):
        kind = draw(st.sampled_from(["linear", "relu", "add", "layernorm"]))
        source = tensors[draw(st.integers(0, len(tensors) - 1))]
        if kind == "linear":
            tensors.append(b.linear(source, hidden, name=f"fc{k}"))
        elif kind == "relu":
            tensors.append(b.relu(source, name=f"relu{k}"))
        elif kind == "layernorm":
            tensors.append(b.layernorm(source, name=f"ln{k}"))
        else:
            other = tensors[draw(st.integers(0, len(tensors) - 1))]
            tensors.append(b.add_(source, other, name=f"add{k}"))
    b.softmax_cross_entropy(b.linear(tensors[-1], 4, name="head"), name="loss")
    return b.build()


@settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), devices=st.sampled_from([1, 2, 4]), precision=st.sampled_from(["fp32", "fp16"]),
       data=st.data())
def test_repricing_agrees_on_random_graphs_and_plans(graph, devices, precision, data):
    """Any plan, not only a planner's: the re-priced sum is the problem's sum, operator and edge terms
    alike, and the memory per device is the problem's."""
    problem, _ = prepare_problem(graph, resolve_cluster("v100x8-nvlink", devices), None, max_candidates=6,
                                 precision=precision)
    plan = tuple(data.draw(st.integers(0, len(c) - 1)) for c in problem.node_costs)
    price = _priced(problem, plan)
    operators, edges = problem.breakdown(plan)
    assert price.operators_s == pytest.approx(operators, rel=1e-9, abs=1e-15)
    assert price.redistribution_s == pytest.approx(edges, rel=1e-9, abs=1e-15)
    assert np.allclose(price.device_memory, problem.device_memory(plan), rtol=1e-9)


@pytest.fixture(scope="module")
def mlp():
    graph = resolve_model("mlp:layers=4,hidden=1024,batch=64")
    problem, _ = prepare_problem(graph, resolve_cluster("v100x8-nvlink", 4), None, max_candidates=12)
    return problem


def test_a_corrupted_objective_term_is_caught(mlp, monkeypatch):
    """Every redistribution priced 1 ms dearer by the problem's own objective function: the planner
    reports it and the array check recomputes it with the same function, so only the re-pricing sees it."""
    breakdown = ConfigProblem.breakdown
    monkeypatch.setattr(ConfigProblem, "breakdown",
                        lambda self, plan: (breakdown(self, plan)[0], breakdown(self, plan)[1] + 1e-3))
    result = solve(mlp, "greedy")
    assert result.status is Status.ERROR
    invalid = [note for note in result.notes if note.startswith("invalid:")]
    assert invalid and all("re-priced from the graph and cluster" in note for note in invalid)


def test_a_corrupted_cost_entry_is_caught(mlp):
    """The problem's operator costs halved after the build (a wrong array): the planner plans with them
    and reports their sum, which the array check confirms; the re-priced plan costs more."""
    corrupted = replace(mlp, node_costs=tuple(costs / 2 for costs in mlp.node_costs))
    result = solve(corrupted, "milp", time_limit=30)
    assert result.status is Status.ERROR
    assert any("re-priced from the graph and cluster" in note and "reported objective" in note
               for note in result.notes)


def test_corrupted_memory_is_caught(mlp):
    corrupted = replace(mlp, node_memory=tuple(memory * 0.5 for memory in mlp.node_memory))
    result = solve(corrupted, "greedy")
    assert result.status is Status.ERROR
    assert any("re-priced" in note and "the problem's memory" in note for note in result.notes)


def test_load_planners_are_checked_against_the_problem_costs(mlp):
    """The load objective is not the sum: its arrays are what the re-pricing checks."""
    corrupted = replace(mlp, edge_costs=tuple(matrix + 1e-3 for matrix in mlp.edge_costs))
    result = solve(corrupted, "milp-load", time_limit=30)
    assert result.status is Status.ERROR
    assert any("re-priced" in note and "the problem's costs" in note for note in result.notes)


def test_problems_without_a_graph_are_checked_from_their_arrays_only():
    from solver_plan.intra.random_instances import random_problem

    problem = random_problem(12, seed=3, shape="dag")
    result = solve(problem, "greedy")
    assert problem.context is None and validate_config_result(problem, result) == []
