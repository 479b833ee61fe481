"""Dense decoder families of Hugging Face config.json beyond LLaMA's: Gemma 2 / Gemma 3, Phi-3,
Falcon, GPT-NeoX (Pythia) and OPT (registered in hf.py's FAMILIES; Qwen3 is hf.py's LLaMA builder
with q/k norms).

What each graph holds, so its parameters equal the checkpoint's (data/hf-configs/published.json):
- gemma2, gemma3_text (and gemma3, whose `text_config` is read; the vision tower is left out):
  RMS norms before and after both the attention and the MLP ("sandwich" norms, 4 per layer),
  GeGLU MLP (tanh-approximated GELU gate), grouped-query attention with an explicit head_dim,
  q/k norms over head_dim in Gemma 3, embedding scaled by sqrt(hidden) (no parameters), head tied.
  Sliding-window layers and logit soft-capping change no parameter; the attention is priced over
  the whole sequence (exact up to seq = sliding_window: 4096 for Gemma 2, 512 for Gemma 3);
- phi3: LLaMA with fused projections (qkv_proj, gate_up_proj), as the checkpoint stores them;
- falcon: fused query_key_value (multi-query: one k and one v head; the new decoder architecture:
  num_kv_heads), parallel attention and MLP reading one LayerNorm (two, ln_attn and ln_mlp, in the
  new architecture), GELU MLP of 4h (ffn_hidden_size), biases only with `bias`, head tied;
- gpt_neox: fused query_key_value with biases, parallel residual x + attn(ln1 x) + mlp(ln2 x)
  (`use_parallel_residual`), GELU MLP with biases, untied embed_out; rotary positions on
  `rotary_pct` of each head (no parameters);
- opt: learned positions (max_position_embeddings + 2 rows: OPT's offset of 2), pre- or post-norm
  (`do_layer_norm_before`), ReLU MLP (ffn_dim), biases (`enable_bias`), project_in / project_out
  when word_embed_proj_dim differs from hidden_size, head tied to the token embedding.
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.importers.hf_blocks import (_attention, _Config, _core, _divides, _gated_mlp, _lm_head, _rms,
                                                   _tokens_input)
from solver_plan.graph.zoo.transformer import token_embedding

ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu", "gelu_fast": "gelu",
               "relu": "relu", "silu": "silu"}


def activation(cfg: _Config, *keys: str, default: str) -> str:
    """The unary kind of the config's activation (the first of `keys` present); GELU's tanh and
    exact forms are one operator (8 FLOPs per element)."""
    name = next((cfg.data[k] for k in keys if cfg.data.get(k) is not None), default)
    if name not in ACTIVATIONS:
        raise InputError(f"key {keys[0]!r} {name!r} is not supported ({', '.join(sorted(ACTIVATIONS))})", cfg.where)
    return ACTIVATIONS[name]


def _layernorm(b: GraphBuilder, x: Tensor, name: str) -> Tensor:
    return b.layernorm(x, name=name)


def _fused_qkv(b: GraphBuilder, x: Tensor, heads: int, kv_heads: int, head_dim: int, bias: bool, out_bias: bool,
               name: str) -> Tensor:
    """One linear of width (heads + 2 kv_heads) x head_dim split into q, k and v (Phi-3, Falcon,
    GPT-NeoX store it fused), then the attention and the output projection (o_proj)."""
    q_width, kv_width = heads * head_dim, kv_heads * head_dim
    fused = b.linear(x, q_width + 2 * kv_width, bias, name=name)
    q, k, v = b.split(fused, (q_width, kv_width, kv_width), axis=2, name="qkv_split")
    return _core(b, q, k, v, heads, kv_heads, x.shape[-1], out_bias)


def _mlp(b: GraphBuilder, x: Tensor, ffn: int, kind: str, bias: bool) -> Tensor:
    """Two matrices with an activation between (GPT-NeoX, Falcon, OPT)."""
    return b.linear(b.unary(b.linear(x, ffn, bias, name="fc_in"), kind, name="act"), x.shape[-1], bias, name="fc_out")


# --- Gemma 2 and Gemma 3 -------------------------------------------------------------------------
GEMMA_HEAD_DIM = 256  # Gemma's head_dim where the config leaves it out (transformers' Gemma2Config default)


def gemma_language_config(cfg: _Config) -> _Config:
    """The language model's config: gemma3's multimodal config holds it in `text_config` (read as
    gemma3_text; the vision tower is left out); any other config as it is."""
    if cfg.data.get("model_type") != "gemma3":
        return cfg
    text = cfg.data.get("text_config")
    if not isinstance(text, dict):
        raise InputError("model_type 'gemma3' needs a 'text_config' object (the language model)", cfg.where)
    return _Config({"model_type": "gemma3_text", **text}, cfg.where)


def _gemma(cfg: _Config, opts: dict, name: str) -> Graph:
    cfg = gemma_language_config(cfg)
    qk_norm = cfg.data["model_type"] != "gemma2"
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    head_dim = cfg.int("head_dim", default=GEMMA_HEAD_DIM)
    _divides(cfg, kv_heads, heads, "num_key_value_heads", "num_attention_heads")
    kind = activation(cfg, "hidden_activation", "hidden_act", default="gelu_pytorch_tanh")
    ffn, vocab = cfg.int("intermediate_size"), cfg.int("vocab_size")
    b = GraphBuilder(name)
    tokens = _tokens_input(b, cfg, opts)
    x = b.unary(token_embedding(b, tokens, vocab, hidden, "embed_tokens"), "scale", name="embed_scale")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers"))):
        with b.scope(f"layers.{index}"):
            with b.scope("self_attn"):
                h = _attention(b, _rms(b, x, "input_layernorm"), heads, kv_heads, head_dim,
                               cfg.bool("attention_bias", False), cfg.bool("attention_bias", False), qk_norm=qk_norm)
                x = b.add_(x, _rms(b, h, "post_attention_layernorm"), name="residual")
            with b.scope("mlp"):
                h = _gated_mlp(b, _rms(b, x, "pre_feedforward_layernorm"), ffn, kind)
                x = b.add_(x, _rms(b, h, "post_feedforward_layernorm"), name="residual")
    _lm_head(b, _rms(b, x, "norm"), vocab, cfg.bool("tie_word_embeddings", True), "embed_tokens")
    return b.build()


# --- Phi-3 ---------------------------------------------------------------------------------------
def _phi3(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    _divides(cfg, kv_heads, heads, "num_key_value_heads", "num_attention_heads")
    kind = activation(cfg, "hidden_act", default="silu")
    ffn, vocab = cfg.int("intermediate_size"), cfg.int("vocab_size")
    bias = cfg.bool("attention_bias", False)
    b = GraphBuilder(name)
    x = token_embedding(b, _tokens_input(b, cfg, opts), vocab, hidden, "embed_tokens")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers"))):
        with b.scope(f"layers.{index}"):
            with b.scope("self_attn"):
                h = _fused_qkv(b, _rms(b, x, "input_layernorm"), heads, kv_heads, hidden // heads, bias, bias,
                               "qkv_proj")
                x = b.add_(x, h, name="residual")
            with b.scope("mlp"):
                h = _rms(b, x, "post_attention_layernorm")
                gate, up = b.split(b.linear(h, 2 * ffn, False, name="gate_up_proj"), (ffn, ffn), axis=2,
                                   name="gate_up_split")
                act = b.unary(gate, kind, name="act") if kind != "silu" else \
                    b.mul(gate, b.unary(gate, "sigmoid", name="act_sigmoid"), name="act")
                x = b.add_(x, b.linear(b.mul(act, up, name="gated"), hidden, False, name="down_proj"), name="residual")
    _lm_head(b, _rms(b, x, "norm"), vocab, cfg.bool("tie_word_embeddings", False), "embed_tokens")
    return b.build()


# --- Falcon and GPT-NeoX: fused q/k/v, LayerNorm, (parallel) residual ------------------------------
def _parallel_block(b: GraphBuilder, x: Tensor, attention, mlp, parallel: bool, norms: tuple[str, str],
                    shared_norm: bool) -> Tensor:
    """x + attn(norm x) + mlp(norm' x) (parallel; one norm for both when `shared_norm`), or the
    sequential pre-norm block x' = x + attn(norm x), x' + mlp(norm' x')."""
    with b.scope("attention"):
        a_in = _layernorm(b, x, norms[0])
        a = attention(a_in)
    if parallel:
        with b.scope("mlp"):
            m = mlp(a_in if shared_norm else _layernorm(b, x, norms[1]))
            return b.add_(b.add_(x, a, name="residual_attn"), m, name="residual")
    x = b.add_(x, a, name="residual_attn")
    with b.scope("mlp"):
        return b.add_(x, mlp(_layernorm(b, x, norms[1])), name="residual")


FALCON_POSITIONS = 2048  # FalconConfig.max_position_embeddings default


def _falcon(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads", "n_head")
    _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    new_arch = cfg.bool("new_decoder_architecture", False)
    if new_arch:
        kv_heads = cfg.int("num_kv_heads", default=heads)
    else:
        kv_heads = 1 if cfg.bool("multi_query", True) else heads
    _divides(cfg, kv_heads, heads, "num_kv_heads", "num_attention_heads")
    bias, parallel = cfg.bool("bias", False), cfg.bool("parallel_attn", True) or new_arch
    two_norms = new_arch and cfg.int("num_ln_in_parallel_attn", default=2) == 2
    ffn, vocab = cfg.int("ffn_hidden_size", default=4 * hidden), cfg.int("vocab_size")
    kind = activation(cfg, "activation", default="gelu")
    b = GraphBuilder(name)
    if "max_position_embeddings" not in cfg.data:  # FalconConfig's default (falcon-7b's file has none)
        cfg = _Config({**cfg.data, "max_position_embeddings": FALCON_POSITIONS}, cfg.where)
    tokens = _tokens_input(b, cfg, opts)
    x = token_embedding(b, tokens, vocab, hidden, "word_embeddings")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers", "n_layer"))):
        with b.scope(f"h.{index}"):
            x = _parallel_block(
                b, x, lambda h: _fused_qkv(b, h, heads, kv_heads, hidden // heads, bias, bias, "query_key_value"),
                lambda h: _mlp(b, h, ffn, kind, bias), parallel,
                ("ln_attn", "ln_mlp") if two_norms else ("input_layernorm", "post_attention_layernorm"),
                shared_norm=parallel and not two_norms)
    _lm_head(b, _layernorm(b, x, "ln_f"), vocab, cfg.bool("tie_word_embeddings", True), "word_embeddings")
    return b.build()


def _gpt_neox(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    ffn, vocab = cfg.int("intermediate_size"), cfg.int("vocab_size")
    kind = activation(cfg, "hidden_act", default="gelu")
    bias = cfg.bool("attention_bias", True)
    b = GraphBuilder(name)
    x = token_embedding(b, _tokens_input(b, cfg, opts), vocab, hidden, "embed_in")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers"))):
        with b.scope(f"layers.{index}"):
            x = _parallel_block(
                b, x, lambda h: _fused_qkv(b, h, heads, heads, hidden // heads, bias, bias, "query_key_value"),
                lambda h: _mlp(b, h, ffn, kind, True), cfg.bool("use_parallel_residual", True),
                ("input_layernorm", "post_attention_layernorm"), shared_norm=False)
    _lm_head(b, _layernorm(b, x, "final_layer_norm"), vocab, cfg.bool("tie_word_embeddings", False), "embed_in")
    return b.build()


# --- OPT ---------------------------------------------------------------------------------------------
OPT_POSITION_OFFSET = 2  # OPTLearnedPositionalEmbedding: max_position_embeddings + 2 rows


def _opt(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    ffn, vocab, positions = cfg.int("ffn_dim"), cfg.int("vocab_size"), cfg.int("max_position_embeddings")
    width = cfg.int("word_embed_proj_dim", default=hidden)
    bias, pre_norm = cfg.bool("enable_bias", True), cfg.bool("do_layer_norm_before", True)
    kind = activation(cfg, "activation_function", default="relu")
    b = GraphBuilder(name)
    tokens = _tokens_input(b, cfg, opts)
    x = token_embedding(b, tokens, vocab, width, "embed_tokens")
    if width != hidden:
        x = b.linear(x, hidden, False, name="project_in")
    x = b.add_(x, b.embedding(b.input(tokens.shape, name="positions"), positions + OPT_POSITION_OFFSET, hidden,
                              name="embed_positions"), name="embed")
    for index in range(opts.get("layers", cfg.int("num_hidden_layers"))):
        with b.scope(f"layers.{index}"):
            with b.scope("self_attn"):
                h = _layernorm(b, x, "self_attn_layer_norm") if pre_norm else x
                x = b.add_(x, _attention(b, h, heads, heads, hidden // heads, bias, bias), name="residual")
                x = x if pre_norm else _layernorm(b, x, "self_attn_layer_norm")
            with b.scope("mlp"):
                h = _layernorm(b, x, "final_layer_norm") if pre_norm else x
                x = b.add_(x, _mlp(b, h, ffn, kind, bias), name="residual")
                x = x if pre_norm else _layernorm(b, x, "final_layer_norm")
    if pre_norm:  # OPT-350m (post-norm) has no final norm
        x = _layernorm(b, x, "final_layer_norm")
    if width != hidden:
        x = b.linear(x, width, False, name="project_out")
    _lm_head(b, x, vocab, cfg.bool("tie_word_embeddings", True), "embed_tokens")
    return b.build()


DENSE_FAMILIES = {"gemma2": _gemma, "gemma3_text": _gemma, "gemma3": _gemma, "phi3": _phi3, "falcon": _falcon,
                  "gpt_neox": _gpt_neox, "opt": _opt}
