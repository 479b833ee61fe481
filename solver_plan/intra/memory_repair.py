"""Repair a plan that breaks the memory limit by single changes (one node to another candidate):
scan the nodes that hold bytes on the devices over the limit, rank each one's best change by cost
increase per byte of total excess (over the limit, summed over devices) it removes, apply them in
that order while each still lowers the total excess, and repeat until every device fits. Only where
no change lowers the total is the older rule used: the busiest device alone, its changes ranked by
cost per byte freed there, none pushing another device above both the limit and the current peak.
(That rule alone let memory swing between devices: on random-dag:nodes=10000 binding, minimisers
3-10% over on 2-7 devices took 60-465 rounds and 5-39 s of CPU, or got stuck.)"""
from __future__ import annotations

import numpy as np

from solver_plan.deadline import Deadline, WorkMeter
from solver_plan.intra.local_cost import candidate_costs
from solver_plan.intra.problem import ConfigProblem


# A change ranked by the total excess it removes is applied only while it still removes this share
# of it (the others wait for the next round's ranking: stale ratios made plans ~1.5% dearer).
STALE_FRACTION = 0.5
# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU) of a ranking:
# a look at each node's bytes on the devices over the limit, and for each node holding some, its
# candidates' usage on every device and their prices: fitted to four repairs of the unconstrained
# greedy plan (gpt3-175B on 64 and 1,024 devices, megatron-1T on 64, random-dag:nodes=10000 on 16:
# 0.07-0.71 s; 1,157-26,197 nodes priced, 27-155 us each, the most devices the dearest). Re-measured
# inside jobs in s38 (scripts/bench_greedy_charge.py --in-job greedy 3 and 10, load 0.5-1.0): on
# random-dag:nodes=10000 over 16 devices the repair took 2.3x its charge (0.44 s of CPU against 0.187,
# 2.43 against 1.05), on gpt3-175B over 1,024 devices 0.67x (0.24 against 0.356): the fixed part of a
# pricing (a dozen numpy calls on k x devices arrays, candidate_costs over the neighbours) is ~75 us,
# not 30; the device term stands (the large meshes were over-charged already).
SCAN_UNITS = 1.0
PRICE_UNITS = 75.0
PRICE_UNITS_PER_DEVICE = 0.12
# Re-ranking after each fifth of the excess is removed: on random-dag:nodes=10000 binding a minimiser
# 3-10% over repaired in 11-35 rounds and 3-8 s of CPU to plans ~0.2-2% cheaper than with one ranking
# (1-4 rounds, 0.5-1.4 s). For the plan that matters (lagrangian_fixing); the quick heuristics'
# repairs keep one ranking (with fine rounds alpa-chain:10000's warm start took 8.6 s, was 3.8 s).
FINE_ROUNDS = 0.2
# Rounds before giving up: the total excess falls every round of the first rule, but a fallback round
# may raise it, so the two can alternate (a plan met again at a round's start ends the repair: a
# tiny case cycled for ever without that; the most rounds measured: 465).
MAX_ROUNDS = 2_000


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


def _excess(usage: np.ndarray, limit: float) -> np.ndarray:
    """Bytes over `limit`, summed over the devices (one per row of `usage`)."""
    return np.maximum(usage - limit, 0.0).sum(axis=-1)


def _allowed(after: np.ndarray, usage: np.ndarray, device: int | None, limit: float) -> np.ndarray:
    """Which rows of `after` (usage per device after each change) are allowed. `device` None (the
    first rule): those that lower the total excess over `limit`; else those that free `device` and
    push no device above both the limit and its peak."""
    if device is None:
        return _excess(after, limit) < _excess(usage, limit)
    highest = after.max(axis=1)
    return (after[:, device] < usage[device]) & ((highest < usage[device]) | (highest <= limit))


def _ranked_moves(problem: ConfigProblem, adjacency, dense: _DenseMemory, plan, usage: np.ndarray,
                  device: int | None, limit: float, meter: WorkMeter, optional: bool):
    """Per node that holds bytes where they count (on `device`, or on any device over the limit when
    `device` is None), its allowed change of least cost increase per byte freed (on `device`, or of
    total excess), as (ratio, node, choice, bytes freed), least ratio first; None when the scan is
    stopped (a scan of 10,000 nodes takes ~0.25 s: at a 3 s limit it overran): by `meter`'s budget
    where the repair is `optional`, else by the wall clock alone."""
    over = usage > limit if device is None else np.arange(len(usage)) == device
    moves = []
    for node in range(problem.num_nodes):
        if meter.stop() if optional else meter.clock_out():
            return None
        meter.charge(SCAN_UNITS)
        memory = dense[node]
        current = plan[node]
        if not (memory[current, over] > 0).any():
            continue
        meter.charge(PRICE_UNITS + PRICE_UNITS_PER_DEVICE * problem.num_devices)
        after = usage[None, :] - memory[current][None, :] + memory  # usage if node took each candidate
        if device is None:
            freed = _excess(usage, limit) - _excess(after, limit)
        else:
            freed = usage[device] - after[:, device]
        allowed = _allowed(after, usage, device, limit)
        allowed[current] = False
        if not allowed.any():
            continue
        costs = candidate_costs(problem, adjacency, node, plan)
        ratios = (costs - costs[current]) / np.where(freed > 0, freed, 1.0)
        choice = int(np.flatnonzero(allowed)[np.argmin(ratios[allowed])])
        moves.append((float(ratios[choice]), node, choice, float(freed[choice])))
    return sorted(moves)


def repair_memory(problem: ConfigProblem, assignment, deadline: Deadline | None = None,
                  round_fraction: float = 1.0, *, meter: WorkMeter | None = None, optional: bool = False):
    """A plan within the memory limit reached by cheap single changes, or None if stuck (or
    stopped). `round_fraction`: the share of the total excess one round removes before the
    changes are ranked again (1: one ranking while it lasts, fast; FINE_ROUNDS: dearer, better plans).
    Its work is charged to `meter` (default: `deadline`'s nominal budget); an `optional` repair (a
    plan fitting memory exists already) stops when that budget is spent, any other only by the
    wall clock (past the deadline's grace): a repair that may make the only fitting plan runs."""
    meter = WorkMeter(deadline) if meter is None else meter
    if problem.memory_limit is None or problem.memory_ok(assignment):
        return tuple(assignment)
    limit = problem.memory_limit * (1 + 1e-9)
    plan = list(assignment)
    adjacency = problem.neighbours()
    dense = _DenseMemory(problem)
    usage = problem.device_memory(plan)
    seen: set[tuple[int, ...]] = set()  # plans at the start of a round: a repeat is a cycle
    while usage.max() > limit:
        state = tuple(plan)
        if state in seen or len(seen) >= MAX_ROUNDS or (meter.stop() if optional else meter.clock_out()):
            return None
        seen.add(state)
        applied, target = 0, (1.0 - round_fraction) * float(_excess(usage, limit))
        for device in (None, int(usage.argmax())):  # the busiest device alone where the total is stuck
            moves = _ranked_moves(problem, adjacency, dense, plan, usage, device, limit, meter, optional)
            if moves is None:  # stopped: no plan that fits
                return None
            for _, node, choice, freed in moves:
                if usage.max() <= limit or (device is not None and usage[device] <= limit):
                    break
                if device is None and applied and _excess(usage, limit) <= target:
                    break  # re-rank: the ratios are of the round's start
                after = usage - dense[node][plan[node]] + dense[node][choice]
                if device is None:  # still freeing most of what it was ranked by (else: next round)
                    allowed = _excess(usage, limit) - _excess(after, limit) >= STALE_FRACTION * freed
                else:
                    allowed = _allowed(after[None, :], usage, device, limit)[0]
                if allowed:
                    usage = after
                    plan[node] = choice
                    applied += 1
            if applied:
                break
        if applied == 0:  # no allowed change, or every ranked one became invalid: stuck
            return None
    return tuple(plan)
