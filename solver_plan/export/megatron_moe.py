"""Megatron-LM flags of an expert-parallel plan (`kind: moe-hybrid`; flags of core_v0.15's
megatron/training/arguments.py, `_add_moe_args` and the MLA group): the model's shape and router
read back from its config.json (hybrid/moe_model.py's reader), and the expert settings the plan
priced: the folding (`--expert-model-parallel-size`, `--expert-tensor-parallel-size`), the
all-to-all dispatcher, grouped GEMM, the capacity factor with padded buffers (or dropless), the
all-to-all overlap and the selective recomputation of the experts (`--recompute-modules moe`).
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.export.common import WHERE
from solver_plan.export.moe_view import moe_layer_pattern

Flags = list[tuple[str, object]]
MLA_FAMILIES = ("deepseek_v2", "deepseek_v3")


def _attention_flags(model, config: dict, family: str) -> Flags:
    """Multi-head latent attention's ranks and head sizes (DeepSeek), or heads, head size and
    key/value groups read back from the planner's GEMM shapes (q: heads x d, k: kv x d)."""
    if family in MLA_FAMILIES:
        flags: Flags = [("--multi-latent-attention", None)]
        if config.get("q_lora_rank"):
            flags.append(("--q-lora-rank", int(config["q_lora_rank"])))
        return flags + [("--kv-lora-rank", int(config["kv_lora_rank"])),
                        ("--qk-head-dim", int(config["qk_nope_head_dim"])),
                        ("--qk-pos-emb-head-dim", int(config["qk_rope_head_dim"])),
                        ("--v-head-dim", int(config["v_head_dim"]))]
    head_dim = model.scores_width // model.heads
    groups = model.attention_gemms[1][1] // head_dim
    flags = [("--kv-channels", head_dim)] if head_dim * model.heads != model.hidden else []
    if groups != model.heads:
        flags += [("--group-query-attention", None), ("--num-query-groups", groups)]
    if family == "qwen3_moe":
        flags.append(("--qk-layernorm", None))  # Qwen3's RMS norms on q and k per head
    return flags


def _router_flags(model, config: dict, family: str, lost: list[str]) -> Flags:
    """The router as the config.json trains it: score function, top-k normalisation, group-limited
    routing, the expert bias of auxiliary-loss-free balancing, and the load-balancing loss with its
    coefficient (`router_aux_loss_coef`; DeepSeek's `aux_loss_alpha`, per sequence with `seq_aux`)."""
    flags: Flags = [("--moe-router-topk", model.top_k)]
    if config.get("scoring_func", "softmax") == "sigmoid":
        flags.append(("--moe-router-score-function", "sigmoid"))
    elif config.get("norm_topk_prob") is False:
        flags.append(("--moe-router-pre-softmax", None))  # softmax over all experts, top-k not renormalised
    if int(config.get("n_group") or 1) > 1:
        flags += [("--moe-router-num-groups", int(config["n_group"])),
                  ("--moe-router-group-topk", int(config["topk_group"]))]
    if float(config.get("routed_scaling_factor") or 1.0) != 1.0:
        flags.append(("--moe-router-topk-scaling-factor", float(config["routed_scaling_factor"])))
    if model.router_bias:
        flags.append(("--moe-router-enable-expert-bias", None))  # DeepSeek-V3's e_score_correction_bias
    coefficient = config.get("aux_loss_alpha" if family in MLA_FAMILIES else "router_aux_loss_coef")
    flags.append(("--moe-router-load-balancing-type", "seq_aux_loss" if config.get("seq_aux") else "aux_loss"))
    if coefficient is not None:
        flags.append(("--moe-aux-loss-coeff", float(coefficient)))
    else:
        lost.append("auxiliary load-balancing loss: the config.json gives no coefficient; Megatron-LM's default 0 "
                    "disables it (set --moe-aux-loss-coeff)")
    return flags


def model_flags(v, lost: list[str]) -> Flags:
    """--num-layers and the shape flags of the plan's mixture of experts (a line instead when the
    config.json is not on this machine)."""
    e = v.experts
    model, config = e.model, e.config
    if model is None:
        lost.append(f"model shape: {e.unreadable}; add --hidden-size, --ffn-hidden-size, --num-attention-heads, "
                    "--seq-length, --max-position-embeddings, --num-experts, --moe-ffn-hidden-size, "
                    "--moe-router-topk and the architecture flags by hand")
        return [("--num-layers", v.layers)]
    family = config.get("model_type", "")
    flags: Flags = [
        ("--num-layers", v.layers), ("--hidden-size", model.hidden),
        ("--ffn-hidden-size", model.dense_ffn or model.expert_ffn), ("--num-attention-heads", model.heads),
        ("--seq-length", model.seq), ("--max-position-embeddings", int(config.get("max_position_embeddings",
                                                                                 model.seq)))]
    flags += _attention_flags(model, config, family)
    flags += [("--swiglu", None), ("--normalization", "RMSNorm"), ("--position-embedding-type", "rope")]
    if not model.tied_embeddings:
        flags.append(("--untie-embeddings-and-output-weights", None))
    flags.append(("--disable-bias-linear", None))
    if config.get("attention_bias", family == "qwen2_moe"):
        flags.append(("--add-qkv-bias", None))
    flags += [("--num-experts", model.experts), ("--moe-ffn-hidden-size", model.expert_ffn)]
    if model.shared_ffn:
        flags.append(("--moe-shared-expert-intermediate-size", model.shared_ffn))
    if model.shared_gate:
        lost.append("the shared expert's sigmoid gate (Qwen2-MoE's shared_expert_gate): Megatron-LM's command line "
                    "has no flag for it (SharedExpertMLP's gate is set in the model spec)")
    if not all(model.moe_layers):
        flags.append(("--moe-layer-freq", moe_layer_pattern(model.moe_layers)))
    return flags + _router_flags(model, config, family, lost)


def expert_flags(v, lost: list[str]) -> Flags:
    """The expert settings the plan priced (module docstring); InputError for a plan Megatron-LM
    refuses to run (expert parallelism in fp16)."""
    e = v.experts
    if e.ep > 1 and v.precision == "mixed-fp16":
        raise InputError("precision mixed-fp16 with expert parallelism (ep > 1): Megatron-LM refuses expert "
                         "parallelism with fp16 (validate_args); plan in bf16", WHERE)
    flags: Flags = [("--expert-model-parallel-size", e.ep)]
    if e.etp != v.tp:  # Megatron-LM's default is the attention's tp (core_r0.10+ for another value)
        flags.append(("--expert-tensor-parallel-size", e.etp))
    flags += dispatcher_flags(e.dispatcher, lost)
    if v.precision in (None, "mixed-bf16", "mixed-fp8"):
        flags.append(("--moe-grouped-gemm", None))  # the per-expert GEMMs the plan priced (TE GroupedLinear)
    else:
        lost.append(f"grouped GEMM: Megatron-LM runs it in bf16 only (precision {v.precision}); its sequential "
                    "experts issue the same per-expert GEMMs one by one")
    if e.capacity_factor is not None:
        # every expert's buffer padded to c x its balanced share (the work the plan priced), the
        # lowest-probability copies dropped beyond it
        flags += [("--moe-expert-capacity-factor", e.capacity_factor), ("--moe-pad-expert-input-to-capacity", None),
                  ("--moe-token-drop-policy", "probs")]
    flags += _overlap_flags(v, lost)
    return flags + sharding_flags(v)


# The release an export with --moe-flex-dispatcher-backend needs (megatron.py writes it as a "needs"
# header, which scripts/check_exports.py reads): core_v0.16.0 generates the flag from
# TransformerConfig.moe_flex_dispatcher_backend (training/arguments.py ArgumentGroupFactory);
# core_v0.15.0-0.15.3 refuse it ("unrecognized arguments", checked with core_v0.15.3's parse_args).
FLEX_BACKEND_NEEDS = ("# needs Megatron-LM core_v0.16 or newer (--moe-flex-dispatcher-backend: HybridEP; the "
                      "core_dev_r0.15.0 branch from commit 0d8e0714, Megatron-Bridge 25.11's, has it too)")


def dispatcher_flags(dispatcher: str, lost: list[str]) -> Flags:
    """The token dispatcher priced: alltoall (MoEAlltoAllTokenDispatcher); DeepEP through the flex
    dispatcher, `--moe-enable-deepep` (core_v0.15.0-0.15.3, checked with core_v0.15.3's parse_args and
    validate_args; the core_dev_r0.15.0 commit 0d8e0714 that Megatron-Bridge 25.11 pins still takes it,
    deprecated for --moe-flex-dispatcher-backend deepep); HybridEP as `--moe-flex-dispatcher-backend
    hybridep`, which needs core_v0.16 (FLEX_BACKEND_NEEDS)."""
    if dispatcher == "alltoall":
        return [("--moe-token-dispatcher-type", "alltoall")]
    if dispatcher == "deepep":
        return [("--moe-token-dispatcher-type", "flex"), ("--moe-enable-deepep", None)]
    return [("--moe-token-dispatcher-type", "flex"), ("--moe-flex-dispatcher-backend", dispatcher)]


# Megatron FSDP (Megatron-core 0.14+, read at core_v0.15.0 megatron/training/arguments.py): the
# sharding strategy by ZeRO stage; it shards the experts over the expert-data-parallel group (its
# "ep_dp" stream group) and requires the fsdp_dtensor checkpoint format.
MEGATRON_FSDP_STRATEGY = {2: "optim_grads", 3: "optim_grads_params"}


def sharding_flags(v) -> Flags:
    """ZeRO-2 / ZeRO-3 of an expert-parallel plan as Megatron FSDP takes them (--use-megatron-fsdp
    --data-parallel-sharding-strategy optim_grads / optim_grads_params --ckpt-format fsdp_dtensor);
    nothing for ZeRO-0/1 (the distributed optimizer's flag is the dense export's)."""
    if v.zero_stage not in MEGATRON_FSDP_STRATEGY:
        return []
    return [("--use-megatron-fsdp", None), ("--data-parallel-sharding-strategy", MEGATRON_FSDP_STRATEGY[v.zero_stage]),
            ("--ckpt-format", "fsdp_dtensor")]


def _overlap_flags(v, lost: list[str]) -> Flags:
    """The all-to-all overlap priced: the shared expert's GEMMs under dispatch and combine, or another
    micro-batch's compute (Megatron-core's batch-level EP overlap, which TransformerConfig allows
    with ep > 1, no full recomputation, bf16/fp16 and, in a pipeline, virtual stages)."""
    overlap = v.experts.a2a_overlap
    if overlap == "shared-expert":
        if v.experts.model is not None and not v.experts.model.shared_ffn:
            lost.append("all-to-all overlap shared-expert: the model has no shared expert (nothing to overlap)")
            return []
        return [("--moe-shared-expert-overlap", None)]
    if overlap == "full":
        why = [reason for reason, bad in (
            ("ep 1", v.experts.ep == 1), ("full recomputation", v.strongest_recompute == "full"),
            (f"precision {v.precision}", v.precision in ("fp32", "tf32")),
            ("a pipeline without virtual stages", v.pp > 1 and v.virtual_stages == 1)) if bad]
        if why:
            lost.append(f"all-to-all overlap full: Megatron-LM's --overlap-moe-expert-parallel-comm refuses {', '.join(why)}"
                        "; exported without it (the all-to-all is exposed: slower than planned)")
            return []
        return [("--overlap-moe-expert-parallel-comm", None)]
    return []


def recompute_flags(v, lost: list[str]) -> Flags:
    """The plan's selective recomputation of a mixture of experts: the experts' MLPs (`moe`) and, with
    latent attention, its up-projections (`mla_up_proj`); the per-head q, k, v of other attentions
    have no Megatron-LM module (listed: they stay in memory)."""
    e = v.experts
    mla = e.model is not None and e.config.get("model_type") in MLA_FAMILIES
    if e.model is not None and not mla:
        lost.append("selective recomputation of the per-head q, k, v (priced: rebuilt from their projections): "
                    "Megatron-LM's recompute modules have none (core_attn recomputes the attention core); they stay "
                    "in memory: more activation memory than planned")
    return [("--recompute-granularity", "selective"), ("--recompute-modules", ("moe", "mla_up_proj") if mla else ("moe",))]


def routing_line(v) -> str:
    """A comment line: the routing the plan was priced under (the runtime routes as its router learns)."""
    e = v.experts
    capacity = "dropless" if e.capacity_factor is None else \
        f"capacity factor {e.capacity_factor:g} ({100 * e.dropped_fraction:.1f}% of token copies dropped)"
    return (f"# experts: etp {e.etp} x ep {e.ep} x edp {e.edp} over each stage's dp x cp x tp; priced under routing "
            f"{e.routing}, {capacity}, all-to-all overlap {e.a2a_overlap} (the runtime's routing is what its router "
            "learns under the load balancing below)")
