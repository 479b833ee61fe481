"""Repair a plan that breaks the memory limit by single changes (one node to another candidate):
scan the nodes on the busiest device, rank changes by cost increase per byte freed there, apply them
in that order while the device stays over the limit, re-checking each, and repeat until every device
fits. A change may not raise any other device's excess over the limit (so the total excess falls
every round); only where no such change is left may it push another device up to just below the
current peak. (The looser rule alone let memory swing between devices: on random-dag:nodes=10000
binding, minimisers 6-9% over took 134-465 rounds and 12-39 s of CPU, where the first rule takes a
few rounds.)"""
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


def _allowed(after: np.ndarray, usage: np.ndarray, device: int, limit: float, strict: bool) -> np.ndarray:
    """Which rows of `after` (usage per device after each change) free `device` and are allowed: under
    `strict`, no device's excess over `limit` grows; else none rises above both the limit and the peak."""
    freed = after[:, device] < usage[device]
    if strict:
        excess = np.maximum(usage - limit, 0.0)
        return freed & (np.maximum(after - limit, 0.0) <= excess).all(axis=1)
    highest = after.max(axis=1)
    return freed & ((highest < usage[device]) | (highest <= limit))


def _ranked_moves(problem: ConfigProblem, adjacency, dense: _DenseMemory, plan, usage: np.ndarray, device: int,
                  limit: float, strict: bool):
    peak = usage[device]
    moves = []
    for node in range(problem.num_nodes):
        memory = dense[node]
        current = plan[node]
        if memory[current, device] <= 0:
            continue
        after = usage[None, :] - memory[current][None, :] + memory  # usage if node took each candidate
        freed = peak - after[:, device]
        allowed = _allowed(after, usage, device, limit, strict)
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
        applied = 0
        for strict in (True, False):
            for _, node, choice in _ranked_moves(problem, adjacency, dense, plan, usage, device, limit, strict):
                if usage[device] <= limit:
                    break
                after = usage - dense[node][plan[node]] + dense[node][choice]
                if _allowed(after[None, :], usage, device, limit, strict)[0]:
                    usage = after
                    plan[node] = choice
                    applied += 1
            if applied:
                break
        if applied == 0:  # no allowed change, or every ranked one became invalid: stuck
            return None
    return tuple(plan)
