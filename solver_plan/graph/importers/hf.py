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
from typing import Any

from solver_plan.errors import GraphError, InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.ops import OpType
from solver_plan.graph.zoo.transformer import tied_output, token_embedding

DEFAULT_BATCH = 8
MAX_DEFAULT_SEQ = 2048
OPTIONS = ("batch", "seq", "target_seq", "layers")
# Bounds that refuse typos before a graph is built: 8x the deepest published model's blocks
# (Megatron-1T, 128) and 2**24 for any width (64x the largest vocabulary, Gemma's 256k).
MAX_LAYERS = 1024
MAX_WIDTH = 2**24
LAYER_KEYS = ("n_layer", "num_hidden_layers", "num_layers", "num_decoder_layers")
NULLABLE = ("n_inner", "head_dim")  # null means "derive it" in these Hugging Face configs


class _Config:
    """A config.json's keys, read with the file named in every error."""

    def __init__(self, data: dict, where: str):
        self.data, self.where = data, where

    def int(self, *keys: str, default: Any = InputError) -> int:
        """The first of `keys` present (aliases across families), a positive integer within bounds."""
        for key in keys:
            if key not in self.data or (self.data[key] is None and key in NULLABLE):
                continue
            value = self.data[key]
            limit = MAX_LAYERS if key in LAYER_KEYS else MAX_WIDTH
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise InputError(f"key {key!r} must be an integer from 1 to {limit}, got {value!r}", self.where)
            return value
        if default is InputError:
            raise InputError(f"missing key {keys[0]!r}" + (f" (or {', '.join(map(repr, keys[1:]))})"
                                                          if len(keys) > 1 else ""), self.where)
        return default

    def bool(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise InputError(f"key {key!r} must be true or false, got {value!r}", self.where)
        return value

    def str(self, key: str, default: str) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise InputError(f"key {key!r} must be a string, got {value!r}", self.where)
        return value


def read_config(path: Path) -> dict:
    from solver_plan.files import read_json  # strict: duplicate keys and NaN are errors naming the file
    data = read_json(path, "Hugging Face config")
    if not isinstance(data, dict):
        raise InputError("a Hugging Face config.json must hold a JSON object", str(path))
    return data


def config_file(spec: str) -> tuple[Path, str]:
    """`[hf:]path[:options]` -> (the config.json it names, a folder meaning its config.json; the
    raw option text). The file must exist."""
    from solver_plan.graph.importers.graph_file import split_file_spec
    path_text, raw = split_file_spec(spec.strip().removeprefix("hf:"))
    path = Path(path_text)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise InputError("no such model file", str(path))
    return path, raw


def looks_like_hf_config(data: dict) -> bool:
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


def _seq(cfg: _Config, opts: dict, *position_keys: str) -> int:
    positions = cfg.int(*position_keys)
    seq = opts.get("seq", min(positions, MAX_DEFAULT_SEQ))
    if seq > positions:
        raise InputError(f"option 'seq' ({seq}) exceeds the model's {position_keys[0]} ({positions})", cfg.where)
    return seq


def _tokens_input(b: GraphBuilder, cfg: _Config, opts: dict) -> Tensor:
    """The (batch, seq) token ids of a decoder whose positions are `max_position_embeddings`."""
    return b.input((opts.get("batch", DEFAULT_BATCH), _seq(cfg, opts, "max_position_embeddings")), name="tokens")


# --- GPT-2 and BERT: the zoo's builders -----------------------------------------------------------
def _gpt2(cfg: _Config, opts: dict, name: str) -> Graph:
    from solver_plan.graph.zoo.gpt import gpt
    hidden, heads = cfg.int("n_embd", "hidden_size"), cfg.int("n_head", "num_attention_heads")
    _divides(cfg, heads, hidden, "n_head", "n_embd")
    return gpt(name, batch=opts.get("batch", DEFAULT_BATCH), seq=_seq(cfg, opts, "n_positions", "n_ctx"),
               positions=cfg.int("n_positions", "n_ctx"), hidden=hidden,
               ffn=cfg.int("n_inner", default=4 * hidden), heads=heads, head_dim=hidden // heads,
               layers=opts.get("layers", cfg.int("n_layer", "num_hidden_layers")), vocab=cfg.int("vocab_size"))


def _bert(cfg: _Config, opts: dict, name: str) -> Graph:
    from solver_plan.graph.zoo.bert import SEGMENTS, bert
    if cfg.int("type_vocab_size", default=SEGMENTS) != SEGMENTS:
        raise InputError(f"key 'type_vocab_size' must be {SEGMENTS} (the graph has two segment embeddings)", cfg.where)
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    _divides(cfg, heads, hidden, "num_attention_heads", "hidden_size")
    return bert(name, batch=opts.get("batch", DEFAULT_BATCH), seq=_seq(cfg, opts, "max_position_embeddings"),
                positions=cfg.int("max_position_embeddings"), hidden=hidden, ffn=cfg.int("intermediate_size"),
                heads=heads, head_dim=hidden // heads,
                layers=opts.get("layers", cfg.int("num_hidden_layers")), vocab=cfg.int("vocab_size"))


def _divides(cfg: _Config, small: int, big: int, small_key: str, big_key: str) -> None:
    if big % small:
        raise InputError(f"key {big_key!r} ({big}) must be a multiple of {small_key!r} ({small})", cfg.where)


# --- building blocks of the LLaMA family and T5 ---------------------------------------------------
def _rms(b: GraphBuilder, x: Tensor, name: str) -> Tensor:
    return b.add(OpType.LAYERNORM, (x,), {"rms": True}, name)[0]


def _head_norm(b: GraphBuilder, x: Tensor, head_dim: int, name: str) -> Tensor:
    """RMSNorm over each head's head_dim features (Qwen3's and Gemma 3's q_norm / k_norm: head_dim
    parameters shared by the heads)."""
    n, seq, width = x.shape
    heads = b.reshape(x, (n, seq, width // head_dim, head_dim), name=f"{name}_heads")
    return b.reshape(_rms(b, heads, name), (n, seq, width), name=f"{name}_out")


def _attention(b: GraphBuilder, x: Tensor, heads: int, kv_heads: int, head_dim: int, qkv_bias: bool,
               out_bias: bool, memory: Tensor | None = None, qk_norm: bool = False) -> Tensor:
    source = x if memory is None else memory
    q = b.linear(x, heads * head_dim, qkv_bias, name="q_proj")
    k = b.linear(source, kv_heads * head_dim, qkv_bias, name="k_proj")
    v = b.linear(source, kv_heads * head_dim, qkv_bias, name="v_proj")
    if qk_norm:
        q, k = _head_norm(b, q, head_dim, "q_norm"), _head_norm(b, k, head_dim, "k_norm")
    return _core(b, q, k, v, heads, kv_heads, x.shape[-1], out_bias)


def _core(b: GraphBuilder, q: Tensor, k: Tensor, v: Tensor, heads: int, kv_heads: int, hidden: int,
          out_bias: bool) -> Tensor:
    """The attention over projected q, k, v and the output projection (o_proj)."""
    attrs = {"heads": heads} if kv_heads == heads else {"heads": heads, "kv_heads": kv_heads}
    core = b.add(OpType.ATTENTION, (q, k, v), attrs, "attention")[0]
    return b.linear(core, hidden, out_bias, name="o_proj")


def _silu(b: GraphBuilder, x: Tensor, name: str) -> Tensor:
    """silu(x) = x * sigmoid(x)."""
    return b.mul(x, b.unary(x, "sigmoid", name=f"{name}_sigmoid"), name=name)


def _activate(b: GraphBuilder, x: Tensor, activation: str, name: str) -> Tensor:
    return _silu(b, x, name) if activation == "silu" else b.unary(x, activation, name=name)


def _gated_mlp(b: GraphBuilder, x: Tensor, ffn: int, activation: str) -> Tensor:
    gate = b.linear(x, ffn, False, name="gate_proj")
    act = _activate(b, gate, activation, "act")
    return b.linear(b.mul(act, b.linear(x, ffn, False, name="up_proj"), name="gated"), x.shape[-1], False,
                    name="down_proj")


def _first_rows(b: GraphBuilder, x: Tensor, rows: int) -> Tensor:
    """The first `rows` rows (axis 1) of x repeated as often as needed: filler for capacity slots."""
    pool = b.concat([x] * -(-rows // x.shape[1]), axis=1, name="pad_pool") if rows > x.shape[1] else x
    if pool.shape[1] == rows:
        return pool
    return b.split(pool, (rows, pool.shape[1] - rows), axis=1, name="pad")[0]


def _moe(b: GraphBuilder, x: Tensor, ffn: int, experts: int, top_k: int, where: str, *, activation: str = "silu",
         router_bias: bool = False, scoring: str = "softmax") -> Tensor:
    """Top-k mixture of gated experts; the experts are grouped 1x1 convolutions (module docstring).
    `scoring`: the router's softmax (Mixtral, Qwen) or sigmoid (DeepSeek-V3, whose `router_bias` is
    its e_score_correction_bias: one parameter per expert, used to choose the experts)."""
    n, seq, hidden = x.shape
    if top_k > experts:
        raise InputError(f"num_experts_per_tok ({top_k}) exceeds the number of experts ({experts})", where)
    per_expert = -(-top_k * seq // experts)  # capacity rounded up: k x seq need not divide by the experts
    padding = experts * per_expert - top_k * seq
    logits = b.linear(x, experts, router_bias, name="router")
    probs = b.softmax(logits, name="router_softmax") if scoring == "softmax" else \
        b.unary(logits, "sigmoid", name="router_sigmoid")
    sizes = (1,) * top_k + ((experts - top_k,) if experts > top_k else ())
    weights = b.split(probs, sizes, axis=2, name="top_k")[:top_k]
    copies = b.concat([x] * top_k, axis=1, name="dispatch") if top_k > 1 else x
    if padding:  # the empty capacity slots run through the experts too (padded grouped GEMM)
        copies = b.concat([copies, _first_rows(b, copies, padding)], axis=1, name="padded")
    grouped = b.reshape(copies, (n, experts, per_expert, hidden), name="by_expert")
    grouped = b.reshape(b.transpose(grouped, (0, 1, 3, 2), name="to_channels"),
                        (n, experts * hidden, per_expert, 1), name="expert_inputs")
    up = b.conv2d(grouped, experts * 2 * ffn, 1, groups=experts, name="experts_gate_up")
    gate, lin = b.split(up, (experts * ffn, experts * ffn), axis=1, name="gate_up_split")
    act = b.mul(_activate(b, gate, activation, "experts_act"), lin, name="experts_gated")
    down = b.conv2d(act, experts * hidden, 1, groups=experts, name="experts_down")
    back = b.reshape(down, (n, experts, hidden, per_expert), name="from_channels")
    back = b.reshape(b.transpose(back, (0, 1, 3, 2), name="to_tokens"), (n, experts * per_expert, hidden),
                     name="combine")
    if padding:
        back = b.split(back, (top_k * seq, padding), axis=1, name="unpad")[0]
    parts = b.split(back, (seq,) * top_k, axis=1, name="copies") if top_k > 1 else (back,)
    out = b.mul(parts[0], weights[0], name="weighted0")
    for i in range(1, top_k):
        out = b.add_(out, b.mul(parts[i], weights[i], name=f"weighted{i}"), name=f"sum{i}")
    return out


def _lm_head(b: GraphBuilder, x: Tensor, vocab: int, tied: bool, embedding: str) -> None:
    logits = tied_output(b, x, vocab, embedding) if tied else b.linear(x, vocab, False, name="lm_head")
    b.softmax_cross_entropy(logits)


# --- LLaMA, Mistral, Qwen2, Mixtral -----------------------------------------------------------------
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
                with b.scope("self_attn"):
                    x = b.add_(x, _attention(b, _rms(b, x, "layer_norm"), heads, heads, head_dim, False, False),
                               name="residual")
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

# Families in their own modules (they build on the blocks above, so they are imported last).
from solver_plan.graph.importers.hf_dense import DENSE_FAMILIES  # noqa: E402
from solver_plan.graph.importers.hf_moe import MOE_FAMILIES  # noqa: E402

FAMILIES.update(DENSE_FAMILIES)
FAMILIES.update(MOE_FAMILIES)
