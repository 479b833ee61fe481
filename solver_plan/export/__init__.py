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


def export_plan(plan_dict: dict, target: str, graph=None, schedule_csv: str | None = None) -> str:
    """A plan JSON dict as a runtime's configuration text for `target` (TARGETS): megatron, deepspeed or
    torchtitan for hybrid plans, dtensor for per-operator plans (needs the plan's `graph`); InputError for
    an unknown target or a plan of the wrong kind. `schedule_csv`: where the torchtitan export of a
    zb-exact plan says its schedule CSV is (`export_files` writes both).
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
    if target == "torchtitan":
        return torchtitan.export_torchtitan(plan_dict, schedule_csv)
    return {"megatron": megatron.export_megatron, "deepspeed": deepspeed.export_deepspeed}[target](plan_dict)


def export_files(plan_dict: dict, target: str, out: str | None, graph=None) -> list[tuple[str | None, str]]:
    """(path, text) pairs to write: the export at `out` (None: standard output) and, for a torchtitan
    export of a zb-exact plan, the schedule CSV beside it (`out` with the suffix `.schedule.csv`, named
    in the export; export/schedule_csv.py), written first."""
    files: list[tuple[str | None, str]] = []
    csv_path = None
    if target == "torchtitan" and isinstance(plan_dict.get("parallelism"), dict) \
            and plan_dict["parallelism"].get("schedule") == "zb-exact" and int(plan_dict["parallelism"]["pp"]) > 1:
        from pathlib import Path

        from solver_plan.export.schedule_csv import csv_text, exact_schedule_rows
        if out is None:
            raise InputError("schedule zb-exact: torchtitan runs it from a schedule CSV written beside the export; "
                             "give the export a file", "--out")
        csv_path = str(Path(out).with_suffix(".schedule.csv"))
        p = plan_dict["parallelism"]
        files.append((csv_path, csv_text(exact_schedule_rows(plan_dict, int(p["pp"]), int(p["micro_batches"])))))
    files.append((out, export_plan(plan_dict, target, graph=graph, schedule_csv=csv_path)))
    return files


__all__ = ["HYBRID_KINDS", "TARGETS", "export_files", "export_plan"]
