"""`solver-plan hybrid` for a mixture of experts: the expert-parallel planner (moe_plan.py) behind the
hybrid command's options, with `--fix ep=8,etp=1,capacity=1.25`, `--routing` and `--a2a-overlap`.

hybrid/cli.py sends here every MODEL that is a mixture-of-experts config.json (`is_moe_model`);
what it prints: status, step time and bound, the folding (dp x tp x pp; etp x ep x edp), the
routing priced and the tokens it drops, one line per stage with its layers and memory, and the
plan's step time under routing skews it was not priced for (uniform, zipf 0.2 and 0.5)."""
from __future__ import annotations

import json


def is_moe_model(spec: str) -> bool:
    """Whether MODEL is a config.json of a mixture-of-experts family (moe_model.MOE_FAMILIES)."""
    from pathlib import Path

    from solver_plan.graph.importers.graph_file import is_model_file, split_file_spec
    from solver_plan.hybrid.moe_model import MOE_FAMILIES

    if not is_model_file(spec):
        return False
    path = Path(split_file_spec(spec.strip().removeprefix("hf:"))[0])
    path = path / "config.json" if path.is_dir() else path
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    from solver_plan.graph.importers.hf import read_config

    return read_config(path).get("model_type") in MOE_FAMILIES


def table(result) -> str:
    lines = [f"status {result.status.value}" + ("" if result.step_time_s is None else
                                                 f", step {result.step_time_s:.3f} s")
             + ("" if result.lower_bound_s is None else f", bound {result.lower_bound_s:.3f} s")
             + f", {result.runtime_s:.1f} s"]
    plan = result.plan
    if plan is not None:
        p = plan.point
        capacity = "dropless" if p.capacity_factor is None else f"capacity {p.capacity_factor:g}"
        lines.append(f"attention dp {p.dp} x tp {p.tp}" + (f" x cp {p.cp}" if p.cp > 1 else "")
                     + f" x pp {p.pp}; experts etp {p.etp} x ep {p.ep} x edp {p.edp}; "
                     f"micro-batch {p.micro_batch_size} x {p.micro_batches}, {p.schedule}"
                     + (f" v {p.virtual_stages}" if p.virtual_stages > 1 else "")
                     + f", recompute {p.recompute}, {'distributed optimizer' if p.zero_stage else 'no ZeRO'}")
        lines.append(f"routing {plan.routing}, {capacity} ({100 * plan.dropped_fraction:.1f}% of copies dropped), "
                     f"all-to-all overlap {plan.a2a_overlap}; {plan.tflops_per_device:.0f} model TFLOP/s per device")
        lines.append(f"pipeline {plan.pipeline_s:.3f} s + exposed sync {plan.dp_sync_s:.3f} s + optimizer "
                     f"{plan.optimizer_s:.3f} s")
        for s in plan.stages:
            lines.append(f"  stage {s.index}: layers {s.first_layer}-{s.first_layer + s.layers - 1} "
                         f"({s.moe_layers} MoE), {1e3 * s.time_per_microbatch_s:.1f} ms per micro-batch, "
                         f"{s.memory.total / 1e9:.1f} GB")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


ROBUSTNESS_LOADS = ("uniform", "zipf:0.2", "zipf:0.5")  # zipf:0.2: hottest of 256 experts 2.4x the mean


def robustness_line(args, plan) -> str:
    """The plan's step time under loads it was not priced for (moe_plan.skew_robustness)."""
    from solver_plan.hybrid.moe_plan import skew_robustness

    loads = [load for load in ROBUSTNESS_LOADS if load != plan.routing]
    priced = skew_robustness(args.model, args.cluster, args.batch, plan, loads, precision=args.precision,
                             runtime=args.runtime)
    return "robustness: this plan under " + ", ".join(
        f"{name} {seconds:.3f} s ({100 * (seconds / plan.step_time_s - 1):+.0f}%)" for name, seconds in priced)


def run_moe(args) -> int:
    from solver_plan.errors import InputError
    from solver_plan.files import write_text_atomic
    from solver_plan.hybrid.cli import parse_memory_limit
    from solver_plan.hybrid.moe_plan import plan_moe
    from solver_plan.runtime import resolve_runtime

    if getattr(args, "export", None):
        raise InputError("exports of expert-parallel plans are not available yet; write the plan with --out "
                         "(parallelism: dp, tp, cp, pp, ep, etp, edp, capacity)", "--export")
    result = plan_moe(args.model, args.cluster, args.batch, devices=args.devices, fix=args.fix,
                      routing=getattr(args, "routing", None), a2a_overlap=getattr(args, "a2a_overlap", "none"),
                      memory_limit=parse_memory_limit(args.memory_limit), precision=args.precision,
                      runtime=resolve_runtime(args.runtime, "--runtime"), time_limit=args.time_limit)
    if args.out:
        write_text_atomic(args.out, json.dumps(result.to_dict(), indent=2) + "\n")
    print(table(result))
    if result.plan is not None:
        print(robustness_line(args, result.plan))
    if args.out:
        print(f"wrote {args.out}")
    return 0 if result.status.has_solution else 1
