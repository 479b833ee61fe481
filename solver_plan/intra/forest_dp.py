"""Exact dynamic programme on a spanning forest: optimum, an optimal plan and every min-marginal.

Keep a maximum-weight spanning forest of the edges (weight: an edge matrix's range, so the edges
that can cost most are kept) and replace every other edge by its smallest entry. Every plan then
costs no more than in the problem, so the forest's optimum is a lower bound, exact when the graph
is a forest. Min-marginals come from one upward and one downward pass (sum-product with min and +,
Pearl's belief propagation on a tree):
  inside[v][k]  = cost_v[k] + sum over children c of up_c[k],  up_c[k] = min_l edge[k, l] + inside[c][l]
  outside[c][l] = min_k edge[k, l] + inside[v][k] - up_c[k] + outside[v][k]  (v the parent of c)
and min over plans with node v at candidate k = inside[v][k] + outside[v][k] + the other trees' optima:
a lower bound on every plan of the problem that gives v candidate k.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


PADDING = 1e30  # cost of a padded (non-existent) candidate in the level-wise passes (costs near it: node by node)
MIN_LEVEL_WIDTH = 8  # level-wise passes when the forest has at least this many nodes per level on average
MAX_PADDED_ENTRIES = 40_000_000  # nodes x widest^2 floats of the stacked matrices; beyond, node by node


@dataclass(frozen=True, eq=False)
class ForestSolution:
    """What the forest DP found: the forest problem's optimum (a lower bound), a plan and min-marginals.
    """
    value: float  # the forest problem's optimum (a lower bound for the problem)
    plan: tuple[int, ...]  # an optimal plan of the forest problem
    min_marginals: tuple[np.ndarray, ...]  # per node, per candidate: least value with that choice (or ())
    dropped_edges: int  # edges outside the forest, each replaced by its smallest entry


def spanning_forest(num_nodes: int, edges, matrices) -> np.ndarray:
    """Mask of the edges in a maximum-weight spanning forest (Kruskal, weight = max - min entry)."""
    weight = np.array([float(m.max() - m.min()) for m in matrices])
    parent = np.arange(num_nodes)

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    keep = np.zeros(len(edges), dtype=bool)
    for j in np.argsort(-weight, kind="stable"):
        a, b = root(edges[j][0]), root(edges[j][1])
        if a != b:
            parent[a] = b
            keep[j] = True
    return keep


class Forest:
    """The kept edges as trees: breadth-first order, each node's parent and the matrix [parent, child]
    (built once; `solve` then runs for any node costs, e.g. the problem's `node_costs` plus one
    penalty per Lagrange multiplier)."""

    def __init__(self, node_costs, edges, matrices, keep: np.ndarray | None = None):
        num_nodes = len(node_costs)
        self.node_costs = tuple(node_costs)
        if keep is None:
            keep = spanning_forest(num_nodes, edges, matrices)
        self.keep = keep
        self.constant = float(sum(m.min() for m, kept in zip(matrices, keep) if not kept))
        adjacency: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(num_nodes)]
        for j in np.flatnonzero(keep):
            u, v = edges[j]
            adjacency[u].append((v, matrices[j]))
            adjacency[v].append((u, matrices[j].T))
        self.parent = np.full(num_nodes, -1)
        self.to_child: list[np.ndarray | None] = [None] * num_nodes
        self.root_of = np.full(num_nodes, -1)
        self.order = []
        for start in range(num_nodes):
            if self.root_of[start] >= 0:
                continue
            self.root_of[start] = start
            queue = [start]
            while queue:
                node = queue.pop()
                self.order.append(node)
                for other, matrix in adjacency[node]:  # matrix rows: node's candidates
                    if self.root_of[other] < 0:
                        self.root_of[other] = start
                        self.parent[other] = node
                        self.to_child[other] = matrix
                        queue.append(other)
        self.roots = np.unique(self.root_of)
        self.levels = _Levels.of(self) if num_nodes else None

    def solve(self, node_costs, marginals: bool = True) -> ForestSolution:
        """Optimum and an optimal plan; the min-marginals too unless `marginals` is False (the
        downward pass costs as much as the upward one)."""
        if self.levels is not None and max(float(np.max(np.abs(c))) for c in node_costs) < PADDING * 1e-6:
            return self.levels.solve(self, node_costs, marginals)
        parent, to_child, order = self.parent.tolist(), self.to_child, self.order
        minimum = np.minimum.reduce  # bound once: the loops below make ~10 calls per node
        num_nodes = len(node_costs)
        inside = [np.asarray(c, dtype=float).copy() for c in node_costs]
        up: list[np.ndarray | None] = [None] * num_nodes
        for node in reversed(order):
            above = parent[node]
            if above >= 0:
                up[node] = minimum(to_child[node] + inside[node], axis=1)
                inside[above] += up[node]
        optimum = np.zeros(num_nodes)
        optimum[self.roots] = [float(inside[r].min()) for r in self.roots]
        total = float(optimum.sum()) + self.constant
        plan = np.zeros(num_nodes, dtype=np.int64)
        outside = [None] * num_nodes
        for node in order:
            above = parent[node]
            if above < 0:
                plan[node] = inside[node].argmin()
                outside[node] = np.zeros(len(inside[node]))
                continue
            matrix = to_child[node]
            plan[node] = (matrix[plan[above]] + inside[node]).argmin()
            if marginals:
                outside[node] = minimum(matrix + (inside[above] - up[node] + outside[above])[:, None], axis=0)
        result = ()
        if marginals:
            others = total - optimum[self.root_of]
            result = tuple(inside[node] + outside[node] + others[node] for node in range(num_nodes))
        return ForestSolution(total, tuple(plan.tolist()), result, int((~self.keep).sum()))


class _Levels:
    """The same passes one depth level at a time over padded arrays (nodes x widest candidate
    list, padding costs PADDING): a few NumPy calls per level instead of per node, for forests whose
    depth is small against their size (a random DAG's spanning tree: 10,000 nodes, depth ~80)."""

    def __init__(self, forest: Forest, depth: np.ndarray, sizes: np.ndarray):
        self.width = int(sizes.max())
        self.sizes = sizes
        self.valid = np.arange(self.width)[None, :] < sizes[:, None]
        self.levels = []
        for level in range(1, int(depth.max()) + 1):
            nodes = np.flatnonzero(depth == level)
            nodes = nodes[np.argsort(forest.parent[nodes], kind="stable")]  # siblings together
            parents = forest.parent[nodes]
            starts = np.flatnonzero(np.r_[True, parents[1:] != parents[:-1]])
            stacked = np.full((len(nodes), self.width, self.width), PADDING)
            for row, node in enumerate(nodes):
                matrix = forest.to_child[node]
                stacked[row, : matrix.shape[0], : matrix.shape[1]] = matrix
            self.levels.append((nodes, parents, stacked, parents[starts], starts))

    @classmethod
    def of(cls, forest: Forest) -> "_Levels | None":
        num_nodes = len(forest.parent)
        depth = np.zeros(num_nodes, dtype=np.int64)
        for node in forest.order:
            if forest.parent[node] >= 0:
                depth[node] = depth[forest.parent[node]] + 1
        sizes = np.array([len(c) for c in forest.node_costs])
        padded_entries = num_nodes * int(sizes.max()) ** 2
        if depth.max() * MIN_LEVEL_WIDTH > num_nodes or padded_entries > MAX_PADDED_ENTRIES:
            return None
        return cls(forest, depth, sizes)

    def solve(self, forest: Forest, node_costs, marginals: bool) -> ForestSolution:
        inside = np.full((len(self.sizes), self.width), PADDING)
        inside[self.valid] = np.concatenate([np.asarray(c, dtype=float) for c in node_costs])
        up = np.zeros_like(inside)
        for nodes, _, stacked, distinct, starts in reversed(self.levels):
            messages = (stacked + inside[nodes][:, None, :]).min(axis=2)
            up[nodes] = messages
            inside[distinct] += np.add.reduceat(messages, starts, axis=0)
        optimum = np.zeros(len(self.sizes))
        optimum[forest.roots] = inside[forest.roots].min(axis=1)
        total = float(optimum.sum()) + forest.constant
        plan = np.zeros(len(self.sizes), dtype=np.int64)
        plan[forest.roots] = inside[forest.roots].argmin(axis=1)
        outside = np.zeros_like(inside)
        for nodes, parents, stacked, _, _ in self.levels:
            plan[nodes] = (stacked[np.arange(len(nodes)), plan[parents]] + inside[nodes]).argmin(axis=1)
            if marginals:
                context = inside[parents] - up[nodes] + outside[parents]
                outside[nodes] = (stacked + context[:, :, None]).min(axis=1)
        result = ()
        if marginals:
            totals = inside + outside + (total - optimum[forest.root_of])[:, None]
            result = tuple(totals[node, :size] for node, size in enumerate(self.sizes))
        return ForestSolution(total, tuple(plan.tolist()), result, int((~forest.keep).sum()))


def solve_forest(node_costs, edges, matrices, keep: np.ndarray | None = None) -> ForestSolution:
    """The forest DP of the problem given as arrays; `keep` (edge mask) defaults to a maximum-weight
    spanning forest. Edges outside it add their smallest entry to the value."""
    return Forest(node_costs, edges, matrices, keep).solve(node_costs)
