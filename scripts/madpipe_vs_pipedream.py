"""Reproduce MadPipe's comparison (Figure 7): valid period of PipeDream + 1F1B* against MadPipe +
exact schedule, over networks, P in {2, 4, 8}, M from 3 to 16 GB and beta in {12, 24} GB/s.

Networks: the PipeDream profiles of resnet50, resnet101, inception_v3, densenet121 (measured on a
V100, batch as profiled), and zoo ResNet-50 at 1000x1000 images, batch 8 (times from the cost model
on one device of --cluster). Each DAG is linearised and merged into --max-layers layers; both
planners get the same chain. Writes a CSV of every run, prints the geometric mean of
period(PipeDream) / period(MadPipe) per M (over P and beta; only runs where both are valid) with
the counts of runs where only one finds a valid pattern, and plots it per network like Figure 7.
    python scripts/madpipe_vs_pipedream.py [--quick] [--jobs 2] [--out results/madpipe]
"""
from __future__ import annotations

import argparse
import csv
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PROFILES = ["resnet50", "resnet101", "inception_v3", "densenet121"]
ZOO = "resnet50:batch=8,image=1000"
MEMORIES_GB = [3, 4, 6, 8, 10, 12, 16]
QUICK = {"networks": ["resnet50", ZOO], "processors": [2, 4, 8], "memories": [4, 8, 16], "bandwidths": [12]}
_CHAINS: dict = {}


def chain_for(network: str, cluster: str, max_layers: int):
    key = (network, cluster, max_layers)
    if key not in _CHAINS:
        from solver_plan.cluster import resolve_cluster
        from solver_plan.graph.chain import coarsen
        from solver_plan.data import data_dir
        from solver_plan.pipeline.sources import chain_from_model, chain_from_profile
        if network in PROFILES:
            chain = chain_from_profile(data_dir() / "pipedream-profiles" / network)
        else:
            chain = chain_from_model(network, resolve_cluster(cluster))
        _CHAINS[key] = coarsen(chain, max_layers) if len(chain) > max_layers else chain
    return _CHAINS[key]


def run_one(task: dict) -> dict:
    from solver_plan.pipeline.api import plan_pipeline
    from solver_plan.pipeline.problem import ChainProblem
    chain = chain_for(task["network"], task["cluster"], task["max_layers"])
    problem = ChainProblem(chain, task["P"], task["M_GB"] * 1e9, task["beta_GBps"] * 1e9)
    row = dict(task)
    for name, planner, schedule in (("pipedream", "pipedream", "1f1b*"), ("madpipe", "madpipe", "exact")):
        begin = time.perf_counter()
        result = plan_pipeline(problem, planner, schedule, time_limit=task["time_limit"])
        row[f"{name}_status"] = result.status.value
        row[f"{name}_planned_s"] = result.allocation.period_s
        row[f"{name}_period_s"] = result.period_s
        row[f"{name}_runtime_s"] = round(time.perf_counter() - begin, 3)
    row["sequential_s"] = problem.total_load
    return row


def tasks(args) -> list[dict]:
    grid = QUICK if args.quick else {"networks": PROFILES + [ZOO], "processors": [2, 4, 8],
                                     "memories": MEMORIES_GB, "bandwidths": [12, 24]}
    return [{"network": n, "P": p, "M_GB": m, "beta_GBps": b, "cluster": args.cluster,
             "max_layers": args.max_layers, "time_limit": args.time_limit}
            for n in grid["networks"] for p in grid["processors"] for m in grid["memories"] for b in grid["bandwidths"]]


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summarise(rows) -> tuple[str, dict]:
    networks = list(dict.fromkeys(r["network"] for r in rows))
    memories = sorted({r["M_GB"] for r in rows})
    curves: dict = {}
    lines = [f"{'M (GB)':>7} | " + " | ".join(f"{n[:18]:>18}" for n in networks + ["all"]),
             "-" * (10 + 21 * (len(networks) + 1))]
    for m in memories:
        cells = []
        for n in networks + ["all"]:
            sel = [r for r in rows if r["M_GB"] == m and (n == "all" or r["network"] == n)]
            both = [r["pipedream_period_s"] / r["madpipe_period_s"] for r in sel
                    if r["pipedream_period_s"] and r["madpipe_period_s"]]
            only_mad = sum(1 for r in sel if r["madpipe_period_s"] and not r["pipedream_period_s"])
            only_pd = sum(1 for r in sel if r["pipedream_period_s"] and not r["madpipe_period_s"])
            g = geomean(both)
            curves.setdefault(n, []).append((m, g))
            cells.append(f"{g:6.3f} n={len(both):<2} +{only_mad}/-{only_pd}" if both else f"{'-':>6} n=0  +{only_mad}/-{only_pd}")
        lines.append(f"{m:>7} | " + " | ".join(f"{c:>18}" for c in cells))
    lines.append("cell: geomean of period(PipeDream+1F1B*)/period(MadPipe+exact) over P and beta where both are "
                 "valid (>1: MadPipe better); n runs; +a: runs only MadPipe solved; -b: only PipeDream solved")
    return "\n".join(lines), curves


def plot(curves: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for network, points in curves.items():
        xs = [m for m, g in points if not math.isnan(g)]
        ys = [g for m, g in points if not math.isnan(g)]
        ax.plot(xs, ys, marker="o", linewidth=2.5 if network == "all" else 1.2, label=network)
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_xlabel("memory per processor M (GB)")
    ax.set_ylabel("period PipeDream / MadPipe (geo. mean)")
    ax.set_title("PipeDream + 1F1B* vs MadPipe + exact schedule (cf. MadPipe Fig. 7)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 networks, M in {4, 8, 16}, beta 12 only")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cluster", default="v100x8-nvlink", help="cluster whose w times the zoo model")
    parser.add_argument("--max-layers", type=int, default=32)
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per exact schedule")
    parser.add_argument("--out", default="results/madpipe_vs_pipedream")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    todo = tasks(args)
    begin = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        for i, row in enumerate(pool.map(run_one, todo), start=1):
            rows.append(row)
            print(f"[{i}/{len(todo)}] {row['network']} P={row['P']} M={row['M_GB']}GB beta={row['beta_GBps']}GB/s: "
                  f"pipedream {row['pipedream_period_s'] or row['pipedream_status']}  "
                  f"madpipe {row['madpipe_period_s'] or row['madpipe_status']}", flush=True)
    with open(out / "runs.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table, curves = summarise(rows)
    (out / "summary.txt").write_text(table + "\n")
    plot(curves, out / "figure7.png")
    print(table)
    print(f"wrote {out / 'runs.csv'}, {out / 'summary.txt'}, {out / 'figure7.png'} in {time.perf_counter() - begin:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
