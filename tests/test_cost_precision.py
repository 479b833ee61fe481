"""The CostModel under a training precision, replicated configurations and the all-devices option.

Hand calculations on a 4-device node with a per-dtype device: bf16 matrix 100 TFLOP/s, fp32 vector
10 TFLOP/s, bf16 vector 20 TFLOP/s, HBM 1 TB/s, no efficiency curves (100%), 1 us launch overhead;
link 100 GB/s, no latency.
"""
import pytest

from solver_plan.cluster import Cluster, DeviceSpec, Link
from solver_plan.cost import CostModel, ParallelConfig
from solver_plan.cost.config import REPLICA
from solver_plan.cost.enumerate import REPLICABLE, enumerate_configs
from solver_plan.errors import InputError
from solver_plan.graph import GraphBuilder
from solver_plan.graph.resolve import resolve_model

DEVICE = DeviceSpec("dev", 100e12, 16e9, matrix_flops=(("bf16", 100e12),),
                    vector_flops=(("fp32", 10e12), ("bf16", 20e12)), hbm_bandwidth=1e12, launch_overhead=1e-6)
CLUSTER = Cluster("t", 1, 4, DEVICE, Link(100e9))
G = 1 / 100e9


@pytest.fixture(scope="module")
def mlp():
    """x (8,16) -> relu -> fc (16->32, bias) -> gelu (keeps fc's output for its backward)."""
    b = GraphBuilder("mlp")
    r = b.relu(b.input((8, 16), name="x"), name="r0")
    b.gelu(b.linear(r, 32, name="fc"), name="r1")
    return b.build()


def fc_cfg(devices, **split):
    return ParallelConfig(tuple({"sample": 1, "out": 1, "in": 1, **split}.items()), tuple(devices))


def relu_cfg(devices, **split):
    degrees = {"sample": 1, "feature": 1, **split}
    return ParallelConfig(tuple(degrees.items()), tuple(devices))


def test_default_precision_follows_the_device():
    assert CostModel(CLUSTER).precision.name == "mixed-bf16"
    with pytest.raises(InputError, match="no fp16 units"):
        CostModel(CLUSTER, precision="fp16")


def test_memory_by_precision(mlp):
    # fc: 544 parameters, output 8 x 32 = 256 elements
    mixed = CostModel(CLUSTER, precision="bf16").node(mlp, mlp.op("fc"), fc_cfg([0]))
    assert mixed.memory_bytes == 544 * (2 + 2 + 4 + 4 + 4) + 256 * 2
    fp32 = CostModel(CLUSTER, precision="fp32").node(mlp, mlp.op("fc"), fc_cfg([0]))
    assert fp32.memory_bytes == 544 * (4 + 4 + 4 + 4) + 256 * 4
    split = CostModel(CLUSTER, precision="bf16").node(mlp, mlp.op("fc"), fc_cfg(range(4), out=4))
    assert split.memory_bytes == 544 / 4 * 16 + 256 * 2 / 4


def test_compute_uses_the_roofline_of_the_compute_dtype(mlp):
    # fc forward per device (sample=4): 8448 / 4 = 2112 FLOP on the bf16 matrix unit (1e14 FLOP/s);
    # HBM: input tile 2 x 16 + output tile 2 x 32 elements in bf16, 544 bf16 weights = 1280 B at 1e12 B/s
    cost = CostModel(CLUSTER, precision="bf16").node(mlp, mlp.op("fc"), fc_cfg(range(4), sample=4))
    forward = max(2112 / 100e12, 1280 / 1e12) + 1e-6
    assert cost.compute_s == pytest.approx(3 * forward)
    # fp32: the fp32 peak is the vector unit's (no fp32 matrix unit); bytes double
    cost = CostModel(CLUSTER, precision="fp32").node(mlp, mlp.op("fc"), fc_cfg(range(4), sample=4))
    assert cost.compute_s == pytest.approx(3 * (max(2112 / 10e12, 2560 / 1e12) + 1e-6))


def test_gradient_sync_in_the_gradient_dtype(mlp):
    # 544 bf16 gradients = 1088 B; ring all-reduce over 4: 2 x 3/4 x 1088 = 1632 B at G
    cost = CostModel(CLUSTER, precision="bf16").node(mlp, mlp.op("fc"), fc_cfg(range(4), sample=4))
    assert cost.q_p == 1632
    assert cost.sync_s == pytest.approx(1632 * G)


def test_redistribution_bytes_in_the_activation_dtype(mlp):
    edge = next(e for e in mlp.edges if e.dst == "r1")
    src, dst = fc_cfg(range(4), sample=4), relu_cfg(range(4), feature=4)
    half = CostModel(CLUSTER, precision="bf16").edge(mlp, edge, src, dst)
    full = CostModel(CLUSTER, precision="fp32").edge(mlp, edge, src, dst)
    # each device needs (8, 8) and holds (2, 8) of it: 48 elements each way
    assert (half.q_r, full.q_r) == (2 * 48 * 2, 2 * 48 * 4)
    assert half.seconds == pytest.approx(192 * G)


def test_replicated_operator_repeats_the_work_and_needs_no_collective(mlp):
    model = CostModel(CLUSTER, precision="bf16")
    replicated = ParallelConfig((("sample", 1), ("feature", 1), (REPLICA, 4)), (0, 1, 2, 3))
    assert replicated.replicas == 4 and replicated.num_shards == 1
    whole = model.node(mlp, mlp.op("r1"), relu_cfg([0]))
    copy = model.node(mlp, mlp.op("r1"), replicated)
    assert copy.q_x == whole.q_x and copy.compute_s == pytest.approx(whole.compute_s)
    assert (copy.q_c, copy.q_p, copy.comm_s, copy.sync_s) == (0, 0, 0, 0)
    assert copy.memory_bytes == whole.memory_bytes  # the whole output on every device
    from solver_plan.cost.collectives import collective_groups
    assert collective_groups(replicated, ("sample", "feature"), (0, 1)) == ((0,), (1,), (2,), (3,))
    # fc split on `out` feeding the replicated relu: each device lacks 3/4 of the 8 x 32 output
    # (forward) and its gradient tile is local (backward): 192 elements x 2 bytes
    edge = next(e for e in mlp.edges if e.dst == "r1")
    cost = model.edge(mlp, edge, fc_cfg(range(4), out=4), replicated)
    assert cost.q_r == 192 * 2


def test_cheap_operators_get_replicated_candidates(mlp):
    relu = enumerate_configs(mlp.op("r0"), mlp, 4)
    assert any(c.replicas == 4 and c.devices == (0, 1, 2, 3) for c in relu)
    assert any(c.replicas == 2 for c in relu)
    fc = enumerate_configs(mlp.op("fc"), mlp, 4)
    assert all(c.replicas == 1 for c in fc)  # GEMMs are not replicated
    assert mlp.op("fc").op_type not in REPLICABLE


def test_all_devices_uses_every_device():
    graph = resolve_model("mlp:layers=2,hidden=64,batch=32")
    for name in graph.topological_order:
        configs = enumerate_configs(graph.op(name), graph, 8, all_devices=True)
        assert configs and all(c.devices == tuple(range(8)) for c in configs)


def test_only_activations_read_in_backward_stay_in_memory():
    # conv -> batchnorm -> relu -> add: the conv output is read by batchnorm's backward (kept); the
    # batchnorm output feeds a ReLU, which differentiates through its own output: freed; the ReLU
    # output is kept; the addition output feeds nothing that reads it: freed
    from solver_plan.cost.activations import keeps_output
    b = GraphBuilder("block")
    x = b.input((2, 4, 8, 8), name="x")
    c = b.conv2d(x, 4, 3, padding=1, name="conv")
    r = b.relu(b.batchnorm(c, name="bn"), name="relu")
    b.add_(r, x, name="add")
    g = b.build()
    assert [keeps_output(g, g.op(n)) for n in ("x", "conv", "bn", "relu", "add")] == [True, True, False, True, False]
    model = CostModel(CLUSTER, precision="bf16")
    single = ParallelConfig((("sample", 1), ("channel", 1), ("height", 1), ("width", 1)), (0,))
    bn = model.node(g, g.op("bn"), single)
    assert bn.memory_bytes == 8 * 16  # 8 parameters x 16 bytes, no activation


def test_plan_files_read_back_replicated_configurations(mlp):
    from solver_plan.simulate.plan_file import parse_operator
    name, cfg = parse_operator({"name": "r0", "degrees": {"sample": 1, "feature": 1, REPLICA: 4},
                                "devices": [0, 1, 2, 3]}, mlp, CLUSTER, "plan.json")
    assert name == "r0" and cfg.replicas == 4 and cfg.num_shards == 1


def test_embedding_reads_only_the_rows_it_gathers():
    # 8 x 4 ids into a 1000 x 16 table: output 512 elements; HBM = ids 32 x 2 + output 512 x 2 +
    # 512 gathered weights x 2 bytes (not the 16,000-entry table), memory-bound at 1e12 B/s
    b = GraphBuilder("emb")
    b.embedding(b.input((8, 4), name="ids"), 1000, 16, name="embed")
    g = b.build()
    from solver_plan.cost.enumerate import single_device_config
    single = single_device_config(g.op("embed"), g)
    cost = CostModel(CLUSTER, precision="bf16").node(g, g.op("embed"), single)
    flops = g.op("embed").flops
    hbm = (32 + 512 + 512) * 2
    assert cost.compute_s == pytest.approx(3 * (max(flops / 20e12, hbm / 1e12) + 1e-6))


def test_cli_precision_and_all_devices(capsys, tmp_path):
    from solver_plan.cli import main
    out = tmp_path / "plan.json"
    code = main(["plan", "--model", "mlp:layers=2,hidden=256,batch=64", "--cluster", "a100x8-80gb",
                 "--precision", "fp32", "--all-devices", "--planner", "greedy", "--out", str(out), "--quiet"])
    _, err = capsys.readouterr()
    assert code == 0 and "precision fp32" in err
    import json
    assert all(len(op["devices"]) == 8 for op in json.loads(out.read_text())["operators"])
    code = main(["plan", "--model", "mlp", "--cluster", "v100x8-nvlink", "--precision", "bf16"])
    _, err = capsys.readouterr()
    assert code == 2 and "no bf16 units" in err and err.count("\n") == 1
