"""Plans for the load objective without branch and bound: LP rounding and local search.

The one-hot model with a max objective has a weak LP relaxation (fractional plans spread work
evenly over the devices), so on real graphs (Inception-v3: 312 operators, 4,500 candidates)
branch and bound does not close in a minute. What works within that time:
- `lp_roundings`: the LP optimum's x rounded per node, to the largest x and by seeded sampling in
  proportion to x (randomised rounding, Raghavan and Thompson 1987): plans that follow where the
  LP puts work (e.g. branches on disjoint device blocks);
- `improve_load`: first-improvement local search over single-node changes, in topological order,
  under the load objective. A move's busy-time change is computed incrementally; the critical
  path (O(nodes + edges)) only for moves whose busiest device already beats the incumbent. It
  stops after the moves its nominal time budget affords (`move_budget`), not at the clock.
- `branch_moves`: the coordinated move single-node changes cannot make. Parallel branches (maximal
  chains between one fork and one join) are split into two sets, one put on each half of the
  devices (every node of a chain takes its cheapest candidate on exactly that half); a move is kept
  when it lowers the load objective. One branch moved alone always makes its half busier, which is
  why single-node search never finds branch parallelism.
All keep the memory limit and never return a plan worse than they were given.
"""
from __future__ import annotations

import numpy as np

from solver_plan.deadline import GRACE_S, Deadline
from solver_plan.intra.load_objective import (SUM_WEIGHT, EdgeSplit, _device_tail, _tail_times, load_breakdown,
                                              plan_links, topological_order)
from solver_plan.intra.problem import ConfigProblem


MANY_DEVICES = 128  # an edge's two device sets above which numpy beats a Python loop over their union


class _LoadState:
    """A plan with its busy and moved vectors, sum and memory per device, updated by single-node
    moves (busy: device time; moved: redistribution charged to the devices' links)."""

    def __init__(self, problem: ConfigProblem, split: EdgeSplit, assignment):
        self.problem, self.split = problem, split
        self.plan = [int(c) for c in assignment]
        self.order = topological_order(problem) if split.layout is None or split.layout.order is None \
            else split.layout.order
        self.incident: list[list[tuple[int, int, bool]]] = problem.neighbours()
        self.memory = problem.device_memory(self.plan)
        # the breakdown's busy and moved vectors: the sums the loop over nodes, then edges, made
        # (each device's amounts in that order): 0.03 s instead of 0.09 s on the 10,000-operator DAG
        parts = load_breakdown(problem, self.plan, split)
        self.busy, self.moved = parts.device_busy.copy(), parts.moved.copy()
        self.total = parts.total
        self.value = parts.objective

    def _add_edge(self, j, u, v, k, l, busy, sign) -> None:
        amount = self.split.residual_at(j, k, l)
        if amount == 0:
            return
        first, second = self.problem.node_devices[u][k], self.problem.node_devices[v][l]
        if len(first) + len(second) > MANY_DEVICES:  # thousands of devices: numpy, not a Python loop
            arrays = self.problem.device_arrays
            busy[np.union1d(arrays[u][k], arrays[v][l])] += sign * amount
            return
        for d in set(first) | set(second):
            busy[d] += sign * amount

    def _value(self, busy, moved, plan) -> float:
        tail = _tail_times(self.problem, plan, self.order, self.split) if plan else np.zeros(1)
        sync = np.array([self.split.sync[node][choice] for node, choice in enumerate(plan)]) if plan else np.zeros(1)
        critical = max(float((tail + sync).max()),  # >= the critical path itself (sync >= 0)
                       _device_tail(self.problem, plan, self.split) if plan else 0.0)
        links = plan_links(self.problem, self.split, np.asarray(plan, dtype=np.int64)) if plan \
            else np.zeros(self.problem.num_devices)
        # bulk owner-based sync: an owner's copies follow its backward work (load_objective text)
        busiest = float((busy + links).max()) if self.split.bulk else float(busy.max())
        return max(busiest, float(moved.max()), float(links.max()), critical) + SUM_WEIGHT * self.problem.objective(plan)

    def try_move(self, node: int, choice: int) -> bool:
        """Apply node -> choice if it lowers the load objective and fits memory."""
        problem, old = self.problem, self.plan[node]
        if choice == old:
            return False
        if problem.memory_limit is not None:
            memory = self.memory.copy()
            memory[list(problem.node_devices[node][old])] -= problem.node_memory[node][old]
            memory[list(problem.node_devices[node][choice])] += problem.node_memory[node][choice]
            if memory.max() > problem.memory_limit * (1 + 1e-9):
                return False
        busy, moved = self.busy.copy(), self.moved.copy()
        own, edges = self.split.device_time[node], self.split.moved[node]
        before, after = list(problem.node_devices[node][old]), list(problem.node_devices[node][choice])
        busy[before] -= own[old]
        busy[after] += own[choice]
        moved[before] -= edges[old]
        moved[after] += edges[choice]
        for j, other, is_source in self.incident[node]:
            u, v = problem.edges[j]
            k_old, l_old = (old, self.plan[v]) if is_source else (self.plan[u], old)
            k_new, l_new = (choice, self.plan[v]) if is_source else (self.plan[u], choice)
            self._add_edge(j, u, v, k_old, l_old, moved, -1.0)
            self._add_edge(j, u, v, k_new, l_new, moved, 1.0)
        if max(busy.max(), moved.max()) >= self.value - 1e-12:  # no better on its own: skip the path
            return False
        self.plan[node] = choice
        value = self._value(busy, moved, self.plan)
        if value < self.value - 1e-12 * max(1.0, self.value):
            self.busy, self.moved, self.value = busy, moved, value
            if problem.memory_limit is not None:
                self.memory = memory
            return True
        self.plan[node] = old
        return False


# Nominal seconds one tried move costs per node of the problem, plus per node and device (a move
# that passes the busiest-device filter re-times the whole graph, over per-device arrays): measured
# (CPU, shared 2-core machine, milp-load at 10 s) 3.7 ms a move on gpt3-175B with 1,160 nodes on 64
# devices and 23.9 ms with 1,157 nodes on 1,024 (where 4 us a node alone had the clock stop its
# search at 3 s: 70 moves afforded took 1.7 s).
MOVE_S_PER_NODE = 2.0e-6
MOVE_S_PER_NODE_DEVICE = 1.8e-8


def move_seconds(problem: ConfigProblem) -> float:
    """Nominal seconds of one tried move (MOVE_S_PER_NODE + MOVE_S_PER_NODE_DEVICE x devices, a node)."""
    return max(1, problem.num_nodes) * (MOVE_S_PER_NODE + MOVE_S_PER_NODE_DEVICE * problem.num_devices)


def move_budget(problem: ConfigProblem, deadline: Deadline) -> int | None:
    """How many moves the nominal budget of `deadline` affords (None: unlimited; at least one pass's
    first move)."""
    budget = deadline.nominal_left()
    return None if budget is None else max(1, int(budget / move_seconds(problem)))


def improve_load(problem: ConfigProblem, split: EdgeSplit, assignment, deadline: Deadline) -> tuple[int, ...]:
    """Local search (module text) until no single-node change helps or the moves its nominal budget
    affords (`move_budget`) are tried: the same plan on a loaded machine; the wall clock only stops
    it earlier, GRACE_S past the deadline, on a machine slower than `move_seconds` (marking the
    deadline cut short)."""
    state = _LoadState(problem, split, assignment)
    moves_left = move_budget(problem, deadline)
    improved = True
    while improved and not deadline.overrun(GRACE_S):
        improved = False
        for node in state.order:
            if deadline.overrun(GRACE_S) or moves_left == 0:
                break
            for choice in np.argsort(problem.node_costs[node], kind="stable"):
                # a move that passes the busiest-device filter re-times the whole graph (O(n)):
                # check the clock and the work budget per move, not per node
                if deadline.overrun(GRACE_S) or moves_left == 0:
                    break
                if moves_left is not None:
                    moves_left -= 1
                if state.try_move(node, int(choice)):
                    improved = True
        if moves_left == 0:
            break
    return tuple(state.plan)


def lp_roundings(problem: ConfigProblem, x_values: np.ndarray, offsets: np.ndarray, count: int,
                 seed: int = 0) -> list[tuple[int, ...]]:
    """The largest-x plan and `count - 1` seeded randomised roundings of an LP solution."""
    rng = np.random.default_rng(seed)
    plans = [tuple(int(np.argmax(x_values[a:b])) for a, b in zip(offsets[:-1], offsets[1:]))]
    for _ in range(count - 1):
        plan = []
        for a, b in zip(offsets[:-1], offsets[1:]):
            weights = np.clip(x_values[a:b], 0.0, None)
            total = weights.sum()
            plan.append(int(rng.choice(b - a, p=weights / total)) if total > 0 else 0)
        plans.append(tuple(plan))
    return plans


def parallel_branches(problem: ConfigProblem) -> list[list[list[int]]]:
    """Groups of at least two chains with the same fork and join; a chain is a maximal run of
    nodes with one predecessor and one successor."""
    succ: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    pred: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for u, v in problem.edges:
        succ[u].append(v)
        pred[v].append(u)

    def inner(i: int) -> bool:
        return len(pred[i]) == 1 and len(succ[i]) == 1

    groups: dict[tuple[int, int], list[list[int]]] = {}
    seen: set[int] = set()
    for i in range(problem.num_nodes):
        if i in seen or not inner(i):
            continue
        start = i
        while inner(pred[start][0]) and pred[start][0] not in seen:
            start = pred[start][0]
        chain = [start]
        while inner(succ[chain[-1]][0]):
            chain.append(succ[chain[-1]][0])
        seen.update(chain)
        groups.setdefault((pred[chain[0]][0], succ[chain[-1]][0]), []).append(chain)
    return [chains for _, chains in sorted(groups.items()) if len(chains) >= 2]


def _on_block(problem: ConfigProblem, split: EdgeSplit, node: int, block: tuple[int, ...]) -> int | None:
    options = [c for c, devices in enumerate(problem.node_devices[node]) if tuple(sorted(devices)) == block]
    return min(options, key=lambda c: split.charged[node][c]) if options else None


def branch_moves(problem: ConfigProblem, split: EdgeSplit, assignment, deadline: Deadline) -> tuple[int, ...]:
    """Put parallel branches on the two halves of the devices where that helps (module text)."""
    from solver_plan.intra.load_objective import load_breakdown
    half = problem.num_devices // 2
    if half < 1 or problem.num_devices % 2:
        return tuple(assignment)
    blocks = (tuple(range(half)), tuple(range(half, problem.num_devices)))
    plan = list(assignment)
    best = load_breakdown(problem, plan, split).objective
    for chains in parallel_branches(problem):
        if deadline.expired():
            break
        chains = chains[:8]  # 2^7 partitions at most
        for mask in range(1, 2 ** (len(chains) - 1)):
            trial = list(plan)
            ok = True
            for index, chain in enumerate(chains):
                block = blocks[(mask >> index) & 1]
                for node in chain:
                    choice = _on_block(problem, split, node, block)
                    if choice is None:
                        ok = False
                        break
                    trial[node] = choice
                if not ok:
                    break
            if not ok or not problem.memory_ok(trial):
                continue
            value = load_breakdown(problem, trial, split).objective
            if value < best - 1e-12 * max(1.0, best):
                plan, best = trial, value
    return tuple(plan)
