"""DAG-aware cuts (pipeline/cuts.py), block-aligned transformer chains, the front door's choice
against PipeDream + 1F1B*, determinism and one memory model for DP and schedulers."""
import itertools
import math
import random

import numpy as np
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.data import data_dir
from solver_plan.pipeline.chain import LayerChain, cut_dag, linearize
from solver_plan.graph.importers import load_pipedream_profile
from solver_plan.pipeline import madpipe, pipedream_dp
from solver_plan.pipeline.api import plan_pipeline
from solver_plan.pipeline.cuts import CutDag, _cut_bytes, best_order
from solver_plan.pipeline.granularity import madpipe_layers
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.sources import build_chain_problem, chain_from_model
from test_pipeline_planners import random_problem  # noqa: E402  (one random chain generator for both files)


def random_dag(seed: int, n: int) -> CutDag:
    rng = random.Random(seed)
    preds = [tuple(sorted(rng.sample(range(v), min(v, rng.randint(1, 2))))) if v else () for v in range(n)]
    succs = tuple(tuple(w for w in range(n) if v in preds[w]) for v in range(n))
    act = tuple(float(rng.randint(1, 9)) for _ in range(n))
    return CutDag(tuple(f"n{v}" for v in range(n)), tuple(preds), succs,
                  tuple(float(rng.randint(1, 9)) for _ in range(n)), (0.0,) * n, act, act)


def brute_force_period(dag: CutDag, stages: int, bandwidth: float) -> float:
    """Every chain of ideals with at most `stages` stages (PipeDream's objective, no memory)."""
    n = len(dag.names)
    ideals = [frozenset(s) for r in range(n + 1) for s in itertools.combinations(range(n), r)
              if all(set(dag.preds[v]) <= set(s) for v in s)]

    def cut(ideal):
        return sum(dag.act[u] for u in ideal if any(w not in ideal for w in dag.succs[u]))

    full, best = frozenset(range(n)), math.inf
    for k in range(stages):
        for middle in itertools.combinations([i for i in ideals if 0 < len(i) < n], k):
            chain = [frozenset(), *sorted(middle, key=len), full]
            if any(not a < b for a, b in zip(chain, chain[1:])):
                continue
            period = max(max(sum(dag.load[v] for v in b - a) for a, b in zip(chain, chain[1:])),
                         max((2 * cut(i) / bandwidth for i in chain[1:-1]), default=0.0))
            best = min(best, period)
    return best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bandwidth", [math.inf, 4.0])
def test_antichain_dp_matches_brute_force(seed, bandwidth):
    dag = random_dag(seed, 8)
    for stages in (2, 3):
        choice = best_order(dag, stages, bandwidth)
        assert choice.period_s == pytest.approx(brute_force_period(dag, stages, bandwidth))
        # the order is topological and keeps every node once
        position = {name: i for i, name in enumerate(choice.order)}
        assert sorted(position) == sorted(dag.names)
        assert all(position[dag.names[u]] < position[dag.names[v]] for v in range(8) for u in dag.preds[v])


def test_a_tensor_crossing_a_cut_counts_once():
    # x feeds three nodes after the cut: its bytes cross once, not three times
    dag = CutDag(("x", "a", "b", "c"), ((), (0,), (0,), (0,)), ((1, 2, 3), (), (), ()),
                 (1.0,) * 4, (0.0,) * 4, (10.0, 1.0, 1.0, 1.0), (10.0, 1.0, 1.0, 1.0))
    member = np.array([[1, 0, 0, 0], [1, 1, 0, 0]], dtype=np.float32)
    assert list(_cut_bytes(dag, member)) == [10.0, 10.0]  # a is a sink: nothing of it crosses


PROFILES = data_dir() / "pipedream-profiles"


@pytest.mark.parametrize("profile, stages, bandwidth", [("squeezenet1_0", 4, math.inf), ("gnmt", 8, 1e9),
                                                        ("resnet18", 8, math.inf)])
def test_chain_in_the_chosen_order_reaches_the_antichain_optimum(profile, stages, bandwidth):
    graph = load_pipedream_profile(PROFILES / profile)
    choice = best_order(cut_dag(graph), stages, bandwidth)
    ordered = pipedream_dp.plan(ChainProblem(linearize(graph, order=choice.order), stages, 1e18, bandwidth),
                                memory_filter=False)
    base = pipedream_dp.plan(ChainProblem(linearize(graph), stages, 1e18, bandwidth), memory_filter=False)
    # the chain's cut bytes agree with the antichain DP's, and its own DP can only do better
    assert ordered.period_s <= choice.period_s * (1 + 1e-9)
    assert ordered.period_s <= base.period_s * (1 + 1e-9)


def test_transformer_chains_are_cut_between_blocks_unless_asked():
    cluster = resolve_cluster("v100x8-nvlink")
    whole = chain_from_model("gpt2:layers=3", cluster, processors=2)
    inside = chain_from_model("gpt2:layers=3", cluster, processors=2, cut_inside_blocks=True)
    blocks = [name for name in whole.layer_names if name.startswith("block")]
    assert len(blocks) == 3 and all(name.split("/")[0] == name.split("..")[-1].split("/")[0] for name in blocks)
    assert len(inside) > len(whole)
    assert sum(whole.forward_s) == pytest.approx(sum(inside.forward_s))
    assert any("between transformer blocks" in note for note in whole.notes)



@pytest.mark.parametrize("seed, memory", [(1, 1000.0), (2, 45.0), (3, 60.0), (5, 38.0)])
def test_front_door_never_worse_than_pipedream_1f1b_star(seed, memory):
    problem = random_problem(seed, 9, 3, memory)
    baseline = plan_pipeline(problem, "pipedream", "1f1b*")
    result = plan_pipeline(problem, "madpipe", "exact", schedule_options={"tick": 1.0}, time_limit=20)
    if baseline.valid:
        assert result.valid and result.period_s <= baseline.period_s + 1e-9
    assert {c["planner"] for c in result.compared} == {"madpipe", "pipedream"}
    assert result.notes[0].startswith("returned " + result.planner)


def test_same_command_same_plan():
    problem = random_problem(7, 10, 3, 50.0)
    first = plan_pipeline(problem, "madpipe", "exact", time_limit=10).to_dict()
    second = plan_pipeline(problem, "madpipe", "exact", time_limit=10).to_dict()
    for key in ("planner", "period_s", "stages", "operations", "status"):
        assert first.get(key) == second.get(key)


@pytest.mark.parametrize("seed", range(5))
def test_madpipe_allocations_pass_the_schedulers_memory_check(seed):
    problem = random_problem(seed, 12, 4, 30.0 + 4 * seed)
    result = madpipe.plan(problem)
    for allocation in filter(None, [result.allocation, *result.alternatives]):
        assert max(allocation.least_memory(problem).values()) <= problem.memory * (1 + 1e-12)


def test_granularity_comes_from_the_budget_only():
    problem = ChainProblem(LayerChain.simple("flat", [1] * 400, [2] * 400, [0] * 400, [1] * 400), 32, 1e9, math.inf)
    sizes = [madpipe_layers(problem, s) for s in (1, 10, 30, 60, 600)]
    assert sizes == sorted(sizes) and sizes[0] >= 32 and sizes[-1] == 400
    assert madpipe_layers(problem, None) == 400


def test_front_door_says_when_fewer_processors_win():
    # one heavy layer: the rest fits on few processors; transfers make extra stages slower
    chain = LayerChain.simple("lopsided", [10, 1, 1], [20, 1, 1], [0, 0, 0], [100, 100, 100])
    problem = ChainProblem(chain, 3, 1e9, 10.0)
    result = plan_pipeline(problem, "madpipe", "exact", time_limit=10)
    used = len(result.allocation.allocation.processors_used)
    assert result.valid
    if used < 3:
        assert any("of 3 processors" in note for note in result.notes)


def test_build_chain_problem_orders_for_the_processors():
    cluster = resolve_cluster("v100x8-nvlink")
    problem = build_chain_problem(str(PROFILES / "resnet50"), cluster, 8, memory=1e12, no_comm=True)
    assert any("antichain" in note for note in problem.chain.notes)
    result = plan_pipeline(problem, "pipedream", "1f1b*")
    assert result.valid
    # PipeDream's own optimizer on this profile at 8 stages: 0.056684 s (docs/pipeline-pipedream-side-by-side.txt)
    assert result.allocation.period_s == pytest.approx(0.056684, rel=1e-6)


def _expired():
    import time
    from solver_plan.deadline import Deadline
    deadline = Deadline(1e-6)
    time.sleep(1e-3)
    return deadline


def test_best_order_keeps_the_base_order_when_the_safety_net_runs_out():
    dag = random_dag(3, 10)
    choice = best_order(dag, 3, 4.0, deadline=_expired())
    assert choice.order == dag.names and choice.period_s is None
    assert "safety net" in choice.note


@pytest.mark.parametrize("seed", range(4))
def test_antichain_dp_with_memory_matches_one_stage_count_at_a_time(seed):
    """The DP over all stage counts at once equals the recurrence written one p at a time
    (PipeDream's memory filter included), on the states `best_order` builds."""
    from solver_plan.pipeline import cuts
    dag = random_dag(seed, 9)
    rng = random.Random(seed)
    dag = CutDag(dag.names, dag.preds, dag.succs, dag.load, tuple(float(rng.randint(0, 5)) for _ in dag.names),
                 dag.act, dag.kept)
    captured = {}
    real = cuts._dp

    def spy(*args, **kwargs):
        captured["args"] = args
        return real(*args, **kwargs)
    cuts._dp = spy
    try:
        best_order(dag, 4, 2.0, memory=60.0, state_factor=3.0)  # PipeDream's filter: 3 x the weights
    finally:
        cuts._dp = real
    load, state, act, cut, comm, subset, processors, memory = captured["args"][:8]
    assert state[-1] == pytest.approx(3.0 * sum(dag.weights))  # the largest ideal holds every layer
    S, full = len(load), len(load) - 1
    best = np.full((S, processors + 1), np.inf)
    best[0, 0] = 0.0
    for j in range(1, S):
        for k in np.flatnonzero(subset[:, j]):
            stage = max(load[j] - load[k], comm[k], comm[j] if j != full else 0.0)
            for p in range(1, processors + 1):
                need = (state[j] - state[k] + (processors - p + 1) * (cut[k] + act[j] - act[k])
                        + 2 * (cut[k] + (cut[j] if j != full else 0)))
                if memory is None or need <= memory:
                    best[j, p] = min(best[j, p], max(best[k, p - 1], stage))
    period, chain = real(load, state, act, cut, comm, subset, processors, memory)
    assert period == pytest.approx(best[full, 1:].min()) if np.isfinite(best[full, 1:].min()) else np.isinf(period)
    assert chain[0] == 0 and chain[-1] == full
