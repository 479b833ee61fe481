"""Local improvement of a plan: change one node at a time to its best candidate given all its
neighbours (respecting memory) until no single change helps. Never makes a plan worse."""
from __future__ import annotations

from solver_plan.deadline import Deadline
from solver_plan.intra.local_cost import candidate_costs, pick
from solver_plan.intra.memory_tracker import MemoryTracker
from solver_plan.intra.problem import ConfigProblem

MAX_PASSES = 20


def improve(problem: ConfigProblem, assignment, deadline: Deadline | None = None, max_passes: int = MAX_PASSES):
    """A plan no worse than `assignment`: each node in turn takes its cheapest candidate given its
    neighbours, within memory, for up to `max_passes` passes or until no single change helps or the
    deadline expires."""
    plan = list(assignment)
    adjacency = problem.neighbours()
    memory = MemoryTracker(problem, plan)
    for _ in range(max_passes):
        changed = False
        for node in range(problem.num_nodes):
            if deadline is not None and deadline.expired():
                return tuple(plan)
            costs = candidate_costs(problem, adjacency, node, plan)
            current = plan[node]
            memory.remove(node, current)
            choice = pick(costs, memory.overflow(node))
            if costs[choice] < costs[current] - 1e-12 * max(1.0, abs(costs[current])):
                plan[node] = choice
                changed = True
            memory.place(node, plan[node])
        if not changed:
            break
    return tuple(plan)
