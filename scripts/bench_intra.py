"""Benchmark the per-operator configuration planners on zoo models and synthetic graphs.

Prints one row per (model, devices, planner): operators, MILP variables before/after exact
simplification, status, objective, bound, gap and seconds. Example:
    python scripts/bench_intra.py --models inception_v3 resnet50 --devices 16 --planners milp elimination greedy
"""
from __future__ import annotations

import argparse
import sys
import time

from solver_plan.intra.linear_model import config_model
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.simplify import simplify
from solver_plan.deadline import time_budget
from solver_plan.intra.solve import solve

DEFAULT_MODELS = ("lenet", "alexnet", "vgg16", "inception_v3", "resnet50", "bert-large", "gpt2:layers=82",
                  "gpt2:layers=830", "synthetic:10000")  # gpt2 with 82 / 830 layers: ~1,000 / ~10,000 operators
DEFAULT_PLANNERS = ("milp", "cpsat", "elimination", "greedy", "data-parallel")
DEFAULT_CLUSTER = "k80-16x4"  # 16 nodes x 4 GPUs, as in DeePa's evaluation; first N devices used


def build(model: str, devices: int, cluster_spec: str, memory_limit: float | None):
    if model.startswith("synthetic:"):
        size = int(model.split(":", 1)[1])
        return random_problem(size, seed=devices, shape="dag", min_candidates=10, max_candidates=30,
                              num_devices=devices).with_memory_limit(memory_limit)
    from solver_plan.cluster.loader import resolve_cluster
    from solver_plan.graph.zoo import build_model
    from solver_plan.intra.build import build_config_problem
    return build_config_problem(build_model(model), resolve_cluster(cluster_spec, devices), memory_limit=memory_limit)


def _fmt(value, digits: int = 6) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", default=list(DEFAULT_MODELS))
    parser.add_argument("--devices", nargs="+", type=int, default=[4, 16, 64])
    parser.add_argument("--planners", nargs="+", default=list(DEFAULT_PLANNERS))
    parser.add_argument("--cluster", default=DEFAULT_CLUSTER)
    parser.add_argument("--time-limit", type=float, default=120.0)
    parser.add_argument("--memory-limit", type=float, default=None, help="bytes per device")
    parser.add_argument("--memory-fraction", type=float, default=None,
                        help="memory limit as this fraction of the busiest device in the unconstrained optimum")
    parser.add_argument("--no-simplify", action="store_true")
    args = parser.parse_args(argv)
    header = f"{'model':<16} {'dev':>3} {'ops':>6} {'vars':>9} {'vars_s':>8} {'planner':<13} {'status':<10} " \
             f"{'objective':>11} {'bound':>11} {'gap':>8} {'secs':>7}"
    print(header)
    for model in args.models:
        for devices in args.devices:
            started = time.perf_counter()
            problem = build(model, devices, args.cluster, args.memory_limit)
            built = time.perf_counter() - started
            if args.memory_fraction is not None:
                free = solve(problem.with_memory_limit(None), "elimination")
                peak = float(problem.device_memory(free.assignment).max())
                problem = problem.with_memory_limit(args.memory_fraction * peak)
            variables = config_model(problem).num_columns
            reduced_variables = config_model(simplify(problem).problem).num_columns
            print(f"# {model} x {devices}: built in {built:.2f} s, {problem.num_candidates} candidates, "
                  f"{len(problem.edges)} edges", file=sys.stderr)
            for planner in args.planners:
                result = solve(problem, planner, time_budget(args.time_limit), simplify=not args.no_simplify)
                gap = None if result.gap is None else 100 * result.gap
                print(f"{model:<16} {devices:>3} {problem.num_nodes:>6} {variables:>9} {reduced_variables:>8} "
                      f"{planner:<13} {result.status.value:<10} {_fmt(result.objective)} {_fmt(result.lower_bound)} "
                      f"{_fmt(gap, 3) + '%' if gap is not None else '-':>8} {result.runtime_s:>7.2f}", flush=True)
                if result.status.value in ("ERROR",):
                    print(f"#   {result.notes[:2]}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
