"""Delta simulation equals full simulation: every task's start and end, bit for bit."""
import random

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.enumerate import data_parallel_config, enumerate_configs
from solver_plan.cost.model import CostModel
from solver_plan.graph.zoo import build_model
from solver_plan.simulate.simulator import StrategySimulator

CASES = [  # branched graphs, small options; 2 nodes in the NMT case so inter-node links are used
    ("inception_v3:batch=8,image=75", 4, 110),
    ("nmt:batch=8,seq=4,target_seq=4,hidden=64,layers=2,vocab=100", 8, 110),
]


def _live_and_fresh(spec: str, devices: int):
    """The graph, up to 16 candidates per operator, the data-parallel strategy, a simulator loaded
    with it (changed live by the tests) and one sharing its lowering for full re-simulations."""
    graph = build_model(spec)
    cluster = resolve_cluster("k80-16x4", devices)
    cost_model = CostModel(cluster)
    candidates = {op.name: enumerate_configs(op, graph, devices, max_candidates=16) for op in graph}
    strategy = {op.name: data_parallel_config(op, graph, devices) for op in graph}
    live = StrategySimulator(graph, cluster, cost_model)
    live.load(strategy)
    return graph, candidates, strategy, live, StrategySimulator(graph, cluster, cost_model, lowering=live.lowering)


@pytest.mark.parametrize("spec,devices,changes", CASES)
def test_delta_equals_full_over_random_single_operator_changes(spec, devices, changes):
    graph, candidates, strategy, live, fresh = _live_and_fresh(spec, devices)
    rng = random.Random(7)
    partial = 0
    for _ in range(changes):
        name = rng.choice(graph.topological_order)
        cfg = rng.choice(candidates[name])
        strategy[name] = cfg
        delta_time = live.change(name, cfg)
        full_time = fresh.load(strategy)
        assert live.timeline() == fresh.timeline()
        assert delta_time == full_time
        partial += live.engine.resimulated < len(live.engine.task_ids())
    assert partial > changes // 4  # the delta really skips part of the timeline


def test_changing_back_restores_the_timeline():
    graph = build_model("inception_v3:batch=8,image=75")
    cluster = resolve_cluster("k80-16x4", 4)
    strategy = {op.name: data_parallel_config(op, graph, 4) for op in graph}
    simulator = StrategySimulator(graph, cluster)
    simulator.load(strategy)
    before = simulator.timeline()
    name = graph.topological_order[40]
    other = enumerate_configs(graph.op(name), graph, 4)[0]
    simulator.change(name, other)
    simulator.change(name, strategy[name])
    assert simulator.timeline() == before


def test_delta_without_changes_does_nothing():
    graph = build_model("lenet")
    cluster = resolve_cluster("k80-16x4", 4)
    simulator = StrategySimulator(graph, cluster)
    simulator.load({op.name: data_parallel_config(op, graph, 4) for op in graph})
    assert simulator.engine.simulate_delta() == simulator.iteration_s
    assert simulator.engine.resimulated == 0


@pytest.mark.parametrize("spec,devices", [(spec, devices) for spec, devices, _ in CASES])
def test_many_changes_at_once_and_unsimulated_reverts_equal_full(spec, devices):
    """change_many (several operators, adjacent ones included) and reverts left unsimulated, as the
    branch refinement uses them: the next simulation equals a full one of the current strategy."""
    graph, candidates, strategy, live, fresh = _live_and_fresh(spec, devices)
    order = graph.topological_order
    rng = random.Random(11)
    for _ in range(40):
        start = rng.randrange(len(order))
        names = order[start:start + rng.randint(1, 12)]  # a run of neighbours: shared edges
        trial = {name: rng.choice(candidates[name]) for name in names}
        old = {name: strategy[name] for name in names}
        seconds = live.change_many(trial)
        assert seconds == fresh.load({**strategy, **trial})
        assert live.timeline() == fresh.timeline()
        if rng.random() < 0.5:
            strategy.update(trial)  # kept
        else:
            assert live.change_many(old, simulate=False) is None  # reverted, not simulated
    assert live.change_many({}) == fresh.load(strategy)
    assert live.timeline() == fresh.timeline()
