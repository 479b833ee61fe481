"""Exact reparametrisation of edge costs before building an exact model.

Each edge matrix M is written M[k, l] = a[k] + b[l] + R[k, l] with R >= 0 and a zero in every row
and column of R: a is moved into the source node's costs, b into the target's. Edges whose
residual R is zero everywhere need no edge variables at all, and the others keep the same optimum.

With closed pairs (pairs of candidates a relaxation proved to be in no better plan, see lp_fixing),
the minima are taken over the open pairs only: the same cost for every plan that uses open pairs
only, and a larger share moved into the nodes. An edge with a closed pair is always kept (its
variables are what forbid the pair).
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
    residuals: tuple[np.ndarray, ...]  # residual matrix of each kept edge, >= 0 (0 where closed)
    open_pairs: tuple[np.ndarray | None, ...] = ()  # per kept edge: bool matrix of open pairs, None: all
    edge_index: tuple[int, ...] = ()  # per kept edge, its index in the problem's edges

    @property
    def num_edge_terms(self) -> int:
        """Entries of the kept residual matrices (the edge variables an exact model needs)."""
        return sum(r.size for r in self.residuals)


def normal_form(problem: ConfigProblem, tolerance: float = 0.0, closed_pairs=None) -> NormalForm:
    """Write each edge matrix as a[k] + b[l] + R[k, l] and move a, b into the node costs; keep only edges
    whose residual exceeds `tolerance` or that have a closed pair. Every plan keeps its cost (tolerance
    0; with `closed_pairs`, per edge a bool matrix of the pairs no plan may use or None, every plan
    using open pairs only). A candidate all of whose pairs on an edge are closed gets a 0 minimum
    there (the model's marginal rows then keep it out)."""
    costs = [np.asarray(c, dtype=float).copy() for c in problem.node_costs]
    kept_edges, residuals, open_pairs, index = [], [], [], []
    closed_pairs = closed_pairs or (None,) * len(problem.edges)
    for position, ((u, v), matrix, closed) in enumerate(zip(problem.edges, problem.edge_costs, closed_pairs)):
        if closed is not None and not closed.any():
            closed = None
        masked = matrix if closed is None else np.where(closed, np.inf, matrix)
        row_min = _finite(masked.min(axis=1))
        shifted = masked - row_min[:, None]
        column_min = _finite(shifted.min(axis=0))
        residual = shifted - column_min[None, :]
        if closed is not None:
            residual = np.where(closed, 0.0, residual)
        costs[u] += row_min
        costs[v] += column_min
        if closed is not None or residual.max() > tolerance:
            kept_edges.append((u, v))
            residuals.append(residual)
            open_pairs.append(None if closed is None else ~closed)
            index.append(position)
    return NormalForm(tuple(costs), tuple(kept_edges), tuple(residuals), tuple(open_pairs), tuple(index))


def _finite(minima: np.ndarray) -> np.ndarray:
    return np.where(np.isfinite(minima), minima, 0.0)
