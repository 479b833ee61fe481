"""Hugging Face config.json import: parameter counts against the published sizes (data/hf-configs/
published.json, with sources), grouped-query attention, mixture of experts, options and bad input."""
from __future__ import annotations

import json
import math

import pytest

from solver_plan.data import data_dir
from solver_plan.errors import InputError
from solver_plan.graph.importers.hf import load_hf_config
from solver_plan.graph.ops import OpType
from solver_plan.graph.resolve import resolve_model

CONFIGS = data_dir() / "hf-configs"
PUBLISHED = {k: v for k, v in json.loads((CONFIGS / "published.json").read_text()).items() if not k.startswith("_")}
SMALL = {"batch": "1", "seq": "64"}  # shapes do not change parameter counts; small graphs build fast


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_matches_published(name):
    ref = PUBLISHED[name]
    graph = load_hf_config(CONFIGS / f"{name}.json", SMALL)
    assert graph.total_params == ref["exact"] - ref["omitted"]
    # the exact count is the paper's / model card's size, rounded as they round it
    assert abs(ref["exact"] - ref["nominal"]) / ref["nominal"] < 0.05


def test_grouped_query_attention_shapes():
    graph = load_hf_config(CONFIGS / "llama-3-8b.json", {"batch": "2", "seq": "16", "layers": "1"})
    attention = graph.op("layers.0/self_attn/attention")
    assert attention.attr("heads") == 32 and attention.attr("kv_heads") == 8
    assert graph.op("layers.0/self_attn/k_proj").output.shape == (2, 16, 8 * 128)
    assert graph.op("layers.0/self_attn/q_proj").output.shape == (2, 16, 32 * 128)


def test_mixtral_experts_and_active_parameters():
    """Experts are one grouped convolution per projection whose weight dimension is the expert
    count; FLOPs per token of the weight-bearing layers = 2 x active parameters, and Mixtral's
    paper gives 13B active (12.9B: embedding lookups are not multiplications)."""
    batch, seq = 1, 64
    graph = load_hf_config(CONFIGS / "mixtral-8x7b-v0.1.json", {"batch": str(batch), "seq": str(seq)})
    up = graph.op("layers.0/block_sparse_moe/experts_gate_up")
    assert up.op_type == OpType.CONV2D and up.attr("groups") == 8
    assert up.params == 8 * 2 * 14336 * 4096
    dense = sum(op.flops for op in graph if op.op_type in (OpType.LINEAR, OpType.CONV2D))
    active = dense / (2 * batch * seq)
    assert abs(active - PUBLISHED["mixtral-8x7b-v0.1"]["active_nominal"]) / 13e9 < 0.03


def test_moe_capacity_is_rounded_up_to_whole_slots():
    """k x seq = 6 dispatched tokens over 8 experts: one slot per expert, 2 padding slots priced as
    expert work (a padded grouped GEMM); the parameters do not change."""
    graph = load_hf_config(CONFIGS / "mixtral-8x7b-v0.1.json", {"batch": "1", "seq": "3", "layers": "1"})
    up = graph.op("layers.0/block_sparse_moe/experts_gate_up")
    assert up.output.shape == (1, 8 * 2 * 14336, 1, 1)
    assert up.flops == 2 * 8 * 4096 * 2 * 14336
    assert graph.op("layers.0/block_sparse_moe/combine").output.shape == (1, 8, 4096)


def test_resolve_forms_and_options():
    a = resolve_model(f"{CONFIGS / 'gpt2.json'}:batch=2,seq=32,layers=2")
    b = resolve_model(f"hf:{CONFIGS / 'gpt2.json'}:batch=2,seq=32,layers=2")
    assert a.total_params == b.total_params
    assert a.op("tokens").output.shape == (2, 32)
    zoo = resolve_model("gpt2:batch=2,seq=32,layers=2")
    assert (a.total_params, a.total_flops) == (zoo.total_params, zoo.total_flops)


def test_t5_defaults_and_tied_head():
    graph = load_hf_config(CONFIGS / "t5-small.json", {"batch": "2", "layers": "1"})
    assert graph.op("tokens").output.shape == (2, 512)
    assert graph.op("lm_head").params == 0  # tied to the shared embedding


def test_llama_flops_per_token_close_to_6n_rule():
    """Training FLOPs ~ 6 x parameters per token for short sequences (Kaplan et al. 2020)."""
    graph = load_hf_config(CONFIGS / "llama-2-7b.json", {"batch": "1", "seq": "128"})
    per_token = 3 * graph.total_flops / 128
    assert math.isclose(per_token / (6 * graph.total_params), 1.0, rel_tol=0.05)


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.pop("hidden_size"), "missing key 'hidden_size'"),
    (lambda c: c.update(model_type="bloom"), "model_type 'bloom' is not supported"),
    (lambda c: c.update(num_key_value_heads=5), "'num_attention_heads' \\(32\\) must be a multiple"),
    (lambda c: c.update(intermediate_size="big"), "key 'intermediate_size' must be an integer from 1"),
    (lambda c: c.update(num_hidden_layers=10**9), "key 'num_hidden_layers' must be an integer from 1 to 1024"),
    (lambda c: c.update(num_key_value_heads=None), "key 'num_key_value_heads' must be an integer"),
])
def test_bad_config_names_file_and_key(tmp_path, edit, message):
    config = json.loads((CONFIGS / "llama-2-7b.json").read_text())
    edit(config)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match=f"config.json.*{message}"):
        load_hf_config(path, SMALL)


def test_job_files_take_model_files_next_to_them(tmp_path):
    """A batch job names a config.json relative to the job file, with options and the hf: prefix;
    the file's digest is part of the job (an edited config reruns)."""
    from solver_plan.batch.jobfile import load_jobs
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "gpt2.json").write_text((CONFIGS / "gpt2.json").read_text())
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text('jobs:\n  - name: byo\n    models: ["cfg/gpt2.json:layers=1,seq=32,batch=2", "hf:cfg/gpt2.json"]\n'
                    "    clusters: [v100x8-nvlink]\n    devices: [2]\n    planners: [greedy]\n")
    loaded = load_jobs(jobs)
    assert [j.model for j in loaded] == [f"{tmp_path}/cfg/gpt2.json:layers=1,seq=32,batch=2",
                                         f"hf:{tmp_path}/cfg/gpt2.json"]
    assert all(j.fingerprints and j.fingerprints[0][1] for j in loaded)


def test_expert_parallelism_is_a_dimension_of_the_expert_layers():
    """The experts' grouped convolution offers `out_channel` (size experts x width) as a weight
    dimension split together with its input channels: a degree dividing the expert count keeps
    whole experts on each device (expert parallelism)."""
    from solver_plan.cost.dims import op_layout
    graph = load_hf_config(CONFIGS / "mixtral-8x7b-v0.1.json", {"batch": "2", "seq": "16", "layers": "1"})
    op = graph.op("layers.0/block_sparse_moe/experts_down")
    layout = op_layout(op, graph)
    dim = next(d for d in layout.dims if d.name == "out_channel")
    assert dim.kind == "parameter" and dim.size == 8 * 4096 and "out_channel" in layout.weight_dims
    index = layout.names.index("out_channel")
    assert layout.input_axes[0][index] == 1  # the input's channels (expert x ffn) split with it
    assert op.params == 8 * 14336 * 4096


def test_model_folder_with_hf_prefix(tmp_path):
    """`hf:FOLDER` reads FOLDER/config.json, as a downloaded model repository holds it."""
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-2-7b.json").read_text())
    graph = resolve_model(f"hf:{folder}:layers=1,seq=16,batch=1")
    assert graph.name == "Llama-2-7b-hf:layers=1,seq=16,batch=1"
    assert graph.op("tokens").output.shape == (1, 16)


# --- families of issue 24: parameters, active parameters, FLOPs per token of one block by hand ----------
MATRIX_OPS = (OpType.LINEAR, OpType.CONV2D, OpType.MATMUL, OpType.ATTENTION)


def _matrix_flops(graph, scope: str) -> float:
    """Multiply-add FLOPs (2 per multiply-add) of a scope's matrix products: Linear without its bias
    adds, Attention without its softmax (5 FLOPs per score), grouped convolutions and MatMuls."""
    total = 0.0
    for op in graph:
        if not op.name.startswith(scope) or op.op_type not in MATRIX_OPS:
            continue
        flops = op.flops
        if op.op_type == OpType.LINEAR and op.attr("bias"):
            flops -= math.prod(op.output.shape)
        if op.op_type == OpType.ATTENTION:
            n, sq, _ = op.output.shape
            flops -= 5 * n * op.attr("heads") * sq * graph.tensor(op.inputs[1]).shape[1]
        total += flops
    return total


def _cfg(name):
    return json.loads((CONFIGS / f"{name}.json").read_text())


def _dense_attention(c, hidden, heads, kv, d, s):
    """Per token: q, k, v, o projections, and the scores and context (2 s a d each)."""
    return 2 * (hidden * heads * d + 2 * hidden * kv * d + heads * d * hidden) + 4 * s * heads * d


def _hand_llama_like(c, s):
    h, a = c["hidden_size"], c["num_attention_heads"]
    return _dense_attention(c, h, a, c.get("num_key_value_heads", a), c.get("head_dim") or h // a, s) \
        + 2 * 3 * h * c["intermediate_size"]


def _hand_phi3(c, s):
    return _hand_llama_like(c, s)  # fused projections: the same products


def _hand_falcon(c, s):
    h, a = c["hidden_size"], c["num_attention_heads"]
    return _dense_attention(c, h, a, 1, h // a, s) + 2 * 2 * h * 4 * h


def _hand_gpt_neox(c, s):
    h, a = c["hidden_size"], c["num_attention_heads"]
    return _dense_attention(c, h, a, a, h // a, s) + 2 * 2 * h * c["intermediate_size"]


def _hand_opt(c, s):
    h, a = c["hidden_size"], c["num_attention_heads"]
    return _dense_attention(c, h, a, a, h // a, s) + 2 * 2 * h * c["ffn_dim"]


def _hand_qwen_moe(c, s):
    """Attention + router (h x E) + top_k routed experts + shared expert and its 1-wide gate."""
    h, a, e = c["hidden_size"], c["num_attention_heads"], c["num_experts"]
    shared = c.get("shared_expert_intermediate_size", 0) if c["model_type"] == "qwen2_moe" else 0
    return (_dense_attention(c, h, a, c["num_key_value_heads"], c.get("head_dim") or h // a, s)
            + 2 * h * e + c["num_experts_per_tok"] * 2 * 3 * h * c["moe_intermediate_size"]
            + (2 * 3 * h * shared + 2 * h if shared else 0))


def _hand_mla(c, s):
    """DeepSeek MLA per token: q_a (h x r_q), q_b (r_q x a (n + r)), kv_a (h x (r_kv + r)), kv_b
    (r_kv x a (n + v)), o (a v x h); scores 2 s a (n + r), context 2 s a v."""
    h, a = c["hidden_size"], c["num_attention_heads"]
    n, r, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    rq, rkv = c["q_lora_rank"], c["kv_lora_rank"]
    return (2 * (h * rq + rq * a * (n + r) + h * (rkv + r) + rkv * a * (n + v) + a * v * h)
            + 2 * s * a * (n + r) + 2 * s * a * v)


def _hand_deepseek_moe_layer(c, s):
    """MLA + router (h x 256) + 8 routed experts + 1 shared expert, each SwiGLU 3 h f_e."""
    h, f = c["hidden_size"], c["moe_intermediate_size"]
    return (_hand_mla(c, s) + 2 * h * c["n_routed_experts"]
            + (c["num_experts_per_tok"] + c["n_shared_experts"]) * 2 * 3 * h * f)


HAND = {  # name: (hand formula, seq, block scope)
    "qwen1.5-moe-a2.7b": (_hand_qwen_moe, 60, "layers.0/"),  # 4 x 60 tokens spread evenly over 60 experts
    "qwen3-30b-a3b": (_hand_qwen_moe, 64, "layers.0/"),
    "gemma-2-2b": (_hand_llama_like, 64, "layers.0/"),
    "gemma-3-1b-pt": (_hand_llama_like, 64, "layers.0/"),
    "phi-3-mini-4k-instruct": (_hand_phi3, 64, "layers.0/"),
    "qwen3-0.6b": (_hand_llama_like, 64, "layers.0/"),
    "falcon-7b": (_hand_falcon, 64, "h.0/"),
    "pythia-70m": (_hand_gpt_neox, 64, "layers.0/"),
    "opt-125m": (_hand_opt, 64, "layers.0/"),
}


@pytest.mark.parametrize("name", sorted(HAND))
def test_block_flops_per_token_by_hand(name):
    formula, seq, scope = HAND[name]
    graph = load_hf_config(CONFIGS / f"{name}.json", {"batch": "2", "seq": str(seq), "layers": "1"})
    assert _matrix_flops(graph, scope) / (2 * seq) == pytest.approx(formula(_cfg(name), seq), rel=1e-12)


def test_deepseek_v3_dense_and_moe_blocks_by_hand():
    """The first 3 layers are dense (SwiGLU of 18432), the 4th has 256 routed experts top-8 and one
    shared expert; both use multi-head latent attention."""
    c, seq = _cfg("deepseek-v3"), 64
    graph = load_hf_config(CONFIGS / "deepseek-v3.json", {"batch": "1", "seq": str(seq), "layers": "4"})
    dense = _hand_mla(c, seq) + 2 * 3 * c["hidden_size"] * c["intermediate_size"]
    assert _matrix_flops(graph, "layers.0/") / seq == pytest.approx(dense, rel=1e-12)
    assert _matrix_flops(graph, "layers.3/") / seq == pytest.approx(_hand_deepseek_moe_layer(c, seq), rel=1e-12)
    up = graph.op("layers.3/mlp/experts_gate_up")
    assert up.attr("groups") == 256 and up.params == 256 * 2 * 2048 * 7168
    assert graph.op("layers.3/mlp/router").params == 256 * 7168 + 256  # + e_score_correction_bias
    assert not any(op.name.startswith("layers.2/mlp/experts") for op in graph)


@pytest.mark.parametrize("name, seq", [("deepseek-v3", 64), ("qwen3-30b-a3b", 64), ("qwen1.5-moe-a2.7b", 60),
                                       ("mixtral-8x7b-v0.1", 64)])
def test_active_parameters_per_token_match_published(name, seq):
    """Active parameters = weight-bearing FLOPs per token / 2 (attention scores excluded) + the token
    embedding (a lookup, not a multiplication): the reports' activated parameters."""
    graph = load_hf_config(CONFIGS / f"{name}.json", {"batch": "1", "seq": str(seq)})
    weights = sum(op.flops - (math.prod(op.output.shape) if op.op_type == OpType.LINEAR and op.attr("bias") else 0)
                  for op in graph if op.op_type in (OpType.LINEAR, OpType.CONV2D))
    c = _cfg(name)
    active = weights / (2 * seq) + c["vocab_size"] * c["hidden_size"]
    # router biases are parameters without multiplications; tiny, within the rounding below
    assert abs(active - PUBLISHED[name]["active_nominal"]) / PUBLISHED[name]["active_nominal"] < 0.03


def test_non_embedding_counts_match_published():
    for name in ("qwen3-30b-a3b", "qwen3-0.6b"):
        ref, c = PUBLISHED[name], _cfg(name)
        embeddings = c["vocab_size"] * c["hidden_size"] * (1 if c["tie_word_embeddings"] else 2)
        assert abs(ref["exact"] - embeddings - ref["non_embedding_nominal"]) / ref["non_embedding_nominal"] < 0.01


def test_gemma3_multimodal_config_reads_its_text_config(tmp_path):
    text = {k: v for k, v in _cfg("gemma-3-1b-pt").items() if k not in ("model_type", "architectures")}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
                                "text_config": text, "vision_config": {"hidden_size": 1152}}))
    assert load_hf_config(path, SMALL).total_params == PUBLISHED["gemma-3-1b-pt"]["exact"]


@pytest.mark.parametrize("name, edit, message", [
    ("deepseek-v3", lambda c: c.update(scoring_func="tanh"), "'scoring_func' 'tanh' is not supported"),
    ("deepseek-v3", lambda c: c.pop("kv_lora_rank"), "missing key 'kv_lora_rank'"),
    ("qwen3-30b-a3b", lambda c: c.update(num_experts_per_tok=129), "num_experts_per_tok \\(129\\) exceeds"),
    ("qwen1.5-moe-a2.7b", lambda c: c.update(mlp_only_layers=[1, "2"]), "'mlp_only_layers' must be a list"),
    ("opt-125m", lambda c: c.update(activation_function="swish"), "'activation_function' 'swish' is not supported"),
    ("gemma-2-2b", lambda c: c.update(num_key_value_heads=3), "must be a multiple of 'num_key_value_heads'"),
])
def test_bad_new_family_configs_name_file_and_key(tmp_path, name, edit, message):
    config = _cfg(name)
    edit(config)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match=f"config.json.*{message}"):
        load_hf_config(path, SMALL)


@pytest.mark.parametrize("name", sorted(HAND) + ["deepseek-v3"])
def test_new_families_plan_end_to_end(name, capsys):
    """One block of each family goes through the per-operator planner (greedy) and its cost model."""
    from solver_plan.cli import main

    assert main(["plan", "--model", f"{CONFIGS / name}.json:layers=1,seq=32,batch=2", "--cluster", "a100x8-80gb",
                 "--devices", "2", "--planner", "greedy", "--quiet"]) == 0
    assert "memory per device" in capsys.readouterr().out
