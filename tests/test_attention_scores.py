"""Attention without a fused kernel (scores materialised) and transformer dropout operators:
the score traffic and memory by hand, and defaults that leave existing graphs unchanged."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost import CostModel, ParallelConfig
from solver_plan.cost.compute import compute_time
from solver_plan.cost.kernels import attention_score_memory, attention_score_traffic
from solver_plan.errors import GraphError, InputError
from solver_plan.graph import GraphBuilder
from solver_plan.graph.resolve import resolve_model


def test_score_traffic_by_hand():
    # 1,000 score elements in 2-byte half precision
    assert attention_score_traffic(1000, 2, dropout=False) == (1000 * 4 * 2, 1000 * 7 * 2)
    assert attention_score_traffic(1000, 2, dropout=True) == (1000 * (6 * 2 + 1), 1000 * (9 * 2 + 1))
    # Korthikanti et al.: 2 a s^2 b bytes kept without dropout, 5 a s^2 b with it (16-bit)
    assert attention_score_memory(1000, 2, dropout=False) == 2000
    assert attention_score_memory(1000, 2, dropout=True) == 5000


def _attention_graph(**kwargs):
    b = GraphBuilder("att")
    q, k, v = (b.input((4, 128, 256), name=n) for n in "qkv")
    b.attention(q, k, v, heads=4, name="attention", **kwargs)
    return b.build()


def test_materialised_scores_add_their_memory_bound_kernels():
    cluster = resolve_cluster("a100x8-80gb", 1)
    model = CostModel(cluster, precision="fp16")
    fused_graph, unfused_graph = _attention_graph(), _attention_graph(scores="materialized", dropout=True)
    fused_op, unfused_op = fused_graph.op("attention"), unfused_graph.op("attention")
    cfg = ParallelConfig((("sample", 1), ("sequence", 1), ("heads", 1)), (0,))  # one device
    fused, unfused = model.node(fused_graph, fused_op, cfg), model.node(unfused_graph, unfused_op, cfg)
    elements = 4 * 4 * 128 * 128
    extra = sum(compute_time(cluster, 0.0, nbytes, unit="vector", dtype=model.precision.compute)
                for nbytes in attention_score_traffic(elements, 2, dropout=True))
    # an unfused kernel: the dense forward (q, k, v and the output in 16 bits) and a backward of two
    # kernels its size, plus the score passes
    dense = compute_time(cluster, fused_op.flops, 4 * 128 * 256 * 2 * 4, unit="matrix", dtype="fp16")
    assert unfused.compute_s == pytest.approx(3.0 * dense + extra)
    assert unfused.memory_bytes == pytest.approx(fused.memory_bytes + attention_score_memory(elements, 2, True))
    # a runtime without fused attention (Megatron-LM 2021: dropout on) prices the fused-marked graph alike
    unfused_runtime = CostModel(cluster, precision="fp16", runtime="megatron-2021")
    assert unfused_runtime.node(fused_graph, fused_op, cfg).compute_s == pytest.approx(unfused.compute_s)
    assert unfused_runtime.node(fused_graph, fused_op, cfg).memory_bytes == pytest.approx(unfused.memory_bytes)


def test_defaults_keep_graphs_unchanged():
    g = _attention_graph()
    assert dict(g.op("attention").attrs) == {"heads": 4}
    gpt = resolve_model("gpt2:batch=2,seq=64,layers=2")
    assert all(op.op_type.name != "UNARY" or op.attrs.get("kind") != "dropout" for op in gpt)
    assert all("scores" not in op.attrs for op in gpt)


def test_bert_options_add_dropout_and_materialised_attention():
    plain = resolve_model("bert-base:batch=2,seq=64,layers=2")
    rich = resolve_model("bert-base:batch=2,seq=64,layers=2,dropout=0.1,attention=unfused")
    dropouts = [op.name for op in rich if op.attrs.get("kind") == "dropout"]
    assert dropouts == ["block0/self_attn/dropout", "block0/mlp/dropout", "block1/self_attn/dropout",
                        "block1/mlp/dropout"]
    assert rich.op("block0/self_attn/attention").attrs == {"heads": 12, "scores": "materialized", "dropout": True}
    assert len(rich) == len(plain) + 4
    assert rich.total_params == plain.total_params


def test_bad_values_are_refused():
    with pytest.raises(GraphError):
        _attention_graph(scores="flash")
    with pytest.raises(InputError) as info:
        resolve_model("bert-base:batch=2,seq=64,attention=sparse")
    assert "attention" in str(info.value)
    with pytest.raises(InputError) as info:
        resolve_model("bert-base:batch=2,seq=64,dropout=1.5")
    assert "dropout" in str(info.value)
