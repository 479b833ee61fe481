"""SMSG-style greedy plans, the heuristics every planner may start from: visit nodes by decreasing
importance (within a growing connected region, see visiting_order); each takes the candidate
minimising its own cost plus the edge costs to neighbours already decided, among candidates that
keep every device within the memory limit (counting the unavoidable memory of undecided nodes). A
local-improvement pass (option refine, default on) then revisits each node given all its
neighbours. Under a memory limit the unconstrained greedy plan, repaired to fit (memory_repair), is
tried too; the cheaper wins."""
from __future__ import annotations

import heapq

import numpy as np

from solver_plan.intra.local_cost import candidate_costs, pick
from solver_plan.intra.local_search import improve
from solver_plan.intra.memory_repair import repair_memory
from solver_plan.intra.memory_tracker import MemoryTracker
from solver_plan.intra.problem import ConfigProblem


def importance(problem: ConfigProblem) -> np.ndarray:
    """How much a node's choice can cost: its dearest candidate plus its incident edges' dearest entries."""
    weight = np.array([float(np.max(c)) for c in problem.node_costs])
    for (u, v), matrix in zip(problem.edges, problem.edge_costs):
        heaviest = float(matrix.max()) if matrix.size else 0.0
        weight[u] += heaviest
        weight[v] += heaviest
    return weight


def visiting_order(problem: ConfigProblem) -> list[int]:
    """Most important node first, then always the most important node next to a decided one (a
    spanning tree grown by importance, as SMSG treats a DAG), so each choice sees its context.
    Plain decreasing importance measured 4x worse than this on Inception-v3 x 16 devices."""
    weight = importance(problem)
    adjacency = problem.neighbours()
    seen = np.zeros(problem.num_nodes, dtype=bool)
    order: list[int] = []
    for start in np.argsort(-weight, kind="stable"):
        if seen[start]:
            continue
        seen[start] = True
        frontier = [(-weight[start], int(start))]
        while frontier:
            _, node = heapq.heappop(frontier)
            order.append(node)
            for _, other, _ in adjacency[node]:
                if not seen[other]:
                    seen[other] = True
                    heapq.heappush(frontier, (-weight[other], other))
    return order


def greedy_assignment(problem: ConfigProblem, deadline=None) -> tuple[int, ...]:
    """Past `deadline` the nodes not yet visited take their least-memory candidate (the plan may
    then break memory; callers check)."""
    order = visiting_order(problem)
    adjacency = problem.neighbours()
    plan = [0] * problem.num_nodes
    decided = np.zeros(problem.num_nodes, dtype=bool)
    memory = MemoryTracker(problem)
    for position, node in enumerate(order):
        if deadline is not None and deadline.expired():
            for rest in order[position:]:
                plan[rest] = int(np.argmin(problem.node_memory[rest]))
            break
        costs = candidate_costs(problem, adjacency, int(node), plan, decided)
        choice = pick(costs, memory.overflow(int(node), undecided=True))
        plan[node] = choice
        decided[node] = True
        memory.place(int(node), choice, undecided=True)
    return tuple(plan)


def least_memory_plan(problem: ConfigProblem) -> tuple[int, ...]:
    """Each node's candidate with the fewest bytes per device."""
    return tuple(int(np.argmin(memory)) for memory in problem.node_memory)


def reserving_greedy(problem: ConfigProblem, reference, deadline=None) -> tuple[int, ...]:
    """Greedy that keeps room for a memory-fitting `reference` plan: each node takes its cheapest
    candidate (given decided neighbours) such that the decided nodes plus the reference choices of
    the undecided ones still fit. The reference choice itself always passes, so when `reference`
    fits the result fits too, however the visit ends (past `deadline` the rest keep the reference
    choice). The plain greedy only reserves each undecided node's unavoidable memory, which is 0 on
    most devices, and can paint itself into a corner: measured on the suite's 1,000-node binding
    instances, it broke the limit while the least-memory plan fitted."""
    order = visiting_order(problem)
    adjacency = problem.neighbours()
    plan = [int(c) for c in reference]
    decided = np.zeros(problem.num_nodes, dtype=bool)
    usage = problem.device_memory(plan)
    limit = problem.memory_limit * (1 + 1e-9)
    for node in order:
        if deadline is not None and deadline.expired():
            break
        node = int(node)
        costs = candidate_costs(problem, adjacency, node, plan, decided)
        arrays, memory = problem.device_arrays[node], problem.node_memory[node]
        base = usage.copy()
        base[arrays[plan[node]]] -= memory[plan[node]]
        for choice in np.argsort(costs, kind="stable"):
            choice = int(choice)
            if choice == plan[node] or base[arrays[choice]].max() + memory[choice] <= limit:
                break
        usage = base
        usage[arrays[choice]] += memory[choice]
        plan[node] = choice
        decided[node] = True
    return tuple(plan)


def heuristic_plans(problem: ConfigProblem, deadline, refine: bool = True, hint=None) -> list:
    """Memory-fitting plans from: greedy; under a memory limit, a greedy keeping room for the
    least-memory plan (it fits whenever that plan does, even past the deadline), the unconstrained
    greedy plan and `hint` (a cheap plan that may break memory) repaired to fit; each then locally
    improved."""
    plans = [greedy_assignment(problem, deadline)]
    if problem.memory_limit is not None and not problem.memory_ok(plans[0]):
        reference = least_memory_plan(problem)
        if problem.memory_ok(reference):
            plans.append(reserving_greedy(problem, reference, deadline))
    if problem.memory_limit is not None and not (deadline is not None and deadline.expired()):
        free = greedy_assignment(problem.with_memory_limit(None), deadline)
        if refine:
            free = improve(problem.with_memory_limit(None), free, deadline)
        plans.append(repair_memory(problem, free, deadline))
        if hint is not None:
            plans.append(repair_memory(problem, hint, deadline))
    if refine:
        plans = [improve(problem, plan, deadline) if plan is not None else None for plan in plans]
    return [plan for plan in plans if plan is not None and problem.memory_ok(plan)]
