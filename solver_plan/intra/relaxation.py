"""Edge-dropping relaxation: a cheap proven lower bound and a plan, for graphs too big to solve.

After the exact reparametrisation of normal_form every edge matrix is a non-negative residual, so
deleting an edge can only lower the optimum. Alternate exact folding (simplify) with deleting the
edges of smallest largest residual until nothing is left to fold; the folded problem's optimum is a
lower bound for the original (memory is ignored, which also only relaxes), and its plan, decoded
through every level, is a feasible plan whose true cost can be measured. Min-sum diffusion
(dual_ascent) first reparametrises the costs exactly, so the dropped edges carry little cost and the
bound nears the LP bound of the local polytope.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from solver_plan.intra.dual_ascent import ROUNDING_SLACK, reparametrise
from solver_plan.intra.normal_form import normal_form
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplify import simplify

DROP_FRACTION = 0.05
DIFFUSION_SHARE = 0.3  # of the remaining time, so exact solvers keep most of it


@dataclass(frozen=True)
class Relaxation:
    """A proven lower bound, a plan for the original problem and how many edges were dropped to get them.
    """
    lower_bound: float
    assignment: tuple[int, ...]  # a plan for the original problem (memory not checked)
    dropped_edges: int


def _residual_problem(problem: ConfigProblem, keep: int | None = None) -> tuple[ConfigProblem, int]:
    """Same objective on every plan, edges as residuals; keeps only the `keep` heaviest edges."""
    form = normal_form(problem)
    order = np.argsort([-r.max() for r in form.residuals], kind="stable")
    chosen = sorted(order[:keep]) if keep is not None else range(len(form.edges))
    edges = tuple(form.edges[j] for j in chosen)
    residuals = tuple(form.residuals[j] for j in chosen)
    relaxed = replace(problem, node_costs=form.node_costs, edges=edges, edge_costs=residuals, memory_limit=None)
    return relaxed, len(form.edges) - len(edges)


def edge_dropping_relaxation(problem: ConfigProblem, deadline=None, *, diffuse: bool = True) -> Relaxation | None:
    """None if the deadline passes first. `diffuse=False` skips the reparametrisation."""
    problem = problem.with_memory_limit(None)
    diffusion_bound = -np.inf
    if diffuse:
        problem, diffusion_bound = reparametrise(problem, None if deadline is None else deadline.work_part(DIFFUSION_SHARE))
    current, dropped = _residual_problem(problem)
    levels = []
    while True:
        reduced = simplify(current, drop_dominated=False)
        levels.append(reduced)
        remaining = len(reduced.problem.edges)
        if remaining == 0:
            break
        if deadline is not None and deadline.expired():
            return None
        keep = remaining - max(1, int(DROP_FRACTION * remaining))
        current, lost = _residual_problem(reduced.problem, keep)
        dropped += lost
    plan = tuple(int(np.argmin(costs)) for costs in levels[-1].problem.node_costs)
    bound = max(levels[-1].problem.objective(plan), diffusion_bound)
    bound -= ROUNDING_SLACK * (1.0 + abs(bound))
    for level in reversed(levels):
        plan = level.decode(plan)
    return Relaxation(float(bound), plan, dropped)
