"""Does the load-aware objective (planner `milp-load`) beat the sum objective (`milp`) in the
execution simulator? Prints, per model, the simulated step time of data parallelism, of the sum
optimum and of the load plan, and the gains over data parallelism (issue 12, deliverable 4).

    python scripts/load_objective_check.py [--time-limit 60] [--calibrated CLUSTER.yaml]

Defaults: Inception-v3 (batch 256) and NMT on 4 P100 (p100-4x4 --devices 4), FlexFlow's setting
(FlexFlow, SysML'19, section 8.4: 12% lower per-iteration time than data parallelism on
Inception-v3). `--calibrated` takes the efficiency curves and launch overhead of a calibrated
cluster YAML (e.g. from `solver-plan calibrate --profile all`) onto the P100 device.
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

from solver_plan.cluster.loader import load_cluster, resolve_cluster
from solver_plan.graph.resolve import resolve_model
from solver_plan.intra.load_objective import load_breakdown
from solver_plan.intra.solve import solve
from solver_plan.planning import prepare_problem
from solver_plan.simulate import simulate_strategy

CASES = (("inception_v3:batch=256", "p100-4x4", 4), ("nmt", "p100-4x4", 4))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--calibrated", help="cluster YAML whose device efficiency curves replace the preset's")
    args = parser.parse_args(argv)
    for model, preset, devices in CASES:
        graph = resolve_model(model)
        cluster = resolve_cluster(preset, devices)
        if args.calibrated:
            fitted = load_cluster(args.calibrated).device
            cluster = replace(cluster, device=replace(
                cluster.device, matrix_efficiency=fitted.matrix_efficiency, vector_efficiency=fitted.vector_efficiency,
                memory_efficiency=fitted.memory_efficiency, launch_overhead=fitted.launch_overhead))
        problem, cost_model = prepare_problem(graph, cluster, None)
        simulated = {}
        for planner in ("data-parallel", "milp", "milp-load"):
            started = time.perf_counter()
            result = solve(problem, planner, time_limit=args.time_limit)
            strategy = {problem.names[i]: problem.candidates[i][c] for i, c in enumerate(result.assignment)}
            simulated[planner] = simulate_strategy(graph, cluster, strategy, cost_model).iteration_s
            print(f"{model} {planner:<13} {result.status.value:<10} simulated {simulated[planner] * 1e3:8.2f} ms  "
                  f"{load_breakdown(problem, result.assignment).describe()}  ({time.perf_counter() - started:.0f} s)",
                  flush=True)
        base = simulated["data-parallel"]
        print(f"{model}: simulated gain over data parallelism: sum objective {base / simulated['milp']:.3f}x, "
              f"load objective {base / simulated['milp-load']:.3f}x\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
