"""Owner-based (parameter-server) gradient sync, FlexFlow's runtime (cluster/sync.py): the cost
term by hand, the YAML key and the presets that use it, and the simulator's bulk-synchronous
sync tasks."""
import pytest

from solver_plan.cluster import Cluster, DeviceSpec, GradientSync, Link, resolve_cluster
from solver_plan.cluster.loader import cluster_from_dict, preset_names
from solver_plan.cost.collectives import collective_time, gradient_sync_time, parameter_server_sync_time
from solver_plan.errors import ClusterError, InputError
from solver_plan.graph.resolve import resolve_model
from solver_plan.intra.solve import solve
from solver_plan.planning import prepare_problem
from solver_plan.simulate import StrategySimulator, simulate_strategy

INTRA = Link(20e9, 10e-6, 0.5)
INTER = Link(10e9, 5e-6, 1.0, nics_per_node=1)


def _cluster(sync: GradientSync, nodes: int = 2, per_node: int = 4) -> Cluster:
    return Cluster("t", nodes, per_node, DeviceSpec("dev", 1e13, 16e9), INTRA, INTER if nodes > 1 else None,
                   gradient_sync=sync)


def test_parameter_server_time_by_hand():
    cluster = _cluster(GradientSync("parameter_server", 4e9, 1e9))
    s = 8e6
    # 8 replicas, 4 per node on 2 nodes: 3 copies inside the owner's node, 1 from the other node
    expected = 3 * (10e-6 + s / 4e9) + 1 * (5e-6 + s / 1e9)
    assert parameter_server_sync_time(cluster, s, 8, 4) == pytest.approx(expected)
    # the bucketed gradient-sync term dispatches to it (no buckets: one copy per tensor)
    assert gradient_sync_time(cluster, s, 8, 4, bucket_bytes=1e6) == pytest.approx(expected)
    # 2 replicas on one node: one copy
    assert gradient_sync_time(cluster, s, 2, 2) == pytest.approx(10e-6 + s / 4e9)
    assert gradient_sync_time(cluster, s, 1, 1) == 0.0


def test_parameter_server_without_copy_rates_uses_the_links():
    cluster = _cluster(GradientSync("parameter_server"))
    s = 1e6
    g_intra = 1 / (20e9 * 0.5)  # bandwidth x efficiency
    g_inter = 1 / (10e9 * 1 / 4)  # one NIC shared by the node's 4 devices
    expected = 3 * (10e-6 + s * g_intra) + (5e-6 + s * g_inter)
    assert parameter_server_sync_time(cluster, s, 8, 4) == pytest.approx(expected)


def test_ring_is_the_default_and_unchanged():
    cluster = _cluster(GradientSync())
    s = 64e6
    assert gradient_sync_time(cluster, s, 8, 4, bucket_bytes=16e6) == pytest.approx(
        collective_time(cluster, "all_reduce", s, 8, 4, buckets=4))


def test_gradient_sync_values_are_checked():
    with pytest.raises(ClusterError):
        GradientSync("tree")
    with pytest.raises(ClusterError):
        GradientSync("ring", intra_node_bandwidth=1e9)
    with pytest.raises(ClusterError):
        GradientSync("parameter_server", intra_node_bandwidth=-1.0)


BASE = {"name": "x", "devices_per_node": 4, "device": {"name": "d", "memory": "16GB", "peak_flops": "10TFLOPS"},
        "links": {"intra_node": {"bandwidth": "20GB/s"}}}


def test_yaml_key():
    assert cluster_from_dict(BASE).gradient_sync == GradientSync()
    sync = cluster_from_dict(dict(BASE, gradient_sync={
        "scheme": "parameter_server", "copy_bandwidth": {"intra_node": "4GB/s"}})).gradient_sync
    assert sync == GradientSync("parameter_server", 4e9, None)
    for value in (GradientSync(), GradientSync("parameter_server"), GradientSync("parameter_server", 4.194e9, 1.049e9)):
        data = dict(BASE) if value.as_yaml() is None else dict(BASE, gradient_sync=value.as_yaml())
        assert cluster_from_dict(data).gradient_sync == value
    for bad, where in (({"scheme": "tree"}, "gradient_sync.scheme"),
                       ({"copy_bandwidth": {"intra_node": "4GB/s"}}, "gradient_sync.copy_bandwidth"),
                       ({"scheme": "parameter_server", "copy_bandwidth": {"intra": "4GB/s"}},
                        "gradient_sync.copy_bandwidth.intra"),
                       ({"sheme": "ring"}, "gradient_sync.sheme")):
        with pytest.raises(InputError) as info:
            cluster_from_dict(dict(BASE, gradient_sync=bad))
        assert info.value.where == where


def test_flexflow_presets_sync_through_owners_and_no_other_preset_does():
    flexflow = {"p100-4x4", "k80-16x4"}  # FlexFlow's two clusters (SysML'19, section 8)
    for name in preset_names():
        cluster = resolve_cluster(name)
        assert cluster.gradient_sync.owner_based == (name in flexflow), name
        # restricting to fewer devices keeps the runtime's scheme
        assert resolve_cluster(name, 1).gradient_sync == cluster.gradient_sync


def _dp(model: str, cluster: Cluster):
    graph = resolve_model(model)
    problem, cost_model = prepare_problem(graph, cluster, None)
    plan = solve(problem, "data-parallel").assignment
    strategy = {problem.names[i]: problem.candidates[i][c] for i, c in enumerate(plan)}
    return graph, cost_model, strategy


def test_simulated_sync_follows_the_backward_pass_on_the_owner():
    """Data parallelism on one node: every parameter is owned by device 0, so the copies queue on
    its gradient port after the last backward task: step = backward end + the sum of the syncs."""
    cluster = _cluster(GradientSync("parameter_server", 4e9), nodes=1)
    graph, cost_model, strategy = _dp("mlp:layers=3,hidden=1024,batch=64", cluster)
    sim = simulate_strategy(graph, cluster, strategy, cost_model)
    syncs = [t for t in sim.tasks if t.category == "sync"]
    backward_end = max(t.end for t in sim.tasks if t.category == "backward")
    expected = sum(cost_model.node(graph, op, strategy[op.name]).sync_s for op in graph.operators)
    assert len(syncs) == 3 and {t.resource for t in syncs} == {"gradient port d0"}
    assert min(t.start for t in syncs) == pytest.approx(backward_end)
    assert sim.iteration_s == pytest.approx(backward_end + expected)
    # per tensor: 3 copies of the fp32 weight and bias into the owner
    fc = graph.op("fc0")
    assert cost_model.node(graph, fc, strategy["fc0"]).sync_s == pytest.approx(
        3 * (10e-6 + fc.params * 4 / 4e9))


def test_delta_simulation_matches_full_with_owner_sync():
    cluster = _cluster(GradientSync("parameter_server", 4e9), nodes=1)
    graph = resolve_model("mlp:layers=3,hidden=512,batch=64")
    problem, cost_model = prepare_problem(graph, cluster, None)
    plan = list(solve(problem, "data-parallel").assignment)
    simulator = StrategySimulator(graph, cluster, cost_model)
    simulator.load({problem.names[i]: problem.candidates[i][c] for i, c in enumerate(plan)})
    node = problem.names.index("fc1")
    for choice in range(len(problem.candidates[node])):
        plan[node] = choice
        delta = simulator.change("fc1", problem.candidates[node][choice])
        fresh = StrategySimulator(graph, cluster, cost_model)
        full = fresh.load({problem.names[i]: problem.candidates[i][c] for i, c in enumerate(plan)})
        assert delta == pytest.approx(full, rel=1e-12)
        assert simulator.timeline() == fresh.timeline()


def test_ring_clusters_still_overlap_sync_with_backward():
    cluster = _cluster(GradientSync(), nodes=1)
    graph, cost_model, strategy = _dp("mlp:layers=3,hidden=1024,batch=64", cluster)
    sim = simulate_strategy(graph, cluster, strategy, cost_model)
    assert not any(r.name.startswith("gradient port") for r in sim.resources)
    assert any(t.category == "sync" and t.resource.startswith("link") for t in sim.tasks)
