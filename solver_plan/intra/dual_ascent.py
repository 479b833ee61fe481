"""Dual ascent by min-sum diffusion: an exact reparametrisation that tightens cheap lower bounds.

Messages a_e (on the source's candidates) and b_e (on the target's) move cost between an edge and
its ends: node i gets + sum of its messages, edge (u, v) gets - a_e[k] - b_e[l]. Every plan keeps
its objective, so for any messages sum_i min_k cost'_i + sum_e min cost'_e is a lower bound, and
the edge-dropping relaxation of the reparametrised problem is one too; diffusion (make each node
and the min-marginals of its edges equal) climbs towards the LP bound of the local polytope,
which is far tighter than dropping edges of the original costs.

Vectorised: candidates are padded to the widest node, and nodes are updated one colour class at a
time (no two nodes of a class share an edge, so a class update is an exact block-coordinate step).
The sweeps run in float32 (SWEEP_DTYPE); the messages they choose are applied to the original costs
in float64 and the returned bound is recomputed from the result, so both stay exact.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from solver_plan.deadline import Deadline, WorkMeter
from solver_plan.intra.problem import ConfigProblem

PADDING = 1e30  # cost of a padded (non-existent) candidate; never the minimum
MAX_PADDED_ENTRIES = 30_000_000  # edge array of (edges x widest^2) floats; beyond it, skip diffusion
ROUNDING_SLACK = 1e-9  # relative: reparametrised costs equal the original up to float rounding
MIN_GAIN = 1e-6  # stop when a sweep raises the bound by less than this fraction (converged)
# The sweeps run in float32: half the memory traffic, 2.2x faster (random-dag:nodes=10000 binding,
# 30 sweeps 11.4 -> 5.3 s of CPU), the same bound after them (43,902.613 either way, recomputed in
# float64); the messages they choose are applied to the original costs in float64 (`_Padded.problem`).
SWEEP_DTYPE = np.float32
# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU) of one sweep
# (every colour class updated, then the bound): per node plus per padded edge entry (edges x widest^2).
# Measured (CPU, random DAGs, 4 colour classes, float64 sweeps): 0.85-12.8 ms at 300-6,000 nodes of
# 2-5 candidates, 25 and 126 ms at 1,000 and 3,000 nodes of 10-30 candidates (1.1 M and 3.4 M padded
# entries); the cost per padded entry grows with the arrays (0.022-0.038 us). In float32 (session
# 35) 0.013 us at 13.5 M padded entries where float64 took 0.028 us (random-dag:nodes=10000, the
# same machine and hour): the entry is charged half the float64 rate, still above what was measured.
# Padding the problem is charged as one sweep.
SWEEP_UNITS_PER_NODE = 2.0
SWEEP_UNITS_PER_PADDED_ENTRY = 0.018


def _colour_classes(problem: ConfigProblem) -> list[np.ndarray]:
    """Greedy colouring: each class is a set of nodes with no edge between them."""
    colour = np.full(problem.num_nodes, -1)
    for node, incident in enumerate(problem.neighbours()):
        taken = {colour[other] for _, other, _ in incident}
        colour[node] = next(c for c in range(len(taken) + 1) if c not in taken)
    return [np.flatnonzero(colour == c) for c in range(colour.max() + 1)] if problem.num_nodes else []


class _Padded:
    """Node costs (n, K) and edge costs (E, K, K) padded with PADDING, plus the messages, in
    SWEEP_DTYPE: the sweeps only choose the messages; `problem` applies them to the original costs
    in float64, so the reparametrisation stays exact whatever the sweeps' rounding."""

    def __init__(self, problem: ConfigProblem):
        width = max(len(c) for c in problem.node_costs)
        self.sizes = np.array([len(c) for c in problem.node_costs])
        self.valid = np.arange(width)[None, :] < self.sizes[:, None]
        self.nodes = np.full((problem.num_nodes, width), PADDING, dtype=SWEEP_DTYPE)
        self.nodes[self.valid] = np.concatenate(problem.node_costs)
        self.sources = np.array([u for u, _ in problem.edges], dtype=np.int64)
        self.targets = np.array([v for _, v in problem.edges], dtype=np.int64)
        self.edges = np.full((len(problem.edges), width, width), PADDING, dtype=SWEEP_DTYPE)
        for j, matrix in enumerate(problem.edge_costs):
            self.edges[j, : matrix.shape[0], : matrix.shape[1]] = matrix
        self.a = np.zeros((len(problem.edges), width), dtype=SWEEP_DTYPE)  # message into the source
        self.b = np.zeros((len(problem.edges), width), dtype=SWEEP_DTYPE)  # message into the target

    def node_costs(self) -> np.ndarray:
        costs = self.nodes.copy()
        np.add.at(costs, self.sources, self.a)
        np.add.at(costs, self.targets, self.b)
        return costs

    def edge_costs(self, edges) -> np.ndarray:
        return self.edges[edges] - self.a[edges][:, :, None] - self.b[edges][:, None, :]

    def bound(self) -> float:
        """The sweeps' bound, in their rounding (when to stop; `exact_bound` is the proven one)."""
        nodes = np.where(self.valid, self.node_costs(), np.inf).min(axis=1).sum(dtype=np.float64)
        return float(nodes + self.edge_costs(slice(None)).min(axis=(1, 2)).sum(dtype=np.float64))

    def update(self, members: np.ndarray, node_costs: np.ndarray) -> None:
        """Diffusion at every node of one colour class."""
        in_class = np.zeros(len(self.nodes), dtype=bool)
        in_class[members] = True
        out_edges = np.flatnonzero(in_class[self.sources])
        in_edges = np.flatnonzero(in_class[self.targets])
        out_marginals = self.edge_costs(out_edges).min(axis=2)
        in_marginals = self.edge_costs(in_edges).min(axis=1)
        total = node_costs.copy()
        np.add.at(total, self.sources[out_edges], out_marginals)
        np.add.at(total, self.targets[in_edges], in_marginals)
        degree = np.bincount(self.sources[out_edges], minlength=len(self.nodes)) + np.bincount(
            self.targets[in_edges], minlength=len(self.nodes))
        share = total / (degree + 1)[:, None]
        out_step = out_marginals - share[self.sources[out_edges]]
        in_step = in_marginals - share[self.targets[in_edges]]
        self.a[out_edges] += np.where(self.valid[self.sources[out_edges]], out_step, 0.0)
        self.b[in_edges] += np.where(self.valid[self.targets[in_edges]], in_step, 0.0)
        node_costs[members] = share[members]

    def problem(self, original: ConfigProblem) -> ConfigProblem:
        messages = np.zeros(self.nodes.shape)  # float64 from here on: the exact reparametrisation
        np.add.at(messages, self.sources, self.a.astype(float))
        np.add.at(messages, self.targets, self.b.astype(float))
        node_costs = tuple(np.asarray(costs, dtype=float) + messages[i, :k]
                           for i, (costs, k) in enumerate(zip(original.node_costs, self.sizes)))
        a, b = self.a.astype(float), self.b.astype(float)
        edge_costs = tuple(original.edge_costs[j] - a[j, : m.shape[0], None] - b[j, None, : m.shape[1]]
                           for j, m in enumerate(original.edge_costs))
        return replace(original, node_costs=node_costs, edge_costs=edge_costs)


def exact_bound(problem: ConfigProblem) -> float:
    """Sum of the least node and edge costs of `problem` (in float64): a proven lower bound."""
    return float(sum(float(np.min(c)) for c in problem.node_costs) + sum(float(np.min(m)) for m in problem.edge_costs))


def reparametrise(problem: ConfigProblem, deadline: Deadline | None = None,
                  max_sweeps: int = 200, meter: WorkMeter | None = None) -> tuple[ConfigProblem, float]:
    """(a problem with the same objective on every plan, a proven lower bound on that objective).
    Sweeps until the bound stalls, `max_sweeps`, or `deadline`'s nominal budget cannot pay for the
    next sweep (SWEEP_UNITS_PER_NODE, SWEEP_UNITS_PER_PADDED_ENTRY; `meter`, when given, a part of
    that budget): the work that decides the
    answer; the wall clock (past `deadline.GRACE_S`) is the safety net. A problem too wide to pad,
    or a budget that cannot pay for padding it and one sweep, gives the problem back unchanged
    with bound -inf."""
    if not problem.edges:
        return problem, float(sum(c.min() for c in problem.node_costs))
    width = max(len(c) for c in problem.node_costs)
    meter = WorkMeter(deadline) if meter is None else meter
    sweep_units = SWEEP_UNITS_PER_NODE * problem.num_nodes + SWEEP_UNITS_PER_PADDED_ENTRY * len(problem.edges) * width**2
    if len(problem.edges) * width * width > MAX_PADDED_ENTRIES or not meter.affords(2 * sweep_units) or meter.clock_out():
        return problem, -np.inf
    meter.charge(sweep_units)
    padded = _Padded(problem)
    classes = _colour_classes(problem)
    bound = padded.bound()
    for _ in range(max_sweeps):
        if not meter.affords(sweep_units) or meter.clock_out():
            break
        meter.charge(sweep_units)
        node_costs = padded.node_costs()
        for members in classes:
            padded.update(members, node_costs)
        improved = padded.bound()
        gained = improved - bound
        bound = max(bound, improved)
        if gained <= MIN_GAIN * max(1.0, abs(bound)):
            break
    reparametrised = padded.problem(problem)
    return reparametrised, exact_bound(reparametrised)
