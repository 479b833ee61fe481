"""Benchmark the execution simulator (FlexFlow SysML'19 Table 5 layout).

1. Time per proposal: a chain of random single-operator changes from data parallelism; each new
   strategy is simulated by delta (update the live task graph, re-simulate from the change point)
   and by full simulation (build the task graph from scratch, simulate everything). Both share the
   cost caches, as FlexFlow caches task times; the chain is run once untimed to warm them.
2. End-to-end search time: the mcmc planner with a fixed number of proposals, full vs delta.
3. MCMC with the sum objective against the proven optimum (milp) on LeNet and AlexNet, 4 devices, 1 s.

Usage: python scripts/bench_simulator.py [--models inception_v3,resnet101,nmt] [--devices 4,16,64]
       [--proposals 10] [--search-proposals 20] [--cluster k80-16x4]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.enumerate import data_parallel_config
from solver_plan.graph.zoo import build_model
from solver_plan.deadline import time_budget
from solver_plan.intra.solve import solve
from solver_plan.planning import prepare_problem
from solver_plan.simulate.mcmc import plan_mcmc
from solver_plan.simulate.simulator import StrategySimulator


def proposal_chain(problem, count: int, seed: int) -> list[tuple[str, object]]:
    rng = random.Random(seed)
    chain = []
    for _ in range(count):
        node = rng.randrange(problem.num_nodes)
        chain.append((problem.names[node], rng.choice(problem.candidates[node])))
    return chain


def per_proposal(graph, cluster, problem, cost_model, proposals: int, seed: int) -> dict:
    start = {op.name: data_parallel_config(op, graph, cluster.num_devices) for op in graph}
    chain = proposal_chain(problem, proposals, seed)
    warm = StrategySimulator(graph, cluster, cost_model)
    warm.load(start)
    for name, cfg in chain:
        warm.change(name, cfg)
    live = StrategySimulator(graph, cluster, cost_model, lowering=warm.lowering)
    fresh = StrategySimulator(graph, cluster, cost_model, lowering=warm.lowering)
    live.load(start)
    strategy = dict(start)
    delta_s, full_s, share = [], [], []
    for name, cfg in chain:
        strategy[name] = cfg
        t0 = time.perf_counter()
        a = live.change(name, cfg)
        t1 = time.perf_counter()
        b = fresh.load(strategy)
        t2 = time.perf_counter()
        if a != b:
            raise AssertionError(f"delta {a} != full {b} after changing {name}")
        delta_s.append(t1 - t0)
        full_s.append(t2 - t1)
        share.append(live.engine.resimulated / len(live.engine.task_ids()))
    return {"tasks": len(fresh.engine.task_ids()), "full": statistics.mean(full_s),
            "delta": statistics.mean(delta_s), "share": statistics.mean(share)}


def search(problem, proposals: int, seed: int) -> dict:
    out = {}
    for mode in ("delta", "full"):  # delta first: the full run then starts with warmer caches
        t0 = time.perf_counter()
        result = plan_mcmc(problem, iterations=proposals, seed=seed, simulation=mode)
        out[mode] = time.perf_counter() - t0
        out[f"{mode}_plan"] = result.assignment
    if out["full_plan"] != out["delta_plan"]:
        raise AssertionError("full and delta searches disagree (they must follow the same chain)")
    return out


def optimum_check(cluster_name: str) -> list[str]:
    rows = ["| model | optimum (milp) | mcmc sum objective, 1 s | reached | mcmc runtime |", "|---|---|---|---|---|"]
    for model in ("lenet", "alexnet"):
        problem, _ = prepare_problem(build_model(model), resolve_cluster(cluster_name, 4))
        optimum = solve(problem, "milp", time_budget(60)).objective
        t0 = time.perf_counter()
        result = plan_mcmc(problem, objective="sum", deadline=time_budget(1.0))
        elapsed = time.perf_counter() - t0
        reached = abs(result.objective - optimum) <= 1e-9 * max(1.0, abs(optimum))
        rows.append(f"| {model} | {optimum:.6g} s | {result.objective:.6g} s | {'yes' if reached else 'NO'} | {elapsed:.2f} s |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="inception_v3,resnet101,nmt")
    parser.add_argument("--devices", default="4,16,64")
    parser.add_argument("--cluster", default="k80-16x4")
    parser.add_argument("--proposals", type=int, default=10, help="proposals timed per case")
    parser.add_argument("--search-proposals", type=int, default=20, help="proposals per end-to-end search")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    models = args.models.split(",")
    counts = [int(d) for d in args.devices.split(",")]
    per_rows = ["| devices | " + " | ".join(f"{m} full | {m} delta | speedup" for m in models) + " |",
                "|---" * (1 + 3 * len(models)) + "|"]
    search_rows = list(per_rows)
    notes = []
    for devices in counts:
        cluster = resolve_cluster(args.cluster, devices)
        per_cells, search_cells = [], []
        for model in models:
            graph = build_model(model)
            problem, cost_model = prepare_problem(graph, cluster)
            p = per_proposal(graph, cluster, problem, cost_model, args.proposals, args.seed)
            per_cells.append(f"{1e3 * p['full']:.1f} ms | {1e3 * p['delta']:.1f} ms | {p['full'] / p['delta']:.1f}x")
            notes.append(f"{model} @ {devices}: {p['tasks']} tasks, delta re-simulated {100 * p['share']:.0f}% of them")
            s = search(problem, args.search_proposals, args.seed)
            search_cells.append(f"{s['full']:.2f} s | {s['delta']:.2f} s | {s['full'] / s['delta']:.1f}x")
            print(f"done {model} @ {devices}", file=sys.stderr, flush=True)
        per_rows.append(f"| {devices} | " + " | ".join(per_cells) + " |")
        search_rows.append(f"| {devices} | " + " | ".join(search_cells) + " |")
    print(f"## Time per proposal ({args.cluster}, mean of {args.proposals} proposals)\n")
    print("\n".join(per_rows))
    print(f"\n## End-to-end MCMC search ({args.search_proposals} proposals, simulator objective)\n")
    print("\n".join(search_rows))
    print("\n" + "\n".join(f"- {n}" for n in notes))
    print("\n## MCMC (sum objective) vs proven optimum, 4 devices\n")
    print("\n".join(optimum_check(args.cluster)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
