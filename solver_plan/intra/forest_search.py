"""Large-neighbourhood search by exact re-solves on random forests (block coordinate descent).

Each round picks a random set of nodes whose induced subgraph is a forest, fixes every other node,
and re-chooses the whole set optimally: with the rest fixed, its edges to fixed nodes become node
costs, and folding leaves (simplify) solves a forest exactly. A round never makes the plan worse,
and it escapes the local optima of one-node-at-a-time search. Memory is ignored by the sub-solve,
so a round whose plan breaks the memory limit is rejected; after MEMORY_STALL_ROUNDS such rejections
in a row the search stops (a plan at a binding limit: measured on random-dag:nodes=10000 binding, all
60 rounds rejected, 15 s of CPU for nothing). Where the limit does not bind no round is rejected for
memory, so the rounds and the plan are those without the rule.
"""
from __future__ import annotations

import numpy as np

from solver_plan.deadline import WorkMeter
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplify import simplify

DEFAULT_ROUNDS = 60  # about 6 s on the 10,000-node benchmark; later rounds gain little
MEMORY_STALL_ROUNDS = 8
# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU) of one round
# per node: drawing the forest, conditioning, folding and scoring (measured 24-39 us on gpt3-175B on
# 64 and 1,024 devices and megatron-1T on 64).
ROUND_UNITS_PER_NODE = 40.0


def random_forest(adjacency, rng: np.random.Generator) -> np.ndarray:
    """Mask of nodes, visited in random order, each taken if its taken neighbours lie in different
    trees (union-find), so the induced subgraph stays acyclic."""
    taken = np.zeros(len(adjacency), dtype=bool)
    parent = list(range(len(adjacency)))

    def root(node: int) -> int:
        while parent[node] != node:
            parent[node] = parent[parent[node]]
            node = parent[node]
        return node

    for node in rng.permutation(len(adjacency)):
        roots = [root(other) for _, other, _ in adjacency[node] if taken[other]]
        if len(roots) == len(set(roots)):
            taken[node] = True
            for tree in roots:
                parent[tree] = node
    return taken


def _conditioned(problem: ConfigProblem, adjacency, plan, chosen: np.ndarray) -> tuple[ConfigProblem, np.ndarray]:
    """The problem on the chosen nodes with every other node fixed to its choice in `plan`."""
    nodes = np.flatnonzero(chosen)
    position = np.full(problem.num_nodes, -1)
    position[nodes] = np.arange(len(nodes))
    costs = [np.array(problem.node_costs[i], dtype=float) for i in nodes]
    edges, matrices = [], []
    for j, (u, v) in enumerate(problem.edges):
        matrix = problem.edge_costs[j]
        if chosen[u] and chosen[v]:
            edges.append((int(position[u]), int(position[v])))
            matrices.append(matrix)
        elif chosen[u]:
            costs[position[u]] += matrix[:, plan[v]]
        elif chosen[v]:
            costs[position[v]] += matrix[plan[u], :]
    sub = ConfigProblem(
        names=tuple(problem.names[i] for i in nodes), candidates=tuple(problem.candidates[i] for i in nodes),
        node_costs=tuple(costs), node_memory=tuple(problem.node_memory[i] for i in nodes),
        node_devices=tuple(problem.node_devices[i] for i in nodes), edges=tuple(edges),
        edge_costs=tuple(matrices), num_devices=problem.num_devices, name=f"{problem.name}-forest")
    return sub, nodes


def _solve_forest(sub: ConfigProblem) -> tuple[int, ...]:
    folded = simplify(sub, drop_dominated=False)
    if folded.problem.edges:
        raise AssertionError("a forest must fold completely")
    return folded.decode(tuple(int(np.argmin(costs)) for costs in folded.problem.node_costs))


def improve_by_forests(problem: ConfigProblem, assignment, deadline=None, rounds: int = DEFAULT_ROUNDS,
                       seed: int = 0, meter: WorkMeter | None = None) -> tuple[int, ...]:
    """A plan no worse than `assignment` (and within memory if it was). Each round is charged
    ROUND_UNITS_PER_NODE per node to `meter` (default: `deadline`'s nominal budget) and starts
    only when that budget covers it, so a loaded machine runs the same rounds; the wall clock only
    stops the search past the deadline's grace (marking it cut short)."""
    plan = list(assignment)
    objective = problem.objective(plan)
    adjacency = problem.neighbours()
    meter = WorkMeter(deadline) if meter is None else meter
    round_units = ROUND_UNITS_PER_NODE * problem.num_nodes
    rng = np.random.default_rng(seed)
    rejected = 0  # rounds in a row whose plan broke the memory limit
    for _ in range(rounds):
        if rejected >= MEMORY_STALL_ROUNDS or not meter.affords(round_units) or meter.clock_out():
            break
        meter.charge(round_units)
        sub, nodes = _conditioned(problem, adjacency, plan, random_forest(adjacency, rng))
        trial = list(plan)
        for node, choice in zip(nodes, _solve_forest(sub)):
            trial[node] = choice
        trial_objective = problem.objective(trial)
        fits = trial_objective >= objective or problem.memory_ok(trial)
        rejected = 0 if fits else rejected + 1
        if trial_objective < objective and fits:
            plan, objective = trial, trial_objective
    return tuple(plan)
