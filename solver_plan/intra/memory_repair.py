"""Repair a plan that breaks the memory limit by single changes (one node to another candidate):
scan the nodes on the busiest device, rank changes by cost increase per byte freed there (a change
may not push any other device above both the limit and the current peak), apply them in that order
while the device stays over the limit, re-checking each, and repeat until every device fits."""
from __future__ import annotations

import numpy as np

from solver_plan.deadline import Deadline
from solver_plan.intra.local_cost import candidate_costs
from solver_plan.intra.problem import ConfigProblem


class _DenseMemory:
    """Per node, a (candidates x devices) matrix of bytes, built on first use."""

    def __init__(self, problem: ConfigProblem):
        self.problem = problem
        self.cache: dict[int, np.ndarray] = {}

    def __getitem__(self, node: int) -> np.ndarray:
        if node not in self.cache:
            matrix = np.zeros((len(self.problem.node_costs[node]), self.problem.num_devices))
            for choice, devices in enumerate(self.problem.device_arrays[node]):
                matrix[choice, devices] = self.problem.node_memory[node][choice]
            self.cache[node] = matrix
        return self.cache[node]


def _ranked_moves(problem: ConfigProblem, adjacency, dense: _DenseMemory, plan, usage: np.ndarray, device: int):
    peak = usage[device]
    moves = []
    for node in range(problem.num_nodes):
        memory = dense[node]
        current = plan[node]
        if memory[current, device] <= 0:
            continue
        after = usage[None, :] - memory[current][None, :] + memory  # usage if node took each candidate
        freed = peak - after[:, device]
        highest = after.max(axis=1)
        allowed = (freed > 0) & ((highest < peak) | (highest <= problem.memory_limit))
        allowed[current] = False
        if not allowed.any():
            continue
        costs = candidate_costs(problem, adjacency, node, plan)
        ratios = (costs - costs[current]) / np.where(freed > 0, freed, 1.0)
        choice = int(np.flatnonzero(allowed)[np.argmin(ratios[allowed])])
        moves.append((float(ratios[choice]), node, choice))
    return sorted(moves)


def repair_memory(problem: ConfigProblem, assignment, deadline: Deadline | None = None):
    """A plan within the memory limit reached by cheap single changes, or None if stuck."""
    if problem.memory_limit is None or problem.memory_ok(assignment):
        return tuple(assignment)
    limit = problem.memory_limit * (1 + 1e-9)
    plan = list(assignment)
    adjacency = problem.neighbours()
    dense = _DenseMemory(problem)
    usage = problem.device_memory(plan)
    while usage.max() > limit:
        if deadline is not None and deadline.expired():
            return None
        device = int(usage.argmax())
        moves = _ranked_moves(problem, adjacency, dense, plan, usage, device)
        if not moves:
            return None
        applied = 0
        for _, node, choice in moves:
            if usage[device] <= limit:
                break
            after = usage - dense[node][plan[node]] + dense[node][choice]
            if after[device] < usage[device] and (after.max() < usage.max() or after.max() <= limit):
                usage = after
                plan[node] = choice
                applied += 1
        if applied == 0:  # every ranked change became invalid: stuck
            return None
    return tuple(plan)
