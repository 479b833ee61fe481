"""Side by side with PipeDream's own optimizer on its own profiles: straight pipelines of 2-16 stages,
without communication and with it (transfers of 2 a / beta in the period, PipeDream's
`--activation_compression_ratio 1`), no memory constraint.

PipeDream's optimizer (msr-fiddle/pipedream, optimizer/optimizer_graph_hierarchical.py) is run
unmodified from a checkout given by --pipedream (its `graph` package needs graphviz only to draw,
so a stand-in module is registered when graphviz is missing). Ours: the profile's chain ordered by
`pipeline.cuts.best_order` for that P and bandwidth, then the `pipedream` planner's DP (memory
filter off). Memory rule: PipeDream's 3 x weights (`pipeline.memory.pipedream_rule`), stated explicitly
so the comparison stays apples to apples (no memory limit binds here: 1e15 bytes). Prints both
periods and their ratio; exits 1 if ours is worse anywhere.
    python scripts/pipedream_side_by_side.py --pipedream /path/to/pipedream [--profiles resnet50 gnmt]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import sys
import time
import types
from pathlib import Path

PROFILES = ["alexnet", "vgg16", "resnet18", "resnet50", "resnet101", "squeezenet1_0", "densenet121", "gnmt"]
STAGES = [2, 4, 8, 16]
BANDWIDTHS = [None, 1e9, 12e9]  # None: no communication; else bytes/s


def load_pipedream(root: Path):
    sys.modules.setdefault("graphviz", types.ModuleType("graphviz"))
    sys.path[:0] = [str(root / "optimizer"), str(root)]
    import optimizer_graph_hierarchical as og  # noqa: E402  (PipeDream's module, from the checkout)
    return og


def pipedream_period(og, profile: Path, stages: int, bandwidth: float | None) -> float:
    # compute_partitioning reads these module globals (set by PipeDream's own __main__)
    og.straight_pipeline, og.use_memory_constraint, og.use_fewer_machines = True, False, False
    og.activation_compression_ratio = None if bandwidth is None else 1.0
    og.memory_size = 1e15
    with contextlib.redirect_stdout(io.StringIO()):
        period, _ = og.main([stages], str(profile), [bandwidth or 1e9], 1e15, True, False, False,
                            og.activation_compression_ratio, None, print_configuration=False)
    return period


def our_period(profile: Path, stages: int, bandwidth: float | None) -> tuple[float, str]:
    from solver_plan.pipeline import pipedream_dp
    from solver_plan.pipeline.memory import pipedream_rule
    from solver_plan.pipeline.problem import ChainProblem
    from solver_plan.pipeline.sources import chain_from_profile
    beta = math.inf if bandwidth is None else bandwidth
    chain = chain_from_profile(profile.parent, processors=stages, bandwidth=beta)
    stages = min(stages, len(chain))
    result = pipedream_dp.plan(ChainProblem(chain, stages, 1e15, beta, pipedream_rule()), memory_filter=False)
    return result.period_s, "; ".join(chain.notes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pipedream", required=True, type=Path, help="a checkout of msr-fiddle/pipedream")
    parser.add_argument("--profiles", nargs="+", default=PROFILES)
    parser.add_argument("--stages", nargs="+", type=int, default=STAGES)
    args = parser.parse_args(argv)
    from solver_plan.data import data_dir
    from solver_plan.pipeline.memory import pipedream_rule
    og = load_pipedream(args.pipedream)
    worse = 0
    print(f"memory: ours charges {pipedream_rule().describe()}; no limit binds (1e15 B) and PipeDream's "
          f"optimizer runs with its memory constraint off")
    print(f"{'profile':>14} {'P':>3} {'beta GB/s':>9} {'PipeDream s':>12} {'ours s':>12} {'ours/PD':>8} "
          f"{'PD time':>8} {'our time':>8}")
    for name in args.profiles:
        profile = data_dir() / "pipedream-profiles" / name / "graph.txt"
        for bandwidth in BANDWIDTHS:
            for stages in args.stages:
                begin = time.perf_counter()
                theirs = pipedream_period(og, profile, stages, bandwidth)
                middle = time.perf_counter()
                ours, note = our_period(profile, stages, bandwidth)
                end = time.perf_counter()
                ratio = ours / theirs
                worse += ratio > 1 + 1e-9
                beta = "-" if bandwidth is None else f"{bandwidth / 1e9:g}"
                print(f"{name:>14} {stages:>3} {beta:>9} {theirs:>12.6g} {ours:>12.6g} {ratio:>8.4f} "
                      f"{middle - begin:>7.2f}s {end - middle:>7.2f}s{'  WORSE' if ratio > 1 + 1e-9 else ''}",
                      flush=True)
    print(f"ours worse than PipeDream's optimizer in {worse} case(s)")
    return 1 if worse else 0


if __name__ == "__main__":
    raise SystemExit(main())
