"""Predicted step times (and peak memory) of published training runs against their measurements.

    python scripts/hybrid_vs_published.py [--cluster a100-80gb-superpod] [--write docs/hybrid-accuracy.md]
                                          [--plan] [--time-limit 60] [--set validation|recent|all]

Two sets of published runs, each row priced with the configuration its source states pinned
(`--fix`; what the source leaves open is planned with those pins) on its own cluster, runtime
profile (solver_plan/runtime) and precision:
- validation (data/published/hybrid.yaml): Megatron-LM 2021-22 on A100 (Narayanan et al. 2021,
  Korthikanti et al. 2022), runtime megatron-2021. One parameter, `compute_scale` (multiplying every
  kernel time), is fitted on the `calibrate` entries only (one measured 22B layer, Korthikanti Table
  4; closed form: measured = scale x compute + communication); the A100 presets ship its fixed point
  as the device's `kernel_time_scale` (1.105), so the fit here comes out at about 1.0 (the check that
  the shipped value is the fitted one).
- recent (data/published/runs-2022-2025.yaml): MT-NLG (DeepSpeed, A100, 2022), torchtitan (A100 2024,
  H100 2025), NeMo 24.07 (H100, fp8), Llama 3 405B (H100, 2024). Nothing is fitted on them: the
  predictions use the device tables and runtime profiles as they are (compute_scale 1).
Per row: the pinned prediction and its error (predicted / published - 1); per set the median and the
worst |error|; with `--plan`, the planner without pins on the same model, devices and batch, and
whether it is predicted slower than the published configuration ran (the measured step) or than the
pinned prediction (it should never be: that configuration is in its space, unless the planner's
memory limit, the device's memory less a 5% margin, refuses it); where the source gives a peak
memory, the pinned plan's prediction of the same figure (allocated, reserved or process) and its error.
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver_plan.cluster import resolve_cluster  # noqa: E402
from solver_plan.hybrid import evaluate, plan_hybrid  # noqa: E402
from solver_plan.units import GIB  # noqa: E402
from solver_plan.hybrid.model import transformer_spec  # noqa: E402
from solver_plan.hybrid.stage_cost import BlockCoster  # noqa: E402

DATA = ROOT / "data" / "published" / "hybrid.yaml"
RECENT = ROOT / "data" / "published" / "runs-2022-2025.yaml"


def narayanan_flops(spec, batch: int) -> float:
    """Narayanan et al. 2021 eq. 3: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)), recomputation counted."""
    s, l, h, v = spec.seq, spec.layers, spec.hidden, spec.vocab
    return 96.0 * batch * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))


def published_step(point: dict) -> float:
    """Seconds per step from whichever figure the source gives (module text of runs-2022-2025.yaml)."""
    if "step_time_s" in point:
        return float(point["step_time_s"])
    spec = transformer_spec(point["model"])
    if "tokens_per_s_per_gpu" in point:
        return point["global_batch"] * spec.seq / (point["tokens_per_s_per_gpu"] * point["gpus"])
    if "tflops_per_gpu" in point:
        return spec.model_flops_per_step(point["global_batch"]) / (point["tflops_per_gpu"] * 1e12 * point["gpus"])
    return narayanan_flops(spec, point["global_batch"]) / (point["tflops_per_gpu_with_recompute"] * 1e12 * point["gpus"])


def fit_scale(entries: list[dict], cluster_name: str, runtime: str | None) -> tuple[float, list[str]]:
    """compute_scale from measured layer times: measured = scale x compute + communication."""
    cluster = resolve_cluster(cluster_name)
    scales, lines = [], []
    for e in entries:
        spec = transformer_spec(e["model"])
        profile = BlockCoster(spec, cluster, runtime=runtime).profile(e["tp"], e["micro_batch_size"])
        compute = profile.block_s - profile.tp_comm_s
        scale = (e["layer_time_s"] - profile.tp_comm_s) / compute
        scales.append(scale)
        lines.append(f"{e['name']}: modelled {1e3 * profile.block_s:.2f} ms ({1e3 * compute:.2f} compute + "
                     f"{1e3 * profile.tp_comm_s:.2f} communication), measured {1e3 * e['layer_time_s']:.2f} ms "
                     f"-> compute_scale {scale:.3f}")
    return sum(scales) / len(scales), lines


def _describe(q) -> str:
    return (f"dp={q.dp}{'' if q.cp == 1 else f' cp={q.cp}'} tp={q.tp} pp={q.pp} b={q.micro_batch_size} "
            f"m={q.micro_batches} {q.schedule}"
            f"{'' if q.virtual_stages == 1 else f' v={q.virtual_stages}'} {q.recompute} z{q.zero_stage}"
            f"{f' attention={q.attention}' if q.attention else ''}")


def predict(point: dict, cluster: str, scale: float, time_limit: float, runtime, precision):
    """(step seconds, description, result) of the point's published configuration."""
    fix = dict(point["fix"])
    full = all(k in fix for k in ("dp", "tp", "pp", "micro_batch_size"))
    if full:
        r = evaluate(point["model"], cluster, point["global_batch"], fix, memory_limit="none", compute_scale=scale,
                     runtime=runtime, precision=precision)
    else:
        r = plan_hybrid(point["model"], cluster, point["global_batch"], devices=point["gpus"], fix=fix,
                        memory_limit="device", time_limit=time_limit, compute_scale=scale, runtime=runtime,
                        precision=precision)
    if r.plan is None:
        return float("nan"), f"no plan ({r.status.value})", r
    return r.plan.step_time_s, _describe(r.plan.parallelism), r


def predicted_memory(result, kind: str) -> float | None:
    """The pinned plan's peak-stage memory of the kind a source measured (StageMemory: allocated,
    reserved = + fragmentation, process = + CUDA context and NCCL buffers)."""
    if result is None or result.plan is None:
        return None
    memory = result.plan.peak_stage.memory
    return {"allocated": memory.allocated, "reserved": memory.reserved, "process": memory.total}[kind]


def run_set(points: list[dict], defaults: dict, args, scale: float, label: str) -> list[dict]:
    rows = []
    for point in points:
        cluster = point.get("cluster") or args.cluster or defaults.get("cluster")
        runtime = point.get("runtime", defaults.get("runtime"))
        precision = point.get("precision", defaults.get("precision"))
        published = published_step(point)
        t0 = time.perf_counter()
        raw = None
        if scale != 1.0:
            raw, _, _ = predict(point, cluster, 1.0, args.time_limit, runtime, precision)
        predicted, chosen, result = predict(point, cluster, scale, args.time_limit, runtime, precision)
        row = {"name": point["name"], "gpus": point["gpus"], "published": published, "raw": raw,
               "predicted": predicted, "chosen": chosen, "runtime_profile": runtime or "megatron-core",
               "cluster": Path(str(cluster)).stem, "precision": precision or "auto", "year": point.get("year"),
               "seconds": time.perf_counter() - t0}
        if "peak_memory_gib" in point:
            kind = point.get("memory_kind", "reserved")
            mem = predicted_memory(result, kind)
            row["memory"] = (point["peak_memory_gib"], None if mem is None else mem / GIB, kind)
        if args.plan:
            r = plan_hybrid(point["model"], cluster, point["global_batch"], devices=point["gpus"],
                            time_limit=args.time_limit, compute_scale=scale, runtime=runtime, precision=precision)
            row["planned"] = r.step_time_s
            row["planned_status"] = r.status.value
            row["planned_choice"] = _describe(r.plan.parallelism) if r.plan is not None else "-"
        rows.append(row)
        error = predicted / published - 1
        line = (f"[{label}] {row['name']:<38} published {published:>8.3f} s  predicted {predicted:>8.3f} s "
                f"({100 * error:+6.1f}%)  [{chosen}]")
        if "memory" in row and row["memory"][1] is not None:
            measured, mem, kind = row["memory"]
            line += f"  memory {kind} {mem:.1f} GiB vs {measured:.1f} ({100 * (mem / measured - 1):+.1f}%)"
        if args.plan:
            line += f"  planner {row['planned']:.3f} s ({row['planned_status']})" if row["planned"] else "  planner -"
        print(line, flush=True)
    return rows


def summary(rows: list[dict], label: str) -> dict:
    errors = [r["predicted"] / r["published"] - 1 for r in rows if math.isfinite(r["predicted"])]
    absolute = [abs(e) for e in errors]
    worst = max(rows, key=lambda r: abs(r["predicted"] / r["published"] - 1) if math.isfinite(r["predicted"]) else 0)
    out = {"label": label, "rows": len(rows), "priced": len(errors),
           "median": statistics.median(absolute) if absolute else float("nan"),
           "mean": statistics.mean(absolute) if absolute else float("nan"),
           "worst": max(absolute) if absolute else float("nan"), "worst_name": worst["name"],
           "within15": sum(a <= 0.15 for a in absolute), "within30": sum(a <= 0.30 for a in absolute),
           "fast": sum(e < 0 for e in errors)}
    planned = [r for r in rows if r.get("planned") is not None]
    if planned:
        out["planner_slower_than_measured"] = [r["name"] for r in planned if r["planned"] > r["published"] * (1 + 1e-9)]
        out["planner_slower_than_pinned"] = [r["name"] for r in planned if r["planned"] > r["predicted"] * (1 + 1e-9)]
    memory = [r["memory"] for r in rows if "memory" in r and r["memory"][1] is not None]
    out["memory_errors"] = [m / measured - 1 for measured, m, _ in memory]
    return out


def summary_text(s: dict) -> str:
    text = (f"{s['label']}: {s['priced']}/{s['rows']} priced; |error| median {100 * s['median']:.1f}%, "
            f"mean {100 * s['mean']:.1f}%, worst {100 * s['worst']:.1f}% ({s['worst_name']}); "
            f"{s['within15']} within 15%, {s['within30']} within 30%; {s['fast']} predicted too fast")
    if "planner_slower_than_measured" in s:
        text += (f"; planner predicted slower than the published run: {len(s['planner_slower_than_measured'])}"
                 f", than the pinned prediction: {len(s['planner_slower_than_pinned'])}")
    if s["memory_errors"]:
        text += "; peak memory error " + ", ".join(f"{100 * e:+.1f}%" for e in s["memory_errors"])
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cluster", help="cluster of the validation set (default: its file's, a100-80gb-superpod)")
    parser.add_argument("--write", help="write the markdown tables to this file")
    parser.add_argument("--plan", action="store_true", help="also plan without pins and compare")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--set", choices=("validation", "recent", "all"), default="all")
    args = parser.parse_args(argv)
    sections = []
    if args.set in ("validation", "all"):
        data = yaml.safe_load(DATA.read_text())
        defaults = data.get("defaults", {})
        cluster = args.cluster or defaults.get("cluster", "a100-80gb-superpod")
        scale, fit_lines = fit_scale(data["calibrate"], cluster, defaults.get("runtime"))
        rows = run_set(data["points"], {**defaults, "cluster": cluster}, args, scale, "validation")
        sections.append(("validation", rows, summary(rows, "validation (Megatron-LM 2021-22, A100)"), fit_lines,
                         scale))
    if args.set in ("recent", "all"):
        data = yaml.safe_load(RECENT.read_text())
        rows = run_set(data["points"], data.get("defaults", {}), argparse.Namespace(**{**vars(args), "cluster": None}),
                       1.0, "recent")
        sections.append(("recent", rows, summary(rows, "recent (2022-2025, A100 and H100, not fitted)"), [], 1.0))
    for _, _, s, fit_lines, scale in sections:
        for line in fit_lines:
            print(line)
        if fit_lines:
            print(f"compute_scale = {scale:.3f}")
        print(summary_text(s))
    if args.write:
        Path(args.write).write_text(markdown(sections, args))
        print(f"wrote {args.write}")
    return 0


def markdown(sections, args) -> str:
    out = ["# Hybrid planner: predicted vs published step times", "",
           f"Generated by `python scripts/hybrid_vs_published.py{f' --cluster {args.cluster}' if args.cluster else ''}"
           f"{' --plan' if args.plan else ''}{'' if args.set == 'all' else f' --set {args.set}'} --write "
           "docs/hybrid-accuracy.md`; figures and sources in `data/published/hybrid.yaml` (validation) and "
           "`data/published/runs-2022-2025.yaml` (recent). Error = predicted / published - 1 (negative: predicted "
           "faster than the run was). Each row is priced with its own runtime profile (solver_plan/runtime).", ""]
    for label, rows, s, fit_lines, scale in sections:
        out += [f"## {'Validation: Megatron-LM 2021-22 on A100' if label == 'validation' else 'Recent runs, 2022-2025'}",
                ""]
        if fit_lines:
            out += ["Calibration (the only fitted number; the rows below were not used to fit it):", ""]
            out += [f"- {line}" for line in fit_lines]
            out += ["", f"compute_scale = {scale:.3f}", ""]
        out += [f"**{summary_text(s)}**", ""]
        head = "| configuration | year | GPUs | cluster | runtime | precision | published step (s) | predicted (s) | error | pinned plan |"
        rule = "| --- | ---: | ---: | --- | --- | --- | ---: | ---: | ---: | --- |"
        if args.plan:
            head += " planner, no pins (s) | its choice |"
            rule += " ---: | --- |"
        out += [head, rule]
        for r in rows:
            line = (f"| {r['name']} | {r['year'] or ''} | {r['gpus']} | {r['cluster']} | {r['runtime_profile']} | "
                    f"{r['precision']} | {r['published']:.3f} | {r['predicted']:.3f} | "
                    f"{100 * (r['predicted'] / r['published'] - 1):+.1f}% | {r['chosen']} |")
            if args.plan:
                line += (f" {r['planned']:.3f} ({r['planned_status']}) | {r['planned_choice']} |" if r.get("planned")
                         else " - | - |")
            out.append(line)
        memory = [r for r in rows if "memory" in r]
        if memory:
            out += ["", "Peak memory (the pinned plan's largest stage, the figure the source measured):", "",
                    "| configuration | measured (GiB) | kind | predicted (GiB) | error |", "| --- | ---: | --- | ---: | ---: |"]
            for r in memory:
                measured, mem, kind = r["memory"]
                out.append(f"| {r['name']} | {measured:.1f} | {kind} | "
                           + ("- | - |" if mem is None else f"{mem:.1f} | {100 * (mem / measured - 1):+.1f}% |"))
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
