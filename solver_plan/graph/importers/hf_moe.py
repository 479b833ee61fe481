"""Mixture-of-experts families of Hugging Face config.json: Qwen2-MoE (Qwen1.5-MoE), Qwen3-MoE and
DeepSeek-V2 / V3 (registered in hf.py's FAMILIES; Mixtral is hf.py's LLaMA builder).

Experts are hf.py's `_moe` (one grouped 1x1 convolution per projection, the expert dimension as
its weight dimension, top-k dispatch with the capacity rounded up to whole slots per expert).
- qwen2_moe: Qwen2 attention (q/k/v biases), `num_experts` experts of `moe_intermediate_size`
  with a softmax router, and a shared expert (a SwiGLU of `shared_expert_intermediate_size`)
  scaled by sigmoid(shared_expert_gate x), a 1-wide linear; layers in `mlp_only_layers`, or not
  a multiple of `decoder_sparse_step`, have a dense SwiGLU of `intermediate_size`;
- qwen3_moe: as qwen2_moe without biases and without a shared expert, with q/k norms over head_dim;
- deepseek_v2 / deepseek_v3: multi-head latent attention (MLA, below); the first
  `first_k_dense_replace` layers dense (SwiGLU of `intermediate_size`), the others (every
  `moe_layer_freq`-th) `n_routed_experts` routed experts of `moe_intermediate_size`, top
  `num_experts_per_tok`, plus `n_shared_experts` shared ones (one SwiGLU of n_shared x
  moe_intermediate_size); the router (`gate`) scores with a sigmoid (V3) or a softmax (V2), and
  V3's `e_score_correction_bias` (one per expert, for the aux-loss-free balancing) is the router's
  bias. Group-limited routing (n_group, topk_group) changes which experts are chosen, not the work.
  The multi-token-prediction module (`num_nextn_predict_layers`) is left out: the main model is
  what trains the next token (DeepSeek-V3 report: 671B main + 14B MTP on the Hub).

MLA (DeepSeek-V2 report, section 2.1): q = W_qb rms(W_qa x) (or W_q x without q_lora_rank), of
heads x (qk_nope + qk_rope); [c, k_rope] = W_kva x with c of kv_lora_rank; [k_nope, v] =
W_kvb rms(c), heads x (qk_nope + v_head_dim); the decoupled rotary key k_rope (qk_rope wide) is
shared by the heads. The project's Attention operator needs v as wide as q, so the core is written
in matrix products: scores = q_nope k_nope^T + q_rope k_rope^T (the shared key broadcast over the
heads), softmax, probabilities x v, then o_proj: exact FLOPs, 2 s^2 h_n (2 (nope + rope) + 2 v)
per sequence for h_n heads.
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.importers.hf_blocks import (_attention, _Config, _divides, _gated_mlp, _lm_head, _moe, _rms,
                                                   _tokens_input)
from solver_plan.graph.zoo.transformer import token_embedding


def _int_list(cfg: _Config, key: str) -> tuple[int, ...]:
    value = cfg.data.get(key) or []
    if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise InputError(f"key {key!r} must be a list of layer indices, got {value!r}", cfg.where)
    return tuple(value)


def _silu_only(cfg: _Config) -> None:
    act = cfg.str("hidden_act", "silu")
    if act != "silu":
        raise InputError(f"key 'hidden_act' must be 'silu' for these experts, got {act!r}", cfg.where)


# --- Qwen2-MoE and Qwen3-MoE ------------------------------------------------------------------------
def _qwen_moe(cfg: _Config, opts: dict, name: str) -> Graph:
    qwen3 = cfg.data["model_type"] == "qwen3_moe"
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    head_dim = cfg.int("head_dim", default=hidden // heads)
    _divides(cfg, kv_heads, heads, "num_key_value_heads", "num_attention_heads")
    _silu_only(cfg)
    qkv_bias = cfg.bool("attention_bias", not qwen3)
    experts, top_k = cfg.int("num_experts"), cfg.int("num_experts_per_tok")
    expert_ffn, ffn = cfg.int("moe_intermediate_size"), cfg.int("intermediate_size")
    shared_ffn = 0 if qwen3 else cfg.int("shared_expert_intermediate_size", default=0)
    step, dense_layers = cfg.int("decoder_sparse_step", default=1), set(_int_list(cfg, "mlp_only_layers"))
    vocab = cfg.int("vocab_size")
    b = GraphBuilder(name)
    x = token_embedding(b, _tokens_input(b, cfg, opts), vocab, hidden, "embed_tokens")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers"))):
        with b.scope(f"layers.{index}"):
            with b.scope("self_attn"):
                h = _attention(b, _rms(b, x, "input_layernorm"), heads, kv_heads, head_dim, qkv_bias, False,
                               qk_norm=qwen3)
                x = b.add_(x, h, name="residual")
            sparse = index not in dense_layers and (index + 1) % step == 0
            with b.scope("mlp"):
                h = _rms(b, x, "post_attention_layernorm")
                if not sparse:
                    out = _gated_mlp(b, h, ffn, "silu")
                else:
                    out = _moe(b, h, expert_ffn, experts, top_k, cfg.where)
                    if shared_ffn:
                        with b.scope("shared_expert"):
                            shared = _gated_mlp(b, h, shared_ffn, "silu")
                        gate = b.unary(b.linear(h, 1, False, name="shared_expert_gate"), "sigmoid",
                                       name="shared_gate_sigmoid")
                        out = b.add_(out, b.mul(shared, gate, name="shared_gated"), name="with_shared")
                x = b.add_(x, out, name="residual")
    _lm_head(b, _rms(b, x, "norm"), vocab, cfg.bool("tie_word_embeddings", False), "embed_tokens")
    return b.build()


# --- DeepSeek-V2 / V3 ---------------------------------------------------------------------------------
def mla_attention(b: GraphBuilder, x: Tensor, cfg: _Config) -> Tensor:
    """Multi-head latent attention (module docstring), ending in o_proj."""
    n, seq, hidden = x.shape
    heads = cfg.int("num_attention_heads")
    nope, rope, v_dim = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim"), cfg.int("v_head_dim")
    kv_rank = cfg.int("kv_lora_rank")
    bias = cfg.bool("attention_bias", False)
    if cfg.data.get("q_lora_rank") is None:
        q = b.linear(x, heads * (nope + rope), False, name="q_proj")
    else:
        q_low = _rms(b, b.linear(x, cfg.int("q_lora_rank"), bias, name="q_a_proj"), "q_a_layernorm")
        q = b.linear(q_low, heads * (nope + rope), False, name="q_b_proj")
    latent, k_rope = b.split(b.linear(x, kv_rank + rope, bias, name="kv_a_proj_with_mqa"), (kv_rank, rope), axis=2,
                             name="kv_a_split")
    kv = b.linear(_rms(b, latent, "kv_a_layernorm"), heads * (nope + v_dim), False, name="kv_b_proj")

    def by_head(t: Tensor, width: int, name: str) -> Tensor:  # (n, s, heads x width) -> (n, heads, s, width)
        return b.transpose(b.reshape(t, (n, seq, heads, width), name=f"{name}_heads"), (0, 2, 1, 3), name=name)

    q_nope, q_rope = b.split(by_head(q, nope + rope, "q"), (nope, rope), axis=3, name="q_split")
    k_nope, v = b.split(by_head(kv, nope + v_dim, "kv"), (nope, v_dim), axis=3, name="kv_split")
    k_shared = b.reshape(k_rope, (n, 1, seq, rope), name="k_rope_shared")
    scores = b.add_(b.matmul(q_nope, b.transpose(k_nope, (0, 1, 3, 2), name="k_nope_t"), name="scores_nope"),
                    b.matmul(q_rope, b.transpose(k_shared, (0, 1, 3, 2), name="k_rope_t"), name="scores_rope"),
                    name="scores")
    context = b.matmul(b.softmax(scores, name="probs"), v, name="context")
    context = b.reshape(b.transpose(context, (0, 2, 1, 3), name="context_tokens"), (n, seq, heads * v_dim),
                        name="context_flat")
    return b.linear(context, hidden, bias, name="o_proj")


def deepseek_layer_is_moe(cfg: _Config, index: int) -> bool:
    """DeepSeek's rule (modeling_deepseek.py): experts in layer i iff n_routed_experts is set,
    i >= first_k_dense_replace and i % moe_layer_freq == 0."""
    return (cfg.data.get("n_routed_experts") is not None and index >= cfg.int("first_k_dense_replace", default=0)
            and index % cfg.int("moe_layer_freq", default=1) == 0)


def _deepseek(cfg: _Config, opts: dict, name: str) -> Graph:
    v3 = cfg.data["model_type"] == "deepseek_v3"
    hidden, vocab = cfg.int("hidden_size"), cfg.int("vocab_size")
    _silu_only(cfg)
    scoring = cfg.str("scoring_func", "sigmoid" if v3 else "softmax")
    if scoring not in ("softmax", "sigmoid"):
        raise InputError(f"key 'scoring_func' {scoring!r} is not supported (softmax, sigmoid)", cfg.where)
    correction = cfg.str("topk_method", "noaux_tc" if v3 else "greedy") == "noaux_tc"
    b = GraphBuilder(name)
    x = token_embedding(b, _tokens_input(b, cfg, opts), vocab, hidden, "embed_tokens")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers"))):
        with b.scope(f"layers.{index}"):
            with b.scope("self_attn"):
                x = b.add_(x, mla_attention(b, _rms(b, x, "input_layernorm"), cfg), name="residual")
            with b.scope("mlp"):
                h = _rms(b, x, "post_attention_layernorm")
                if not deepseek_layer_is_moe(cfg, index):
                    out = _gated_mlp(b, h, cfg.int("intermediate_size"), "silu")
                else:
                    expert_ffn = cfg.int("moe_intermediate_size")
                    out = _moe(b, h, expert_ffn, cfg.int("n_routed_experts"), cfg.int("num_experts_per_tok"),
                               cfg.where, router_bias=correction, scoring=scoring)
                    shared = cfg.int("n_shared_experts", default=0) if cfg.data.get("n_shared_experts") else 0
                    if shared:
                        with b.scope("shared_experts"):
                            out = b.add_(out, _gated_mlp(b, h, shared * expert_ffn, "silu"), name="with_shared")
                x = b.add_(x, out, name="residual")
    _lm_head(b, _rms(b, x, "norm"), vocab, cfg.bool("tie_word_embeddings", False), "embed_tokens")
    return b.build()


MOE_FAMILIES = {"qwen2_moe": _qwen_moe, "qwen3_moe": _qwen_moe, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek}
