"""DeepSpeed-MoE settings of an expert-parallel plan. ds_config has no expert keys: the experts are
built in the model code with `deepspeed.moe.layer.MoE(hidden_size, expert, num_experts, ep_size, k,
capacity_factor, eval_capacity_factor, min_capacity, use_residual, noisy_gate_policy, drop_tokens,
use_rts, use_tutel, enable_expert_tensor_parallelism, ...)` (deepspeed/moe/layer.py, 0.14 to 0.19),
so the export gives those arguments under `solver_plan.moe_layer` for the training script.

DeepSpeed's folding: expert-parallel groups of ep_size ranks inside the data-parallel ranks of a
pipeline stage (deepspeed/utils/groups.py), the experts whole on each tensor-parallel rank or,
with enable_expert_tensor_parallelism, split over the whole tensor-parallel group. A plan whose
experts are split over some but not all of the tp ranks, or whose ep spans tp ranks, has no such
folding and is refused.
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.export.common import WHERE


def _check_folding(v) -> None:
    """DeepSpeed folds the experts as ep_size over dp (etp = 1 without tp) or, with expert tensor
    parallelism, ep_size over dp with etp = tp; InputError naming the plan's folding otherwise."""
    e = v.experts
    if (v.tp > 1 and e.etp != v.tp) or v.dp % e.ep:
        raise InputError(f"expert folding etp {e.etp} x ep {e.ep} over dp {v.dp} x cp {v.cp} x tp {v.tp}: DeepSpeed-MoE "
                         "puts ep_size inside the data-parallel ranks (ep must divide dp) with the experts whole or "
                         "split over all tp ranks (etp 1 or tp); export this plan to megatron", WHERE)


def moe_layer(v, lost: list[str]) -> tuple[dict, list[int] | None]:
    """The `deepspeed.moe.layer.MoE` arguments of the plan (all but `expert`, the module the model code
    gives) and the indices of the layers that have experts (None when the model is not
    readable here); what DeepSpeed-MoE cannot do is appended to `lost`."""
    _check_folding(v)
    e = v.experts
    model, config = e.model, e.config
    layer: dict = {"ep_size": e.ep}
    if model is not None:
        layer.update(hidden_size=model.hidden, num_experts=model.experts, k=model.top_k)
    else:
        lost.append(f"moe_layer num_experts and k: {e.unreadable}; add them from the model")
    # the plan's capacity: padded buffers of c x the balanced share, dropping beyond it (drop_tokens);
    # dropless: DeepSpeed sizes the buffers to the busiest expert (drop_tokens false)
    layer.update(capacity_factor=e.capacity_factor or 1.0, eval_capacity_factor=e.capacity_factor or 1.0,
                 drop_tokens=e.capacity_factor is not None, use_residual=False,
                 enable_expert_tensor_parallelism=e.etp > 1)
    if model is not None:
        if model.shared_ffn:
            lost.append(f"shared expert of width {model.shared_ffn}: DeepSpeed-MoE's use_residual is PR-MoE's residual "
                        "MLP mixed by a learned coefficient, not a shared expert added to the routed ones; build the "
                        "shared expert beside the MoE layer in the model code")
        if config.get("scoring_func") == "sigmoid" or model.router_bias or int(config.get("n_group") or 1) > 1:
            lost.append("the router (sigmoid scores, group-limited top-k, expert bias of auxiliary-loss-free balancing): "
                        "DeepSpeed-MoE's TopKGate is a softmax top-k gate")
        coefficient = config.get("aux_loss_alpha", config.get("router_aux_loss_coef"))
        lost.append("load balancing: DeepSpeed-MoE returns the GShard auxiliary loss (l_aux) from each MoE layer; add "
                    + (f"{coefficient} x l_aux " if coefficient is not None else "a coefficient x l_aux ")
                    + "to the loss in the training script")
    if e.dispatcher != "alltoall":
        lost.append(f"token dispatcher {e.dispatcher} (one copy per token and destination node, then rank): "
                    "DeepSpeed-MoE's dispatch is one all-to-all of the capacity buffers (a copy per token and expert): more all-to-all bytes than planned")
    if e.a2a_overlap != "none":
        lost.append(f"all-to-all overlap {e.a2a_overlap}: DeepSpeed-MoE does not overlap dispatch and combine with "
                    "compute (exposed: slower than planned)")
    if v.zero_stage >= 3:
        raise InputError("zero_stage 3 with MoE: DeepSpeed's engine refuses it (assert not has_moe_layers, \"MoE not "
                         "supported with Stage 3\"); export this plan to megatron (Megatron FSDP) or torchtitan "
                         "(FSDP2), or plan with zero_stage <= 2", WHERE)
    if v.zero_stage >= 1:
        lost.append("ZeRO with MoE: pass the optimizer the parameter groups of "
                    "deepspeed.moe.utils.split_params_into_different_moe_groups_for_optimizer (expert parameters "
                    "sharded over the expert-data-parallel ranks)")
    return layer, None if model is None else [i for i, moe in enumerate(model.moe_layers) if moe]
