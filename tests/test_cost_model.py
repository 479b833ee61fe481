"""Hand-computed q_x, q_c, q_p, q_r, memory and seconds of the symbolic cost model.

Cluster: 2 nodes x 4 devices, w = 1e-12 s/FLOP, g = 1e-9 s/B within a node, 1e-8 s/B between nodes,
no latency (unless a test says so). Tensors are float32 (4 bytes).
"""
import numpy as np
import pytest

from solver_plan.cluster import Cluster, DeviceSpec, Link
from solver_plan.cost import CostModel, ParallelConfig
from solver_plan.cost.redistribution import redistribution
from solver_plan.graph import GraphBuilder, Measured, OpType

G_INTRA, G_INTER = 1e-9, 1e-8


def make_cluster(latency: float = 0.0) -> Cluster:
    return Cluster("test", 2, 4, DeviceSpec("dev", 1e12, 16e9), Link(1e9, latency), Link(1e8, latency))


def cfg(devices, **degrees) -> ParallelConfig:
    return ParallelConfig(tuple(degrees.items()), tuple(devices))


@pytest.fixture(scope="module")
def mlp():
    """x (8,16) -> relu -> fc (16->32, bias) -> gelu (its backward reads its input, so fc's output
    stays in memory: `activations.keeps_output`)."""
    b = GraphBuilder("mlp")
    x = b.input((8, 16), name="x")
    r = b.relu(x, name="r0")
    h = b.linear(r, 32, name="fc")
    b.gelu(h, name="r1")
    return b.build()


# fc: flops = 2*8*16*32 + 8*32 = 8448; params 16*32 + 32 = 544 -> 2176 bytes; output 8x32 -> 1024 B
FC = dict(sample=1, out=1, **{"in": 1})


def fc_cfg(devices, **split):
    return cfg(devices, **{**FC, **split})


def test_linear_single_device(mlp):
    cost = CostModel(make_cluster()).node(mlp, mlp.op("fc"), fc_cfg([0]))
    assert cost.q_x == 3 * 8448
    assert (cost.q_c, cost.q_p) == (0, 0)
    assert cost.memory_bytes == 2176 * 4 + 1024
    assert cost.compute_s == pytest.approx(3 * 8448 * 1e-12)
    assert cost.seconds == pytest.approx(cost.compute_s)


def test_linear_data_parallel(mlp):
    cost = CostModel(make_cluster()).node(mlp, mlp.op("fc"), fc_cfg(range(4), sample=4))
    assert cost.q_x == 3 * 8448 / 4
    assert cost.q_c == 0
    assert cost.q_p == 2 * 3 / 4 * 2176  # ring all-reduce of all parameter gradients
    assert cost.sync_s == pytest.approx(3264 * G_INTRA)
    assert cost.memory_bytes == 2176 * 4 + 1024 / 4


def test_linear_parameter_split_all_reduces_input_gradient(mlp):
    cost = CostModel(make_cluster()).node(mlp, mlp.op("fc"), fc_cfg(range(4), out=4))
    assert cost.q_p == 0  # nothing replicated
    assert cost.q_c == 2 * 3 / 4 * (8 * 16 * 4)  # dX partial sums over the 4 out shards
    assert cost.memory_bytes == 2176 / 4 * 4 + 1024 / 4


def test_linear_reduction_split_all_reduces_output(mlp):
    cost = CostModel(make_cluster()).node(mlp, mlp.op("fc"), fc_cfg(range(4), **{"in": 4}))
    assert cost.q_c == 2 * 3 / 4 * 1024  # partial Y over the 4 in shards; dX needs nothing
    assert cost.q_p == 0
    assert cost.comm_s == pytest.approx(1536 * G_INTRA)
    assert cost.memory_bytes == 2176 / 4 * 4 + 1024  # the output is replicated


def test_linear_hybrid(mlp):
    cost = CostModel(make_cluster()).node(mlp, mlp.op("fc"), fc_cfg(range(4), sample=2, out=2))
    assert cost.q_x == 3 * 8448 / 4
    assert cost.q_p == 2 * 1 / 2 * 1088  # half the weights, over the 2 sample replicas
    assert cost.q_c == 2 * 1 / 2 * (4 * 16 * 4)  # dX tile (4,16) over the 2 out shards
    assert cost.memory_bytes == 1088 * 4 + 4 * 16 * 4


def test_input_from_model_input_needs_no_gradient_all_reduce():
    b = GraphBuilder("g")
    b.linear(b.input((8, 16), name="x"), 32, name="fc")
    g = b.build()
    assert CostModel(make_cluster()).node(g, g.op("fc"), fc_cfg(range(4), out=4)).q_c == 0


def test_linear_3d_sequence_split():
    b = GraphBuilder("g")
    x = b.relu(b.input((2, 4, 8), name="x"), name="r")
    y = b.linear(x, 6, bias=False, name="fc")
    b.linear(y, 2, bias=False, name="head")  # reads fc's output in backward: it stays in memory
    g = b.build()
    model = CostModel(make_cluster())
    cost = model.node(g, g.op("fc"), cfg(range(4), sample=1, sequence=4, out=1, **{"in": 1}))
    assert g.op("fc").flops == 768
    assert cost.q_x == 3 * 768 / 4
    assert cost.q_c == 0
    assert cost.q_p == 2 * 3 / 4 * 192
    assert cost.memory_bytes == 192 * 4 + 2 * 4 * 6 * 4 / 4


@pytest.fixture(scope="module")
def conv():
    """x (2,4,8,8) -> relu -> conv 3x3 pad 1, 8 channels, no bias: flops 73728, 288 params -> batchnorm
    (which reads the conv output in backward, so it stays in memory)."""
    b = GraphBuilder("conv")
    x = b.relu(b.input((2, 4, 8, 8), name="x"), name="r")
    b.batchnorm(b.conv2d(x, 8, 3, padding=1, name="conv"), name="bn")
    return b.build()


CONV = dict(sample=1, out_channel=1, in_channel=1, height=1, width=1)


def test_conv_in_channel_split(conv):
    cost = CostModel(make_cluster()).node(conv, conv.op("conv"), cfg([0, 1], **{**CONV, "in_channel": 2}))
    assert conv.op("conv").flops == 73728
    assert cost.q_x == 3 * 73728 / 2
    assert cost.q_c == 2 * 1 / 2 * (2 * 8 * 8 * 8 * 4)
    assert cost.q_p == 0
    assert cost.memory_bytes == 1152 / 2 * 4 + 4096


def test_conv_height_split(conv):
    cost = CostModel(make_cluster()).node(conv, conv.op("conv"), cfg([0, 1], **{**CONV, "height": 2}))
    assert (cost.q_c, cost.q_p) == (0, 1152)
    assert cost.memory_bytes == 1152 * 4 + 2048


def test_conv_out_channel_split_all_reduces_input_gradient(conv):
    cost = CostModel(make_cluster()).node(conv, conv.op("conv"), cfg([0, 1], **{**CONV, "out_channel": 2}))
    assert cost.q_c == 2 * 1 / 2 * (2 * 4 * 8 * 8 * 4)
    assert cost.q_p == 0


@pytest.fixture(scope="module")
def chain():
    """x (8,32) -> relu a -> relu b."""
    b = GraphBuilder("chain")
    x = b.relu(b.input((8, 32), name="x"), name="a")
    b.relu(x, name="b")
    return b.build()


def rcfg(devices, sample=1, feature=1):
    return cfg(devices, sample=sample, feature=feature)


def test_elementwise_costs(chain):
    cost = CostModel(make_cluster()).node(chain, chain.op("b"), rcfg(range(4), feature=4))
    assert (cost.q_x, cost.q_c, cost.q_p) == (3 * 256 / 4, 0, 0)
    assert cost.memory_bytes == 1024 / 4


def edge_ab(chain):
    return next(e for e in chain.edges if e.dst == "b")


def test_q_r_zero_when_tiles_coincide(chain):
    model = CostModel(make_cluster())
    for c in (rcfg([0]), rcfg(range(4), sample=4), rcfg(range(8), sample=2, feature=4)):
        assert model.edge(chain, edge_ab(chain), c, c).q_r == 0


def test_q_r_sample_to_feature(chain):
    cost = CostModel(make_cluster()).edge(chain, edge_ab(chain), rcfg(range(4), sample=4), rcfg(range(4), feature=4))
    # forward: each device needs (8,8) = 64, holds (2,8) = 16 of it; backward symmetric: 48 + 48 elements
    assert cost.q_r == (48 + 48) * 4
    assert cost.seconds == pytest.approx(384 * G_INTRA)


def test_q_r_replica_to_sample(chain):
    cost = CostModel(make_cluster()).edge(chain, edge_ab(chain), rcfg([0]), rcfg(range(4), sample=4))
    # forward: d1..d3 each lack their (2,32) = 64 elements; backward: d0 lacks 3 x 64 of the gradient
    assert cost.q_r == (64 + 192) * 4


def test_inter_node_costs_more(chain):
    model = CostModel(make_cluster())
    within = model.edge(chain, edge_ab(chain), rcfg(range(4), sample=4), rcfg(range(4), feature=4))
    across = model.edge(chain, edge_ab(chain), rcfg(range(4), sample=4), rcfg(range(4, 8), feature=4))
    assert across.q_r == (64 + 64) * 4  # nothing is local any more
    assert across.seconds == pytest.approx(512 * G_INTER)
    assert across.seconds > within.seconds
    mlp_model = CostModel(make_cluster())
    b = GraphBuilder("g")
    b.linear(b.input((8, 16)), 32, name="fc")
    g = b.build()
    intra = mlp_model.node(g, g.op("fc"), fc_cfg(range(4), sample=4))
    inter = mlp_model.node(g, g.op("fc"), fc_cfg((2, 3, 4, 5), sample=4))
    assert (intra.q_p, inter.q_p) == (3264, 3264)
    # hierarchical all-reduce (issue 12: one alpha-beta model), 2 nodes x 2 devices, S = 2176 B:
    # reduce-scatter + all-gather inside each node, 2 x (1/2) S at G_INTRA, then a 2-node ring on
    # S/2 = 1088 B per device, 2 x (1/2) x 1088 at G_INTER (the first model: 3264 B all at G_INTER)
    assert inter.sync_s == pytest.approx(2176 * G_INTRA + 1088 * G_INTER)
    assert inter.seconds > intra.seconds


def test_missing_piece_fetched_from_replica_on_own_node():
    cluster = make_cluster()
    whole = np.array([[[0, 8]], [[0, 8]]])  # devices 0 and 4 (one per node) each hold all 8 elements
    halves = np.array([[[0, 4]], [[4, 8]]])  # devices 1 and 5 need one half each
    elements, level = redistribution(cluster, [cfg([1, 5], sample=2)], [halves], [cfg([0, 4], sample=2)], [whole])
    assert elements.tolist() == [[4]]
    assert level.tolist() == [[1]]  # intra-node


def test_edge_matrix_matches_edge(chain):
    model = CostModel(make_cluster())
    srcs = (rcfg([0]), rcfg(range(4), sample=4), rcfg(range(4, 8), feature=4))
    dsts = (rcfg(range(4), feature=4), rcfg([0]))
    matrix = model.edge_matrix(chain, edge_ab(chain), srcs, dsts)
    assert matrix.shape == (3, 2)
    for i, s in enumerate(srcs):
        for j, d in enumerate(dsts):
            assert matrix[i, j] == pytest.approx(model.edge(chain, edge_ab(chain), s, d).seconds)


def test_latency_added_per_ring_step_and_transfer(chain):
    model = CostModel(make_cluster(latency=1e-6))
    b = GraphBuilder("g")
    b.linear(b.input((8, 16)), 32, name="fc")
    g = b.build()
    # bucketed (issue 12): the tensor's share 2176 B / 25 MiB of one bucket's 2(4-1) latencies
    sync = model.node(g, g.op("fc"), fc_cfg(range(4), sample=4)).sync_s
    assert sync == pytest.approx(3264 * G_INTRA + 6 * 1e-6 * 2176 / (25 * 2**20))
    cost = model.edge(chain, edge_ab(chain), rcfg(range(4), sample=4), rcfg(range(4), feature=4))
    assert cost.seconds == pytest.approx(384 * G_INTRA + 2e-6)


def test_measured_times_used():
    b = GraphBuilder("g")
    x = b.input((8, 32), name="x")
    b.add(OpType.UNARY, (x,), {"kind": "relu"}, name="r", measured=Measured(0.3, 0.6))
    g = b.build()
    cost = CostModel(make_cluster()).node(g, g.op("r"), rcfg(range(4), sample=4))
    assert cost.compute_s == pytest.approx(0.9 / 4)
    assert cost.q_x == 3 * 256 / 4


def test_optimizer_factor_validated():
    from solver_plan.errors import InputError
    with pytest.raises(InputError):
        CostModel(make_cluster(), optimizer_factor=-1)


def test_edge_matrix_diagonal_zero_for_identical_layouts(chain):
    from solver_plan.cost import enumerate_configs
    model = CostModel(make_cluster())
    cands = enumerate_configs(chain.op("a"), chain, 8)
    assert cands == enumerate_configs(chain.op("b"), chain, 8)
    matrix = model.edge_matrix(chain, edge_ab(chain), cands, cands)
    assert np.all(np.diag(matrix) == 0)
    assert np.all(matrix[~np.eye(len(cands), dtype=bool)] > 0)  # every other pair moves something
    assert not matrix.flags.writeable


def test_reduction_output_replicas_feed_consumer_locally(mlp):
    """fc split over `in` on 4 devices leaves the whole output on each: a consumer on any of them
    needs nothing in forward; in backward d0 (sample slice 0 of 4) lacks 3/4 of dY."""
    edge = next(e for e in mlp.edges if e.dst == "r1")
    cost = CostModel(make_cluster()).edge(mlp, edge, fc_cfg(range(4), **{"in": 4}),
                                          cfg([0, 1, 2, 3], sample=4, feature=1))
    assert cost.q_r == 0 + (8 * 32 - 2 * 32) * 4


def test_embedding_ids_align_with_leading_output_axes():
    from solver_plan.cost.dims import op_layout
    b = GraphBuilder("g")
    ids = b.input((8, 16), name="ids")
    b.embedding(ids, 100, 32, name="embed")
    g = b.build()
    layout = op_layout(g.op("embed"), g)
    axes = dict(zip(layout.names, layout.input_axes[0]))
    assert axes["sample"] == 0 and axes["sequence"] == 1 and axes["embedding"] is None
    # a data-parallel embedding after a data-parallel input moves no ids
    model = CostModel(make_cluster())
    from solver_plan.cost.enumerate import data_parallel_config
    edge = g.edges[0]
    assert model.edge(g, edge, data_parallel_config(g.op("ids"), g, 4), data_parallel_config(g.op("embed"), g, 4)).q_r == 0


def test_owner_based_sync_reports_the_owners_received_bytes(mlp):
    """Under FlexFlow's owner-based sync, q_p is what the owner receives: (n - 1) x the gradient
    (the ring's 2 (n - 1) / n volume would misreport it); the time is parameter_server_sync_time."""
    from dataclasses import replace
    from solver_plan.cluster import GradientSync
    from solver_plan.cost.collectives import parameter_server_sync_time
    cluster = replace(make_cluster(), gradient_sync=GradientSync("parameter_server", 4e9, 1e9))
    cost = CostModel(cluster).node(mlp, mlp.op("fc"), fc_cfg(range(4), sample=4))
    assert cost.q_p == 3 * 2176  # three replicas copy 2,176 fp32 bytes each to the owner
    assert cost.sync_s == pytest.approx(parameter_server_sync_time(cluster, 2176, 4, 4))
