"""Reproduce MadPipe's comparison (Figure 7 of Beaumont et al., "MadPipe: Memory Aware Dynamic
Programming Algorithm for Pipelined Model Parallelism", IPDPS 2022) on the paper's own setting:
ResNet-50, ResNet-101, Inception-v3 and DenseNet-121 at 1000x1000 images, batch 8, P from 2 to 8,
memory M from 3 to 16 GB per processor, bandwidth beta of 12 and 24 GB/s.

Networks are the zoo graphs (times from the cost model on one device of --cluster, a V100 at its
fp32 rate by default, as the paper's profiles); each DAG is ordered for the best antichain cuts at
that P and beta (pipeline/cuts.py) and merged into --max-layers layers, the same chain for both
planners (the front door's MadPipe would get its own coarsening). Stage memory follows the paper's
model, PipeDream's 3 x weights (`pipeline.memory.pipedream_rule`, stated in the outputs), not the
default Adam state of `solver-plan pipeline` (16 B per fp32 parameter = 4 x weights). Per instance: PipeDream's DP + 1F1B* (the paper's baseline) and MadPipe-DP
+ exact schedule (MadPipe alone, without the front door's fallback to the baseline), each under
--time-limit. The figure and summary show, per M, the geometric mean of period(PipeDream + 1F1B*) /
period(MadPipe) (> 1: MadPipe better), every curve, "all" included, over the SAME instances at
every M point: the (network, P, beta) where both planners find a valid plan at every M of the
grid (the instances at 3 GB are the binding ones). Counts of runs only one planner solves are
printed per M.
    python scripts/madpipe_vs_pipedream.py [--quick] [--jobs 2] [--out docs] [--from-csv docs/madpipe-vs-pipedream.csv]
The full grid is 4 networks x P in {2, 4, 6, 8} x 7 memories x 2 bandwidths = 224 instances
(P = 3, 5, 7 left out to stay near 10 minutes on 2 shared cores; --processors 2 3 4 5 6 7 8 runs
them); --quick: ResNet-50 and DenseNet-121, P in {2, 4, 8}, M in {3, 6, 16}, beta 12.
"""
from __future__ import annotations

import argparse
import csv
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

NETWORKS = ["resnet50", "resnet101", "inception_v3", "densenet121"]
SPEC = "{}:batch=8,image=1000"
MEMORIES_GB = [3, 4, 6, 8, 10, 12, 16]
PROCESSORS = [2, 4, 6, 8]
BANDWIDTHS_GBPS = [12, 24]
QUICK = {"networks": ["resnet50", "densenet121"], "processors": [2, 4, 8], "memories": [3, 6, 16],
         "bandwidths": [12]}
_CHAINS: dict = {}


# The paper's profiles are PyTorch fp32 runs on V100s: layer times at the V100's fp32 rate
# (15.7 TFLOP/s, NVIDIA V100 datasheet), not its fp16 tensor-core peak (the v100x8-nvlink preset).
# The link is replaced by beta in every run.
V100_FP32 = """name: v100-fp32
nodes: 1
devices_per_node: 8
device: {name: V100-SXM2-16GB-fp32, memory: 16GB, peak_flops: 15.7TFLOPS}
links:
  intra_node: {bandwidth: 12GB/s}
"""


def resolve(cluster: str):
    from solver_plan.cluster import resolve_cluster
    if cluster != "v100-fp32":
        return resolve_cluster(cluster)
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(V100_FP32)
    return resolve_cluster(f.name)


def chain_for(network: str, cluster: str, processors: int, bandwidth: float):
    key = (network, cluster, processors, bandwidth)
    if key not in _CHAINS:
        from solver_plan.pipeline.sources import chain_from_model
        _CHAINS[key] = chain_from_model(SPEC.format(network), resolve(cluster), processors=processors,
                                        bandwidth=bandwidth)
    return _CHAINS[key]


def memory_rule():
    from solver_plan.pipeline.memory import pipedream_rule
    return pipedream_rule()


def run_one(task: dict) -> dict:
    from solver_plan.pipeline.api import plan_pipeline
    from solver_plan.pipeline.problem import ChainProblem
    from solver_plan.pipeline.chain import coarsen
    beta = task["beta_GBps"] * 1e9
    chain = chain_for(task["network"], task["cluster"], task["P"], beta)
    if len(chain) > task["max_layers"]:  # both planners on the same chain, as in the paper
        chain = coarsen(chain, task["max_layers"])
    problem = ChainProblem(chain, task["P"], task["M_GB"] * 1e9, beta, memory_rule())  # the paper's 3 W
    row = dict(task)
    for name, planner, schedule in (("pipedream", "pipedream", "1f1b*"), ("madpipe", "madpipe", "exact")):
        begin = time.perf_counter()
        result = plan_pipeline(problem, planner, schedule, time_limit=task["time_limit"], compare_baseline=False)
        row[f"{name}_status"] = result.status.value
        row[f"{name}_planned_s"] = result.allocation.period_s
        row[f"{name}_period_s"] = result.period_s
        row[f"{name}_layers"] = result.problem.layers
        row[f"{name}_runtime_s"] = round(time.perf_counter() - begin, 3)
    row["sequential_s"] = problem.total_load
    return row


def tasks(args) -> list[dict]:
    grid = QUICK if args.quick else {"networks": NETWORKS, "processors": args.processors,
                                     "memories": MEMORIES_GB, "bandwidths": BANDWIDTHS_GBPS}
    return [{"network": n, "P": p, "M_GB": m, "beta_GBps": b, "cluster": args.cluster, "time_limit": args.time_limit,
             "max_layers": args.max_layers}
            for n in grid["networks"] for p in grid["processors"] for b in grid["bandwidths"] for m in grid["memories"]]


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def common_instances(rows) -> tuple[list, set]:
    """(memories plotted, instances): the (network, P, beta) both planners solve at every plotted M.
    The plotted range starts at the smallest M from which on at least half of the instances solved
    at the largest M are solved at every M (below it memory is too small for most instances)."""
    memories = sorted({r["M_GB"] for r in rows})
    solved: dict = {}
    for r in rows:
        key = (r["network"], r["P"], r["beta_GBps"])
        solved.setdefault(key, set())
        if r["pipedream_period_s"] and r["madpipe_period_s"]:
            solved[key].add(r["M_GB"])
    at_max = {k for k, ms in solved.items() if memories[-1] in ms}
    for i, _ in enumerate(memories):
        plotted = memories[i:]
        common = {k for k, ms in solved.items() if set(plotted) <= ms}
        if len(common) >= 0.5 * len(at_max):
            return plotted, common
    return memories[-1:], at_max


def summarise(rows) -> tuple[str, dict]:
    """Per network and "all": geo-mean ratio per M over the same instances at every plotted M."""
    networks = list(dict.fromkeys(r["network"] for r in rows))
    memories = sorted({r["M_GB"] for r in rows})
    plotted, common = common_instances(rows)
    by_instance: dict = {}
    for r in rows:
        by_instance.setdefault((r["network"], r["P"], r["beta_GBps"]), {})[r["M_GB"]] = r
    curves: dict = {}
    lines = [f"{'M (GB)':>7} | " + " | ".join(f"{n[:22]:>22}" for n in networks + ["all"]),
             "-" * (10 + 25 * (len(networks) + 1))]
    for m in memories:
        cells = []
        for n in networks + ["all"]:
            keys = sorted(k for k in common if n == "all" or k[0] == n) if m in plotted else []
            ratios = [by_instance[k][m]["pipedream_period_s"] / by_instance[k][m]["madpipe_period_s"] for k in keys]
            sel = [r for r in rows if r["M_GB"] == m and (n == "all" or r["network"] == n)]
            only_mad = sum(1 for r in sel if r["madpipe_period_s"] and not r["pipedream_period_s"])
            only_pd = sum(1 for r in sel if r["pipedream_period_s"] and not r["madpipe_period_s"])
            both = sum(1 for r in sel if r["pipedream_period_s"] and r["madpipe_period_s"])
            g = geomean(ratios)
            if ratios:
                curves.setdefault(n, []).append((m, g))
            head = f"{g:6.3f} n={len(ratios):<3}" if ratios else f"{'-':>6} n=0  "
            cells.append(f"{head} {both}/+{only_mad}/-{only_pd}")
        lines.append(f"{m:>7} | " + " | ".join(f"{c:>22}" for c in cells))
    lines.append(f"cell: geo-mean of period(PipeDream DP + 1F1B*) / period(MadPipe-DP + exact) (>1: MadPipe better) "
                 f"over the same {len(common)} (network, P, beta) instances at every M in {plotted}: those both "
                 f"solve at all of them; n: instances of the column; b/+a/-c: runs at this M both solve / only "
                 f"MadPipe solves / only PipeDream solves")
    return "\n".join(lines), curves


def solved_fractions(rows) -> dict:
    """Per planner, the fraction of all (network, P, beta) instances it solves at each M (the same
    instances at every M by construction)."""
    memories = sorted({r["M_GB"] for r in rows})
    fractions: dict = {}
    for name in ("pipedream", "madpipe"):
        for m in memories:
            sel = [r for r in rows if r["M_GB"] == m]
            fractions.setdefault(name, []).append((m, sum(1 for r in sel if r[f"{name}_period_s"]) / len(sel)))
    return fractions


def per_memory_ratios(rows) -> dict:
    """Per network and "all": at each M, (geo-mean period ratio, n) over the runs both planners solve
    at that M (different instances at different M: read with the n beside each point)."""
    networks = list(dict.fromkeys(r["network"] for r in rows))
    result: dict = {}
    for n in networks + ["all"]:
        for m in sorted({r["M_GB"] for r in rows}):
            both = [r for r in rows if r["M_GB"] == m and (n == "all" or r["network"] == n)
                    and r["pipedream_period_s"] and r["madpipe_period_s"]]
            if both:
                ratios = [r["pipedream_period_s"] / r["madpipe_period_s"] for r in both]
                result.setdefault(n, []).append((m, geomean(ratios), len(both)))
    return result


def headline(rows) -> str:
    """The sentence the README quotes: the same-instances ratio and the solved shares (printed, so
    no number in prose lacks a script that prints it)."""
    plotted, common = common_instances(rows)
    by_instance = {(r["network"], r["P"], r["beta_GBps"], r["M_GB"]): r for r in rows}
    ratios = [by_instance[k + (plotted[0],)]["pipedream_period_s"] / by_instance[k + (plotted[0],)]["madpipe_period_s"]
              for k in sorted(common)]
    fractions = solved_fractions(rows)
    middle = [m for m in sorted({r["M_GB"] for r in rows})[1:] if m < plotted[0]]  # above the smallest M

    def span(name):
        values = [100 * f for m, f in fractions[name] if m in middle]
        return f"{min(values):.0f}-{max(values):.0f}%" if values else "-"
    where = f"{plotted[0]} GB" if len(plotted) == 1 else f"{plotted[0]}-{plotted[-1]} GB"
    text = (f"headline: at {where} (instances both solve at every M from there) MadPipe's period is "
            f"{100 * (1 - 1 / geomean(ratios)):.1f}% shorter (geo-mean ratio {geomean(ratios):.3f} over "
            f"{len(ratios)} instances)")
    if middle:
        text += (f"; at {middle[0]}-{middle[-1]} GB MadPipe solves {span('madpipe')} of instances, PipeDream "
                 f"{span('pipedream')}")
    return text


def plot(rows, path: Path, subtitle: str) -> None:
    """Left: per M, the geo-mean period ratio over the runs both solve at that M, n beside each
    point ("all" bold); right: the share of instances each planner solves at all."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8))
    memories = sorted({r["M_GB"] for r in rows})
    for network, points in per_memory_ratios(rows).items():
        bold = network == "all"
        line, = ax.plot([m for m, _, _ in points], [g for _, g, _ in points], marker="o",
                        linewidth=2.5 if bold else 1.0, markersize=6 if bold else 4,
                        color="black" if bold else None, label="all networks" if bold else network, zorder=3 if bold else 2)
        if bold:
            for m, g, n in points:
                ax.annotate(f"n={n}", (m, g), textcoords="offset points", xytext=(7, 5), ha="left", fontsize=7)
    ax.axhline(1.0, color="grey", linestyle=":")
    ax.set_xticks(memories)
    ax.set_xlim(min(memories) - 0.5, max(memories) + 1.5)  # room for the last n label
    ax.set_xlabel("memory per processor M (GB)")
    ax.set_ylabel("period PipeDream+1F1B* / period MadPipe\n(geo-mean; > 1: MadPipe faster)")
    ax.set_title("period ratio over the runs both planners solve at that M\n(n: runs, all networks)", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    labels = {"pipedream": "PipeDream DP + 1F1B*", "madpipe": "MadPipe-DP + exact"}
    for name, points in solved_fractions(rows).items():
        bx.plot([m for m, _ in points], [100 * f for _, f in points], marker="o", label=labels[name])
    bx.set_xticks(memories)
    bx.set_ylim(-2, 102)
    bx.set_xlabel("memory per processor M (GB)")
    bx.set_ylabel("instances with a valid plan (%)")
    bx.set_title("share of instances solved (all networks, P, beta)", fontsize=9)
    bx.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"MadPipe vs PipeDream, zoo CNNs at 1000x1000 images, batch 8 (cf. MadPipe Fig. 7)\n{subtitle}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def read_rows(path: Path) -> list[dict]:
    """Rows of a previous run's CSV, typed as run_one writes them (empty period: no valid plan)."""
    rows = []
    with open(path, newline="") as f:
        for raw in csv.DictReader(f):
            row = dict(raw)
            for key in ("P", "M_GB", "beta_GBps", "max_layers"):
                row[key] = int(float(row[key]))
            for key in ("pipedream_period_s", "madpipe_period_s"):
                row[key] = float(row[key]) if row[key] else None
            rows.append(row)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 networks, P in {2, 4, 8}, M in {3, 6, 16}, beta 12")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--processors", nargs="+", type=int, default=PROCESSORS)
    parser.add_argument("--cluster", default="v100-fp32",
                        help="cluster whose device times the zoo models (default: a V100 at its fp32 rate)")
    parser.add_argument("--max-layers", type=int, default=32,
                        help="both planners get the chain merged to this many layers (as the paper compares them)")
    parser.add_argument("--time-limit", type=float, default=10.0,
                        help="seconds per planner run (a safety net: the DP and schedule work limits come from it)")
    parser.add_argument("--out", default="results/madpipe_vs_pipedream")
    parser.add_argument("--from-csv", type=Path, help="summarise and plot a previous run's CSV instead of running")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_csv:
        rows = read_rows(args.from_csv)
        header = args.from_csv.with_suffix(".txt").read_text().splitlines()[0] if args.from_csv.with_suffix(".txt").exists() else ""
        table, _ = summarise(rows)
        (out / "madpipe-vs-pipedream.txt").write_text(f"{header}\n{table}\n{headline(rows)}\n")
        plot(rows, out / "madpipe-vs-pipedream.png", header.split(";")[0])
        print(table)
        print(headline(rows))
        return 0
    todo = tasks(args)
    begin = time.perf_counter()
    rows = []
    with ProcessPoolExecutor(max(1, args.jobs)) as pool:
        for i, row in enumerate(pool.map(run_one, todo, chunksize=7), start=1):
            rows.append(row)
            print(f"[{i}/{len(todo)}] {row['network']} P={row['P']} M={row['M_GB']}GB beta={row['beta_GBps']}GB/s: "
                  f"pipedream {row['pipedream_period_s'] or row['pipedream_status']}  "
                  f"madpipe {row['madpipe_period_s'] or row['madpipe_status']} ({row['madpipe_layers']} layers)",
                  flush=True)
    with open(out / "madpipe-vs-pipedream.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table, _ = summarise(rows)
    took = time.perf_counter() - begin
    subtitle = (f"{len(todo)} runs, P {sorted({t['P'] for t in todo})}, beta {sorted({t['beta_GBps'] for t in todo})} "
                f"GB/s, chains of {args.max_layers} layers, time limit {args.time_limit:g} s per planner, "
                f"memory rule {memory_rule().rule} (PipeDream's 3 x weights)")
    (out / "madpipe-vs-pipedream.txt").write_text(f"{subtitle}; {took:.0f} s with {args.jobs} jobs\n{table}\n"
                                                  f"{headline(rows)}\n")
    plot(rows, out / "madpipe-vs-pipedream.png", subtitle)
    print(table)
    print(headline(rows))
    print(f"wrote {out / 'madpipe-vs-pipedream.csv'}, .txt, .png in {took:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
