"""Whether a branch-and-bound whose nodes are Lagrangian solves could prove the binding-memory instances.

Measures, on the simplified `bench_binding_memory` instance: the root Lagrangian bound of the memory
rows (the forest DP after min-sum diffusion, `intra/lagrangian.py`'s pieces, with the diffusion run
to convergence at the best multipliers three times and Polyak steps towards the known optimum, the
best target there is), its gap to the given optimum (or best known plan), the candidates its
min-marginals leave open, the "swing" operators (those whose choice differs between the minimisers
at multipliers perturbed by +-0.2%, 1% and 3%), and strong branching on the swing operators with
the widest memory range: each child (x_v = the minimiser's choice, x_v != it) re-optimises the
multipliers from the parent's for `--branch-steps` steps. CPU seconds are this process's. Figures,
not assertions: docs/architecture.md (intra/, session 37) quotes them. Example (one core, ~15 s):
    python scripts/probe_lagrangian_branching.py random-dag:1000 4445.4836
"""
from __future__ import annotations

import argparse
import resource
import sys

import numpy as np

from bench_binding_memory import instance
from solver_plan.deadline import WorkMeter
from solver_plan.intra.dual_ascent import reparametrise
from solver_plan.intra.forest_dp import Forest, spanning_forest
from solver_plan.intra.lagrangian import _Penalties, _rediffused, binding_devices
from solver_plan.intra.simplify import simplify

FORBIDDEN = 1e9  # added to the cost of a candidate a branch forbids (below forest_dp's padding)
PERTURBATIONS = (0.002, 0.01, 0.03)  # relative, each drawn 6 times per device
REDIFFUSIONS = 3


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Dual:
    """The Lagrangian dual of the memory rows on one reparametrised forest: value and minimiser."""

    def __init__(self, problem, free):
        self.problem, self.binding = problem, binding_devices(problem)
        self.penalties = _Penalties(problem, self.binding)
        self.keep = spanning_forest(problem.num_nodes, problem.edges, problem.edge_costs)
        self.reset(free)

    def reset(self, free) -> None:
        self.free = free
        self.forest = Forest(free.node_costs, free.edges, free.edge_costs, self.keep)

    def minimum(self, multipliers, node_costs=None, marginals=False):
        costs = self.forest.node_costs if node_costs is None else node_costs
        return self.forest.solve(self.penalties.node_costs(costs, multipliers), marginals=marginals)

    def ascend(self, start, target: float, steps: int, node_costs=None):
        """(best bound, its multipliers, steps): projected subgradient, Polyak steps towards `target`,
        the step factor halved after 6 steps without a better bound."""
        multipliers, best, best_at, factor, stall = start.copy(), -np.inf, start.copy(), 1.0, 0
        for step in range(1, steps + 1):
            solution = self.minimum(multipliers, node_costs)
            value = solution.value - float(multipliers.sum())
            if value > best:
                best, best_at, stall = value, multipliers.copy(), 0
            elif (stall := stall + 1) >= 6:
                factor, stall = factor / 2, 0
            slack = np.where(self.binding, self.penalties.slack(solution.plan), 0.0)
            direction = np.where((multipliers > 0) | (slack > 0), slack, 0.0)
            norm = float(direction @ direction)
            if best >= target - 1e-9 * abs(target) or factor < 1e-4 or norm == 0.0:
                break
            multipliers = np.maximum(0.0, multipliers + factor * max(target - value, 1e-9) / norm * direction)
        return best, best_at, step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("instance", help="random-dag:N or alpa-chain:N (bench_binding_memory)")
    parser.add_argument("optimum", type=float, help="the optimum, or the best known plan's cost")
    parser.add_argument("--steps", type=int, default=300, help="multiplier steps after each diffusion")
    parser.add_argument("--branch-nodes", type=int, default=8)
    parser.add_argument("--branch-steps", type=int, default=40)
    args = parser.parse_args(argv)
    started = _cpu()
    problem = simplify(instance(args.instance)).problem
    print(f"{args.instance}: simplified to {problem.num_nodes} nodes, {len(problem.edges)} edges, "
          f"{problem.num_candidates} candidates", flush=True)
    dual = Dual(problem, reparametrise(problem.with_memory_limit(None), None, max_sweeps=5)[0])
    bound, multipliers, steps = dual.ascend(np.zeros(problem.num_devices), args.optimum, 30)
    print(f"5 sweeps, {steps} steps: bound {bound:.4f} ({_cpu() - started:.1f} s CPU)", flush=True)
    for round_ in range(REDIFFUSIONS):
        begun = _cpu()
        dual.reset(_rediffused(dual.free, dual.penalties, multipliers, None, WorkMeter(None)))
        bound, multipliers, steps = dual.ascend(multipliers, args.optimum, args.steps)
        print(f"diffusion {round_ + 1} at the best multipliers, {steps} steps: bound {bound:.4f} "
              f"({_cpu() - begun:.1f} s CPU), {args.optimum - bound:.4f} below the optimum "
              f"({100 * (args.optimum - bound) / args.optimum:.4f}%)", flush=True)
    root = dual.minimum(multipliers, marginals=True)
    open_ = [np.flatnonzero(m - float(multipliers.sum()) < args.optimum * (1 - 1e-9)) for m in root.min_marginals]
    print(f"min-marginals leave {sum(map(len, open_))} of {problem.num_candidates} candidates open, "
          f"{sum(len(o) > 1 for o in open_)} nodes with more than one", flush=True)
    rng = np.random.default_rng(0)
    plans = np.array([root.plan] + [
        dual.minimum(multipliers * (1 + size * rng.uniform(-1, 1, problem.num_devices))).plan
        for size in PERTURBATIONS for _ in range(6)])
    swing = np.flatnonzero((plans != plans[0]).any(axis=0))
    print(f"swing operators: {len(swing)}", flush=True)
    widest = sorted(swing.tolist(), key=lambda v: -float(np.ptp(problem.node_memory[v])))[:args.branch_nodes]
    for node in widest:
        begun, choice = _cpu(), root.plan[node]
        children = []
        for fixed in (True, False):  # x_v = choice; x_v != choice
            costs = list(dual.forest.node_costs)
            forbid = np.arange(len(costs[node])) != choice if fixed else np.arange(len(costs[node])) == choice
            costs[node] = costs[node] + FORBIDDEN * forbid
            children.append(dual.ascend(multipliers, args.optimum, args.branch_steps, costs)[0] - bound)
        print(f"branch on node {node} ({len(open_[node])} open): x = {choice} {children[0]:+.4f}, "
              f"x != {choice} {children[1]:+.4f} (of the {args.optimum - bound:.4f} gap; "
              f"{_cpu() - begun:.1f} s CPU)", flush=True)
    print(f"total {_cpu() - started:.1f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
