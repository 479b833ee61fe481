"""TransformerSpec closed forms agree with the project's own graph of the same model."""
import pytest

from solver_plan.errors import InputError
from solver_plan.graph.zoo import build_model
from solver_plan.hybrid.model import transformer_spec

SPEC = "gpt2:layers=3,hidden=96,heads=4,head_dim=32,ffn=256,seq=16,positions=32,vocab=100,batch=2"


def test_parameters_and_flops_match_the_graph():
    graph = build_model(SPEC)
    spec = transformer_spec(SPEC)
    ops = [graph.op(name) for name in graph.topological_order]
    assert spec.total_params == sum(op.params for op in ops)
    matmul = sum(op.flops for op in ops if op.op_type.value in ("Linear",))
    attention_core = sum(op.flops for op in ops if op.op_type.value == "Attention")
    # the graph's attention op also counts its softmax (5 FLOPs per score); the model FLOPs do not
    softmax = 5 * 2 * 4 * 16 * 16 * 3
    bias_adds = 2 * 16 * (3 * 128 + 96 + 256 + 96) * 3  # the graph counts one FLOP per bias element
    assert 3 * (matmul + attention_core - softmax - bias_adds) == pytest.approx(spec.model_flops_per_step(2))


def test_narayanan_formula_for_standard_shapes():
    spec = transformer_spec("gpt3-175B:vocab=51200")
    B, s, l, h, V = 1536, 2048, 96, 12288, 51200
    assert spec.model_flops_per_step(B) == pytest.approx(72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)))


def test_non_transformer_models_are_refused():
    with pytest.raises(InputError, match="GPT-style"):
        transformer_spec("resnet50")
