"""Point-to-point link efficiency (`p2p_efficiency`), distinct from the collective `efficiency`:
redistribution, the simulator's transfers and the `p2p` kind follow it, collectives do not; the
YAML key, its default and the p100-4x4 figure's source (data/published/interconnect.yaml)."""
from dataclasses import replace

import pytest
import yaml

from solver_plan.calibrate.output import cluster_dict
from solver_plan.cluster import Cluster, DeviceSpec, LinkLevel, Link, cluster_from_dict, preset_names, resolve_cluster
from solver_plan.cost import CostModel, ParallelConfig
from solver_plan.cost.collectives import collective_time, p2p_time
from solver_plan.data import data_dir
from solver_plan.errors import ClusterError, InputError
from solver_plan.graph import GraphBuilder
from solver_plan.simulate import simulate_strategy

BANDWIDTH, LATENCY, EFFICIENCY, P2P = 20e9, 10e-6, 0.5, 0.8


def _cluster(p2p: float | None = P2P) -> Cluster:
    return Cluster("pair", 1, 4, DeviceSpec("dev", 1e13, 16e9), Link(BANDWIDTH, LATENCY, EFFICIENCY, p2p_efficiency=p2p))


def _chain():
    """x (1024, 256) -> relu a -> relu b: one fp32 tensor of 1 MiB between a and b."""
    b = GraphBuilder("chain")
    x = b.input((1024, 256), name="x")
    b.relu(b.relu(x, name="a"), name="b")
    return b.build()


def _on(device: int) -> ParallelConfig:
    return ParallelConfig((("sample", 1), ("feature", 1)), (device,))


def test_redistribution_follows_p2p_while_all_reduce_follows_efficiency():
    graph, cluster = _chain(), _cluster()
    edge = next(e for e in graph.edges if e.dst == "b")
    nbytes = 1024 * 256 * 4
    # a on device 0, b on device 1: the whole tensor moves forward and its gradient back
    cost = CostModel(cluster, precision="fp32").edge(graph, edge, _on(0), _on(1))
    assert cost.q_r == 2 * nbytes
    assert cost.seconds == pytest.approx(2 * (LATENCY + nbytes / (BANDWIDTH * P2P)))
    # a ring all-reduce of the same bytes on 4 devices: 2(n-1) alpha + 2(n-1)/n S / (B x efficiency)
    assert collective_time(cluster, "all_reduce", nbytes, 4) == pytest.approx(
        6 * LATENCY + 1.5 * nbytes / (BANDWIDTH * EFFICIENCY))
    # the `p2p` kind (hybrid pipeline sends) and the pipeline's stage bandwidth are point-to-point
    assert collective_time(cluster, "p2p", nbytes, 2, 2) == pytest.approx(LATENCY + nbytes / (BANDWIDTH * P2P))
    assert cluster.bandwidth(0, 1) == pytest.approx(BANDWIDTH * P2P)


def test_simulated_transfer_follows_p2p():
    graph, cluster = _chain(), _cluster()
    cost_model = CostModel(cluster, precision="fp32")
    strategy = {"x": _on(0), "a": _on(0), "b": _on(1)}
    sim = simulate_strategy(graph, cluster, strategy, cost_model)
    transfers = [t for t in sim.tasks if t.category == "transfer"]
    assert len(transfers) == 2  # a -> b forward, its gradient back
    for task in transfers:
        assert task.end - task.start == pytest.approx(LATENCY + 1024 * 256 * 4 / (BANDWIDTH * P2P))


def test_default_is_the_collective_efficiency():
    plain, same = _cluster(None), _cluster(EFFICIENCY)
    assert plain.intra_node.point_to_point_efficiency == EFFICIENCY
    for level in (LinkLevel.SAME_DEVICE, LinkLevel.INTRA_NODE):
        assert plain.g_p2p(level) == plain.g(level) == same.g_p2p(level)
    assert p2p_time(plain, LinkLevel.INTRA_NODE, 1e6) == pytest.approx(LATENCY + 1e6 / (BANDWIDTH * EFFICIENCY))
    # a `hardware: g_intra_node` override is the measured seconds per byte of both
    fixed = replace(_cluster(), g_overrides=((LinkLevel.INTRA_NODE, 2e-11),))
    assert fixed.g_p2p(LinkLevel.INTRA_NODE) == fixed.g(LinkLevel.INTRA_NODE) == 2e-11


def _spec(**intra):
    return {"name": "t", "devices_per_node": 4, "device": {"name": "gpu", "peak_flops": "10TFLOPS", "memory": "16GB"},
            "links": {"intra_node": {"bandwidth": "20GB/s", "efficiency": 0.65, **intra}}}


def test_yaml_key_and_its_default():
    cluster = cluster_from_dict(_spec(p2p_efficiency=0.9))
    assert cluster.intra_node.p2p_efficiency == 0.9
    assert cluster.g_p2p(LinkLevel.INTRA_NODE) == pytest.approx(1 / 18e9)
    assert cluster.g(LinkLevel.INTRA_NODE) == pytest.approx(1 / 13e9)
    default = cluster_from_dict(_spec())
    assert default.intra_node.p2p_efficiency is None
    assert default.g_p2p(LinkLevel.INTRA_NODE) == default.g(LinkLevel.INTRA_NODE)


@pytest.mark.parametrize("value", [1.5, 0, -0.2, "fast", True, float("nan")])
def test_bad_p2p_efficiency_names_the_key(value):
    with pytest.raises(InputError) as info:
        cluster_from_dict(_spec(p2p_efficiency=value), "c.yaml")
    assert "c.yaml.links.intra_node.p2p_efficiency" in str(info.value)


@pytest.mark.parametrize("value", [0.0, 1.01, float("inf"), "0.9"])
def test_link_refuses_bad_p2p_efficiency(value):
    with pytest.raises(ClusterError, match="p2p_efficiency"):
        Link(BANDWIDTH, p2p_efficiency=value)


def test_p100_preset_figure_comes_from_the_stored_measurement():
    entry = yaml.safe_load((data_dir() / "published" / "interconnect.yaml").read_text())["p100_sxm2_nvlink_4gpu"]
    measured = entry["unidirectional_gb_s"]["one_link"] / entry["link_bandwidth_gb_s"]
    p100 = resolve_cluster("p100-4x4")
    assert p100.intra_node.p2p_efficiency == pytest.approx(measured, abs=5e-5)
    assert p100.intra_node.efficiency == 0.65  # collectives keep calculon's NCCL figure
    assert p100.bandwidth(0, 1) == pytest.approx(entry["unidirectional_gb_s"]["one_link"] * 1e9, rel=1e-4)
    # every other preset prices point-to-point copies as before
    for name in preset_names():
        if name != "p100-4x4":
            cluster = resolve_cluster(name)
            assert all(link is None or link.p2p_efficiency is None
                       for link in (cluster.intra_node, cluster.inter_node)), name


def test_calibration_output_keeps_the_key():
    p100 = resolve_cluster("p100-4x4")
    assert cluster_from_dict(cluster_dict(p100)) == p100
