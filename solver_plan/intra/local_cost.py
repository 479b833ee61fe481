"""Cost of each candidate of one node given the choices of (some of) its neighbours."""
from __future__ import annotations

import numpy as np

from solver_plan.intra.problem import ConfigProblem


def candidate_costs(problem: ConfigProblem, adjacency, node: int, assignment, decided=None) -> np.ndarray:
    """Node cost plus edge costs to neighbours already chosen (all, if `decided` is None)."""
    costs = np.array(problem.node_costs[node], dtype=float)
    for edge, other, is_source in adjacency[node]:
        if decided is not None and not decided[other]:
            continue
        matrix = problem.edge_costs[edge]
        costs += matrix[:, assignment[other]] if is_source else matrix[assignment[other], :]
    return costs


def pick(costs: np.ndarray, overflow: np.ndarray) -> int:
    """Cheapest candidate that fits in memory; if none fits, the one overflowing least."""
    fits = overflow <= 1e-9 * max(1.0, float(np.abs(overflow).max(initial=0.0)))
    if fits.any():
        return int(np.flatnonzero(fits)[np.argmin(costs[fits])])
    return int(np.argmin(overflow))
