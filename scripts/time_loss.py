"""The loss and the output projection as torchtitan runs them, timed on one GPU: the kernel-level
measurement behind the torchtitan profiles' `Kernels.loss_kernel_bytes_per_logit`.

    python scripts/time_loss.py --out DIR [--repeats 10] [--warmup 3] [--dry-run]

For each (tokens, vocabulary, hidden): torchtitan's loss, F.cross_entropy(pred.flatten(0, 1).float(),
labels) on bf16 logits (train.py of 9dec370), forward alone and forward + backward; and the output
projection's GEMMs (x @ W^T forward, and its backward's two GEMMs) in bf16. CUDA events, median of the
repeats after the warm-ups; also a device-to-device copy of 1 GiB for the HBM rate the bytes a logit
are expressed at. Writes loss.csv (seconds, and bytes a logit = seconds x copy rate / logits) and
meta.json. `--dry-run` writes the planned rows without timings (no torch), for tests on CPU.
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import measure_device as kit  # noqa: E402  (the kit's timer, a script beside this one)

# (tokens, vocabulary, hidden): Llama 3's 128K vocabulary at 8K and 16K tokens a micro-batch, a 32K one,
# and 405B's output layer under TP 8 (16,032 local logits a token) at 4 x 8K tokens
CASES = [(8192, 128256, 4096), (16384, 128256, 4096), (8192, 32000, 4096), (32768, 16032, 16384)]
COLUMNS = ["tokens", "vocab", "hidden", "loss_forward_ms", "loss_forward_backward_ms", "loss_bytes_per_logit",
           "gemm_forward_ms", "gemm_backward_ms", "gemm_fraction_of_bf16_peak", "copy_gb_per_s", "how"]


def time_case(torch, timer, tokens: int, vocab: int, hidden: int) -> tuple[float, float, float, float]:
    import torch.nn.functional as F
    logits = torch.randn(tokens, vocab, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,), device="cuda")

    def forward():
        with torch.no_grad():
            F.cross_entropy(logits.float(), labels)

    def both():
        logits.grad = None
        F.cross_entropy(logits.float(), labels).backward()
    loss_forward, loss_both = timer.median_s(forward), timer.median_s(both)
    logits.grad = None
    x = torch.randn(tokens, hidden, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(vocab, hidden, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(tokens, vocab, device="cuda", dtype=torch.bfloat16)
    gemm_forward = timer.median_s(lambda: x @ w.t())
    gemm_backward = timer.median_s(lambda: (dy @ w, dy.t() @ x))
    return loss_forward, loss_both, gemm_forward, gemm_backward


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows, meta = [], {"dry_run": args.dry_run}
    if args.dry_run:
        how = "dry-run: planned rows, no timings"
        rows = [[t, v, h] + [""] * (len(COLUMNS) - 4) + [how] for t, v, h in CASES]
    else:
        import torch
        timer = kit.Timer(torch, args.warmup, args.repeats)
        how = f"CUDA events, median of {args.repeats} after {args.warmup} warm-up runs"
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        copy_rate = 2.0 * src.numel() / timer.median_s(lambda: dst.copy_(src), back_to_back=True)  # read + write bytes a second
        del src, dst
        for tokens, vocab, hidden in CASES:
            forward, both, gemm_f, gemm_b = time_case(torch, timer, tokens, vocab, hidden)
            logits = tokens * vocab
            rows.append([tokens, vocab, hidden, f"{forward * 1e3:.3f}", f"{both * 1e3:.3f}",
                         f"{both * copy_rate / logits:.1f}", f"{gemm_f * 1e3:.3f}", f"{gemm_b * 1e3:.3f}",
                         f"{6.0 * tokens * vocab * hidden / (gemm_f + gemm_b) / 989e12:.3f}",
                         f"{copy_rate / 1e9:.0f}", how])
            print(rows[-1][:-1], flush=True)
            torch.cuda.empty_cache()
        meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda)
    meta.update(how=how, elapsed_s=time.perf_counter() - started)
    with open(args.out / "loss.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(rows)
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
