"""Device-table entries derived from one call of the device measurement kit (scripts/measure_device.py).

    python scripts/device_tables.py data/device/h100-2026-11-26 [--cluster h100-4x8-ib]

Reads the kit's kernel tables (calibration.csv, attention-backward.csv, copies.csv) and prints, with
every figure it rests on, the entries of data/hardware/devices.yaml they determine:
- matrix_efficiency (bf16 GEMMs): per GFLOP threshold of the device's curve, the median achieved
  fraction of the bf16 peak of the GEMMs at or above it (and below the next), after taking the
  device's launch overhead off each time (compute_time adds it back);
- dtype_efficiency (fp8, fp16, tf32): the median over shapes measured in both dtypes of
  (achieved fraction of the dtype's peak) / (bf16's fraction at the same shape);
- attention_efficiency: per backend and query length, the achieved fraction of the bf16 peak of a
  causal forward + backward counted as the cost model counts it (cost/kernels.py: forward = half the
  dense FLOPs, backward FLASH_BACKWARD_RATIO x forward), i.e. 3.5 x the causal forward FLOPs / time;
- HBM: device-to-device copy rate (read + write) against the table's bandwidth.
Kernels only: nothing here looks at blocks.csv or end-to-end runs (those validate; scripts/
hybrid_vs_published.py and blocks.csv's predicted columns).
"""
from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def _shape(text: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", text)}


def gemm_fractions(rows, device, launch: float) -> dict[str, dict[tuple[int, int, int], float]]:
    """dtype -> (m, n, k) -> achieved fraction of that dtype's matrix peak, `launch` seconds removed."""
    out: dict[str, dict] = defaultdict(dict)
    for row in rows:
        if row["op"] != "matmul":
            continue
        s = _shape(row["shape"])
        seconds = float(row["time_us"]) * 1e-6 - launch
        flops = 2.0 * s["m"] * s["n"] * s["k"]
        out[row["dtype"]][(s["m"], s["n"], s["k"])] = flops / seconds / device.peak(row["dtype"], "matrix")
    return out


def curve_medians(fractions: dict, thresholds: list[float]) -> list[tuple[float, float | None, int]]:
    """(threshold GFLOP, median fraction of the GEMMs in [threshold, next higher), count)."""
    out = []
    upper = float("inf")
    for t in thresholds:
        inside = [f for (m, n, k), f in fractions.items() if t <= 2.0 * m * n * k / 1e9 < upper]
        out.append((t, statistics.median(inside) if inside else None, len(inside)))
        upper = t
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--cluster", default="h100-4x8-ib", help="preset whose device's peaks and tables to compare with")
    parser.add_argument("--launch-overhead-us", type=float, default=None,
                        help="per-kernel time taken off before the fractions (default: the device table's)")
    args = parser.parse_args(argv)
    from solver_plan.cluster import resolve_cluster
    from solver_plan.cost.kernels import CAUSAL_WORK_FRACTION, FLASH_BACKWARD_RATIO

    device = resolve_cluster(args.cluster).device
    launch = device.launch_overhead if args.launch_overhead_us is None else args.launch_overhead_us * 1e-6
    gemms = gemm_fractions(_rows(args.folder / "calibration.csv"), device, launch)
    print(f"# from {args.folder} against the {device.name} peaks (launch overhead {launch * 1e6:.1f} us taken off)")
    thresholds = [t for t, _ in device.matrix_efficiency] or [128.0, 16.0, 1.0, 0.0]
    print("matrix_efficiency (bf16 GEMMs; threshold GFLOP: median fraction [count]; table now):")
    for (t, median, count), (_, now) in zip(curve_medians(gemms["bf16"], thresholds), device.matrix_efficiency):
        shown = "-" if median is None else f"{median:.3f}"
        print(f"  >= {t:g}: {shown} [{count}]   table {now}")
    for (m, n, k), f in sorted(gemms["bf16"].items(), key=lambda kv: -kv[0][0] * kv[0][1] * kv[0][2]):
        print(f"    bf16 {m}x{n}x{k} ({2e-9 * m * n * k:.0f} GFLOP): {f:.3f}")
    print("dtype_efficiency (fraction of the dtype's peak / bf16's at the same shape; median over shapes >= 100 GFLOP):")
    for dtype in ("fp8", "fp16", "tf32"):
        ratios = [f / gemms["bf16"][shape] for shape, f in gemms.get(dtype, {}).items()
                  if shape in gemms["bf16"] and 2.0 * shape[0] * shape[1] * shape[2] >= 100e9]
        if ratios:
            print(f"  {dtype}: {statistics.median(ratios):.3f} over {len(ratios)} shapes "
                  f"(range {min(ratios):.3f}-{max(ratios):.3f}); table {dict(device.dtype_efficiency).get(dtype)}")
    attention = _rows(args.folder / "attention-backward.csv")
    factor = CAUSAL_WORK_FRACTION * (1.0 + FLASH_BACKWARD_RATIO)  # of the dense forward FLOPs
    by_backend: dict[tuple[str, int], list[float]] = defaultdict(list)
    for row in attention:
        if int(row["head_dim"]) != 128:
            continue
        b, a, s, d = (int(row[k]) for k in ("batch", "heads", "seq", "head_dim"))
        dense_forward = 4.0 * b * a * s * s * d
        seconds = float(row["forward_backward_us"]) * 1e-6
        by_backend[(row.get("backend", "default"), s)].append(factor * dense_forward / seconds / device.peak("bf16", "matrix"))
    print("attention_efficiency (causal forward + backward as the cost model counts it; backend, query length: median [count]):")
    for (backend, s), values in sorted(by_backend.items()):
        print(f"  {backend:9s} s={s:5d}: {statistics.median(values):.3f} [{len(values)}]")
    print(f"  table now: {dict(device.attention_efficiency)}")
    grouped_path = args.folder / "grouped-gemm.csv"
    if grouped_path.exists():
        print("grouped expert GEMMs (one kernel over E experts; fraction of the bf16 peak with one launch taken off, "
              "by GFLOP per expert):")
        for row in _rows(grouped_path):
            if not row["grouped_us"]:
                continue
            e, t, k, n = (int(row[c]) for c in ("experts", "tokens_per_expert", "k", "n"))
            flops = 2.0 * e * t * k * n
            fraction = flops / (float(row["grouped_us"]) * 1e-6 - launch) / device.peak("bf16", "matrix")
            print(f"  E={e:3d} tokens={t:5d} {k}x{n}: {flops / e / 1e9:8.2f} GFLOP per expert -> {fraction:.3f}")
    copies = [r for r in _rows(args.folder / "copies.csv") if r["direction"] == "d2d"]
    for row in copies:
        rate = 2.0 * int(row["bytes"]) / (float(row["time_us"]) * 1e-6)
        print(f"HBM copy {int(row['bytes']) / 1e6:.0f} MB: {rate / 1e12:.2f} TB/s read + write = "
              f"{rate / device.hbm_bandwidth:.3f} of {device.hbm_bandwidth / 1e12:.2f} TB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
