"""torchtitan settings of an expert-parallel plan (torchtitan 0.3).

torchtitan's expert parallelism (`parallelism.expert_parallel_degree`, torchtitan/config/configs.py
and distributed/parallel_dims.py) borrows its ranks from FSDP and tensor parallelism: the experts
are split over ep ranks and FSDP-sharded over efsdp = dp_shard x cp x tp / ep, never split by tp
(no expert tensor parallelism in 0.3; 0.2 had `expert_tensor_parallel_degree`). So a plan with
etp > 1 is refused, and ep must divide dp_shard x cp x tp. Its MoE layers route dropless through
an all-to-all dispatcher with grouped GEMMs; the router and its load balancing are those of the
registered model (config_registry functions: qwen3_30b_a3b, deepseek_v3_16b, deepseek_v3_671b).
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.export.common import WHERE

# torchtitan 0.3's registered mixtures of experts: --module, --config and the model each trains
# (hidden, layers, heads, experts, top-k, expert width, shared expert width, vocabulary, dense first layers)
MOE_CONFIGS = {("qwen3", "qwen3_30b_a3b"): (2048, 48, 32, 128, 8, 768, 0, 151936, 0),
               ("deepseek_v3", "deepseek_v3_16b"): (2048, 27, 16, 64, 6, 1408, 2816, 102400, 1),
               ("deepseek_v3", "deepseek_v3_671b"): (7168, 61, 128, 256, 8, 2048, 2048, 129280, 3)}


def module_and_config(v, lost: list[str]) -> list[str]:
    """`--module M --config F` when torchtitan registers the plan's mixture of experts, else nothing
    (and a line asking for one)."""
    model = v.experts.model
    if model is None:
        lost.append(f"--module/--config: {v.experts.unreadable}; name the config_registry function that builds it")
        return []
    dense_first = model.moe_layers.index(True)
    key = (model.hidden, model.layers, model.heads, model.experts, model.top_k, model.expert_ffn, model.shared_ffn,
           model.vocab, dense_first)
    for (module, config), dims in MOE_CONFIGS.items():
        if dims == key:
            return [f"--module {module}", f"--config {config}"]
    lost.append(f"--module/--config: torchtitan registers no mixture of experts of this shape (hidden {model.hidden}, "
                f"{model.layers} layers, {model.experts} experts top-{model.top_k} of width {model.expert_ffn}); "
                "register a config_registry function that builds it (torchtitan's qwen3 and deepseek_v3 modules "
                "build MoE decoders) and pass --module/--config for it")
    return []


def expert_overrides(v, replicate: int, sharded: int, lost: list[str]) -> tuple[list[tuple[str, object]], int, int]:
    """The expert-parallel degree and the data-parallel degrees it needs: (overrides, replicate,
    shard). torchtitan takes ep from FSDP and tp ranks, so a plan without sharding whose ep exceeds
    what cp x tp hold is exported with FSDP over the data-parallel ranks (listed); InputError for
    what torchtitan cannot fold."""
    e = v.experts
    if e.etp > 1:
        raise InputError(f"etp {e.etp}: torchtitan 0.3 has no expert tensor parallelism (its experts are split over ep "
                         "and FSDP-sharded over dp_shard x cp x tp / ep, never by tp); export this plan to megatron",
                         WHERE)
    if (sharded * v.cp * v.tp) % e.ep:
        if (v.dp * v.cp * v.tp) % e.ep:
            raise InputError(f"ep {e.ep} does not divide dp x cp x tp = {v.dp * v.cp * v.tp}, the ranks torchtitan "
                             "takes expert parallelism from", WHERE)
        lost.append(f"ep {e.ep} over data-parallel ranks without ZeRO (zero_stage {v.zero_stage}): torchtitan borrows "
                    "expert-parallel ranks from FSDP; exported with FSDP over all data-parallel ranks (ZeRO-3: less "
                    "memory, more parameter all-gathers than planned)")
        replicate, sharded = 1, v.dp
    if e.capacity_factor is not None:
        lost.append(f"capacity factor {e.capacity_factor:g} (padded expert buffers, {100 * e.dropped_fraction:.1f}% "
                    "of token copies dropped): torchtitan's MoE is dropless (no token dropping; under skew the busiest "
                    "rank processes more than the capacity the plan priced)")
    if e.dispatcher != "alltoall":
        lost.append(f"token dispatcher {e.dispatcher} (one copy per token and destination node, then rank): "
                    "this exporter writes torchtitan's all-to-all dispatcher (a copy per token and expert): more all-to-all bytes than planned")
    if e.a2a_overlap != "none":
        lost.append(f"all-to-all overlap {e.a2a_overlap}: torchtitan's all-to-all dispatcher runs in the layer's "
                    "stream (exposed: slower than planned)")
    lost.append("routing and load balancing: those of the registered model (its router and load_balance_coeff); "
                f"the plan was priced under routing {e.routing}")
    return [("parallelism.expert_parallel_degree", e.ep)], replicate, sharded
