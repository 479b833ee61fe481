"""Local improvement of a plan: change one node at a time to its best candidate given all its
neighbours (respecting memory) until no single change helps. Never makes a plan worse."""
from __future__ import annotations

import numpy as np

from solver_plan.deadline import Deadline, WorkMeter
from solver_plan.intra.local_cost import candidate_costs, pick
from solver_plan.intra.memory_tracker import MemoryTracker
from solver_plan.intra.problem import ConfigProblem

MAX_PASSES = 20


# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU) of visiting
# one node: pricing its candidates against its neighbours, and the meter's charge and clock check;
# under a memory limit, also moving its bytes and checking each candidate's devices (one gather and
# `maximum.reduceat` over the node's (candidate, device) entries, `MemoryTracker.overflow`), a
# fixed part and MEMORY_UNITS_PER_ENTRY an entry (`device_entries`). s38 greedy
# (scripts/bench_greedy_charge.py; CPU, least of three, 2 shared cores at load 1.4-2.2): one pass
# under a job's deadline 14-16 us a visit without a limit, 24-29 with one (17-61 entries a node on
# the suite's problems, 550 on the models over 64 devices), 41-44 on gpt3-175B over 1,024 devices
# (5,860 entries), 56-63 on megatron-1T over 3,072 (10,800): 0.003 us an entry, no term in
# candidates x degree (its fit: 0.00-0.02 us a candidate-price); inside jobs (`--in-job`) 16-22
# us without a limit and 38-52 with one on the DAG and gpt3-175B over 1,024 devices. The quarter
# unit a candidate-price these replace charged 52 us a visit on the 10,000-node DAG and 54 on
# megatron-1T over 3,072 devices; 12 units a visit was under the jobs' 16-22.
VISIT_UNITS = 20.0
MEMORY_VISIT_UNITS = 18.0
MEMORY_UNITS_PER_ENTRY = 0.005
# Under a memory limit `improve` first places the whole plan's bytes (`MemoryTracker(problem,
# plan)`, one indexed add a node over the devices of its choice): measured 1.1-1.2 us a node with
# 4-64 devices a choice, 2.6 with 343 (gpt3-175B over 1,024 devices), 5.5 with 1,435 (megatron-1T
# over 3,072); uncharged, it was most of milp-load's short improve calls on the 10,000-node DAG
# (0.026-0.028 s of CPU against 0.004 s charged). Charged once a call, before its visits.
TRACKER_UNITS_PER_NODE = 1.5
TRACKER_UNITS_PER_DEVICE = 0.003


def device_entries(problem: ConfigProblem) -> np.ndarray:
    """Per node, its (candidate, device) pairs: the devices its candidates use, counted per
    candidate. Computed once per problem (6 ms at 10,000 nodes, read by every charge of a pass),
    kept as `greedy_plans.visiting_order` keeps its order."""
    entries = problem.__dict__.get("_device_entries_per_node")
    if entries is None:
        entries = np.fromiter((sum(map(len, devices)) for devices in problem.node_devices), dtype=float,
                              count=problem.num_nodes)
        object.__setattr__(problem, "_device_entries_per_node", entries)  # a cache, as functools.cached_property keeps
    return entries


def node_units(problem: ConfigProblem) -> list[float]:
    """Work units of visiting each node once: VISIT_UNITS, and under a memory limit MEMORY_VISIT_UNITS
    + MEMORY_UNITS_PER_ENTRY x its `device_entries` (its memory check reads each of them once)."""
    if problem.memory_limit is None:
        return [VISIT_UNITS] * problem.num_nodes
    return (VISIT_UNITS + MEMORY_VISIT_UNITS + MEMORY_UNITS_PER_ENTRY * device_entries(problem)).tolist()


def tracker_units(problem: ConfigProblem, plan) -> float:
    """Work units of placing `plan`'s bytes on the devices (0 without a memory limit): per node
    TRACKER_UNITS_PER_NODE + TRACKER_UNITS_PER_DEVICE x the devices of its choice."""
    if problem.memory_limit is None:
        return 0.0
    devices = sum(len(problem.node_devices[node][choice]) for node, choice in enumerate(plan))
    return TRACKER_UNITS_PER_NODE * problem.num_nodes + TRACKER_UNITS_PER_DEVICE * devices


def improve(problem: ConfigProblem, assignment, deadline: Deadline | None = None, max_passes: int = MAX_PASSES,
            meter: WorkMeter | None = None):
    """A plan no worse than `assignment`: each node in turn takes its cheapest candidate given its
    neighbours, within memory, for up to `max_passes` passes or until no single change helps or its
    work budget is spent: `meter` (default: all of `deadline`'s nominal budget), charged
    `tracker_units` once and `node_units` per node visited, so the same plan comes back on a loaded machine;
    the wall clock only stops it past the deadline's grace (marking it cut short)."""
    plan = list(assignment)
    adjacency = problem.neighbours()
    meter = WorkMeter(deadline) if meter is None else meter
    units = node_units(problem)
    memory = MemoryTracker(problem, plan)
    meter.charge(tracker_units(problem, plan))
    for _ in range(max_passes):
        changed = False
        for node in range(problem.num_nodes):
            if meter.stop():
                return tuple(plan)
            meter.charge(units[node])
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
