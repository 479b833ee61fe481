"""Context-parallel attention on one GPU: one cp rank's forward and backward as PyTorch runs it.

    python scripts/time_context_parallel.py --out DIR [--local-tokens 32768] [--cp 1,2,4] [--dry-run]

What a rank of a context-parallel group computes does not depend on the other ranks' data, so one
GPU times it: torch's fake process group (torch.testing's FakeStore, backend "fake") gives rank 0
of a `cp`-rank mesh whose collectives move no data but allocate every buffer. Per cp degree, with
Llama 3 8B's attention shapes (32 query heads, 8 key/value heads repeated to 32 as torchtitan's
Attention does before SDPA, head dim 128, one sequence of cp x `local-tokens` tokens):
- `torch-cp`: F.scaled_dot_product_attention inside torch's `context_parallel` context (the
  load-balanced ring of torch.distributed.tensor.experimental, its default rotate method), forward
  and backward of rank 0's share;
- `chunks`: the same rank's kernels called one by one without the ring's bookkeeping: the causal
  attention of its own 2 pieces, then cp - 1 non-causal calls of its queries' second half against a
  peer's whole key/value piece (the load-balanced schedule's shapes), forward and backward;
- `whole`: causal attention over the whole sequence on one GPU, whose time / cp is what a cost model
  that divides the whole-sequence attention by cp assumes.
Each under the SDPA backends asked for (`--backends flash,cudnn`); a combination that fails is
written with its error. CUDA events, median of `--repeats` after `--warmup` runs.
Writes `context-parallel.csv` (method, backend, cp, local_tokens, heads, kv_heads, head_dim,
forward_ms, backward_ms, pairs: the (query, key) pairs the rank computes, error) and `meta.json`.
`--dry-run` writes the files with the planned rows and no timings (no torch needed).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

COLUMNS = ("method", "backend", "cp", "local_tokens", "heads", "kv_heads", "head_dim", "forward_ms", "backward_ms",
           "pairs", "error")
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128  # Llama 3 8B


def rank_pairs(cp: int, local: int) -> float:
    """(query, key) pairs one load-balanced rank computes: its causal share of the whole sequence,
    (cp local)^2 / 2 / cp."""
    return (cp * local) ** 2 / 2.0 / cp


def planned(cps: list[int], local: int, backends: list[str]) -> list[dict]:
    rows = []
    for backend in backends:
        for cp in cps:
            for method in ("torch-cp", "chunks", "whole"):
                if method == "torch-cp" and cp == 1:
                    continue
                rows.append({"method": method, "backend": backend, "cp": cp, "local_tokens": local, "heads": HEADS,
                             "kv_heads": KV_HEADS, "head_dim": HEAD_DIM, "pairs": rank_pairs(cp, local)})
    return rows


def timed(torch, run, warmup: int, repeats: int) -> tuple[float, float]:
    """Median (forward ms, backward ms) of `run()`, which returns (forward_fn, backward_fn)."""
    fwd, bwd = [], []
    for i in range(warmup + repeats):
        forward, backward = run()
        start, mid, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        out = forward()
        mid.record()
        backward(out)
        end.record()
        torch.cuda.synchronize()
        if i >= warmup:
            fwd.append(start.elapsed_time(mid))
            bwd.append(mid.elapsed_time(end))
    return statistics.median(fwd), statistics.median(bwd)


def qkv(torch, tokens: int, requires_grad: bool = True):
    """Query, and keys and values repeated to the query heads (torchtitan's repeat_kv), (1, heads, tokens,
    head_dim) bf16."""
    q = torch.randn(1, HEADS, tokens, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, KV_HEADS, tokens, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(1, KV_HEADS, tokens, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    rep = HEADS // KV_HEADS
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return [t.requires_grad_(requires_grad) for t in (q, k, v)]


def attention_run(torch, calls):
    """A run of SDPA `calls` [(q, k, v, causal)] with leaf inputs: forward all, backward all."""
    import torch.nn.functional as F

    def run():
        def forward():
            return [F.scaled_dot_product_attention(q, k, v, is_causal=causal) for q, k, v, causal in calls]

        def backward(outs):
            torch.autograd.backward(outs, [torch.ones_like(o) for o in outs])
            for q, k, v, _ in calls:
                q.grad = k.grad = v.grad = None
        return forward, backward
    return run


def chunk_calls(torch, cp: int, local: int):
    """The load-balanced rank's kernels: causal over its own `local` tokens, then cp - 1 calls of its
    queries' second half against a peer's whole piece (torch and Megatron-core's schedule for a rank
    after the peer; the other case, all queries against the peer's first half, has the same pairs)."""
    q, k, v = qkv(torch, local)
    calls = [(q, k, v, True)]
    half = local // 2
    for _ in range(cp - 1):
        qh = q.detach()[:, :, half:].clone().requires_grad_(True)
        kp, vp = (t.detach().clone().requires_grad_(True) for t in (k, v))
        calls.append((qh, kp, vp, False))
    return calls


def fake_mesh(torch, cp: int):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=cp)
    return init_device_mesh("cuda", (cp,))


def torch_cp_time(torch, cp: int, local: int, warmup: int, repeats: int) -> tuple[float, float]:
    import torch.nn.functional as F
    from torch.distributed.tensor.experimental import context_parallel
    mesh = fake_mesh(torch, cp)
    q, k, v = (t.detach() for t in qkv(torch, cp * local, requires_grad=False))

    def run():  # fresh leaves of the rank's (sharded) buffers each time
        ql, kl, vl = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
        return (lambda: F.scaled_dot_product_attention(ql, kl, vl, is_causal=True),
                lambda out: out.backward(torch.ones_like(out)))
    with context_parallel(mesh, buffers=[q, k, v], buffer_seq_dims=[2, 2, 2]):
        return timed(torch, run, warmup, repeats)


def measure(torch, row: dict, warmup: int, repeats: int) -> tuple[float, float]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[row["backend"]]
    cp, local = row["cp"], row["local_tokens"]
    with sdpa_kernel([backend]):
        if row["method"] == "torch-cp":
            return torch_cp_time(torch, cp, local, warmup, repeats)
        if row["method"] == "chunks":
            return timed(torch, attention_run(torch, chunk_calls(torch, cp, local)), warmup, repeats)
        return timed(torch, attention_run(torch, [(*qkv(torch, cp * local), True)]), warmup, repeats)


def write_csv(path: Path, rows: list[dict]) -> None:
    import csv
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--local-tokens", type=int, default=32768)
    parser.add_argument("--cp", default="1,2,4")
    parser.add_argument("--backends", default="flash,cudnn")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget-s", type=float, default=240.0, help="stop starting rows after this many seconds")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    try:
        cps = [int(c) for c in args.cp.split(",")]
    except ValueError:
        parser.error(f"--cp: expected comma-separated integers, got {args.cp!r}")
    if any(c < 1 for c in cps) or args.local_tokens < 2 or args.local_tokens % 2:
        parser.error("--cp must be >= 1 and --local-tokens an even number >= 2")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = planned(cps, args.local_tokens, args.backends.split(","))
    meta: dict = {"dry_run": args.dry_run, "command": " ".join(["python3", "scripts/time_context_parallel.py",
                                                                *(argv if argv is not None else sys.argv[1:])]),
                  "how": f"CUDA events, median of {args.repeats} after {args.warmup} warm-up runs"}
    done: list[dict] = []
    if not args.dry_run:
        import torch
        meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda)
        began = time.monotonic()
        for row in rows:
            if time.monotonic() - began > args.budget_s:
                row["error"] = "skipped: budget"
            else:
                try:
                    row["forward_ms"], row["backward_ms"] = (round(x, 4) for x in measure(torch, row, args.warmup,
                                                                                           args.repeats))
                except Exception as exc:  # one failing combination must not lose the others
                    row["error"] = f"{type(exc).__name__}: {str(exc)[:200]}"
                torch.cuda.empty_cache()
            done.append(row)
            print(json.dumps(row), flush=True)
            write_csv(out / "context-parallel.csv", done)
        meta["elapsed_s"] = round(time.monotonic() - began, 1)
    else:
        done = rows
    write_csv(out / "context-parallel.csv", done)
    (out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
