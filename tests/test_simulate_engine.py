"""The task engine and the simulator's analytic cases."""
import math

import pytest

from solver_plan.cluster import Cluster, DeviceSpec, Link, LinkLevel, resolve_cluster
from solver_plan.cost.enumerate import data_parallel_config, single_device_config
from solver_plan.graph.zoo import build_model
from solver_plan.simulate import simulate_strategy
from solver_plan.simulate.engine import UNCONTENDED, TaskEngine
from solver_plan.simulate.lowering import split_key, task_key
from solver_plan.simulate.simulator import StrategySimulator


def free_comm_cluster(devices: int) -> Cluster:
    """One node whose links cost nothing (g = 0, no latency)."""
    return Cluster("free", 1, devices, DeviceSpec("dev", 1e12, 16e9), Link(1e9, 0.0),
                   g_overrides=((LinkLevel.INTRA_NODE, 0.0),))


def test_fifo_on_one_resource_and_overlap_across_resources():
    engine = TaskEngine()
    a = engine.add_task(2.0, 0, 1)
    b = engine.add_task(3.0, 0, 2)  # same device, ready at 0 too: runs after a (FIFO by key)
    transfer = engine.add_task(4.0, 10, 3)  # a link
    c = engine.add_task(1.0, 1, 4)
    engine.add_dependency(a, transfer)
    engine.add_dependency(transfer, c)
    assert engine.simulate_full() == pytest.approx(7.0)
    assert (engine.start[b], engine.end[b]) == (2.0, 5.0)
    # the transfer (2..6) overlaps b's compute (2..5) on another resource
    assert (engine.start[transfer], engine.end[transfer]) == (2.0, 6.0)
    assert (engine.start[c], engine.end[c]) == (6.0, 7.0)


def test_uncontended_tasks_start_when_ready():
    engine = TaskEngine()
    x = engine.add_task(1.0, UNCONTENDED, 1)
    y = engine.add_task(1.0, UNCONTENDED, 2)
    assert engine.simulate_full() == 1.0
    assert engine.start[x] == engine.start[y] == 0.0


def test_one_device_equals_sum_of_task_times():
    graph = build_model("lenet")
    cluster = resolve_cluster("k80-16x4", 1)
    sim = simulate_strategy(graph, cluster, {op.name: single_device_config(op, graph) for op in graph})
    assert sim.iteration_s == pytest.approx(sum(t.duration for t in sim.tasks), rel=1e-12)
    assert sim.devices[0].utilisation == pytest.approx(1.0)
    assert sim.critical_path[-1].end == pytest.approx(sim.iteration_s)


@pytest.mark.parametrize("devices", [2, 4, 8])
def test_data_parallel_chain_with_free_communication_is_compute_over_p(devices):
    graph = build_model("mlp:batch=64,hidden=256,layers=4")
    cluster = free_comm_cluster(devices)
    one = simulate_strategy(graph, cluster, {op.name: single_device_config(op, graph) for op in graph})
    many = simulate_strategy(graph, cluster, {op.name: data_parallel_config(op, graph, devices) for op in graph})
    assert many.iteration_s == pytest.approx(one.iteration_s / devices, rel=1e-9)
    assert all(d.utilisation == pytest.approx(1.0) for d in many.devices)


def test_communication_overlaps_independent_compute():
    """Two branches: a transfer on one link runs while the other branch computes."""
    graph = build_model("inception_v3:batch=8,image=75")
    cluster = resolve_cluster("k80-16x4", 4)
    strategy = {op.name: single_device_config(op, graph) for op in graph}
    # move one branch operator to device 1: its input and output now cross a link
    moved = next(name for name in graph.topological_order if name.startswith("Mixed_5b/conv2d"))
    cfg = strategy[moved]
    strategy[moved] = type(cfg)(cfg.degrees, (1,))
    split = simulate_strategy(graph, cluster, strategy)
    transfers = [t for t in split.tasks if t.category == "transfer"]
    assert transfers
    busy_overlap = [t for t in transfers if any(
        c.resource == "device 0" and c.start < t.end and t.start < c.end for c in split.tasks
        if c.category in ("forward", "backward"))]
    assert busy_overlap, "some transfer should run while device 0 computes"
    assert split.iteration_s < sum(t.duration for t in split.tasks if t.resource in ("device 0", "device 1")) + \
        sum(t.duration for t in transfers)


def test_keys_increase_along_every_dependency_and_decode():
    graph = build_model("nmt:batch=8,seq=4,target_seq=4,hidden=64,layers=2,vocab=100")
    cluster = resolve_cluster("k80-16x4", 8)
    simulator = StrategySimulator(graph, cluster)
    simulator.load({op.name: data_parallel_config(op, graph, 8) for op in graph})
    engine = simulator.engine
    for t in engine.task_ids():
        for s in engine.succs[t]:
            assert engine.key[t] < engine.key[s]
    keys = [engine.key[t] for t in engine.task_ids()]
    assert len(set(keys)) == len(keys)
    assert split_key(task_key(2, 17, 1, 300, 4095)) == (2, 17, 1, 300, 4095)
    assert not math.isnan(simulator.iteration_s)


def test_measured_times_are_used_when_the_graph_carries_them():
    from solver_plan.data import data_dir
    from solver_plan.graph.resolve import resolve_model
    graph = resolve_model(str(data_dir() / "pipedream-profiles" / "gnmt" / "graph.txt"))
    cluster = resolve_cluster("v100x8-nvlink", 1)
    sim = simulate_strategy(graph, cluster, {op.name: single_device_config(op, graph) for op in graph})
    measured = sum(op.measured.forward_s + op.measured.backward_s for op in graph if op.measured is not None)
    assert sim.iteration_s == pytest.approx(measured, rel=1e-9)
    forward = sum(t.duration for t in sim.tasks if t.category == "forward")
    assert forward == pytest.approx(sum(op.measured.forward_s for op in graph if op.measured is not None), rel=1e-9)
