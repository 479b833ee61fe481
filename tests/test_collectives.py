import math

import pytest

from solver_plan.cluster import cluster_from_dict, resolve_cluster
from solver_plan.cost.collectives import (DDP_BUCKET_BYTES, TREE_BANDWIDTH_FACTOR, collective_cost, collective_time,
                                          gradient_sync_time)


def two_level(nodes=4, per_node=8):
    # intra: 100 GB/s x 0.5 = 50 GB/s achieved, 10 us; inter: 2 NICs x 100 GB/s / 8 devices x 1.0, 20 us
    return cluster_from_dict({
        "nodes": nodes, "devices_per_node": per_node,
        "device": {"peak_flops": "100TFLOPS", "memory": "16GB"},
        "links": {"intra_node": {"bandwidth": "100GB/s", "latency": "10us", "efficiency": 0.5},
                  "inter_node": {"bandwidth": "100GB/s", "latency": "20us", "nics_per_node": 2}}})


B_I, A_I = 1 / 50e9, 10e-6
B_E, A_E = 1 / 25e9, 20e-6  # 2 x 100 GB/s shared by 8 devices


def test_single_node_ring_formulas():
    c, S = two_level(), 8e8
    assert collective_time(c, "all_reduce", S, 8) == pytest.approx(14 * A_I + 2 * 7 / 8 * S * B_I)
    assert collective_time(c, "reduce_scatter", S, 8) == pytest.approx(7 * A_I + 7 / 8 * S * B_I)
    assert collective_time(c, "all_gather", S, 4) == pytest.approx(3 * A_I + 3 / 4 * S * B_I)
    assert collective_time(c, "all_to_all", S, 4) == pytest.approx(3 * A_I + 3 / 4 * S * B_I)
    assert collective_time(c, "broadcast", S, 4) == pytest.approx(3 * A_I + S * B_I)
    assert collective_time(c, "p2p", S, 2) == pytest.approx(A_I + S * B_I)
    assert collective_time(c, "p2p", S, 2, 1) == pytest.approx(A_E + S * B_E)
    assert collective_time(c, "all_reduce", S, 1) == 0.0


def test_hierarchical_all_reduce_large_message_uses_the_inter_node_ring():
    c, S = two_level(), 8e8
    inside = 2 * (7 * A_I + 7 / 8 * S * B_I)  # reduce-scatter + all-gather in the node
    ring = 2 * 3 * A_E + 2 * 3 / 4 * (S / 8) * B_E  # 4 nodes, 1/8 of the bytes per device
    cost = collective_cost(c, "all_reduce", S, 32, 8)
    assert cost.algorithm == "hierarchical-ring"
    assert cost.seconds == pytest.approx(inside + ring)


def test_hierarchical_all_reduce_small_message_uses_the_tree():
    c = two_level(nodes=64)
    S = 8e3
    inside = 2 * (7 * A_I + 7 / 8 * S * B_I)
    tree = 2 * 6 * A_E + 2 * (S / 8) * B_E / TREE_BANDWIDTH_FACTOR  # log2(64) = 6
    cost = collective_cost(c, "all_reduce", S, 512, 8)
    assert cost.algorithm == "hierarchical-tree"
    assert cost.seconds == pytest.approx(inside + tree)


def test_one_device_per_node_is_a_pure_inter_node_collective():
    c, S = two_level(), 1e9
    assert collective_time(c, "all_reduce", S, 4, 1) == pytest.approx(6 * A_E + 1.5 * S * B_E)
    assert collective_time(c, "reduce_scatter", S, 4, 1) == pytest.approx(3 * A_E + 0.75 * S * B_E)


def test_buckets_pay_latency_per_bucket_only():
    c, S = two_level(), 1e9
    one = collective_cost(c, "all_reduce", S, 8)
    ten = collective_cost(c, "all_reduce", S, 8, buckets=10)
    assert ten.transfer == pytest.approx(one.transfer)
    assert ten.latency == pytest.approx(10 * one.latency)
    # a tensor's share of 25 MiB buckets: fractional bucket count
    share = gradient_sync_time(c, DDP_BUCKET_BYTES / 4, 8)
    assert share == pytest.approx(14 * A_I / 4 + 2 * 7 / 8 * DDP_BUCKET_BYTES / 4 * B_I)


def test_thousands_of_devices_from_shape_only():
    pod = resolve_cluster("h100-80gb-superpod")
    assert pod.num_devices == 4096
    t = collective_time(pod, "all_reduce", 2e9, 4096, 8)
    # lower bound: the inter-node share of bytes, 2 x (S / 8) over 50 GB/s x 0.9 per GPU
    assert t > 2 * 2e9 / 8 / (50e9 * 0.9)
    assert math.isfinite(t) and t < 1.0
    with pytest.raises(ValueError):
        collective_time(pod, "all_reduce", 1e6, 8192, 8)  # more nodes than the pod has
    with pytest.raises(ValueError):
        collective_time(pod, "gather", 1e6, 8)


def test_multi_node_presets_have_the_advertised_network():
    a100 = resolve_cluster("a100-80gb-superpod")
    assert (a100.nodes, a100.devices_per_node) == (512, 8)
    assert a100.inter_node.nics_per_node == 8
    assert a100.inter_node.bandwidth == pytest.approx(25e9)  # 200 Gb/s HDR per NIC
    h100 = resolve_cluster("h100-80gb-superpod")
    assert h100.inter_node.bandwidth == pytest.approx(50e9)  # 400 Gb/s NDR per NIC


def test_hierarchical_all_gather_all_to_all_and_broadcast():
    c, S = two_level(), 8e8  # 4 nodes x 8 devices, 32 in the group
    assert collective_time(c, "all_gather", S, 32, 8) == pytest.approx(
        7 * A_I + 7 / 8 * S * B_I + 3 * A_E + 3 / 4 * (S / 8) * B_E)
    # pairwise exchange: 7 peers inside the node, 24 outside
    assert collective_time(c, "all_to_all", S, 32, 8) == pytest.approx(
        7 * A_I + 24 * A_E + 7 / 32 * S * B_I + 24 / 32 * S * B_E)
    # pipelined broadcast inside each node, and across the 4 nodes on S / 8 per device
    assert collective_time(c, "broadcast", S, 32, 8) == pytest.approx(7 * A_I + S * B_I + 3 * A_E + S / 8 * B_E)
