"""`solver-plan hybrid` for a mixture of experts: the expert-parallel planner (moe_plan.py) behind the
hybrid command's options, with `--fix ep=8,etp=1,capacity=1.25`, `--routing` and `--a2a-overlap`.

hybrid/cli.py sends here every MODEL that is a mixture-of-experts config.json (`moe_model.is_moe_model`);
what it prints: status, step time and bound, the folding (dp x tp x pp; etp x ep x edp), the
routing priced and the tokens it drops, one line per stage with its layers and memory, and the
plan's step time under routing skews it was not priced for (uniform, zipf 0.2 and 0.5)."""
from __future__ import annotations

import json

ZERO_NAMES = ("no ZeRO", "distributed optimizer", "ZeRO-2", "ZeRO-3 / FSDP")  # by the plan's zero_stage


def table(result) -> str:
    """Human summary of a `MoEResult`: status, step time, bound, runtime, and the chosen point's degrees,
    micro-batching, schedule and memory.
    """
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
                     + f", recompute {p.recompute}, {ZERO_NAMES[p.zero_stage]}")
        lines.append(f"routing {plan.routing}, {capacity} ({100 * plan.dropped_fraction:.1f}% of copies dropped), "
                     f"all-to-all overlap {plan.a2a_overlap}; {plan.tflops_per_device:.0f} model TFLOP/s per device")
        lines.append(f"pipeline {plan.pipeline_s:.3f} s + exposed sync {plan.dp_sync_s:.3f} s + optimizer "
                     f"{plan.optimizer_s:.3f} s + contention of the hidden sync {plan.contention_s:.3f} s")
        for s in plan.stages:
            lines.append(f"  stage {s.index}: layers {s.first_layer}-{s.first_layer + s.layers - 1} "
                         f"({s.moe_layers} MoE), {1e3 * s.time_per_microbatch_s:.1f} ms per micro-batch, "
                         f"{s.memory.total / 1e9:.1f} GB")
    lines += [f"note: {n}" for n in result.notes]
    return "\n".join(lines)


def print_moe(args, report) -> int:
    """Print (and write with --out) the expert-parallel plan of `report` (hybrid.answer)."""
    from solver_plan.files import write_text_atomic

    result = report.result
    if args.out:
        write_text_atomic(args.out, json.dumps(result.to_dict(), indent=2) + "\n")
    print(table(result))
    if result.plan is not None:
        print("robustness: this plan under " + ", ".join(
            f"{name} {seconds:.3f} s ({100 * (seconds / result.plan.step_time_s - 1):+.0f}%)"
            for name, seconds in report.robustness))
    if args.out:
        print(f"wrote {args.out}")
    return 0 if result.status.has_solution else 1
