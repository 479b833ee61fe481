"""The hybrid model's block time and peak memory against the blocks the device kit measured.

    python scripts/blocks_vs_measured.py [--runs data/device/h100-2026-11-26 data/device/h200-2026-11-26]
        [--traces data/device/h200-2026-11-27-alloc/traces-expandable]

For each block of each run's blocks.csv (bf16, one GPU; scripts/measure_device.py make_block; eager
PyTorch, or torch.compile'd and with torchao float8 Linears as its `mode` column says): the forward +
backward time the hybrid planner prices for that block on one device of the run's cluster preset
(hybrid/stage_cost.py BlockCoster, tp = 1, the block's micro-batch, fp8 GEMMs for compile-fp8, plus
what its checkpointing repeats: BlockProfile.repeated_forward_s) under
the runtime profiles `torchtitan` (eager: unfused norms, SiLU x up, SDPA) and `torchtitan-compile`,
and the peak allocation the memory model predicts (the kit's predicted column); the summary counts
each block against its own mode's profile (eager: torchtitan; compiled: torchtitan-compile). Validation only:
nothing is fitted here. Caveats printed with the table: the kit's blocks use torch's own RMSNorm /
LayerNorm modules and no rotary embedding, where the torchtitan profile prices torchtitan's eager
fp32 RMSNorm and rotary chains, so the eager profile overprices the GPT-style blocks' norms.
Then the allocator-trace cases: allocated and reserved peaks against the memory model.
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from solver_plan.units import GIB  # noqa: E402

PRESET = {"h100": "h100-4x8-ib", "h200": "h200-8x8-ib"}


def _device_of(run: Path) -> str:
    """`h100` or `h200`: the device the kit's meta.json names (the folder's name where it names neither)."""
    import json
    meta = run / "meta.json"
    device = json.loads(meta.read_text()).get("device", "") if meta.exists() else ""
    for key in PRESET:
        if key in device.lower():
            return key
    return run.name.split("-")[0]


def _kit():
    sys.path.insert(0, str(ROOT / "scripts"))  # the kit beside this script
    import measure_device
    return measure_device


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", nargs="+", type=Path,
                        default=[ROOT / "data/device/h100-2026-11-26", ROOT / "data/device/h200-2026-11-26"])
    parser.add_argument("--traces", nargs="+", type=Path,
                        default=[ROOT / "data/device/h200-2026-11-27-alloc/traces-expandable",
                                 ROOT / "data/device/h200-2026-11-27-pp-cp/traces"],
                        help="folders of allocator traces to compare (scripts/trace_allocator.py; each skipped "
                             "when absent)")
    args = parser.parse_args(argv)
    import warnings

    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid.stage_cost import BlockCoster

    kit = _kit()
    errors: dict[str, list[float]] = {"torchtitan": [], "torchtitan-compile": [], "memory": []}
    print("| run | block | measured ms | torchtitan | torchtitan-compile | peak measured | peak predicted |")
    print("|---|---|---|---|---|---|---|")
    for run in args.runs:
        preset = PRESET[_device_of(run)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cluster = resolve_cluster(preset)
        with open(run / "blocks.csv") as f:
            rows = list(csv.DictReader(f))
        for row in rows:
            case = kit.BlockCase(row["style"], int(row["batch"]), int(row["seq"]), int(row["hidden"]), int(row["heads"]),
                                 int(row["kv_heads"]), int(row["ffn"]), gqa=row["gqa"], ac=row.get("ac", "none"),
                                 mode=row.get("mode") or "eager")
            measured = float(row["forward_backward_ms"]) / 1e3
            cells = []
            for runtime in ("torchtitan", "torchtitan-compile"):
                profile = BlockCoster(kit.block_spec(case), cluster, runtime=runtime,
                                      precision=kit.block_precision(case)).profile(1, case.batch)
                predicted = profile.block_s + profile.repeated_forward_s(case.ac)
                if runtime == kit.block_runtime(case):  # each block against its own mode's profile
                    errors[runtime].append(predicted / measured - 1)
                cells.append(f"{predicted * 1e3:.2f} ({predicted / measured - 1:+.1%})")
            peak, predicted_peak = int(row["peak_allocated_bytes"]), kit.predicted_block_bytes(case)
            errors["memory"].append(predicted_peak / peak - 1)
            name = f"{case.style} b={case.batch} s={case.seq} h={case.hidden} {case.gqa} {case.ac} {case.mode}"
            print(f"| {run.name} | {name} | {measured * 1e3:.2f} | {cells[0]} | {cells[1]} | {peak / GIB:.2f} GiB | "
                  f"{predicted_peak / GIB:.2f} GiB ({predicted_peak / peak - 1:+.1%}) |")
    for key, values in errors.items():
        if not values:
            continue
        absolute = sorted(abs(v) for v in values)
        print(f"{key}: median |error| {absolute[len(absolute) // 2]:.1%}, worst {absolute[-1]:.1%} over {len(values)} blocks")
    print("caveat: the kit's blocks use torch's RMSNorm/LayerNorm modules and no rotary embedding; the torchtitan "
          "profile prices torchtitan's eager fp32 RMSNorm and rotary chains (GPT-style blocks read slow under it)")
    for folder in args.traces:
        if folder.is_dir():
            print()
            print_traces(folder)
    return 0


def print_traces(folder: Path) -> None:
    """Allocated and reserved peaks of the allocator-trace cases (scripts/trace_allocator.py,
    torch's figures of the second step, less what an earlier case of the same call left allocated)
    against hybrid/memory.py (`trace_allocator.predicted_memory`)."""
    import json
    sys.path.insert(0, str(ROOT / "scripts"))
    import trace_allocator

    summary = json.loads((folder / "summary.json").read_text())
    print(f"Allocator traces ({folder.relative_to(ROOT)}, {summary.get('alloc_conf')}, {summary.get('device')}):")
    print()
    print("| case | allocated measured | predicted | reserved measured | predicted |")
    print("|---|---|---|---|---|")
    for name, case in summary["cases"].items():
        predicted = trace_allocator.predicted_memory(name)
        before = case.get("allocated_before_bytes", 0)
        allocated, reserved = case["peak_allocated_bytes"] - before, case["peak_reserved_bytes"] - before
        cells = ("not modelled", "not modelled") if predicted is None else tuple(
            f"{p / GIB:.2f} GiB ({p / m - 1:+.1%})" for p, m in zip(predicted, (allocated, reserved)))
        print(f"| {name} | {allocated / GIB:.2f} GiB | {cells[0]} | {reserved / GIB:.2f} GiB | {cells[1]} |")


if __name__ == "__main__":
    raise SystemExit(main())
