"""The building blocks of the Hugging Face importers (hf.py, hf_dense.py, hf_moe.py): a config.json's
keys read with bounds (`_Config`), the token input, attention, feed-forward (gated, mixture of
experts) and LM head as `GraphBuilder` steps. Semantics of each family: hf.py's docstring."""
from __future__ import annotations

from typing import Any

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Tensor
from solver_plan.graph.ops import OpType
from solver_plan.graph.zoo.transformer import tied_output

DEFAULT_BATCH = 8
MAX_DEFAULT_SEQ = 2048
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
               out_bias: bool, memory: Tensor | None = None, qk_norm: bool = False, causal: bool = True) -> Tensor:
    source = x if memory is None else memory
    q = b.linear(x, heads * head_dim, qkv_bias, name="q_proj")
    k = b.linear(source, kv_heads * head_dim, qkv_bias, name="k_proj")
    v = b.linear(source, kv_heads * head_dim, qkv_bias, name="v_proj")
    if qk_norm:
        q, k = _head_norm(b, q, head_dim, "q_norm"), _head_norm(b, k, head_dim, "k_norm")
    return _core(b, q, k, v, heads, kv_heads, x.shape[-1], out_bias, causal and memory is None)


def _core(b: GraphBuilder, q: Tensor, k: Tensor, v: Tensor, heads: int, kv_heads: int, hidden: int,
          out_bias: bool, causal: bool = True) -> Tensor:
    """The attention over projected q, k, v and the output projection (o_proj); `causal`: a decoder's
    self-attention (every family read here but T5's encoder and cross-attention)."""
    attrs = {"heads": heads} if kv_heads == heads else {"heads": heads, "kv_heads": kv_heads}
    if causal:
        attrs["causal"] = True
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
