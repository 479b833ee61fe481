"""Before an exact model under a binding memory limit: the Lagrangian bound, a better incumbent, and
the model restricted to the candidates the multipliers leave open.

1. `lagrangian_dual` (a share of the time) gives a bound, minimisers and per-candidate bounds.
2. The minimisers that fit memory, and the best-bound minimiser repaired to fit (memory_repair),
   are improved by local search; the cheapest plan, or the warm start if cheaper, is the incumbent.
3. Every candidate whose Lagrangian bound is not below the incumbent's cost is in no cheaper plan:
   the exact model is built on the others only (Lagrangian reduced-cost fixing). Its optimum is the
   problem's optimum, and min(its proven bound, the incumbent's cost) is a proven bound for the
   problem: a plan outside the restriction costs at least the incumbent.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from solver_plan.intra.lagrangian import ROUNDING_SLACK, lagrangian_dual, restricted
from solver_plan.intra.local_search import improve
from solver_plan.intra.memory_repair import repair_memory
from solver_plan.intra.problem import ConfigProblem
from solver_plan.units import format_seconds

LAGRANGIAN_SHARE = 0.25  # of the time the exact planner has left
REPAIR_SHARE = 0.3  # of the Lagrangian's remaining time, for repairing its best minimiser
IMPROVED_PLANS = 4  # fitting minimisers improved by local search (each a pass over the nodes)


@dataclass(frozen=True, eq=False)
class Restriction:
    problem: ConfigProblem  # the problem on the open candidates
    choices: tuple[np.ndarray, ...]  # per node, the original index of each open candidate
    incumbent: tuple[int, ...] | None  # best plan known (original indices), fits memory
    bound: float  # the Lagrangian bound: no plan of the problem costs less
    outside_bound: float  # no plan using a removed candidate costs less
    note: str

    def encode(self, plan) -> tuple[int, ...]:
        return tuple(int(np.flatnonzero(self.choices[node] == choice)[0]) for node, choice in enumerate(plan))

    def decode(self, plan) -> tuple[int, ...]:
        return tuple(int(self.choices[node][choice]) for node, choice in enumerate(plan))

    def problem_bound(self, restricted_bound: float | None) -> float:
        """A proven bound for the whole problem from one for the restricted problem."""
        inner = -np.inf if restricted_bound is None else min(restricted_bound, self.outside_bound)
        return max(self.bound, inner)


def _best_plan(problem: ConfigProblem, minimisers, incumbent, deadline):
    fitting = [plan for plan in minimisers if problem.memory_ok(plan)]
    fitting.sort(key=problem.objective)
    options = [improve(problem, plan, deadline) for plan in fitting[:IMPROVED_PLANS]]
    if minimisers and not problem.memory_ok(minimisers[0]) and not deadline.expired():
        repaired = repair_memory(problem, minimisers[0], deadline.share(REPAIR_SHARE))
        if repaired is not None:
            options.append(improve(problem, repaired, deadline))
    if incumbent is not None:
        options.append(tuple(incumbent))
    return min(options, key=problem.objective) if options else None


def lagrangian_restriction(problem: ConfigProblem, deadline, incumbent=None) -> Restriction | None:
    """None when the memory limit cannot bind (nothing to relax)."""
    started = time.perf_counter()
    clock = deadline.share(LAGRANGIAN_SHARE)
    upper = None if incumbent is None else problem.objective(incumbent)
    relaxation = lagrangian_dual(problem, clock, upper)
    if relaxation is None:
        return None
    plan = _best_plan(problem, relaxation.plans, incumbent, clock)
    if plan is None:
        choices = tuple(np.arange(len(c)) for c in problem.node_costs)
        outside = np.inf
    else:
        choices = relaxation.open_candidates(problem.objective(plan), keep=plan)
        outside = problem.objective(plan)
        outside -= ROUNDING_SLACK * (1.0 + abs(outside))
    kept = sum(len(c) for c in choices)
    note = (f"lagrangian: bound {relaxation.bound:.10g} after {relaxation.steps} multiplier steps "
            f"({'exact' if relaxation.exact_inner else 'spanning-forest'} inner minimum), "
            f"{kept} of {problem.num_candidates} candidates left open, "
            f"{format_seconds(time.perf_counter() - started)}")
    return Restriction(restricted(problem, choices), choices, plan, relaxation.bound, outside, note)
