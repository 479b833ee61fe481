"""Benchmark of the hybrid planner's targets (issue 10); prints figures, asserts nothing.

    python scripts/bench_hybrid.py [--quick]

- GPT-3 175B (gpt3-175B) on 1,024 A100-80GB of a100-80gb-superpod, global batch 1536: a feasible plan
  with its bound in < 60 s, never later than --time-limit + 10% (checked at 60 s and at 10 s);
- megatron-1T on 3,072 devices, global batch 3072: < 120 s;
- Llama 3.1 405B on 16,384 H100 (data/published/clusters/meta-h100-roce-16k.yaml, runtime torchtitan)
  at 8,192 tokens, batch 2048, and at 131,072 tokens, batch 128 (Dubey et al. 2024, Table 4): the space
  with context parallelism (cp), interleaving with any layer count and unequal stages: < 60 s.
Each run is a fresh process (`solver-plan hybrid ... --out`), timed from outside: wall time and the
child's CPU time (user + system, which the machine's load inflates far less than the wall); on a
shared machine the walls are inflated by whatever else runs. `--cases` picks cases by index.
The space includes ZB-V and zb-exact (torchtitan runs them; zb-exact only up to 4 stages) and
optimizer offload (where the cluster file has a host section and the runtime runs it), issue 23.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

A100 = ("a100-80gb-superpod",)
META = ("data/published/clusters/meta-h100-roce-16k.yaml", "--runtime", "torchtitan")
LLAMA = "data/published/models/llama-3.1-405b.json"
CASES = [  # (label, model, devices, batch, time limit, target seconds, cluster and options)
    ("GPT-3 175B / 1024 A100", "gpt3-175B", 1024, 1536, 60, 60, A100),
    ("GPT-3 175B / 1024 A100, --time-limit 10", "gpt3-175B", 1024, 1536, 10, 11, A100),
    ("1T / 3072 A100", "megatron-1T", 3072, 3072, 120, 120, A100),
    ("Llama3 405B 8K / 16384 H100", f"{LLAMA}:seq=8192", 16384, 2048, 60, 60, META),
    ("Llama3 405B 128K / 16384 H100", f"{LLAMA}:seq=131072", 16384, 128, 60, 60, META),
]


def run(label, model, devices, batch, limit, target, cluster=A100) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "plan.json"
        cmd = [sys.executable, "-m", "solver_plan", "hybrid", "--model", model, "--cluster", *cluster,
               "--devices", str(devices), "--batch", str(batch), "--time-limit", str(limit), "--out", str(out)]
        start, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
        plan = json.loads(out.read_text()) if out.exists() else {}
    q = plan.get("parallelism", {})
    line = (f"{label:<42} wall {wall:6.1f} s (target {target} s: {'met' if wall <= target else 'MISSED'}), "
            f"CPU {cpu:6.1f} s  evaluated {plan.get('evaluated')} pruned {plan.get('pruned')}  "
            f"{plan.get('status', 'no plan')}  step {plan.get('step_time_s') or float('nan'):.3f} s  "
            f"bound {plan.get('lower_bound_s') or float('nan'):.3f} s  "
            f"{plan.get('tflops_per_device') or float('nan'):.1f} TFLOP/s/GPU  "
            f"dp={q.get('dp')} cp={q.get('cp')} tp={q.get('tp')} pp={q.get('pp')} b={q.get('micro_batch_size')} "
            f"{q.get('schedule')} v={q.get('virtual_stages')} {q.get('recompute')} zero={q.get('zero_stage')} "
            f"offload={q.get('offload', 'none')}")
    print(line, flush=True)
    if proc.returncode not in (0, 1):
        print(proc.stderr[-2000:])
    return {"label": label, "wall_s": wall, "cpu_s": cpu, "target_s": target, "plan": plan}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the first case")
    parser.add_argument("--cases", type=int, nargs="*", help="indices of CASES to run (default all)")
    args = parser.parse_args(argv)
    cases = CASES[:1] if args.quick else [CASES[i] for i in args.cases] if args.cases else CASES
    for case in cases:
        run(*case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
