"""TransformerSpec closed forms agree with the project's own graph of the same model."""
from dataclasses import replace

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


# --- Hugging Face decoders (issue 10 follow-up): shapes from config.json -----------------------------
import json  # noqa: E402

from solver_plan.cluster import resolve_cluster  # noqa: E402
from solver_plan.data import data_dir  # noqa: E402
from solver_plan.graph.resolve import resolve_model  # noqa: E402
from solver_plan.hybrid import plan_hybrid  # noqa: E402
from solver_plan.hybrid import memory as mem  # noqa: E402
from solver_plan.hybrid.space import tp_degrees  # noqa: E402
from solver_plan.hybrid.validate import validate_plan  # noqa: E402
from solver_plan.result import Status  # noqa: E402

CONFIGS = data_dir() / "hf-configs"
PUBLISHED = {k: v for k, v in json.loads((CONFIGS / "published.json").read_text()).items() if not k.startswith("_")}
DECODERS = ["gpt2", "llama-2-7b", "llama-3-8b", "mistral-7b-v0.1", "qwen2-0.5b", "mixtral-8x7b-v0.1", "qwen3-0.6b",
            "phi-3-mini-4k-instruct", "gemma-2-2b", "gemma-3-1b-pt"]


@pytest.mark.parametrize("name", DECODERS)
def test_hf_parameter_counts_match_published(name):
    """Closed forms from config.json = the checkpoint's parameter count (data/hf-configs/published.json)."""
    ref = PUBLISHED[name]
    assert transformer_spec(str(CONFIGS / f"{name}.json")).total_params == ref["exact"] - ref["omitted"]


@pytest.mark.parametrize("name", ["llama-3-8b", "qwen2-0.5b", "mixtral-8x7b-v0.1", "qwen3-0.6b",
                                  "phi-3-mini-4k-instruct", "gemma-2-2b", "gemma-3-1b-pt"])
def test_hf_closed_forms_match_the_one_block_graph(name):
    """Block parameters and matrix FLOPs equal those of the importer's graph of one block (the graph the
    per-operator solver prices), for GQA, q/k/v biases (qwen2), SwiGLU and experts, q/k norms (qwen3,
    gemma 3), fused projections (phi-3) and sandwich norms with head_dim != hidden / heads (gemma)."""
    spec = transformer_spec(f"{CONFIGS / f'{name}.json'}:seq=64")
    graph = resolve_model(spec.block_spec(2))
    block = [op for op in graph if op.name.startswith(spec.block_scope)]
    assert sum(op.params for op in block) == spec.block_params
    matmul = sum(op.flops for op in block if op.op_type.value in ("Linear", "Conv2d"))
    bias = 2 * 64 * (spec.attn_width + 2 * spec.kv_width) if spec.qkv_bias else 0  # one FLOP per bias element
    scores = spec.attention_core_forward_flops(2)
    assert matmul - bias == pytest.approx(spec.block_forward_flops(2) - scores)


def test_grouped_query_attention_changes_parameters_and_activations():
    gqa = transformer_spec(str(CONFIGS / "llama-3-8b.json"))
    mha = replace(gqa, kv_heads=0)
    h, d = gqa.hidden, gqa.head_dim
    assert mha.block_params - gqa.block_params == 2 * h * (32 - 8) * d
    diff = (mem.layer_activation_bytes(mha, 1, 1, "selective", False)
            - mem.layer_activation_bytes(gqa, 1, 1, "selective", False))
    assert diff == pytest.approx(2 * gqa.seq * 2 * (32 - 8) * d)  # K and V, 16-bit, s b kv d each
    # Megatron splits key/value heads over t: t must divide kv_heads (8), not only heads (32)
    assert tp_degrees(replace(gqa, kv_heads=2), 8, 64) == [1, 2]


def test_untied_output_projection_is_on_the_last_stage():
    spec = transformer_spec(str(CONFIGS / "llama-2-7b.json"))
    assert not spec.tied_embeddings and not spec.learned_positions
    last = mem.stage_params(spec, 0, False, True, 2, 4)
    assert last == pytest.approx(spec.hidden + spec.vocab * spec.hidden / 2)
    assert mem.stage_params(spec, 0, True, False, 2, 4) == pytest.approx(spec.vocab * spec.hidden / 2)


@pytest.mark.parametrize("name", ["t5-small.json", "bert-base-uncased.json"])
def test_non_decoder_hf_configs_are_refused(name):
    with pytest.raises(InputError, match="decoder-only"):
        transformer_spec(str(CONFIGS / name))


def test_hf_batch_option_is_refused():
    with pytest.raises(InputError, match="--batch"):
        transformer_spec(f"{CONFIGS / 'llama-3-8b.json'}:batch=4")


def _tiny_llama(tmp_path, **extra):
    cfg = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 384, "num_attention_heads": 8,
           "num_key_value_heads": 2, "num_hidden_layers": 4, "max_position_embeddings": 256, "vocab_size": 1000,
           "tie_word_embeddings": False, **extra}
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(cfg))
    return f"{path}:seq=128"


def test_plan_of_a_hf_decoder_is_validated(tmp_path):
    """The search runs on a LLaMA-style config end to end and the independent checker agrees."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    result = plan_hybrid(_tiny_llama(tmp_path), cluster, 16, time_limit=None, fix={"pp": 2})
    assert result.status == Status.OPTIMAL
    assert validate_plan(result.plan, cluster) == []
    assert result.plan.terms.embedding_sync_s == 0.0  # untied: nothing shared between first and last stage
    assert result.plan.parallelism.tp in (1, 2)  # t must divide kv_heads = 2


def test_norms_beyond_llamas_add_their_parameters_and_kept_inputs():
    """Gemma's sandwich norms: 2 more RMS norms a block (2 h) and their inputs kept (4 s b h, 16-bit);
    q/k norms: 2 head_dim parameters and their inputs (2 s b (a d + kv d)), split over t."""
    gemma = transformer_spec(str(CONFIGS / "gemma-3-1b-pt.json") + ":seq=256")
    assert gemma.sandwich_norms and gemma.qk_norm and gemma.tied_embeddings and gemma.head_dim == 256
    plain = replace(gemma, sandwich_norms=False, qk_norm=False)
    h, s, d = gemma.hidden, gemma.seq, gemma.head_dim
    assert gemma.block_params - plain.block_params == 2 * h + 2 * d
    kept = mem.layer_activation_bytes(gemma, 1, 1, "selective", False) - mem.layer_activation_bytes(plain, 1, 1,
                                                                                                    "selective", False)
    assert kept == pytest.approx(2 * 2 * s * h + 2 * s * (gemma.attn_width + gemma.kv_width))
    split = mem.layer_activation_bytes(gemma, 1, 2, "selective", False) - mem.layer_activation_bytes(plain, 1, 2,
                                                                                                     "selective", False)
    assert split == pytest.approx(2 * 2 * s * h + 2 * s * (gemma.attn_width + gemma.kv_width) / 2)
    assert mem.layer_activation_bytes(gemma, 1, 1, "full", False) == mem.layer_activation_bytes(plain, 1, 1, "full",
                                                                                                False)
