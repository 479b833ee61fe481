"""Predicted step times of published GPT training configurations against their measurements.

    python scripts/hybrid_vs_published.py [--cluster a100-80gb-superpod] [--write docs/hybrid-accuracy.md]
                                          [--plan] [--time-limit 60]

1. Calibration (one parameter, `compute_scale`, multiplying every kernel time of the cost core): fitted
   on the `calibrate` entries of data/published/hybrid.yaml only (one measured 22B layer, Korthikanti
   et al. 2022 Table 4). The layer's time is compute x scale + communication, so the fit is closed-form.
   The A100 presets ship the fixed point of this fit as the device's `kernel_time_scale` (1.105:
   1.089 against the uncalibrated curves, then 1.015 more once applied, since the block's attention
   score traffic is not a cost-core kernel), so `solver-plan hybrid` predicts with it; against those
   presets the fit here comes out at about 1.0 (the check that the shipped value is the fitted one).
2. Validation: every `points` entry is priced by `solver_plan.hybrid.evaluate` (what-if, everything the
   source gives pinned; the rest planned by `plan_hybrid` with those pins) with and without the
   calibration; the error is predicted / published - 1.
3. `--plan`: the planner without pins on the same model, devices and batch must never predict a slower
   step than the published configuration (it is a point of its space).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver_plan.hybrid import evaluate, plan_hybrid  # noqa: E402
from solver_plan.hybrid.model import transformer_spec  # noqa: E402
from solver_plan.hybrid.stage_cost import BlockCoster  # noqa: E402
from solver_plan.cluster import resolve_cluster  # noqa: E402

DATA = ROOT / "data" / "published" / "hybrid.yaml"


def narayanan_flops(spec, batch: int) -> float:
    """Narayanan et al. 2021 eq. 3: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), recomputation counted."""
    s, l, h, v = spec.seq, spec.layers, spec.hidden, spec.vocab
    return 96.0 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def published_step(point: dict) -> float:
    if "step_time_s" in point:
        return float(point["step_time_s"])
    spec = transformer_spec(point["model"])
    return narayanan_flops(spec, point["global_batch"]) / (point["tflops_per_gpu_with_recompute"] * 1e12 * point["gpus"])


def fit_scale(entries: list[dict], cluster_name: str) -> tuple[float, list[str]]:
    """compute_scale from measured layer times: measured = scale x compute + communication."""
    cluster = resolve_cluster(cluster_name)
    scales, lines = [], []
    for e in entries:
        spec = transformer_spec(e["model"])
        profile = BlockCoster(spec, cluster).profile(e["tp"], e["micro_batch_size"])
        compute = profile.block_s - profile.tp_comm_s
        scale = (e["layer_time_s"] - profile.tp_comm_s) / compute
        scales.append(scale)
        lines.append(f"{e['name']}: modelled {1e3 * profile.block_s:.2f} ms ({1e3 * compute:.2f} compute + "
                     f"{1e3 * profile.tp_comm_s:.2f} communication), measured {1e3 * e['layer_time_s']:.2f} ms "
                     f"-> compute_scale {scale:.3f}")
    return sum(scales) / len(scales), lines


def predict(point: dict, cluster: str, scale: float, time_limit: float) -> tuple[float, str]:
    fix = dict(point["fix"])
    full = all(k in fix for k in ("dp", "tp", "pp", "micro_batch_size"))
    if full:
        r = evaluate(point["model"], cluster, point["global_batch"], fix, memory_limit="none", compute_scale=scale)
    else:
        r = plan_hybrid(point["model"], cluster, point["global_batch"], devices=point["gpus"], fix=fix,
                        memory_limit="device", time_limit=time_limit, compute_scale=scale)
    if r.plan is None:
        return float("nan"), f"no plan ({r.status.value})"
    q = r.plan.parallelism
    return r.plan.step_time_s, (f"b={q.micro_batch_size} m={q.micro_batches} {q.schedule}"
                                f"{'' if q.virtual_stages == 1 else f' v={q.virtual_stages}'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", default="a100-80gb-superpod")
    parser.add_argument("--write", help="write the markdown table to this file")
    parser.add_argument("--plan", action="store_true", help="also plan without pins and compare")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args(argv)
    data = yaml.safe_load(DATA.read_text())
    scale, fit_lines = fit_scale(data["calibrate"], args.cluster)
    rows = []
    for point in data["points"]:
        published = published_step(point)
        raw, _ = predict(point, args.cluster, 1.0, args.time_limit)
        t0 = time.perf_counter()
        calibrated, chosen = predict(point, args.cluster, scale, args.time_limit)
        row = {"name": point["name"], "gpus": point["gpus"], "published": published, "raw": raw,
               "calibrated": calibrated, "chosen": chosen, "runtime": time.perf_counter() - t0}
        if args.plan:
            r = plan_hybrid(point["model"], args.cluster, point["global_batch"], devices=point["gpus"],
                            time_limit=args.time_limit, compute_scale=scale)
            row["planned"] = r.step_time_s
            row["planned_status"] = r.status.value
        rows.append(row)
        print(f"{row['name']:<28} {published:>8.3f} s  raw {raw:>8.3f} ({100 * (raw / published - 1):+6.1f}%)  "
              f"calibrated {calibrated:>8.3f} ({100 * (calibrated / published - 1):+6.1f}%)  [{chosen}]"
              + (f"  planner {row['planned']:.3f} s ({row['planned_status']})" if args.plan else ""), flush=True)
    errors = [abs(r["calibrated"] / r["published"] - 1) for r in rows]
    within = sum(e <= 0.15 for e in errors)
    summary = (f"compute_scale = {scale:.3f} (fitted on {len(data['calibrate'])} calibration entry); "
               f"validation: {within}/{len(rows)} within 15%, mean |error| {100 * sum(errors) / len(errors):.1f}%, "
               f"max {100 * max(errors):.1f}%")
    print("\n".join(fit_lines))
    print(summary)
    if args.plan:
        slower = [r["name"] for r in rows if r.get("planned") is not None and r["planned"] > r["calibrated"] * (1 + 1e-9)]
        print("planner never slower than the published configuration:", "yes" if not slower else f"NO: {slower}")
    if args.write:
        Path(args.write).write_text(markdown(rows, fit_lines, summary, args))
        print(f"wrote {args.write}")
    return 0


def markdown(rows, fit_lines, summary, args) -> str:
    out = ["# Hybrid planner: predicted vs published step times", "",
           f"Generated by `python scripts/hybrid_vs_published.py --cluster {args.cluster}"
           f"{' --plan' if args.plan else ''} --write docs/hybrid-accuracy.md`; figures and sources in "
           "`data/published/hybrid.yaml`.", "",
           "Calibration (the only fitted number; the validation rows below were not used to fit it):", ""]
    out += [f"- {line}" for line in fit_lines]
    out += ["", f"**{summary}**", "",
            "| configuration | GPUs | published step (s) | predicted, cost core as is (s) | error | predicted, calibrated (s) | error | planner's choice of the unpinned |"
            + (" planner, no pins (s) |" if args.plan else ""),
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |" + (" ---: |" if args.plan else "")]
    for r in rows:
        line = (f"| {r['name']} | {r['gpus']} | {r['published']:.3f} | {r['raw']:.3f} | {100 * (r['raw'] / r['published'] - 1):+.1f}% | "
                f"{r['calibrated']:.3f} | {100 * (r['calibrated'] / r['published'] - 1):+.1f}% | {r['chosen']} |")
        if args.plan:
            line += f" {r['planned']:.3f} ({r['planned_status']}) |" if r.get("planned") else " - |"
        out.append(line)
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
