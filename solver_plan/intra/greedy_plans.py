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

from solver_plan.deadline import WORK_UNIT_S, WorkMeter
from solver_plan.intra.local_cost import candidate_costs, pick
from solver_plan.intra.local_search import device_entries, improve, node_units
from solver_plan.intra.memory import can_fit
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


def visiting_order(problem: ConfigProblem) -> tuple[int, ...]:
    """Most important node first, then always the most important node next to a decided one (a
    spanning tree grown by importance, as SMSG treats a DAG), so each choice sees its context.
    Plain decreasing importance measured 4x worse than this on Inception-v3 x 16 devices.
    Computed once per problem (greedy and the reserving greedy both visit; 0.08 s of CPU at
    10,000 operators), kept as `memory.can_fit` keeps its bound."""
    order = problem.__dict__.get("_visiting_order")
    if order is None:
        order = _visiting_order(problem)
        object.__setattr__(problem, "_visiting_order", order)  # a cache, as functools.cached_property keeps
    return order


def _visiting_order(problem: ConfigProblem) -> tuple[int, ...]:
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
    return tuple(order)


# A greedy step and its share of the pass's set-up cost about two local-search visits of the node
# (`local_search.node_units`): the step itself one (it prices and checks the same candidates;
# measured 10-12 us a step without a memory limit, 17-24 under one, 36-50 on 1,024-3,072 devices,
# as `improve`'s visits), the set-up another (the visiting order, the neighbour lists and device
# arrays, built on a problem's first pass: 7-10 us a node). Under a memory limit the pass also
# builds the undecided nodes' unavoidable memory (`MemoryTracker`, `least_memory_matrix`, not
# cached: a table of nodes x devices, an intersection of each node's candidates' devices):
# GREEDY_TABLE_UNITS_PER_ENTRY a (candidate, device) entry (`local_search.device_entries`).
# s38 greedy (scripts/bench_greedy_charge.py, a pass on a fresh copy of the problem, CPU, least of
# three): 0.11 s on gpt3-175B over 1,024 devices (6.8 million entries), 0.19 s on megatron-1T over
# 3,072 (16.7 million), where the pass took 0.27 and 0.43 s against 0.125 and 0.167 s charged by
# the visits alone; 0.04 s on the 10,000-node DAG (0.6 million).
GREEDY_VISITS = 2.0
GREEDY_TABLE_UNITS_PER_ENTRY = 0.03


def greedy_units(problem: ConfigProblem, table: bool = True) -> list[float]:
    """Work units of each node's greedy step: GREEDY_VISITS `node_units`, plus under a memory limit
    GREEDY_TABLE_UNITS_PER_ENTRY x its `device_entries` (its part of the unavoidable-memory table;
    `table=False` for `reserving_greedy`, which tracks the whole plan's memory instead)."""
    visits = [GREEDY_VISITS * units for units in node_units(problem)]
    if problem.memory_limit is None or not table:
        return visits
    return (np.asarray(visits) + GREEDY_TABLE_UNITS_PER_ENTRY * device_entries(problem)).tolist()


def greedy_pass_seconds(problem: ConfigProblem) -> float:
    """Nominal seconds of one greedy pass (`greedy_units`, `deadline.WORK_UNIT_S` a unit); the
    reserving pass is charged no more (measured 0.02-0.16 s where this pass took 0.04-0.43 s)."""
    return sum(greedy_units(problem)) * WORK_UNIT_S


def greedy_assignment(problem: ConfigProblem, deadline=None, meter: WorkMeter | None = None) -> tuple[int, ...]:
    """One pass over the nodes, charged to `meter` (default: `deadline`'s) but never stopped by its
    budget: the plan every heuristic starts from. Only the wall clock stops it (`clock_out`, past
    the deadline's grace); the nodes not yet visited then take their least-memory candidate (the
    plan may then break memory; callers check)."""
    order = visiting_order(problem)
    adjacency = problem.neighbours()
    meter = WorkMeter(deadline) if meter is None else meter
    units = greedy_units(problem)
    plan = [0] * problem.num_nodes
    decided = np.zeros(problem.num_nodes, dtype=bool)
    memory = MemoryTracker(problem)
    for position, node in enumerate(order):
        meter.charge(units[node])
        if meter.clock_out():
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


def reserving_greedy(problem: ConfigProblem, reference, deadline=None,
                     meter: WorkMeter | None = None) -> tuple[int, ...]:
    """Greedy that keeps room for a memory-fitting `reference` plan: each node takes its cheapest
    candidate (given decided neighbours) such that the decided nodes plus the reference choices of
    the undecided ones still fit. The reference choice itself always passes, so when `reference`
    fits the result fits too, however the visit ends (past `deadline` the rest keep the reference
    choice). The plain greedy only reserves each undecided node's unavoidable memory, which is 0 on
    most devices, and can paint itself into a corner: measured on the suite's 1,000-node binding
    instances, it broke the limit while the least-memory plan fitted. Charged to `meter` as
    `greedy_assignment` is, less the unavoidable-memory table it does not build (`greedy_units`),
    and likewise stopped only by the wall clock."""
    order = visiting_order(problem)
    adjacency = problem.neighbours()
    meter = WorkMeter(deadline) if meter is None else meter
    units = greedy_units(problem, table=False)
    plan = [int(c) for c in reference]
    decided = np.zeros(problem.num_nodes, dtype=bool)
    usage = problem.device_memory(plan)
    limit = problem.memory_limit * (1 + 1e-9)
    for node in order:
        node = int(node)
        meter.charge(units[node])
        if meter.clock_out():
            break
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


# Of the work budget left once a memory-fitting plan exists, the share the optional repair of the
# unconstrained greedy plan (and of `hint`) may spend; the rest improves the plans.
REPAIR_PART = 0.5


def heuristic_plans(problem: ConfigProblem, deadline, refine: bool = True, hint=None) -> list:
    """Memory-fitting plans from: greedy; under a memory limit, a greedy keeping room for the
    least-memory plan (it fits whenever that plan does, even past the deadline), the unconstrained
    greedy plan and `hint` (a cheap plan that may break memory) repaired to fit; each then locally
    improved. Work is counted (`deadline.WorkMeter`, in units of `WORK_UNIT_S`) against the
    deadline's nominal budget, never the time left, so a loaded machine finds the same plans: the greedy
    passes always run, and so does a repair while no plan fits memory (it may make the only one);
    a repair once a plan fits gets REPAIR_PART of the budget left (None past it; nor does the
    unconstrained greedy pass it starts from then run once the budget is spent), and the
    improvement passes share the rest equally. The wall clock only stops work past the deadline's
    grace, marking the answer cut short."""
    meter = WorkMeter(deadline)
    plans = [greedy_assignment(problem, deadline, meter)]
    if problem.memory_limit is not None and not problem.memory_ok(plans[0]):
        reference = least_memory_plan(problem)
        if problem.memory_ok(reference):
            plans.append(reserving_greedy(problem, reference, deadline, meter))
    if problem.memory_limit is not None and not any(problem.memory_ok(plan) for plan in plans):
        # a repair that must run (no plan fits yet) is pointless where no plan can fit: each node's
        # unavoidable bytes already overflow a device (megatron-1T on 64 devices: a 0.93 s repair,
        # stuck, left the diagnosis that proves INFEASIBLE no time); about one pass of work
        meter.charge(sum(node_units(problem)))
        if not can_fit(problem):
            return []
    # The unconstrained pass only feeds the repairs, which are optional once a plan fits: then it
    # runs only with budget left (it ran regardless, and at 10,000 operators and 1 s the clock cut it)
    fitting = problem.memory_limit is not None and any(problem.memory_ok(plan) for plan in plans)
    if problem.memory_limit is not None and not meter.clock_out() and not (fitting and meter.spent()):
        unconstrained = problem.with_memory_limit(None)
        object.__setattr__(unconstrained, "_visiting_order", visiting_order(problem))  # memory plays no part in it
        free = greedy_assignment(unconstrained, deadline, meter)
        if refine:
            free = improve(unconstrained, free, deadline, meter=meter.part(REPAIR_PART))
        for start in (free, hint):
            if start is None:
                continue
            fits = any(plan is not None and problem.memory_ok(plan) for plan in plans)
            plans.append(repair_memory(problem, start, deadline, meter=meter.part(REPAIR_PART) if fits else meter,
                                       optional=fits))
    if refine:
        plans = [plan for plan in plans if plan is not None]
        plans = [improve(problem, plan, deadline, meter=meter.part(1 / (len(plans) - index)))
                 for index, plan in enumerate(plans)]
    return [plan for plan in plans if plan is not None and problem.memory_ok(plan)]
