"""Exports: a plan's JSON as the configuration a training runtime reads.

`export_plan(plan_dict, target, graph=None) -> str` is a pure function of the plan dict (the
`--out` JSON; the model's shape is read back from its MODEL): "megatron" (Megatron-LM command-line
flags), "deepspeed" (a ds_config JSON) and "torchtitan" (torchtitan 0.3 command-line overrides)
take hybrid plans (`kind: "hybrid"`) and expert-parallel ones (`kind: "moe-hybrid"`: the hybrid
command's plans of a mixture of experts, with their ep / etp / capacity); "dtensor" (PyTorch DTensor placements per module on a device
mesh) takes per-operator plans and the graph they were planned on. What a runtime cannot express
is listed in the output (a comment, or a `not_expressible` key), never dropped silently.
docs/exports.md lists what each writes and the runtime versions that check it.
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.export.common import plan_kind

TARGETS = ("megatron", "deepspeed", "torchtitan", "dtensor")
HYBRID_KINDS = ("hybrid", "moe-hybrid")  # the plans megatron, deepspeed and torchtitan take


def export_plan(plan_dict: dict, target: str, graph=None) -> str:
    """A plan JSON dict as a runtime's configuration text for `target` (TARGETS): megatron, deepspeed or
    torchtitan for hybrid plans, dtensor for per-operator plans (needs the plan's `graph`); InputError for
    an unknown target or a plan of the wrong kind.
    """
    if target not in TARGETS:
        raise InputError(f"unknown export target {target!r} (targets: {', '.join(TARGETS)})", "--export")
    kind = plan_kind(plan_dict)
    if target == "dtensor":
        if kind != "config":
            raise InputError(f"the dtensor export takes a per-operator plan (solver-plan plan --out), got a {kind} plan",
                             "--export")
        from solver_plan.export.dtensor import export_dtensor
        return export_dtensor(plan_dict, graph)
    if kind not in HYBRID_KINDS:
        raise InputError(f"the {target} export takes a hybrid plan (solver-plan hybrid --out), got a {kind} plan; "
                         "per-operator plans export to dtensor", "--export")
    from solver_plan.export import deepspeed, megatron, torchtitan
    return {"megatron": megatron.export_megatron, "deepspeed": deepspeed.export_deepspeed,
            "torchtitan": torchtitan.export_torchtitan}[target](plan_dict)


__all__ = ["HYBRID_KINDS", "TARGETS", "export_plan"]
