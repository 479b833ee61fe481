"""Exact per-operator planners where the memory limit binds, beside the plain one-hot formulation.

Instances: the suite's `random-dag:nodes=N,candidates=6-30,seed=1,memory=binding` (N = 100, 1,000,
10,000; any N, e.g. `random-dag:3000`, which milp's LP route takes at 60 s by column generation)
and an Alpa-shaped chain (`alpa-chain:N`, below) with a binding limit. For each instance and
planner, one run per time limit and seed; prints status, objective, bound, gap, wall seconds and CPU seconds
(this process and its solver workers together: a worker is shut down after each run so its CPU time
is counted; on a shared machine CPU time is the figure the load changes least), and the harness'
note on where the time went. Figures, not assertions: they depend on the machine (state how loaded
it was when quoting them). `--options root_lp=false` compares against the Lagrangian route; `--seeds 0 1 2 3`
runs each limit once per seed. Example (a few minutes):
    python scripts/bench_binding_memory.py --instances random-dag:100 alpa-chain:10000 --limits 60
The reference planners are skipped above REFERENCE_MAX_NODES (their PuLP model does not fit memory).

Alpa-shaped chain: operators in a chain, every candidate a sharding of the operator over *all*
devices (Alpa's intra-operator setting), so every device holds the same bytes and the memory rows
are one knapsack row. Candidate c of node v: shard factor s in {1, 2, 4, 8} (s = 1: replicated),
cost = compute_v u(0.8, 1.2) / s + comm_v[c] log2(s) with comm_v[c] = compute_v r, r log-uniform in
[0.05, 1]; bytes per device = S_v f / s, f ~ u(1, 1.5), S_v uniform in 1..1000 MiB; edge (u, v)
costs t u(0.8, 1.2) where the two shardings differ (spec ids drawn from 30 kinds), 0 where equal,
t ~ u(0.1, 0.5) (compute_u + compute_v) / 2. Limit = M + ALPA_BINDING (P - M), M the least possible
bytes (each node's least), P those of the per-node cheapest plan.
"""
from __future__ import annotations

import argparse
import itertools
import math
import resource
import sys
import time

import numpy as np

from solver_plan.cost.config import ParallelConfig
from solver_plan.intra import isolated
from solver_plan.intra.problem import ConfigProblem
from solver_plan.deadline import time_budget
from solver_plan.intra.solve import solve
from solver_plan.units import MIB

ALPA_BINDING = 0.08  # of the range between the least bytes and the cheapest plan's bytes
ALPA_SPEC_KINDS = 30
REFERENCE_MAX_NODES = 1_000
DEFAULT_INSTANCES = ("random-dag:100", "random-dag:1000", "random-dag:10000", "alpa-chain:10000")
DEFAULT_PLANNERS = ("milp", "reference-highs", "reference-cbc")


def alpa_chain(nodes: int, seed: int = 1, devices: int = 8, min_candidates: int = 6,
               max_candidates: int = 30) -> ConfigProblem:
    """The Alpa-shaped chain of the module docstring, with its binding limit."""
    rng = np.random.default_rng([seed, nodes, devices])
    everyone = tuple(range(devices))
    factors = np.array([1, 2, 4, 8])
    node_costs, node_memory, kinds = [], [], []
    compute = rng.uniform(1.0, 10.0, size=nodes)
    size = rng.integers(1, 1001, size=nodes).astype(float) * MIB
    for v in range(nodes):
        k = int(rng.integers(min_candidates, max_candidates + 1))
        kind = rng.choice(ALPA_SPEC_KINDS, size=k, replace=False)
        shard = factors[kind % len(factors)]
        ratio = np.exp(rng.uniform(np.log(0.05), 0.0, size=k))
        node_costs.append(compute[v] * rng.uniform(0.8, 1.2, size=k) / shard + compute[v] * ratio * np.log2(shard))
        node_memory.append(np.ceil(size[v] * rng.uniform(1.0, 1.5, size=k) / shard))
        kinds.append(kind)
    edges = [(v, v + 1) for v in range(nodes - 1)]
    edge_costs = []
    for u, v in edges:
        scale = rng.uniform(0.1, 0.5) * (compute[u] + compute[v]) / 2
        differ = kinds[u][:, None] != kinds[v][None, :]
        edge_costs.append(scale * rng.uniform(0.8, 1.2, size=differ.shape) * differ)
    problem = ConfigProblem(
        names=tuple(f"op{v}" for v in range(nodes)),
        candidates=tuple(tuple(ParallelConfig((("sample", devices),), everyone) for _ in kind) for kind in kinds),
        node_costs=tuple(node_costs), node_memory=tuple(node_memory),
        node_devices=tuple(tuple(everyone for _ in kind) for kind in kinds), edges=tuple(edges),
        edge_costs=tuple(edge_costs), num_devices=devices, name=f"alpa-chain:nodes={nodes},seed={seed}")
    least = float(sum(m.min() for m in node_memory))
    cheapest = float(sum(m[int(np.argmin(c))] for m, c in zip(node_memory, node_costs)))
    return problem.with_memory_limit(math.ceil(least + ALPA_BINDING * (cheapest - least)))


def instance(name: str) -> ConfigProblem:
    family, nodes = name.split(":")
    if family == "alpa-chain":
        return alpa_chain(int(nodes))
    from solver_plan.suite.generators import resolve_problem
    return resolve_problem(f"{family}:nodes={nodes},candidates=6-30,seed=1,memory=binding")


def _fmt(value, digits: int = 8) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _cpu_seconds() -> float:
    """User and system CPU of this process and of its ended children (the solver workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", nargs="+", default=list(DEFAULT_INSTANCES),
                        help="random-dag:N or alpa-chain:N")
    parser.add_argument("--planners", nargs="+", default=list(DEFAULT_PLANNERS))
    parser.add_argument("--limits", nargs="+", type=float, default=[60.0, 120.0], help="time limits (s)")
    parser.add_argument("--options", nargs="*", default=[], help="milp options as name=true|false")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help="seeds (HiGHS' random seed, forest search): one run each; HiGHS' time on one "
                             "model varies ~2x with it, so compare over several")
    args = parser.parse_args(argv)
    options = {name: value.lower() == "true" for name, value in (o.split("=") for o in args.options)}
    print(f"{'instance':<18} {'planner':<16} {'limit':>5} {'seed':>4} {'status':<10} {'objective':>12} {'bound':>12} "
          f"{'gap':>9} {'secs':>7} {'cpu':>7}")
    for name in args.instances:
        problem = instance(name)
        print(f"# {name}: {problem.num_nodes} nodes, {len(problem.edges)} edges, {problem.num_candidates} "
              f"candidates, limit {problem.memory_limit:.6g} B", flush=True)
        for planner in args.planners:
            if planner.startswith("reference") and problem.num_nodes > REFERENCE_MAX_NODES:
                print(f"{name:<18} {planner:<16} skipped: the PuLP model does not fit memory", flush=True)
                continue
            for limit, seed in itertools.product(args.limits, args.seeds):
                isolated.shutdown()  # a fresh worker: its CPU time is counted when it ends
                cpu_before = _cpu_seconds()
                started = time.perf_counter()
                result = solve(problem, planner, time_budget(limit), seed=seed,
                               **(options if planner == "milp" else {}))
                wall = time.perf_counter() - started
                isolated.shutdown()
                cpu = _cpu_seconds() - cpu_before
                gap = "-" if result.gap is None else f"{100 * result.gap:.4f}%"
                print(f"{name:<18} {planner:<16} {limit:>5g} {seed:>4} {result.status.value:<10} {_fmt(result.objective):>12} "
                      f"{_fmt(result.lower_bound):>12} {gap:>9} {wall:>7.1f} {cpu:>7.1f}", flush=True)
                for note in result.notes:
                    if note.startswith(("time:", "lagrangian", "root LP", "first MILP stage")):
                        print(f"#   {note}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
