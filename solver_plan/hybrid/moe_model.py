"""The mixture-of-experts decoder an expert-parallel plan trains: shapes, parameters and FLOPs of
its layers, from a Hugging Face config.json (mixtral, qwen2_moe, qwen3_moe, deepseek_v2,
deepseek_v3) read with the importer's reader, so the counts are those of the importer's graph
(tests/test_moe.py checks them against it and against the published sizes).

Unlike `TransformerSpec` (identical blocks), the layers here may differ: DeepSeek's first
`first_k_dense_replace` layers are dense (`moe_layers` says which are MoE). Every matrix of a layer
is a GEMM shape (in, out) per token; what the tensor-parallel degree splits is the column (out)
dimension of the first matrices and the row (in) of the output ones (Megatron), so a GEMM's work
per device is its FLOPs / tp either way.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from solver_plan.errors import InputError

MOE_FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3")
MAX_DEFAULT_SEQ = 4096  # the sequence length MoE pre-training runs use (DeepSeek-V3, Megatron-Bridge recipes)


@dataclass(frozen=True)
class MoEModel:
    """A decoder of `layers` pre-norm blocks; layer i has experts iff moe_layers[i].
    Widths per token: `attention_gemms` (in, out) of the attention's projections (MLA: q_a, q_b,
    kv_a, kv_b, o; otherwise q, k, v, o); `scores_width` = heads x the q/k head dim and
    `values_width` = heads x the v head dim (the core's two products, 2 s x width FLOPs per token
    each); `attention_stored` = elements per token the attention keeps for backward besides its
    input (q, k, v, context, and MLA's low-rank latents; Qwen3's q/k norms also save their inputs,
    (heads + kv_heads) x head_dim more: Transformer Engine's RMSNorm saves a contiguous copy of its
    input while the attention saves the rotated q and k), of which `attention_recomputable` (the
    per-head q, k, v) selective recomputation drops and recomputes from the layer's own GEMMs (MLA's
    up-projections, Megatron's mla_up_proj; the q, k, v projections otherwise)."""
    name: str
    hidden: int
    seq: int
    vocab: int
    heads: int
    attention_gemms: tuple[tuple[int, int], ...]
    attention_extra_params: int  # biases, MLA's low-rank norms, q/k norms
    scores_width: int
    values_width: int
    attention_stored: int
    attention_recomputable: int  # of attention_stored: the per-head q, k, v (selective recomputation's)
    kv_width: int  # elements per token of K and V (what context parallelism passes around its ring)
    moe_layers: tuple[bool, ...]
    dense_ffn: int  # SwiGLU width of the dense layers
    experts: int
    top_k: int
    expert_ffn: int
    shared_ffn: int = 0  # SwiGLU width of the shared expert(s) (n_shared x expert_ffn for DeepSeek)
    shared_gate: bool = False  # Qwen2-MoE's sigmoid(shared_expert_gate x), a 1-wide linear
    router_bias: bool = False  # DeepSeek-V3's e_score_correction_bias
    tied_embeddings: bool = False
    # group-limited (node-limited) routing: the experts in `expert_groups` equal contiguous groups, each
    # token choosing its top_k among the experts of `groups_per_token` of them (DeepSeek-V2/V3's n_group,
    # topk_group; Megatron-core's --moe-router-num-groups / --moe-router-group-topk); 1 and 1: unlimited
    expert_groups: int = 1
    groups_per_token: int = 1

    def __post_init__(self):
        for key in ("hidden", "seq", "vocab", "heads", "experts", "top_k", "expert_ffn"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"{key} must be a positive integer, got {value!r}", self.name)
        if self.top_k > self.experts:
            raise InputError(f"top_k ({self.top_k}) exceeds experts ({self.experts})", self.name)
        if not any(self.moe_layers):
            raise InputError("no layer has experts", self.name)
        groups, chosen = self.expert_groups, self.groups_per_token
        if (not isinstance(groups, int) or not isinstance(chosen, int) or groups < 1 or self.experts % groups
                or not 1 <= chosen <= groups or self.top_k > chosen * (self.experts // groups)):
            raise InputError(f"expert groups {groups!r} choosing {chosen!r} must divide the {self.experts} experts and "
                             f"leave at least top_k ({self.top_k}) experts to choose from", self.name)

    @property
    def layers(self) -> int:
        """Number of decoder layers."""
        return len(self.moe_layers)

    @property
    def moe_layer_count(self) -> int:
        """Number of layers with experts."""
        return sum(self.moe_layers)

    # --- parameters -------------------------------------------------------------------------------
    @property
    def recomputed_gemms(self) -> tuple[tuple[int, int], ...]:
        """The attention GEMMs selective recomputation repeats to rebuild the per-head q, k, v: MLA's
        q_b and kv_b (the second and fourth), or q, k and v (the first three)."""
        mla = len(self.attention_gemms) == 5
        return (self.attention_gemms[1], self.attention_gemms[3]) if mla else self.attention_gemms[:3]

    @property
    def attention_saved_gemm_inputs(self) -> int:
        """Elements per token of `attention_stored` that are inputs of the attention's GEMMs (what
        Transformer Engine saves in fp8 under fp8 training): the output projection's input (the
        context, heads x v head dim) and, with MLA, the q_b and kv_b inputs (the q and kv latents).
        The norm output that feeds the first projections is counted apart (one of the 2 h)."""
        if len(self.attention_gemms) == 5:
            return self.attention_gemms[1][0] + self.attention_gemms[3][0] + self.attention_gemms[4][0]
        return self.attention_gemms[-1][0]

    @cached_property
    def attention_params(self) -> int:
        """Parameters of one layer's attention: its projections (sum of in x out) plus extras (biases, MLA's
        low-rank norms, q/k norms).
        """
        return sum(k * n for k, n in self.attention_gemms) + self.attention_extra_params

    @cached_property
    def expert_params(self) -> int:
        """One layer's routed experts: experts x 3 h f_e (SwiGLU: gate, up, down)."""
        return self.experts * 3 * self.hidden * self.expert_ffn

    @property
    def router_params(self) -> int:
        """Parameters of one router, hidden x experts (plus a bias per expert when it has one)."""
        return self.hidden * self.experts + (self.experts if self.router_bias else 0)

    @property
    def shared_params(self) -> int:
        """Parameters of one layer's shared expert: 3 x hidden x shared_ffn (gated MLP), plus a gate vector
        when it has one.
        """
        return 3 * self.hidden * self.shared_ffn + (self.hidden if self.shared_gate else 0)

    def dense_layer_params(self, moe: bool) -> int:
        """Parameters of a layer outside its routed experts: attention, two RMS norms, and the dense
        SwiGLU (3 h f) or the router and shared experts."""
        return self._layer_params[moe]

    @cached_property
    def _layer_params(self) -> tuple[int, int]:
        common = self.attention_params + 2 * self.hidden
        return common + 3 * self.hidden * self.dense_ffn, common + self.router_params + self.shared_params

    @property
    def embedding_params(self) -> int:
        """Parameters of the token embedding, vocab x hidden."""
        return self.vocab * self.hidden

    @property
    def head_params(self) -> int:
        """Final norm and the untied output projection."""
        return self.hidden + (0 if self.tied_embeddings else self.vocab * self.hidden)

    @property
    def total_params(self) -> int:
        """Parameters of the model: every layer's dense part, experts on the MoE layers, embedding and head.
        """
        return (sum(self.dense_layer_params(m) + (self.expert_params if m else 0) for m in self.moe_layers)
                + self.embedding_params + self.head_params)

    @property
    def active_params(self) -> int:
        """Parameters a token passes: top_k of the routed experts (embedding included, as reports count)."""
        routed = self.top_k * 3 * self.hidden * self.expert_ffn
        return (sum(self.dense_layer_params(m) + (routed if m else 0) for m in self.moe_layers)
                + self.embedding_params + self.head_params)

    # --- FLOPs per token (forward, multiply-add = 2) -----------------------------------------------
    def dense_gemms(self, moe: bool) -> tuple[tuple[int, int], ...]:
        """(in, out) of the matrices every token passes on the tensor-parallel side: attention,
        and the dense SwiGLU (h -> 2f, f -> h) or the shared expert (and its gate); the router is
        apart (`router_flops_per_token`: it is not split by tp)."""
        h = self.hidden
        if not moe:
            mlp = ((h, 2 * self.dense_ffn), (self.dense_ffn, h))
        else:
            mlp = ((h, 2 * self.shared_ffn), (self.shared_ffn, h)) if self.shared_ffn else ()
            mlp += ((h, 1),) if self.shared_gate else ()
        return self.attention_gemms + mlp

    def attention_core_flops_per_token(self) -> float:
        """q k^T and probabilities x v over the whole sequence: 2 s (scores width + values width)."""
        return 2.0 * self.seq * (self.scores_width + self.values_width)

    def expert_flops_per_token(self) -> float:
        """top_k experts x 2 x 3 h f_e."""
        return self.top_k * 6.0 * self.hidden * self.expert_ffn

    def router_flops_per_token(self) -> float:
        """Forward FLOPs of the router GEMM per token, 2 x hidden x experts."""
        return 2.0 * self.hidden * self.experts

    def layer_flops_per_token(self, moe: bool) -> float:
        """Forward FLOPs per token of one layer: its dense GEMMs (2 k n each), the attention core, and on a
        MoE layer the routed experts and the router.
        """
        gemms = sum(2.0 * k * n for k, n in self.dense_gemms(moe))
        return gemms + self.attention_core_flops_per_token() + (
            self.expert_flops_per_token() + self.router_flops_per_token() if moe else 0.0)

    def model_flops_per_step(self, global_batch: int) -> float:
        """3 x forward (backward = 2 x forward) of every layer and of the logits, no recomputation."""
        tokens = global_batch * self.seq
        layers = sum(self.layer_flops_per_token(m) for m in self.moe_layers)
        return 3.0 * tokens * (layers + 2.0 * self.hidden * self.vocab)


def moe_model(model) -> MoEModel:
    """A MoEModel, or one from a config.json spec `[hf:]path[:seq=S,layers=L]`; InputError naming the
    file for anything but a mixture-of-experts family."""
    if isinstance(model, MoEModel):
        return model
    from solver_plan.graph.importers.hf import _Config, _options, config_file, read_config

    if not isinstance(model, str) or not model.strip():
        raise InputError(f"expects a config.json of a mixture of experts, got {model!r}", "--model")
    path, raw = config_file(model)
    where = str(path)
    if "batch" in raw:
        raise InputError("option 'batch' is the micro-batch size here: give the global batch with --batch", where)
    opts = _options(raw, where)
    cfg = _Config(read_config(path), where)
    family = cfg.data.get("model_type")
    if family not in MOE_FAMILIES:
        raise InputError(f"expert-parallel plans need a mixture of experts ({', '.join(MOE_FAMILIES)}); "
                         f"model_type {family!r}", where)
    return _from_config(cfg, family, opts, model.strip())


def _from_config(cfg, family: str, opts: dict, name: str) -> MoEModel:
    from solver_plan.graph.importers.hf_moe import deepseek_layer_is_moe

    h, heads = cfg.int("hidden_size"), cfg.int("num_attention_heads")
    positions = cfg.int("max_position_embeddings")
    seq = opts.get("seq", min(positions, MAX_DEFAULT_SEQ))
    if seq > positions:
        raise InputError(f"option 'seq' ({seq}) exceeds max_position_embeddings ({positions})", cfg.where)
    layers = opts.get("layers", cfg.int("num_hidden_layers"))
    common = dict(name=name, hidden=h, seq=seq, vocab=cfg.int("vocab_size"), heads=heads,
                  tied_embeddings=cfg.bool("tie_word_embeddings", False), top_k=cfg.int("num_experts_per_tok"))
    if family.startswith("deepseek"):
        nope, rope, v = cfg.int("qk_nope_head_dim"), cfg.int("qk_rope_head_dim"), cfg.int("v_head_dim")
        rkv = cfg.int("kv_lora_rank")
        rq = cfg.int("q_lora_rank") if cfg.data.get("q_lora_rank") is not None else 0
        q = ((h, rq), (rq, heads * (nope + rope))) if rq else ((h, heads * (nope + rope)),)
        gemms = q + ((h, rkv + rope), (rkv, heads * (nope + v)), (heads * v, h))
        shared = cfg.int("n_shared_experts", default=0) if cfg.data.get("n_shared_experts") else 0
        expert_ffn = cfg.int("moe_intermediate_size")
        # HF modeling_deepseek: "group_limited_greedy" (V2) and "noaux_tc" (V3) pick topk_group of n_group
        # groups per token, then top-k experts among them; "greedy" (V2-Lite) ignores the groups
        method = cfg.str("topk_method", "noaux_tc" if family == "deepseek_v3" else "greedy")
        # a given n_group is checked (0 would divide by zero in HF's router); null or absent: no groups
        limited = method in ("group_limited_greedy", "noaux_tc") and cfg.data.get("n_group") is not None
        groups = (cfg.int("n_group"), cfg.int("topk_group")) if limited else (1, 1)
        return MoEModel(**common, attention_gemms=gemms, attention_extra_params=rq + rkv,
                        scores_width=heads * (nope + rope), values_width=heads * v,
                        attention_stored=(rq + rkv + rope + heads * (nope + rope) * 2 + heads * v * 2),
                        attention_recomputable=heads * (nope + rope) * 2 + heads * v,
                        kv_width=heads * (nope + rope) + heads * v,
                        moe_layers=tuple(deepseek_layer_is_moe(cfg, i) for i in range(layers)),
                        dense_ffn=cfg.int("intermediate_size"), experts=cfg.int("n_routed_experts"),
                        expert_ffn=expert_ffn, shared_ffn=shared * expert_ffn,
                        router_bias=method == "noaux_tc", expert_groups=groups[0], groups_per_token=groups[1])
    kv = cfg.int("num_key_value_heads", default=heads)
    d = cfg.int("head_dim", default=h // heads)
    qwen3 = family == "qwen3_moe"
    bias = cfg.bool("attention_bias", family == "qwen2_moe")
    gemms = ((h, heads * d), (h, kv * d), (h, kv * d), (heads * d, h))
    extra = ((heads + 2 * kv) * d if bias else 0) + (2 * d if qwen3 else 0)
    if family == "mixtral":
        experts, expert_ffn, shared, ffn = cfg.int("num_local_experts"), cfg.int("intermediate_size"), 0, 0
        sparse = (True,) * layers
    else:
        experts, expert_ffn = cfg.int("num_experts"), cfg.int("moe_intermediate_size")
        shared = 0 if qwen3 else cfg.int("shared_expert_intermediate_size", default=0)
        step = cfg.int("decoder_sparse_step", default=1)
        dense = set(cfg.data.get("mlp_only_layers") or [])
        sparse = tuple(i not in dense and (i + 1) % step == 0 for i in range(layers))
        ffn = cfg.int("intermediate_size")
    return MoEModel(**common, attention_gemms=gemms, attention_extra_params=extra, scores_width=heads * d,
                    values_width=heads * d, attention_stored=(2 * heads + 2 * kv + (heads + kv if qwen3 else 0)) * d,
                    attention_recomputable=(heads + 2 * kv) * d, kv_width=2 * kv * d, moe_layers=sparse,
                    dense_ffn=ffn, experts=experts, expert_ffn=expert_ffn, shared_ffn=shared,
                    shared_gate=family == "qwen2_moe" and shared > 0)


def is_moe_model(spec: str) -> bool:
    """Whether MODEL is a config.json of a mixture-of-experts family (moe_model.MOE_FAMILIES)."""
    from pathlib import Path

    from solver_plan.graph.importers.graph_file import is_model_file, split_file_spec

    if not is_model_file(spec):
        return False
    path = Path(split_file_spec(spec.strip().removeprefix("hf:"))[0])
    path = path / "config.json" if path.is_dir() else path
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    from solver_plan.graph.importers.hf import read_config

    return read_config(path).get("model_type") in MOE_FAMILIES
