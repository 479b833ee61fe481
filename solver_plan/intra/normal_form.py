"""Exact reparametrisation of edge costs before building an exact model.

Each edge matrix M is written M[k, l] = a[k] + b[l] + R[k, l] with R >= 0 and a zero in every row
and column of R: a is moved into the source node's costs, b into the target's. Edges whose
residual R is zero everywhere need no edge variables at all, and the others keep the same optimum.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver_plan.intra.problem import ConfigProblem


@dataclass(frozen=True, eq=False)
class NormalForm:
    """Node costs with the edge row and column minima moved in, and the non-zero edge residuals."""
    node_costs: tuple[np.ndarray, ...]  # original node costs plus the moved edge rows/columns
    edges: tuple[tuple[int, int], ...]  # edges whose residual is not all zero
    residuals: tuple[np.ndarray, ...]  # residual matrix of each kept edge, >= 0

    @property
    def num_edge_terms(self) -> int:
        """Entries of the kept residual matrices (the edge variables an exact model needs)."""
        return sum(r.size for r in self.residuals)


def normal_form(problem: ConfigProblem, tolerance: float = 0.0) -> NormalForm:
    """Write each edge matrix as a[k] + b[l] + R[k, l] and move a, b into the node costs; keep only edges
    whose residual exceeds `tolerance`. Every plan keeps its cost (tolerance 0)."""
    costs = [np.asarray(c, dtype=float).copy() for c in problem.node_costs]
    kept_edges, residuals = [], []
    for (u, v), matrix in zip(problem.edges, problem.edge_costs):
        row_min = matrix.min(axis=1)
        shifted = matrix - row_min[:, None]
        column_min = shifted.min(axis=0)
        residual = shifted - column_min[None, :]
        costs[u] += row_min
        costs[v] += column_min
        if residual.max() > tolerance:
            kept_edges.append((u, v))
            residuals.append(residual)
    return NormalForm(tuple(costs), tuple(kept_edges), tuple(residuals))
