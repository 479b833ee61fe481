"""An expert-parallel plan (`kind: moe-hybrid`, hybrid/moe_plan.py) read into the exporters' view.

The plan JSON is the result the hybrid command writes with `--out` (the envelope, with the plan
under `plan`) or that plan alone (a batch record's `result.plan`). Its attention side (dp, tp, cp,
pp, micro-batching, virtual stages, recomputation, distributed optimizer, layers per stage) becomes
a `HybridView` as hybrid plans do; its expert side (ep, etp, edp, capacity, routing, all-to-all
overlap) the view's `experts`, with the model read back by the planner's own reader
(hybrid/moe_model.moe_model) so the runtimes' expert flags are those the plan priced.
"""
from __future__ import annotations

from dataclasses import replace

from solver_plan.errors import InputError
from solver_plan.export.common import WHERE, ExpertView, HybridView, check_view, hybrid_view, plan_kind

SOLVED = ("OPTIMAL", "FEASIBLE", "TIME_LIMIT")


def plan_view(d: dict) -> HybridView:
    """The view every runtime exporter reads: of an expert-parallel plan (moe-hybrid: the result or
    its plan) with its `experts`, else of a hybrid plan (common.hybrid_view)."""
    if isinstance(d, dict) and "moe-hybrid" in (d.get("kind"), (d.get("plan") or {}).get("kind")):
        return moe_view(d)
    return hybrid_view(d)


def moe_plan_body(d: dict) -> dict:
    """The plan of a moe-hybrid result dict (its `plan`), or the dict itself when it is the plan;
    InputError when the result has no plan."""
    if "plan" in d:
        if d.get("status") not in SOLVED or not isinstance(d["plan"], dict):
            raise InputError(f"the plan has no solution to export (status {d.get('status')!r})", WHERE)
        return d["plan"]
    if "parallelism" not in d:
        raise InputError("an expert-parallel plan without 'parallelism' (expected the hybrid command's --out JSON "
                         "or its 'plan')", WHERE)
    return d


def _model(spec: str):
    """(MoEModel, config.json keys, None), or (None, {}, why) when the model cannot be read here."""
    from solver_plan.graph.importers.hf import config_file, read_config
    from solver_plan.hybrid.moe_model import moe_model
    try:
        return moe_model(spec), read_config(config_file(spec)[0]), None
    except InputError as exc:
        return None, {}, f"model {spec!r} could not be read here ({exc})"


def _chunks(stage_layers: tuple[int, ...], virtual: int) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
    """Each stage's layers per virtual stage: the planner cuts the layers into pp stages and prices
    the interleaved bubble (moe_price.py), so each stage's layers are split as evenly as they go
    over its virtual stages, the first ones one larger; a stage with fewer layers than virtual
    stages cannot be (() and a line saying the runtime's even split applies)."""
    if virtual == 1:
        return (), ()
    if min(stage_layers) < virtual:
        return (), (f"stages of {list(stage_layers)} layers with {virtual} virtual stages each: a stage has fewer "
                    "layers than virtual stages; exported as the even split of the layers over the virtual stages",)
    return tuple(tuple(n // virtual + (1 if i < n % virtual else 0) for i in range(virtual))
                 for n in stage_layers), ()


def moe_view(d: dict) -> HybridView:
    """The `HybridView` (with `experts`) of a moe-hybrid result or plan dict; InputError naming what is
    malformed."""
    plan = moe_plan_body(d)
    if plan_kind(plan) != "moe-hybrid":
        raise InputError(f"the result's plan is of kind {plan.get('kind')!r}, not 'moe-hybrid'", WHERE)
    try:
        p, stages = plan["parallelism"], plan["stages"]
        tp, recompute = int(p["tp"]), str(p.get("recompute", "none"))
        capacity = p.get("capacity_factor")
        experts = ExpertView(int(p["ep"]), int(p["etp"]), int(p["edp"]), None if capacity is None else float(capacity),
                             str(plan.get("routing", "uniform")), float(plan.get("dropped_fraction", 0.0)),
                             str(plan.get("a2a_overlap", "none")), *_model(str(plan["model"])))
        chunks, notes = _chunks(tuple(int(s["layers"]) for s in stages), int(p.get("virtual_stages", 1)))
        experts = replace(experts, notes=notes, dispatcher=str(p.get("dispatcher", "alltoall")))
        view = HybridView(
            str(plan["model"]), int(plan["devices"]), int(plan["global_batch"]), int(p["dp"]), tp, int(p["pp"]),
            int(p["micro_batch_size"]), int(p["micro_batches"]), int(p.get("virtual_stages", 1)), recompute,
            int(p.get("zero_stage", 0)),
            tp > 1,  # tokens enter the experts split over tp: Megatron-core's sequence parallelism (moe.py)
            str(p.get("schedule", "1f1b")), tuple(int(s["layers"]) for s in stages), (),
            plan.get("precision"), (recompute,) * len(stages), int(p.get("cp", 1)), chunk_layers=chunks,
            experts=experts)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"malformed expert-parallel plan ({type(exc).__name__}: {exc})", WHERE) from None
    from solver_plan.hybrid.moe import A2A_OVERLAPS, DISPATCHERS
    for key, value, choices in (("dispatcher", experts.dispatcher, DISPATCHERS),
                                ("a2a_overlap", experts.a2a_overlap, A2A_OVERLAPS)):
        if value not in choices:  # a runtime flag would be written from it as it stands
            raise InputError(f"{key} {value!r} is not one of {', '.join(choices)}", WHERE)
    if experts.ep * experts.etp * experts.edp != view.dp * view.cp * view.tp:
        raise InputError(f"ep x etp x edp = {experts.ep * experts.etp * experts.edp} != dp x cp x tp "
                         f"{view.dp * view.cp * view.tp} (the devices of a stage)", WHERE)
    model = experts.model
    if model is not None and model.layers != view.layers:
        raise InputError(f"the stages hold {view.layers} layers, the model {model.layers}", WHERE)
    return check_view(view)


def moe_layer_pattern(moe_layers) -> str:
    """Which layers have experts as a list expression of runs, dense 0 and MoE 1: DeepSeek-V3's
    3 dense then 58 MoE layers -> "([0]*3+[1]*58)" (Megatron-LM's --moe-layer-freq pattern form)."""
    runs: list[list[int]] = []
    for flag in (int(bool(m)) for m in moe_layers):
        if runs and runs[-1][0] == flag:
            runs[-1][1] += 1
        else:
            runs.append([flag, 1])
    return "(" + "+".join(f"[{flag}]*{count}" for flag, count in runs) + ")"
