"""Device-table entries for devices the project cannot measure itself, from PUBLISHED kernel-level measurements.

    python scripts/published_device_tables.py

Sibling of scripts/device_tables.py (which derives the H100 / H200 entries from the project's own kit). Reads
data/device/published/ (each file's header names its source and how it was measured) and prints, with the
figures they rest on, the B200 / GB200 entries of data/hardware/devices.yaml:
- matrix_efficiency (bf16 GEMMs): OpenXLA's published matmul table times the same dots on sm_100 (Blackwell)
  and sm_90 (Hopper). Per GFLOP bin of the H100 curve, the median over shapes timed on both of
  (B200 fraction of its bf16 peak) / (H100 fraction of its peak), launch overhead taken off both, multiplies
  the H100 curve the project measured itself (data/device/h100-2026-11-26). The ratio keeps what the
  harness measures alike on both devices (shape mix, XLA's dispatch) out of the B200 figure and anchors it on
  the kit whose GEMMs are the ones training runs; the direct sm_100 fractions are printed beside it.
- dtype_efficiency fp8: Transformer Engine's published GEMM benchmark on a Blackwell (B300) GPU, the 12
  GEMMs of a training layer with pre-quantized inputs (kernels only: the cost model prices the casts
  apart, cost/kernels.py fp8_cast_bytes): (BF16 time / MXFP8 time) / 2, the fp8 fraction of its doubled
  peak over bf16's. Printed beside it: the same with TE's in-loop quantization, and one cuBLAS row-wise
  fp8 point at 4096^3 (helion PR 2756) over the XLA table's bf16 at that size (different harnesses).
- attention_efficiency (cudnn, flash2): cuDNN's own SDPA training benchmark, causal forward + backward as
  the cost model counts it (3.5 x the causal forward FLOPs, cost/kernels.py) over the device's bf16 peak.
- attention_efficiency triton2022 (A100, H100, H200): the 2022 Triton FlashAttention kernel
  (flash_attn_triton.py for the pre-MLIR Triton, LLM Foundry's attn_impl: triton), from FlashAttention-2's
  release charts (Dao 2023, Figures 4 and 7: causal, head dimension 128, forward + backward). On the A100 the
  chart's Triton bars over the 312 TFLOPS peak; on Hopper, which the chart times FlashAttention-2 on but not
  Triton, the A100 ratio Triton / FlashAttention-2 at each sequence times the chart's H100 FlashAttention-2
  bar (the same harness and FlashAttention-2 version as the ratio), over 989 TFLOPS; the H200 (the same GH100
  compute) takes the H100's. Both kernels issue Ampere's mma.sync on Hopper (no wgmma:
  flash-attn 2.x before FlashAttention-3, Triton before its MLIR backend), and the chart's two Ampere-style
  CUDA kernels gain alike from A100 to H100 (FlashAttention 1.57-1.78x, FlashAttention-2 1.65-1.74x), which
  the transfer assumes of the Triton one; printed beside it.
Kernels only: no end-to-end run enters any figure (those validate: scripts/bench_moe.py).
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from device_tables import _rows  # noqa: E402  (a sibling script, not a package module)

FOLDER = ROOT / "data" / "device" / "published"
LAUNCH_S = 3e-6  # per-kernel gap taken off every time, as for the H100 entry (device_tables --launch-overhead-us 3)
PEAK_BF16 = {"sm_100": 2250e12, "sm_90": 989e12}  # B200 and H100 SXM dense bf16 (devices.yaml)
PEAK = {"B200": (2250e12, 4500e12), "GB200": (2500e12, 5000e12)}  # (bf16, fp8) dense per GPU
H100_CURVE = [(128.0, 0.7), (16.0, 0.7), (4.0, 0.65), (1.0, 0.55), (0.0, 0.25)]  # measured, devices.yaml
# the B200 curve's bins: the H100's plus one at 512 GFLOP, where the sm_100 / sm_90 ratio keeps rising (the
# larger machine needs larger dots to fill); the H100 figure there is its >= 128 one
BINS = [(512.0, 0.7), *H100_CURVE]
ATTENTION_SEQS = (16384, 8192, 4096, 2048, 1024)
A100_BF16, H100_BF16 = 312e12, 989e12  # A100 SXM and H100 SXM dense bf16 / fp16 (devices.yaml)


def xla_fractions(rows) -> dict[str, dict[tuple[int, int, int, int], float]]:
    """arch -> (b, m, n, k) -> achieved fraction of that arch's bf16 peak with LAUNCH_S taken off the time;
    dots whose time is under twice the launch gap (latency, not throughput) are left out."""
    out: dict[str, dict] = defaultdict(dict)
    for row in rows:
        b, m, n, k = (int(row[c]) for c in ("b", "m", "n", "k"))
        flops = 2.0 * b * m * n * k
        seconds = flops / float(row["bf16_flops"])
        if seconds < 2 * LAUNCH_S:
            continue
        out[row["arch"]][(b, m, n, k)] = flops / (seconds - LAUNCH_S) / PEAK_BF16[row["arch"]]
    return out


def binned(values: dict[tuple[int, int, int, int], float], thresholds) -> list[tuple[float, float | None, int]]:
    """(threshold GFLOP, median of the values of the dots in [threshold, next higher), count)."""
    out, upper = [], float("inf")
    for t in thresholds:
        inside = [v for (b, m, n, k), v in values.items() if t <= 2e-9 * b * m * n * k < upper]
        out.append((t, statistics.median(inside) if inside else None, len(inside)))
        upper = t
    return out


def matrix_curve(fractions) -> list[tuple[float, float, float | None, int]]:
    """(threshold, B200 efficiency, median B200/H100 ratio, count) per entry of BINS; a bin without a
    shape timed on both keeps the ratio of the next larger bin."""
    shared = {s: fractions["sm_100"][s] / fractions["sm_90"][s] for s in fractions["sm_100"] if s in fractions["sm_90"]}
    out, last = [], None
    for (t, ratio, count), (_, h100) in zip(binned(shared, [t for t, _ in BINS]), BINS):
        used = ratio if ratio is not None else last
        last = used
        out.append((t, round(h100 * used, 2) if used is not None else h100, ratio, count))
    return out


def attention_curves(rows, device: str) -> dict[str, list[tuple[int, float]]]:
    """backend -> [(query length, fraction of the device's bf16 peak)] for causal forward + backward."""
    peak = PEAK[device][0]
    out: dict[str, list] = defaultdict(list)
    for row in rows:
        if row["device"] != device:
            continue
        s, h, d = int(row["seq"]), int(row["heads"]), int(row["head_dim"])
        causal_forward = 0.5 * 4.0 * h * s * s * d  # batch 1
        seconds = (float(row["forward_ms"]) + float(row["backward_ms"])) * 1e-3
        out[row["backend"]].append((s, 3.5 * causal_forward / seconds / peak))
    return {k: sorted(v, reverse=True) for k, v in out.items()}


def flash_chart(rows, device: str, method: str, causal: bool = True) -> dict[int, float]:
    """sequence -> TFLOP/s of `method` in FlashAttention-2's release chart (head dimension 128)."""
    return {int(r["seqlen"]): float(r["tflops"]) for r in rows
            if r["device"].startswith(device) and r["method"] == method and r["causal"] == str(int(causal))}


def triton_curve_a100(rows) -> list[tuple[int, float]]:
    """[(query length, fraction of the A100's bf16 peak)] of the Triton kernel, longest first; the chart's
    shortest sequence (512) becomes the 0 entry."""
    chart = flash_chart(rows, "A100", "FlashAttention Triton")
    return [(s if s > 512 else 0, round(chart[s] * 1e12 / A100_BF16, 3)) for s in sorted(chart, reverse=True)]


def triton_curve_hopper(rows) -> list[tuple[int, float, float]]:
    """[(query length, fraction of the H100's bf16 peak, ratio)], longest first: the chart's H100
    FlashAttention-2 bar times the A100 ratio Triton / FlashAttention-2 at the same sequence (one harness for
    all three figures); the shortest sequence (512) becomes the 0 entry."""
    triton, flash2 = flash_chart(rows, "A100", "FlashAttention Triton"), flash_chart(rows, "A100", "FlashAttention-2")
    hopper = flash_chart(rows, "H100", "FlashAttention-2")
    curve = []
    for s in sorted(hopper, reverse=True):
        ratio = triton[s] / flash2[s]
        curve.append((s if s > 512 else 0, round(hopper[s] * 1e12 * ratio / H100_BF16, 3), ratio))
    return curve


def te_fp8_factor(rows, mode: str = "prequant", column: str = "mxfp8_ms") -> float:
    """(BF16 / fp8 time of a whole layer's 12 GEMMs) / 2 in Transformer Engine's benchmark: the fp8 GEMMs'
    fraction of their (2x bf16) peak over the bf16 GEMMs' fraction."""
    row = next(r for r in rows if r["mode"] == mode and r["row"] == "layer:total")
    return float(row["bf16_ms"]) / float(row[column]) / 2.0


def fp8_point(points, fractions) -> tuple[float, float, float]:
    """(fp8 fraction of its peak, B200 bf16 fraction at the same GFLOP, their ratio) for torch._scaled_mm."""
    point = next(p for p in points if p["kernel"].startswith("torch._scaled_mm"))
    m, n, k = (int(point[c]) for c in ("m", "n", "k"))
    fp8 = float(point["tflops"]) * 1e12 / PEAK["B200"][1]
    gflop = 2e-9 * m * n * k
    same_size = [f for (b, mm, nn, kk), f in fractions["sm_100"].items() if abs(2e-9 * b * mm * nn * kk - gflop) < 1.0]
    bf16 = statistics.median(same_size)
    return fp8, bf16, fp8 / bf16


def main(argv=None) -> int:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args(argv)
    fractions = xla_fractions(_rows(FOLDER / "xla-matmul-sm100-sm90.csv"))
    print(f"# from {FOLDER.relative_to(ROOT)} (launch {LAUNCH_S * 1e6:.0f} us taken off each XLA dot)")
    print("matrix_efficiency (bf16): H100 curve x median B200/H100 fraction ratio over dots timed on both")
    for t, value, ratio, count in matrix_curve(fractions):
        shown = "-" if ratio is None else f"{ratio:.3f}"
        print(f"  >= {t:g} GFLOP: ratio {shown} [{count}] -> {value}")
    for arch in ("sm_100", "sm_90"):
        direct = ", ".join(f">= {t:g}: {'-' if v is None else f'{v:.3f}'} [{c}]"
                           for t, v, c in binned(fractions[arch], [t for t, _ in BINS]))
        print(f"  direct {arch} fractions (XLA harness): {direct}")
    te = _rows(FOLDER / "te-gemm-blackwell.csv")
    print(f"dtype_efficiency fp8 (TE, B300, a layer's 12 GEMMs, kernels only): MXFP8 {te_fp8_factor(te):.3f}; "
          f"per-tensor current scaling {te_fp8_factor(te, column='fp8_current_ms'):.3f}; with TE's in-loop "
          f"quantization MXFP8 {te_fp8_factor(te, 'autocast'):.3f}")
    fp8, bf16, ratio = fp8_point(_rows(FOLDER / "fp8-gemm-points.csv"), fractions)
    print(f"  cross-check, other harnesses: cuBLAS row-wise torch._scaled_mm 4096^3 {fp8:.3f} of 4.5 PFLOPS / "
          f"XLA bf16 {bf16:.3f} at 137 GFLOP = {ratio:.2f}")
    for row in (r for r in te if r["row"].startswith("fprop:")):
        flops = 2.0 * int(row["m"]) * int(row["k"]) * int(row["n"])
        print(f"  cross-check of the bf16 curve, TE B300 {row['row']} ({flops / 1e9:.0f} GFLOP): "
              f"{flops / (float(row['bf16_ms']) * 1e-3) / PEAK['B200'][0]:.2f} of 2.25 PFLOPS")
    sdpa = _rows(FOLDER / "cudnn-sdpa-training.csv")
    for device in ("GB200", "B200"):
        for backend, curve in attention_curves(sdpa, device).items():
            shown = ", ".join(f"{s}: {f:.3f}" for s, f in curve if s <= 32768)
            print(f"attention_efficiency {device} {backend} (causal fwd+bwd / bf16 peak): {shown}")
    chart = _rows(FOLDER / "flashattention2-fwd-bwd.csv")
    print("attention_efficiency A100 triton2022 (chart's Triton / 312 TFLOPS): "
          + ", ".join(f"{s}: {f}" for s, f in triton_curve_a100(chart)))
    print("attention_efficiency H100 and H200 triton2022 (A100 Triton / FlashAttention-2 x the chart's H100 "
          "FlashAttention-2 / 989 TFLOPS): " + ", ".join(f"{t}: {f} (ratio {r:.3f})" for t, f, r in triton_curve_hopper(chart)))
    for method in ("FlashAttention", "FlashAttention-2"):
        a100, h100 = flash_chart(chart, "A100", method), flash_chart(chart, "H100", method)
        print(f"  cross-check, H100 / A100 of {method}: "
              + ", ".join(f"{s}: {h100[s] / a100[s]:.2f}" for s in sorted(a100) if s in h100))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
