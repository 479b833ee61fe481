"""torchtitan's own TransformerBlock on one GPU: forward + backward time and peak memory, eager,
compiled, and compiled with torchao's float8 Linears, for the hybrid model's torchtitan profiles.

    python scripts/time_torchtitan_block.py --torchtitan DIR --out OUT [--cluster h200-8x8-ib] [--dry-run]

DIR holds a torchtitan source tree whose `torchtitan/models/llama/model.py` (and the `models/norms.py`
it imports) is the model of the runs compared (9dec370 for the published 2025 rows: its RMSNorm in
eager fp32 ops, rotary embedding as complex multiplication, repeat_kv, SDPA, SwiGLU); nothing of it is
part of this project: the device call extracts those two files from the repository and stubs
`torchtitan.utils.device_module` (the one other import). Each case builds one block of a flavour's
shapes (layer 0, rope theta 500,000), feeds it the precomputed rotary frequencies, and wraps it as the
device kit wraps its own block (scripts/measure_device.py checkpoint_block: torchtitan's op-level
selective or full checkpointing, float8 conversion, torch.compile), then measures it with the kit's
measure_block (CUDA events, median of the repeats; peak allocation over one forward + backward).
Writes the kit's blocks.csv (its `mode` column) and meta.json, so scripts/blocks_vs_measured.py
compares it with the model; the kit's `titan` blocks lack the rotary embedding and use torch's fused
RMSNorm, which is why this measures torchtitan's own.
`--dry-run` writes the files from the model's predictions (no torch, no torchtitan), for tests on CPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import measure_device as kit  # noqa: E402  (the kit's cases, wrappers and writers, a script beside this one)

# torchtitan 9dec370 models/llama/__init__.py flavours: (dim, heads, kv heads, ffn after its rounding)
FLAVOURS = {"8B": (4096, 32, 8, 14336), "70B": (8192, 64, 8, 28672)}


def plan_cases() -> list[tuple[str, kit.BlockCase]]:
    """The 8B rows' micro-batch (2 x 8192, op-level selective) and a 70B block (1 x 8192, full), eager,
    compiled and compiled float8."""
    cases = []
    for flavour, batch, ac in (("8B", 2, "selective"), ("70B", 1, "full")):
        h, a, kv, f = FLAVOURS[flavour]
        cases += [(flavour, kit.BlockCase("titan", batch, 8192, h, a, kv, f, ac=ac, mode=m))
                  for m in ("eager", "compile", "compile-fp8")]
    return cases


def build_block(torch, flavour: str, case: kit.BlockCase, device: str = "cuda"):
    """torchtitan's TransformerBlock of `flavour` with its rotary frequencies, wrapped as the kit wraps."""
    import torch.nn as nn
    from torchtitan.models.llama.model import ModelArgs, TransformerBlock, precompute_freqs_cis
    h, a, kv, _ = FLAVOURS[flavour]
    multiplier, multiple_of = {"8B": (1.3, 1024), "70B": (1.3, 4096)}[flavour]
    args = ModelArgs(dim=h, n_layers=1, n_heads=a, n_kv_heads=kv, ffn_dim_multiplier=multiplier,
                     multiple_of=multiple_of, rope_theta=500000, max_seq_len=case.seq)

    # the complex64 rotary frequencies as a plain attribute, not a buffer: Module.to(dtype=bf16) casts complex
    # buffers to real (dropping the imaginary part), which the 2026-11-27 call's torchtitan-block/ suffered
    freqs_cis = precompute_freqs_cis(h // a, case.seq, 500000).to(device)

    class WithRope(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = TransformerBlock(0, args)

        def forward(self, x):
            return self.block(x, freqs_cis)
    inner = WithRope()
    ffn = inner.block.feed_forward.w1.out_features
    if ffn != case.ffn:
        raise ValueError(f"torchtitan's {flavour} block has ffn {ffn}, the case {case.ffn}")
    return kit.checkpoint_block(torch, inner, case, device)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--torchtitan", type=Path, help="folder holding torchtitan/models/llama/model.py")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--cluster", default="h200-8x8-ib", help="preset of the dry run's predictions")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    cases = plan_cases()
    out: dict = {name: [] for name in kit.plan_cases(quick=True)}
    started = time.perf_counter()
    skipped = []
    meta: dict = {"dry_run": args.dry_run, "cluster_for_predictions": args.cluster,
                  "block": "torchtitan's own TransformerBlock (models/llama/model.py of --torchtitan), with rotary "
                           "embedding", "torchtitan": str(args.torchtitan)}
    if args.dry_run:
        how = "dry-run: the cost model's prediction, not a measurement"
        cluster = kit._cost_device(args.cluster)
        for _, case in cases:
            predicted = kit.predicted_block_bytes(case)
            out["compiled"].append((case, kit.predicted_block_s(cluster, case), predicted, predicted, 0,
                                    kit.predicted_kept_bytes(case)))
    else:
        if args.torchtitan is None:
            parser.error("--torchtitan is required unless --dry-run")
        sys.path.insert(0, str(args.torchtitan))
        import torch
        timer = kit.Timer(torch, args.warmup, args.repeats)
        how = f"CUDA events, median of {args.repeats} after {args.warmup} warm-up runs"
        for flavour, case in cases:
            try:
                out["compiled"].append((case, *kit.measure_block(torch, timer, case,
                                                                 build=lambda: build_block(torch, flavour, case))))
            except Exception as exc:  # noqa: BLE001 (one failing case must not lose the others)
                skipped.append(f"{flavour} {case}: {type(exc).__name__}: {str(exc)[:300]}")
                print(skipped[-1], flush=True)
        meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda)
    meta.update(how=how, elapsed_s=time.perf_counter() - started, skipped=skipped)
    kit.write_all(args.out, out, meta, how)
    print(json.dumps({k: meta[k] for k in ("dry_run", "elapsed_s", "skipped")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
