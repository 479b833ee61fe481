"""Benchmark: how MadPipe-DP scales with layers and processors, and the whole front door at 400 x 32.

Part 1 (complexity): one MadPipe-DP feasibility pass (`MadPipeDP.solve` at one target period, the
paper's 11 memory and 51 delay levels, optimistic estimate) on seeded synthetic chains, for every
layers x processors of the grid, at a period of 1.5 x the load bound (near where the bisection
works). Prints seconds per pass and the ratio to L^2 (the complexity stated in
solver_plan/pipeline/granularity.py: O(L x K x V x M) with K ~ L / P stage lengths and P normal
processors, i.e. ~L^2 V M).
Part 2 (front door): `plan_pipeline(madpipe, exact)` on 400 layers x 32 processors with a
--time-limit (default 60 s): wall-clock seconds, against the limit + 10%.
    python scripts/bench_pipeline_scaling.py [--layers 25 50 100 200 400] [--processors 4 8 16 32]
                                             [--time-limit 60] [--skip-front-door]
"""
from __future__ import annotations

import argparse
import random
import time

from solver_plan.pipeline.chain import LayerChain
from solver_plan.pipeline.madpipe import MadPipeDP
from solver_plan.pipeline.memory import pipedream_rule
from solver_plan.pipeline.problem import ChainProblem

# docs/pipeline-scaling.md was measured with PipeDream's 3 x weights; kept so its figures reproduce
RULE = pipedream_rule()


def synthetic_chain(layers: int, seed: int = 0) -> LayerChain:
    """CNN-like: activations large at the start, weights large at the end (as scripts/bench_pipeline.py)."""
    rng = random.Random(seed)
    forward = [rng.uniform(1e-3, 5e-3) for _ in range(layers)]
    backward = [2 * f * rng.uniform(0.8, 1.2) for f in forward]
    decay = [2.0 ** (-4 * i / layers) for i in range(layers)]
    activations = [rng.uniform(0.5, 1.5) * 2e8 * d * 100 / layers for d in decay]
    weights = [rng.uniform(0.5, 1.5) * 4e6 / d * 100 / layers for d in decay]
    return LayerChain.simple(f"synthetic{layers}", forward, backward, weights, activations, input_bytes=2e8)


def dp_pass_seconds(layers: int, processors: int, memory: float) -> float:
    problem = ChainProblem(synthetic_chain(layers), processors, memory, 12e9, RULE)
    tau = 1.5 * problem.total_load / processors
    dp = MadPipeDP(problem)
    begin = time.perf_counter()
    dp.solve(tau, tau)
    return time.perf_counter() - begin


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", nargs="+", type=int, default=[25, 50, 100, 200, 400])
    parser.add_argument("--processors", nargs="+", type=int, default=[4, 8, 16, 32])
    parser.add_argument("--memory", type=float, default=8e9, help="bytes per processor")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--skip-front-door", action="store_true")
    args = parser.parse_args(argv)
    print(f"memory rule: {RULE.describe()}")
    print("MadPipe-DP, one feasibility pass (seconds); last column: seconds / L^2 x 1e6 (flat = quadratic)")
    print(f"{'layers':>6} | " + " | ".join(f"P={p:<4}" for p in args.processors) + " | s/L^2 x1e6")
    for layers in args.layers:
        cells = [dp_pass_seconds(layers, p, args.memory) if p <= layers else float("nan") for p in args.processors]
        valid = [c for c in cells if c == c]
        print(f"{layers:>6} | " + " | ".join(f"{c:6.3f}" for c in cells)
              + f" | {1e6 * max(valid) / layers ** 2:8.2f}", flush=True)
    if args.skip_front_door:
        return 0
    from solver_plan.pipeline.api import plan_pipeline
    problem = ChainProblem(synthetic_chain(400), 32, args.memory, 12e9, RULE)
    begin = time.perf_counter()
    result = plan_pipeline(problem, "madpipe", "exact", time_limit=args.time_limit)
    took = time.perf_counter() - begin
    print(f"front door, 400 layers x 32 processors, --time-limit {args.time_limit:g}: {took:.1f} s "
          f"(limit + 10% = {1.1 * args.time_limit:.0f} s: {'OK' if took <= 1.1 * args.time_limit else 'OVER'}); "
          f"{result.planner} + {result.scheduler} {result.status.value}, period "
          f"{result.period_s if result.period_s is not None else float('nan'):.6g} s, load bound "
          f"{problem.total_load / 32:.6g} s")
    for note in result.notes:
        print(f"  note: {note}")
    return 0 if took <= 1.1 * args.time_limit else 1


if __name__ == "__main__":
    raise SystemExit(main())
