"""Hugging Face `config.json` -> `Graph` for the common transformer families.

MODEL forms: `path/to/config.json`, `hf:path/to/config.json`, either followed by
`:batch=8,seq=1024,layers=4` (also `target_seq` for T5). Defaults: batch 8, seq = the config's
maximum positions capped at 2048 (T5: 512, target 128), every layer of the config.

Families by `model_type` (what each graph holds, so parameter counts can be checked against the
published sizes, see data/hf-configs/SOURCES.md):
- gpt2: the zoo's GPT decoder (learned positions, pre-norm LayerNorm, tied LM head);
- bert: the zoo's BERT with its MLM head (no pooler, as BertForMaskedLM);
- t5: encoder-decoder, RMS norms, no biases, ReLU or gated-GELU feed-forward, LM head tied unless
  `tie_word_embeddings` is false (T5 v1.1). Relative position biases (num_buckets x heads per
  stack, 512 parameters in t5-small) are left out: there is no operator for them;
- llama, mistral, qwen2: RMS norms, rotary positions (no parameters), grouped-query attention
  (`num_key_value_heads`), SwiGLU feed-forward (silu(gate) * up, silu = x * sigmoid(x)), q/k/v
  biases for qwen2 (or `attention_bias`), LM head tied only if `tie_word_embeddings`;
- qwen3: llama with q/k norms (RMSNorm over head_dim) and no biases;
- mixtral: llama with a mixture of experts in place of each feed-forward (see `moe`);
- gemma2, gemma3(_text), phi3, falcon, gpt_neox, opt: hf_dense.py; qwen2_moe, qwen3_moe,
  deepseek_v2, deepseek_v3 (multi-head latent attention, shared experts, first dense layers):
  hf_moe.py.

Mixture of experts. The cost model has no expert dimension of its own, so the experts of a layer
are one grouped 1x1 convolution with `groups = num_local_experts`: its weight dimension
(`out_channel`, split with the input channels of each group) *is* the expert dimension, and a
degree that divides the expert count is expert parallelism; the sample and sequence (`height`)
dimensions stay data/sequence parallel. Tokens are dispatched top-k: the k copies of the sequence
are laid out as (N, experts x hidden, ceil(k x seq / experts), 1), i.e. perfectly balanced routing
with each expert's capacity rounded up to whole slots (padding slots are computed, as in a padded
grouped GEMM); routing imbalance is the hybrid planner's (hybrid/moe.py), not the graph's. The
router is a linear layer (bias-free but for DeepSeek-V3's correction bias) and a softmax (sigmoid
for DeepSeek-V3) whose first k scores weight the k expert outputs.
"""
from __future__ import annotations

from pathlib import Path

from solver_plan.errors import GraphError, InputError
from solver_plan.files import read_json  # strict: duplicate keys and NaN are errors naming the file
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.importers.file_spec import split_file_spec
from solver_plan.graph.importers.hf_blocks import (DEFAULT_BATCH, MAX_LAYERS, MAX_WIDTH, _attention, _Config, _divides,
                                                   _gated_mlp, _lm_head, _moe, _rms, _seq, _tokens_input)
from solver_plan.graph.importers.hf_dense import DENSE_FAMILIES
from solver_plan.graph.importers.hf_moe import MOE_FAMILIES
from solver_plan.graph.zoo.bert import SEGMENTS, bert
from solver_plan.graph.zoo.gpt import gpt
from solver_plan.graph.zoo.transformer import token_embedding

OPTIONS = ("batch", "seq", "target_seq", "layers")


def read_config(path: Path) -> dict:
    """The JSON object of a Hugging Face config.json; InputError when the file holds anything else."""
    data = read_json(path, "Hugging Face config")
    if not isinstance(data, dict):
        raise InputError("a Hugging Face config.json must hold a JSON object", str(path))
    return data


def config_file(spec: str) -> tuple[Path, str]:
    """`[hf:]path[:options]` -> (the config.json it names, a folder meaning its config.json; the
    raw option text). The file must exist."""
    path_text, raw = split_file_spec(spec.strip().removeprefix("hf:"))
    path = Path(path_text)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise InputError("no such model file", str(path))
    return path, raw


def looks_like_hf_config(data: dict) -> bool:
    """Whether a JSON object looks like a Hugging Face config (it has `model_type` or `architectures`)."""
    return "model_type" in data or "architectures" in data


def load_hf_config(path: str | Path, options: dict[str, str] | None = None, name: str | None = None) -> Graph:
    """Build the training graph (ending in the LM loss) of the model a config.json describes."""
    path = Path(path)
    where = str(path)
    cfg = _Config(read_config(path), where)
    model_type = cfg.data.get("model_type")
    if model_type is None:
        raise InputError(f"missing key 'model_type' (one of {', '.join(sorted(FAMILIES))})", where)
    if not isinstance(model_type, str) or model_type not in FAMILIES:  # a list or mapping is unhashable
        raise InputError(f"model_type {model_type!r} is not supported (supported: {', '.join(sorted(FAMILIES))})",
                         where)
    opts = _options(options or {}, where)
    try:
        return FAMILIES[model_type](cfg, opts, name or path.stem)
    except GraphError as exc:
        raise InputError(f"the config gives an invalid graph: {exc}", where) from None


def _options(raw: dict[str, str], where: str) -> dict[str, int]:
    out = {}
    for key, text in raw.items():
        if key not in OPTIONS:
            raise InputError(f"unknown option {key!r} (options: {', '.join(OPTIONS)})", where)
        try:
            value = int(text)
        except (TypeError, ValueError):
            value = 0
        limit = MAX_LAYERS if key == "layers" else MAX_WIDTH
        if not 1 <= value <= limit:
            raise InputError(f"option {key!r} expects an integer from 1 to {limit}, got {text!r}", where)
        out[key] = value
    return out


def _gpt2(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads = cfg.int("n_embd", "hidden_size"), cfg.int("n_head", "num_attention_heads")
    _divides(cfg, heads, hidden, "n_head", "n_embd")
    return gpt(name, batch=opts.get("batch", DEFAULT_BATCH), seq=_seq(cfg, opts, "n_positions", "n_ctx"),
               positions=cfg.int("n_positions", "n_ctx"), hidden=hidden,
               ffn=cfg.int("n_inner", default=4 * hidden), heads=heads, head_dim=hidden // heads,
               layers=opts.get("layers", cfg.int("n_layer", "num_hidden_layers")), vocab=cfg.int("vocab_size"))


def _bert(cfg: _Config, opts: dict, name: str) -> Graph:
    if cfg.int("type_vocab_size", default=SEGMENTS) != SEGMENTS:
        raise InputError(f"key 'type_vocab_size' must be {SEGMENTS} (the graph has two segment embeddings)", cfg.where)
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    return bert(name, batch=opts.get("batch", DEFAULT_BATCH), seq=_seq(cfg, opts, "max_position_embeddings"),
                positions=cfg.int("max_position_embeddings"), hidden=hidden, ffn=cfg.int("intermediate_size"),
                heads=heads, head_dim=hidden // heads,
                layers=opts.get("layers", cfg.int("num_hidden_layers")), vocab=cfg.int("vocab_size"))


def _llama(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    kv_heads = cfg.int("num_key_value_heads", default=heads)
    head_dim = cfg.int("head_dim", default=hidden // heads)
    if cfg.data.get("head_dim") is None:
        _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    _divides(cfg, kv_heads, heads, "num_key_value_heads", "num_attention_heads")
    model_type = cfg.data["model_type"]
    qkv_bias = cfg.bool("attention_bias", model_type == "qwen2")
    qk_norm = model_type == "qwen3"  # q_norm / k_norm over head_dim
    out_bias = cfg.bool("attention_bias", False) if model_type != "qwen2" else False
    act = cfg.str("hidden_act", "silu")
    if act not in ("silu", "gelu", "relu"):
        raise InputError(f"key 'hidden_act' {act!r} is not supported (silu, gelu, relu)", cfg.where)
    moe = model_type == "mixtral"
    if moe:
        experts, top_k = cfg.int("num_local_experts"), cfg.int("num_experts_per_tok")
        if act != "silu":
            raise InputError(f"key 'hidden_act' must be 'silu' for mixtral experts, got {act!r}", cfg.where)
    ffn, vocab = cfg.int("intermediate_size"), cfg.int("vocab_size")
    layers = opts.get("layers", cfg.int("num_hidden_layers"))
    b = GraphBuilder(name)
    x = token_embedding(b, _tokens_input(b, cfg, opts), vocab, hidden, "embed_tokens")
    for index in range(layers):
        with b.scope(f"layers.{index}"):
            with b.scope("self_attn"):
                h = _attention(b, _rms(b, x, "input_layernorm"), heads, kv_heads, head_dim, qkv_bias, out_bias,
                               qk_norm=qk_norm)
                x = b.add_(x, h, name="residual")
            with b.scope("block_sparse_moe" if moe else "mlp"):
                h = _rms(b, x, "post_attention_layernorm")
                h = _moe(b, h, ffn, experts, top_k, cfg.where) if moe else _gated_mlp(b, h, ffn, act)
                x = b.add_(x, h, name="residual")
    x = _rms(b, x, "norm")
    _lm_head(b, x, vocab, cfg.bool("tie_word_embeddings", False), "embed_tokens")
    return b.build()


# --- T5 ---------------------------------------------------------------------------------------------
def _t5(cfg: _Config, opts: dict, name: str) -> Graph:
    hidden, heads, head_dim = cfg.int("d_model"), cfg.int("num_heads"), cfg.int("d_kv")
    ffn, vocab = cfg.int("d_ff"), cfg.int("vocab_size")
    enc_layers = opts.get("layers", cfg.int("num_layers"))
    dec_layers = opts.get("layers", cfg.int("num_decoder_layers", default=enc_layers))
    proj = cfg.str("feed_forward_proj", "relu")
    if proj not in ("relu", "gated-gelu"):
        raise InputError(f"key 'feed_forward_proj' {proj!r} is not supported (relu, gated-gelu)", cfg.where)
    batch = opts.get("batch", DEFAULT_BATCH)
    b = GraphBuilder(name)

    def ffn_block(h: Tensor) -> Tensor:
        if proj == "relu":
            return b.linear(b.relu(b.linear(h, ffn, False, name="wi")), hidden, False, name="wo")
        return _gated_mlp(b, h, ffn, "gelu")

    def stack(x: Tensor, layers: int, memory: Tensor | None) -> Tensor:
        for index in range(layers):
            with b.scope(f"block.{index}"):
                with b.scope("self_attn"):  # causal in the decoder (the stack with a memory) only
                    x = b.add_(x, _attention(b, _rms(b, x, "layer_norm"), heads, heads, head_dim, False, False,
                                             causal=memory is not None), name="residual")
                if memory is not None:
                    with b.scope("cross_attn"):
                        h = _attention(b, _rms(b, x, "layer_norm"), heads, heads, head_dim, False, False, memory)
                        x = b.add_(x, h, name="residual")
                with b.scope("ffn"):
                    x = b.add_(x, ffn_block(_rms(b, x, "layer_norm")), name="residual")
        return _rms(b, x, "final_layer_norm")

    seq = opts.get("seq", min(cfg.int("n_positions", default=512), 512))  # relative positions: no hard limit
    sources = token_embedding(b, b.input((batch, seq), name="tokens"), vocab, hidden, "shared")
    with b.scope("encoder"):
        memory = stack(sources, enc_layers, None)
    with b.scope("decoder"):
        ids = b.input((batch, opts.get("target_seq", 128)), name="tokens")
        x = stack(token_embedding(b, ids, vocab, hidden, "embed_tokens", "shared"), dec_layers, memory)
    _lm_head(b, x, vocab, cfg.bool("tie_word_embeddings", True), "shared")
    return b.build()


FAMILIES = {"gpt2": _gpt2, "bert": _bert, "t5": _t5, "llama": _llama, "mistral": _llama, "qwen2": _llama,
            "qwen3": _llama, "mixtral": _llama}
# Families in their own modules (built from the blocks of hf_blocks.py, as the ones above).

FAMILIES.update(DENSE_FAMILIES)
FAMILIES.update(MOE_FAMILIES)
