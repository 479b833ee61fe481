"""The attention core priced once (`cost/attention.py`): by hand on a device with measured fused
kernels, the same figures in the per-operator cost model, the hybrid block cost and the simulator,
causal masks where the models have them, and the `plan --runtime` choice recorded in the plan."""
import json

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost import CostModel, ParallelConfig
from solver_plan.cost.compute import compute_time, step_efficiency
from solver_plan.cost.kernels import CAUSAL_WORK_FRACTION, FLASH_BACKWARD_RATIO
from solver_plan.errors import InputError
from solver_plan.graph import GraphBuilder
from solver_plan.graph.resolve import resolve_model

ONE_DEVICE = ParallelConfig((("sample", 1), ("sequence", 1), ("heads", 1)), (0,))
BATCH, SEQ, WIDTH, HEADS = 2, 2048, 1024, 8


def _attention(causal: bool):
    b = GraphBuilder("att")
    q, k, v = (b.input((BATCH, SEQ, WIDTH), name=n) for n in "qkv")
    b.attention(q, k, v, heads=HEADS, name="attention", causal=causal)
    graph = b.build()
    return graph, graph.op("attention")


@pytest.mark.parametrize("causal", [True, False])
def test_fused_attention_by_hand_on_a_measured_device(causal):
    cluster = resolve_cluster("h100-4x8-ib", 1)
    device = cluster.device
    graph, op = _attention(causal)
    model = CostModel(cluster, precision="bf16")  # megatron-core: cuDNN fused attention, causal skipping
    forward, backward = model.attention_seconds(graph, op, ONE_DEVICE)
    curve = dict(device.attention_efficiency)["cudnn"]
    kernel = (op.flops / (device.peak("bf16", "matrix") * step_efficiency(curve, SEQ)) + device.launch_overhead) \
        * device.kernel_time_scale
    assert kernel > 0 and max(forward, backward) > 0
    fraction = CAUSAL_WORK_FRACTION if causal else 1.0
    assert forward == pytest.approx(fraction * kernel)
    assert backward == pytest.approx(FLASH_BACKWARD_RATIO * fraction * kernel)
    assert model.node(graph, op, ONE_DEVICE).compute_s == pytest.approx(forward + backward)


def test_runtimes_choose_the_kernel():
    cluster = resolve_cluster("h100-4x8-ib", 1)
    graph, op = _attention(True)
    cudnn = sum(CostModel(cluster, precision="bf16").attention_seconds(graph, op, ONE_DEVICE))
    flash2 = sum(CostModel(cluster, precision="bf16", runtime="torchtitan").attention_seconds(graph, op, ONE_DEVICE))
    unfused = sum(CostModel(cluster, precision="bf16", runtime="megatron-2021").attention_seconds(graph, op, ONE_DEVICE))
    # measured on the H100 at 2K tokens: cuDNN's kernel is faster than FlashAttention-2's, and both
    # beat writing the scores to memory with dropout
    assert cudnn < flash2 < unfused
    dense = compute_time(cluster, op.flops, BATCH * SEQ * WIDTH * 2 * 4, unit="matrix", dtype="bf16")
    assert unfused > 3.0 * dense  # the dense kernels plus the score matrix's passes


def test_hybrid_block_prices_attention_as_the_per_operator_model():
    from solver_plan.hybrid.stage_cost import _compute_s

    cluster = resolve_cluster("h100-4x8-ib", 1)
    graph = resolve_model("gpt2:batch=1,seq=2048,positions=2048,layers=1")
    op = next(o for o in graph if o.op_type.name == "ATTENTION")
    assert op.attrs.get("causal") is True
    for runtime in ("megatron-core", "torchtitan", "megatron-2021"):
        model = CostModel(cluster, precision="bf16", runtime=runtime)
        assert _compute_s(cluster, model, graph, op, ONE_DEVICE, 1.0, runtime) == \
            pytest.approx(model.attention_seconds(graph, op, ONE_DEVICE))


def test_simulator_splits_fused_attention_one_to_two_and_a_half():
    from solver_plan.simulate.durations import TaskTimes

    cluster = resolve_cluster("h100-4x8-ib", 1)
    graph, op = _attention(True)
    times = TaskTimes(graph, CostModel(cluster, precision="bf16"))
    forward, backward = times.shard(op, ONE_DEVICE)
    assert backward / forward == pytest.approx(FLASH_BACKWARD_RATIO)


def test_models_mark_causal_self_attention_only():
    gpt = resolve_model("gpt2:batch=1,seq=64,layers=1")
    bert = resolve_model("bert-base:batch=1,seq=64,layers=1")
    t5 = resolve_model("t5-small:batch=1,seq=64,target_seq=16,layers=1")
    attention = {g.name: {op.name: bool(op.attrs.get("causal")) for op in g if op.op_type.name == "ATTENTION"}
                 for g in (gpt, bert, t5)}
    assert set(attention[gpt.name].values()) == {True}
    assert set(attention[bert.name].values()) == {False}
    t5_flags = attention[t5.name]
    assert {name for name, causal in t5_flags.items() if causal} == \
        {name for name in t5_flags if name.startswith("decoder") and "self_attn" in name}


def test_hf_decoders_are_causal_and_t5_encoders_not(tmp_path):
    llama = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
             "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 1000, "max_position_embeddings": 128}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(llama))
    graph = resolve_model(f"{path}:batch=1,seq=64")
    flags = [op.attrs.get("causal") for op in graph if op.op_type.name == "ATTENTION"]
    assert flags == [True]


def test_graph_file_causal_attribute(tmp_path):
    from solver_plan.graph.importers.graph_file import check_attrs
    from solver_plan.graph.ops import OpType

    check_attrs(OpType.ATTENTION, {"heads": 2, "causal": True}, "op 'a'")
    with pytest.raises(InputError, match="causal"):
        check_attrs(OpType.ATTENTION, {"heads": 2, "causal": "yes"}, "op 'a'")


def test_plan_records_its_runtime_and_refuses_an_unknown_one(tmp_path):
    from solver_plan.planning import answer_plan
    from solver_plan.requests import PlanRequest

    report = answer_plan(PlanRequest(model="gpt2:batch=2,seq=128,layers=1", cluster="h100-4x8-ib", devices=2,
                                     planner="greedy", runtime="torchtitan", time_limit=30))
    assert report.plan.to_dict()["runtime"] == "torchtitan"
    with pytest.raises(InputError, match="runtime"):
        PlanRequest(runtime="flash9")
