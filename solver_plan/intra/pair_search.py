"""Pair exchanges under a binding memory limit: two nodes change candidate at once, where the cheaper
change alone breaks the limit and the other frees the bytes it needs. Never worse, memory kept.

Why: a plan repaired to fit sits at the limit on several devices, and every single-node change that
lowers its cost then breaks it, so local search (one node at a time) stops there. On
random-dag:nodes=100,candidates=6-30,seed=1,memory=binding the plan of the LP's support (454.310)
and the optimum (454.185) differ at two non-adjacent nodes: one moves bytes from devices 0-3 to 4-7
and gets cheaper, the other moves bytes off 2-7 onto 0-1 at a small cost.

One sweep: every change (node v to candidate c) gets its cost change given the plan's neighbours
and its bytes change per device (a dense changes x devices array, so only where that is small:
MAX_DENSE_ENTRIES). For each improving change that breaks the limit, cheapest first (at most
MAX_FIRST a sweep), the partner is the cheapest change (of the MAX_PARTNERS cheapest) at another
node whose cost rise is below the gain and whose bytes fit with it on every device; at adjacent nodes the shared edge's cost is recomputed for the pair. Accepted moves
in one sweep touch disjoint nodes and neighbourhoods (their cost changes stay exact); a sweep ends
with local search, and sweeps repeat while one finds a move.
"""
from __future__ import annotations

import numpy as np

from solver_plan.deadline import WorkMeter
from solver_plan.intra.local_cost import candidate_costs
from solver_plan.intra.local_search import improve
from solver_plan.intra.problem import ConfigProblem

MAX_DENSE_ENTRIES = 20_000_000  # changes x devices: above this the search is skipped
# Work per sweep: the cheapest MAX_FIRST improving changes, each against its MAX_PARTNERS cheapest
# partners (unbounded, one sweep of alpa-chain:10000 binding, where every candidate uses every
# device, took 30 s of CPU and found nothing; random-dag:100 has ~100 and ~1,800)
MAX_FIRST = 500
MAX_PARTNERS = 10_000
MAX_SWEEPS = 50
GAIN_TOLERANCE = 1e-9  # relative: a pair must lower the cost by more than this
# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU), charged to the
# nominal budget so a loaded machine stops at the same move: building a sweep's changes, per node and
# per (candidate x device) entry of its dense bytes array, and trying one improving change against its
# partners, per change plus per such entry (its partners are filtered in that array). Measured (CPU):
# the build 1.9-22 ms on random DAGs of 300-3,000 nodes, 1,000-18,000 candidates, 4-16 devices, and
# 0.70 s on gpt3-175B@1024 (6.9 M entries): 5 us a node + 0.1 us an entry, within 45% (over) on all
# four; a change tried 21-117 us on those DAGs (15 us + 0.0006 us an entry, within 20%) and 401 us on
# gpt3-175B@1024, where that rule says 4.2 ms (the partners are capped): over, so fewer are tried.
BUILD_UNITS_PER_NODE = 5.0
BUILD_UNITS_PER_ENTRY = 0.1
TRY_UNITS = 15.0
TRY_UNITS_PER_ENTRY = 0.0006


class _Changes:
    """Every single-node change of a plan: its node, candidate, cost change and bytes change."""

    def __init__(self, problem: ConfigProblem, plan: list[int], adjacency):
        counts = np.array([len(c) for c in problem.node_costs], dtype=np.int64)
        self.node = np.repeat(np.arange(problem.num_nodes, dtype=np.int64), counts)
        self.choice = np.concatenate([np.arange(k, dtype=np.int64) for k in counts])
        costs = [candidate_costs(problem, adjacency, v, plan) for v in range(problem.num_nodes)]
        self.delta = np.concatenate([c - c[plan[v]] for v, c in enumerate(costs)])
        entry_node, entry_choice, entry_device, entry_bytes = problem.memory_entries
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        row = starts[entry_node] + entry_choice
        own = np.zeros((len(self.node), problem.num_devices))
        np.add.at(own, (row, entry_device), entry_bytes)
        current = own[starts + np.asarray(plan, dtype=np.int64)]
        self.bytes = own - current[self.node]
        self.used = current.sum(axis=0)


def _edge_correction(problem: ConfigProblem, adjacency, plan, a: int, ca: int, b: int, cb: int) -> float:
    """Cost of changing a to ca and b to cb together minus the two changes' separate cost changes
    (non-zero only on an edge between a and b)."""
    correction = 0.0
    for edge, other, is_source in adjacency[a]:
        if other != b:
            continue
        matrix = problem.edge_costs[edge]
        pick = (lambda x, y: matrix[x, y]) if is_source else (lambda x, y: matrix[y, x])
        correction += pick(ca, cb) - pick(ca, plan[b]) - pick(plan[a], cb) + pick(plan[a], plan[b])
    return float(correction)


def _sweep(problem: ConfigProblem, plan: list[int], adjacency, meter: WorkMeter, limit: float) -> int:
    """Apply improving pair exchanges to `plan` (in place) over disjoint neighbourhoods within the
    memory `limit`, each change tried charged to `meter` (stopped where it is spent); how many."""
    changes = _Changes(problem, plan, adjacency)
    headroom = limit * (1.0 + 1e-9) - changes.used
    scale = GAIN_TOLERANCE * max(1.0, abs(problem.objective(plan)))
    alone = (changes.bytes <= headroom).all(axis=1)
    first = np.flatnonzero((changes.delta < -scale) & ~alone)
    first = first[np.argsort(changes.delta[first], kind="stable")][:MAX_FIRST]
    order = np.argsort(changes.delta, kind="stable")
    sorted_delta = changes.delta[order]
    touched = np.zeros(problem.num_nodes, dtype=bool)
    moves = 0
    try_units = TRY_UNITS + TRY_UNITS_PER_ENTRY * problem.num_candidates * problem.num_devices
    for i in first:
        if meter.stop():
            break
        meter.charge(try_units)
        a = int(changes.node[i])
        if touched[a]:
            continue
        gain = -float(changes.delta[i])
        partners = order[: min(MAX_PARTNERS, int(np.searchsorted(sorted_delta, gain - scale, side="left")))]
        partners = partners[(changes.node[partners] != a) & ~touched[changes.node[partners]]]
        room = headroom - changes.bytes[i]
        partners = partners[(changes.bytes[partners] <= room).all(axis=1)]
        for j in partners:  # cheapest first; the first whose exact pair cost still gains
            b, ca, cb = int(changes.node[j]), int(changes.choice[i]), int(changes.choice[j])
            total = -gain + float(changes.delta[j]) + _edge_correction(problem, adjacency, plan, a, ca, b, cb)
            if total < -scale:
                plan[a], plan[b] = ca, cb
                headroom = room - changes.bytes[j]
                for node in (a, b):
                    touched[node] = True
                    touched[[other for _, other, _ in adjacency[node]]] = True
                moves += 1
                break
    return moves


def improve_by_pairs(problem: ConfigProblem, assignment, deadline=None, max_sweeps: int = MAX_SWEEPS):
    """A plan no worse than `assignment` that fits memory where it did: pair exchanges (module
    docstring) then local search, repeated while a sweep finds a move and `deadline`'s nominal budget
    pays for the work (BUILD_UNITS_PER_*, TRY_UNITS*, local search's own); the wall clock only stops it
    past the deadline's grace. Without a memory limit, or where the dense bytes array would be too
    big, `assignment` as it is."""
    plan = list(assignment)
    if problem.memory_limit is None or not problem.memory_ok(plan):
        return tuple(plan)
    if problem.num_candidates * problem.num_devices > MAX_DENSE_ENTRIES:
        return tuple(plan)
    adjacency = problem.neighbours()
    meter = WorkMeter(deadline)
    build_units = (BUILD_UNITS_PER_NODE * problem.num_nodes
                   + BUILD_UNITS_PER_ENTRY * problem.num_candidates * problem.num_devices)
    for _ in range(max_sweeps):
        if not meter.affords(build_units) or meter.clock_out():
            break
        meter.charge(build_units)
        trial = list(plan)
        if not _sweep(problem, trial, adjacency, meter, float(problem.memory_limit)):
            break
        trial = list(improve(problem, trial, deadline, meter=meter))
        if not problem.memory_ok(trial) or problem.objective(trial) >= problem.objective(plan):
            break  # the safety net: never worse, never over the limit
        plan = trial
    return tuple(plan)
