"""The transformer a hybrid plan trains: shapes, parameter counts and FLOPs, from a model spec.

Hybrid planning works on transformer-block boundaries, so it needs a decoder-only stack of identical
blocks: a GPT-style zoo spec (`gpt2*`, any llm-shapes model such as `gpt3-175B`, or
`gpt2:layers=96,hidden=12288,...`) or a Hugging Face config.json of a decoder family the project
imports (`solver_plan/graph/importers/hf.py`: gpt2, llama, mistral, qwen2, qwen3, mixtral, phi3,
gemma2, gemma3), e.g.
`data/hf-configs/llama-3-8b.json:seq=4096` (options `seq`, `layers`). The per-operator configuration
of one block is solved on the project's own graph of the same model with one block (`block_spec`);
the counts here are closed forms of that graph (checked against it in tests/test_hybrid_model.py,
and against the published sizes of data/hf-configs/published.json).

Hugging Face shapes: grouped-query attention (`kv_heads` < `heads`: k and v projections of width
kv_heads x head_dim, so fewer parameters, FLOPs and stored activations), gated MLPs (SwiGLU: gate,
up and down matrices, no biases), RMS norms (h parameters, not 2h), rotary positions (no position
embedding), untied output projections (`tie_word_embeddings: false`), q/k norms over head_dim
(Qwen3, Gemma 3: 2 x head_dim parameters a block, their inputs kept), Gemma's "sandwich" norms (an
RMS norm after the attention and after the MLP too: 4 a block, the two extra inputs kept; its GeGLU
MLP is a gated MLP), Phi-3's fused projections (the same matrices, stored fused), and Mixtral's mixture of
experts (`experts` SwiGLU experts per layer, `top_k` of them per token, perfectly balanced routing as
in hf.py). Expert parallelism is not an outer dimension of the hybrid space: inside a stage the
per-operator solver may split the experts' grouped weight over the tp submesh (hf.py's expert
dimension), which is expert parallelism within a node; expert parallelism across data-parallel
replicas (DeepSpeed-MoE / Megatron's --expert-model-parallel-size) is not searched.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from solver_plan.errors import InputError

GPT_FAMILY_NOTE = ("hybrid plans need a decoder-only transformer: a GPT-style zoo spec (gpt2, gpt2-*, an llm-shapes "
                   "model such as gpt3-175B) or a Hugging Face config.json of model_type gpt2, llama, mistral, qwen2, "
                   "qwen3, mixtral, phi3, gemma2 or gemma3")
HF_DECODERS = ("gpt2", "llama", "mistral", "qwen2", "qwen3", "mixtral", "phi3", "gemma2", "gemma3", "gemma3_text")
QK_NORM_FAMILIES = ("qwen3", "gemma3_text")  # RMS norms over head_dim on q and k (hf.py, hf_dense.py)
GEMMA_FAMILIES = ("gemma2", "gemma3_text")  # sandwich norms, head tied, hf_dense.GEMMA_HEAD_DIM unless given
HF_MAX_DEFAULT_SEQ = 2048  # as hf.py: the config's maximum positions, capped


@dataclass(frozen=True)
class TransformerSpec:
    """A decoder of `layers` identical pre-norm blocks, a token embedding (+ learned positions for
    GPT), a final norm and an output projection, tied to the token embedding or not.
    Defaults are GPT's (solver_plan/graph/zoo/gpt.py); `block_model` and `block_scope` say how to
    build the one-block graph (None: the zoo's gpt2 spec, scope "block0/")."""
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    head_dim: int
    seq: int
    vocab: int
    positions: int
    kv_heads: int = 0  # 0: as many as heads (multi-head attention)
    gated_mlp: bool = False  # SwiGLU: gate, up, down (no biases)
    qkv_bias: bool = True
    out_bias: bool = True
    mlp_bias: bool = True
    rms_norm: bool = False  # RMSNorm: a scale only (h parameters); LayerNorm: scale and shift (2h)
    learned_positions: bool = True  # a positions x hidden embedding (GPT); rotary positions have none
    tied_embeddings: bool = True
    experts: int = 1  # > 1: a mixture of `experts` gated MLPs per layer, `top_k` per token (Mixtral)
    top_k: int = 1
    qk_norm: bool = False  # RMS norms over head_dim on the queries and keys (Qwen3, Gemma 3)
    sandwich_norms: bool = False  # an RMS norm after the attention and after the MLP too (Gemma 2 / 3)
    block_model: str | None = None  # model file of the one-block graph (a config.json); None: zoo gpt2
    block_scope: str = "block0/"

    def __post_init__(self):
        for key in ("layers", "hidden", "ffn", "heads", "head_dim", "seq", "vocab", "positions", "experts", "top_k"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InputError(f"{key} must be a positive integer, got {value!r}", self.name)
        if not isinstance(self.kv_heads, int) or isinstance(self.kv_heads, bool) or self.kv_heads < 0:
            raise InputError(f"kv_heads must be a non-negative integer, got {self.kv_heads!r}", self.name)
        if self.kv_heads and self.heads % self.kv_heads:
            raise InputError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})", self.name)
        if self.top_k > self.experts:
            raise InputError(f"top_k ({self.top_k}) exceeds experts ({self.experts})", self.name)
        if self.experts > 1 and not self.gated_mlp:
            raise InputError("experts are gated MLPs (Mixtral): experts > 1 needs gated_mlp", self.name)
        if self.seq > self.positions:
            raise InputError(f"seq ({self.seq}) exceeds positions ({self.positions})", self.name)

    @property
    def attn_width(self) -> int:
        """Width of the attention's heads, heads x head_dim (may differ from hidden)."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of the k and v projections: kv_heads x head_dim (grouped-query attention)."""
        return (self.kv_heads or self.heads) * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """Matrices of the MLP: 3 with a gated MLP (SwiGLU), else 2."""
        return 3 if self.gated_mlp else 2

    @property
    def norm_params(self) -> int:
        """Parameters of one norm: hidden for RMSNorm, 2 x hidden (scale and shift) for LayerNorm."""
        return self.hidden if self.rms_norm else 2 * self.hidden

    # --- parameters ----------------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        """q (h x a d), k and v (h x kv d each), biases if any, output projection (a d x h + h)."""
        h, w, kv = self.hidden, self.attn_width, self.kv_width
        return (h * (w + 2 * kv) + (w + 2 * kv if self.qkv_bias else 0)
                + w * h + (h if self.out_bias else 0))

    @property
    def mlp_params(self) -> int:
        """h f + f + f h + h (GPT); 3 h f (SwiGLU, no biases); experts x 3 h f + the router's h x experts."""
        h, f = self.hidden, self.ffn
        one = self.mlp_matrices * h * f + ((f + h) if self.mlp_bias and not self.gated_mlp else 0)
        return one if self.experts == 1 else self.experts * one + h * self.experts

    @property
    def block_matrix_params(self) -> int:
        """The block's weight matrices alone (what an fp8 GEMM casts): q, k, v and the output projection,
        h (a d + 2 kv d) + a d h, and the MLP's, E k h f (k matrices, E experts); no biases, norms or router."""
        h, w, kv = self.hidden, self.attn_width, self.kv_width
        return h * (w + 2 * kv) + w * h + max(1, self.experts) * self.mlp_matrices * h * self.ffn

    @property
    def block_norms(self) -> int:
        """Norms of a block over the hidden width: before the attention and the MLP, and with sandwich
        norms after each too."""
        return 4 if self.sandwich_norms else 2

    @cached_property  # priced for every stage of every point of the search
    def block_params(self) -> int:
        """Attention, MLP (or experts), the block's norms and the q/k norms (2 head_dim, RMS)."""
        return (self.attention_params + self.mlp_params + self.block_norms * self.norm_params
                + (2 * self.head_dim if self.qk_norm else 0))

    @property
    def token_embedding_params(self) -> int:
        """Parameters of the token embedding, vocab x hidden."""
        return self.vocab * self.hidden

    @property
    def embedding_params(self) -> int:
        """Token embedding and, for learned positions, the position embedding (first stage)."""
        return self.token_embedding_params + (self.positions * self.hidden if self.learned_positions else 0)

    @property
    def head_params(self) -> int:
        """Final norm, and the output projection when it is not tied to the token embedding (a tied one
        is counted once, in the embedding)."""
        return self.norm_params + (0 if self.tied_embeddings else self.vocab * self.hidden)

    @property
    def total_params(self) -> int:
        """Parameters of the model: blocks, embeddings and the head."""
        return self.layers * self.block_params + self.embedding_params + self.head_params

    # --- FLOPs (multiply-add = 2) -------------------------------------------------------
    def mlp_forward_flops(self, batch: int) -> float:
        """2 x tokens x the MLP matrices a token passes: m h f for a dense MLP (m = 2, or 3 gated);
        top_k x 3 h f + the router's h x experts with experts."""
        tokens = batch * self.seq
        dense = self.mlp_matrices * self.hidden * self.ffn
        if self.experts == 1:
            return 2.0 * tokens * dense
        return 2.0 * tokens * (self.top_k * dense + self.hidden * self.experts)

    def block_forward_flops(self, batch: int) -> float:
        """2 x tokens x (h (a d + 2 kv d) + a d h) + MLP + attention scores and context 2 x 2 x b s^2 (a d)."""
        h, w, kv, s = self.hidden, self.attn_width, self.kv_width, self.seq
        return (2.0 * batch * s * (h * (w + 2 * kv) + w * h) + self.mlp_forward_flops(batch)
                + 4.0 * batch * s * s * w)

    def attention_core_forward_flops(self, batch: int) -> float:
        """Q K^T and scores x V: what selective recomputation recomputes (Korthikanti et al. 2022)."""
        return 4.0 * batch * self.seq * self.seq * self.attn_width

    def logits_forward_flops(self, batch: int) -> float:
        """Forward FLOPs of the output projection for `batch` sequences, 2 x batch x seq x hidden x vocab."""
        return 2.0 * batch * self.seq * self.hidden * self.vocab

    def model_flops_per_step(self, global_batch: int) -> float:
        """Training FLOPs without recomputation: 3 x forward (backward = 2 x forward) of every block
        and of the logits. For a(d) = h and ffn = 4h this is Narayanan et al. (SC'21) eq. (3) without
        its recomputation pass: 72 B s l h^2 (1 + s/(6h) + V/(12 l h)), i.e. 6 x params x tokens plus
        attention 12 x layers x h x s^2 x batch."""
        return 3.0 * (self.layers * self.block_forward_flops(global_batch)
                      + self.logits_forward_flops(global_batch))

    # --- the project's graph of one block ---------------------------------------------------
    def block_spec(self, micro_batch: int) -> str:
        """A model spec of the same model with one block and batch = micro-batch size: solved once per
        (submesh, micro-batch) and reused for every block (tying)."""
        if self.block_model is not None:
            return f"{self.block_model}:layers=1,seq={self.seq},batch={micro_batch}"
        return (f"gpt2:layers=1,hidden={self.hidden},heads={self.heads},head_dim={self.head_dim},"
                f"ffn={self.ffn},seq={self.seq},positions={self.positions},vocab={self.vocab},batch={micro_batch}")


def transformer_spec(model: str) -> TransformerSpec:
    """The TransformerSpec of a zoo spec or a Hugging Face config.json spec; InputError for anything
    but a decoder-only transformer."""
    from solver_plan.graph.importers.graph_file import is_model_file

    if is_model_file(model):
        return _hf_spec(model)
    from solver_plan.graph.zoo import gpt
    from solver_plan.graph.zoo.catalog import model_entry
    from solver_plan.graph.zoo.spec import resolve_options, split_spec

    name, raw = split_spec(model)
    entry = model_entry(name)
    if entry.build is not gpt.gpt:
        raise InputError(f"{GPT_FAMILY_NOTE}; got {name!r}", "--model")
    options = resolve_options(entry, raw)
    return TransformerSpec(model.strip(), layers=options["layers"], hidden=options["hidden"], ffn=options["ffn"],
                           heads=options["heads"], head_dim=options["head_dim"], seq=options["seq"],
                           vocab=options["vocab"], positions=options["positions"])


def _hf_spec(model: str) -> TransformerSpec:
    """A Hugging Face config.json (`[hf:]path[:seq=S,layers=L]`) read with hf.py's own reader, so the
    shapes are those of the graph the block is solved on."""
    from solver_plan.graph.importers.graph_file import model_file_parts
    from solver_plan.graph.importers.hf import _Config, _options, config_file, read_config
    from solver_plan.graph.importers.hf_dense import GEMMA_HEAD_DIM, gemma_language_config

    path, raw = config_file(model)
    where = str(path)
    if path.suffix.lower() != ".json":
        raise InputError(f"{GPT_FAMILY_NOTE}; got a graph file", where)
    if "batch" in raw:
        raise InputError("option 'batch' is the micro-batch size here: give the global batch with --batch and "
                         "pin micro_batch_size with --fix", where)
    opts = _options(raw, where)
    data = read_config(path)
    cfg = _Config(data, where)
    model_type = data.get("model_type")
    if model_type not in HF_DECODERS:
        raise InputError(f"{GPT_FAMILY_NOTE}; model_type {model_type!r} is not a decoder-only stack", where)
    prefix = model_file_parts(model)[0]
    block_model = f"{prefix}{path}"
    if model_type == "gpt2":
        hidden, heads = cfg.int("n_embd", "hidden_size"), cfg.int("n_head", "num_attention_heads")
        positions = cfg.int("n_positions", "n_ctx")
        return TransformerSpec(model.strip(), layers=opts.get("layers", cfg.int("n_layer", "num_hidden_layers")),
                               hidden=hidden, ffn=cfg.int("n_inner", default=4 * hidden), heads=heads,
                               head_dim=hidden // heads, seq=opts.get("seq", min(positions, HF_MAX_DEFAULT_SEQ)),
                               vocab=cfg.int("vocab_size"), positions=positions, block_model=block_model,
                               block_scope="block0/")
    cfg = gemma_language_config(cfg)  # gemma3's language model, as the graph reads it
    model_type = cfg.data["model_type"]
    hidden, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    positions = cfg.int("max_position_embeddings")
    moe = model_type == "mixtral"
    gemma = model_type in GEMMA_FAMILIES
    qkv_bias = cfg.bool("attention_bias", model_type == "qwen2")
    return TransformerSpec(
        model.strip(), layers=opts.get("layers", cfg.int("num_hidden_layers")), hidden=hidden,
        ffn=cfg.int("intermediate_size"), heads=heads,
        head_dim=cfg.int("head_dim", default=GEMMA_HEAD_DIM if gemma else hidden // heads),
        seq=opts.get("seq", min(positions, HF_MAX_DEFAULT_SEQ)), vocab=cfg.int("vocab_size"), positions=positions,
        kv_heads=cfg.int("num_key_value_heads", default=heads), gated_mlp=True, qkv_bias=qkv_bias,
        out_bias=cfg.bool("attention_bias", False) if model_type != "qwen2" else False, mlp_bias=False,
        rms_norm=True, learned_positions=False, tied_embeddings=cfg.bool("tie_word_embeddings", gemma),
        experts=cfg.int("num_local_experts") if moe else 1, top_k=cfg.int("num_experts_per_tok") if moe else 1,
        qk_norm=model_type in QK_NORM_FAMILIES, sandwich_norms=gemma,
        block_model=block_model, block_scope="layers.0/")
