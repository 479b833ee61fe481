"""Branch parallelism pays in the simulator, and the load objective's planner finds it where the
sum objective cannot (issue 12, deliverable 4): two parallel branches with heavy parameters on a
2-device cluster whose runtime syncs gradients through owners after the backward pass."""
from dataclasses import replace

import numpy as np
import pytest

from solver_plan.cluster import Cluster, DeviceSpec, GradientSync, Link
from solver_plan.cost.enumerate import data_parallel_config
from solver_plan.graph.builder import GraphBuilder
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.planning import prepare_problem
from solver_plan.result import Status
from solver_plan.simulate import simulate_strategy
from solver_plan.simulate.refine import branch_regions, refine_branches
from solver_plan.deadline import Deadline, time_budget

H, BATCH = 1024, 4096


def _graph():
    b = GraphBuilder("two-branches")
    x = b.input((BATCH, H), name="x")
    y = b.add_(b.linear(x, H, name="left"), b.linear(x, H, name="right"), name="join")
    b.softmax_cross_entropy(y)
    return b.build()


def _cluster():
    # 10 TFLOP/s at 100% (no efficiency curves), 20 GB/s between the two devices; gradient copies
    # into the owner at 4 GB/s after the backward pass (FlexFlow's runtime, cluster/sync.py)
    return Cluster("pair", 1, 2, DeviceSpec("dev", 1e13, 16e9), Link(20e9, 10e-6),
                   gradient_sync=GradientSync("parameter_server", 4e9))


def _placement_space(problem: ConfigProblem) -> ConfigProblem:
    """Only data parallelism or a whole operator on one device (the operator-placement space of
    DeePa and of FlexFlow's operator dimension), so the two plans below are the whole story."""
    graph = problem.context[0]
    keep = []
    for name, cfgs in zip(problem.names, problem.candidates):
        dp = data_parallel_config(graph.op(name), graph, problem.num_devices)
        keep.append(np.array([i for i, c in enumerate(cfgs) if len(c.devices) == 1 or c == dp]))
    return replace(
        problem, candidates=tuple(tuple(c[i] for i in k) for c, k in zip(problem.candidates, keep)),
        node_costs=tuple(c[k] for c, k in zip(problem.node_costs, keep)),
        node_memory=tuple(m[k] for m, k in zip(problem.node_memory, keep)),
        node_devices=tuple(tuple(d[i] for i in k) for d, k in zip(problem.node_devices, keep)),
        edge_costs=tuple(m[np.ix_(keep[u], keep[v])] for (u, v), m in zip(problem.edges, problem.edge_costs)))


def _simulate(problem, plan):
    graph, cluster, cost_model = problem.context
    strategy = {problem.names[i]: problem.candidates[i][c] for i, c in enumerate(plan)}
    return simulate_strategy(graph, cluster, strategy, cost_model).iteration_s, strategy


def test_load_objective_beats_the_sum_in_the_simulator():
    graph, cluster = _graph(), _cluster()
    full, cost_model = prepare_problem(graph, cluster, None)
    problem = _placement_space(full)
    left, right = (graph.op(n) for n in ("left", "right"))
    dp = {n: next(c for c in problem.candidates[problem.names.index(n)] if len(c.devices) == 2) for n in ("left", "right")}
    one = {n: next(c for c in problem.candidates[problem.names.index(n)] if c.devices == (0,)) for n in ("left", "right")}
    c = cost_model.node(graph, left, one["left"]).compute_s  # a branch on one device
    s = cost_model.node(graph, left, dp["left"]).sync_s  # its gradient copy when data parallel
    # the premise, by hand: one copy of the 4 MiB fp32 weight (+ bias) at 4 GB/s; compute 3 x 2 b h^2
    assert s == pytest.approx(10e-6 + (H * H + H) * 4 / 4e9)
    assert c == pytest.approx(3 * 2 * BATCH * H * H / 1e13, rel=0.01)
    # the sum prefers data parallelism (c/2 + s per branch < c), the step does not: data parallel
    # devices each run both halves (c) then the owner receives both copies (2 s); one branch per
    # device runs c side by side, plus moving activations
    assert c / 2 + s < c
    summed = solve(problem, "milp", deadline=time_budget(10))
    loaded = solve(problem, "milp-load", deadline=time_budget(10))
    assert summed.status is Status.OPTIMAL and loaded.status in (Status.OPTIMAL, Status.FEASIBLE)
    assert validate_config_result(problem, loaded) == []
    sum_s, sum_plan = _simulate(problem, summed.assignment)
    load_s, load_plan = _simulate(problem, loaded.assignment)
    assert len(sum_plan["left"].devices) == 2 and len(sum_plan["right"].devices) == 2
    assert {load_plan["left"].devices, load_plan["right"].devices} == {(0,), (1,)}
    assert sum_s == pytest.approx(c + 2 * s, rel=0.1)  # the data-parallel step: compute, then both copies
    assert load_s < 0.95 * sum_s  # the activations moved cost less than the copies saved


def test_branch_regions_and_simulated_branch_moves():
    graph, cluster = _graph(), _cluster()
    problem = _placement_space(prepare_problem(graph, cluster, None)[0])
    names = problem.names
    assert [[[names[n] for n in branch] for branch in fork] for fork in branch_regions(problem)] == [
        [["left"], ["right"]]]
    dp = tuple(next(i for i, c in enumerate(cfgs) if len(c.devices) == 2) for cfgs in problem.candidates)
    start, _ = _simulate(problem, dp)
    seconds, plan = refine_branches(problem, dp, Deadline(10))
    assert seconds == pytest.approx(_simulate(problem, plan)[0]) and seconds < 0.95 * start
    assert {problem.candidates[names.index(n)][plan[names.index(n)]].devices for n in ("left", "right")} == {(0,), (1,)}


def test_without_the_load_milp_the_plan_is_still_chosen_by_simulation(monkeypatch):
    from solver_plan.simulate import milp_load
    monkeypatch.setattr(milp_load, "MAX_MODEL_ENTRIES", 0)  # the seed-only path (model too big)
    graph, cluster = _graph(), _cluster()
    problem = _placement_space(prepare_problem(graph, cluster, None)[0])
    summed = solve(problem, "milp", deadline=time_budget(10))
    loaded = solve(problem, "milp-load", deadline=time_budget(10))
    assert any("load MILP not built" in note for note in loaded.notes)
    assert validate_config_result(problem, loaded) == []
    assert _simulate(problem, loaded.assignment)[0] < 0.95 * _simulate(problem, summed.assignment)[0]
