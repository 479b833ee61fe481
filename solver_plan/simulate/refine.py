"""Plans judged by the execution simulator: pick the fastest of several plans, and move whole
branches of the graph onto device blocks where the simulated step time drops.

Why: the load objective (intra/load_objective.py) is a maximum of lower bounds of the step time
(busiest device, critical path, ...). It cannot see how they interact: a branch moved onto half of
the devices waits for its inputs to arrive there, devices idle at the join until the slowest
branch ends, transfers queue on the links. So it may rank a plan above one that simulates faster
(Inception-v3 on 4 P100, docs/branch-parallelism.md: its local search's plan scores 348 ms, the
sum optimum 384 ms; simulated 473 vs 385 ms). The simulator sees all of that (FlexFlow's task
graph), so the final choice among plans and the coordinated branch moves below are made by
simulated step time.

- `fastest(problem, plans, deadline)`: each distinct plan simulated once (full simulation), the
  fastest first; the plans not simulated when the deadline passes are left out.
- `branch_regions(problem)`: for every fork (a node with several successors) and its join (the
  nearest node every path from the fork reaches: immediate post-dominator), the branches: the
  nodes between fork and join reachable from each successor, overlapping ones merged. Inception's
  modules are forks with 3-4 branches; nested forks (Mixed_7's 1x3 / 3x1 pairs) are their own.
- `refine_branches(problem, plan, deadline)`: for each fork, joint placements of its branches on
  device blocks (each single device the configurations offer, each half, all devices; every node
  of a branch takes its cheapest candidate on exactly that block) are simulated: every split of
  the branches between the two halves, and the TRIALS placements with the least estimated
  busiest device. A placement is kept when the simulated step drops (first improvement); sweeps
  repeat, alternating whether a candidate's price includes its gradient sync, until two sweeps
  gain nothing or the deadline. Single-node moves (FlexFlow's MCMC proposals) cannot do this: one
  operator of a branch moved to other devices pays transfers both ways and gains nothing until
  the whole branch has moved (mcmc from the sum optimum of Inception-v3: no gain in 60 s).
- `refine_nodes(problem, plan, deadline)`: one pass of single-operator changes by delta
  simulation over the operators with gradient sync.
Plans returned never simulate slower than the plan given and keep the memory limit.
"""
from __future__ import annotations

import itertools

import numpy as np

from solver_plan.deadline import Deadline
from solver_plan.intra.load_objective import split_edges, topological_order
from solver_plan.intra.problem import ConfigProblem
from solver_plan.simulate.objectives import SimulatedObjective, simulatable
from solver_plan.simulate.simulator import StrategySimulator

MAX_SIMULATED_CELLS = 50_000  # operators x devices (as mcmc: one simulation must stay well under a second)


def can_simulate(problem: ConfigProblem) -> bool:
    """One node per operator with the graph in `problem.context`, and a task graph small enough."""
    return simulatable(problem) and problem.num_nodes * problem.num_devices <= MAX_SIMULATED_CELLS


def fastest(problem: ConfigProblem, plans, deadline: Deadline) -> list[tuple[float, tuple[int, ...], str]]:
    """(simulated seconds, plan, source) of the distinct `plans` ((plan, source) pairs) simulated
    before the deadline, fastest first (ties: the earlier plan)."""
    scorer = SimulatedObjective(problem, *problem.context)
    distinct: dict[tuple[int, ...], str] = {}
    for plan, source in plans:
        distinct.setdefault(tuple(int(c) for c in plan), source)
    scored = []
    for index, (plan, source) in enumerate(distinct.items()):
        if deadline.expired() and scored:
            break
        scored.append((scorer.load(plan), index, plan, source))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [(seconds, plan, source) for seconds, _, plan, source in scored]


def _post_dominators(successors: list[list[int]], order: list[int]) -> list[int]:
    """Immediate post-dominator of every node (-1: the virtual sink after every node without
    successors), by the intersection of post-dominator chains in reverse topological order."""
    n = len(successors)
    position = {node: i for i, node in enumerate(order)}
    ipdom = [-1] * n

    def chain(node: int) -> list[int]:
        path = []
        while node != -1:
            path.append(node)
            node = ipdom[node]
        return path

    for node in reversed(order):
        succ = successors[node]
        if not succ:
            continue
        common = set(chain(succ[0]))
        for other in succ[1:]:
            common &= set(chain(other))
        # the nearest common post-dominator is the one earliest in topological order
        ipdom[node] = min(common, key=lambda v: position[v]) if common else -1
    return ipdom


def branch_regions(problem: ConfigProblem) -> list[list[list[int]]]:
    """Per fork with at least two branches, the branches (node lists); outer forks first."""
    order = topological_order(problem)
    if order is None:
        return []
    successors: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for u, v in problem.edges:
        if v not in successors[u]:
            successors[u].append(v)
    ipdom = _post_dominators(successors, order)
    position = {node: i for i, node in enumerate(order)}
    groups = []
    for fork in order:
        if len(successors[fork]) < 2:
            continue
        join = ipdom[fork]
        regions: list[set[int]] = []
        for start in successors[fork]:
            if start == join:
                continue
            region, frontier = {start}, [start]
            while frontier:
                u = frontier.pop()
                for v in successors[u]:
                    if v != join and v not in region and (join == -1 or position[v] < position[join]):
                        region.add(v)
                        frontier.append(v)
            regions.append(region)
        merged: list[set[int]] = []
        for region in regions:  # branches that share a node are one branch
            for other in [m for m in merged if m & region]:
                region |= other
                merged.remove(other)
            merged.append(region)
        if len(merged) >= 2:
            groups.append([sorted(r, key=position.get) for r in merged])
    return groups


def device_blocks(num_devices: int) -> list[tuple[int, ...]]:
    """Each single device, each half (when the count is even), and all devices."""
    blocks = [(d,) for d in range(num_devices)]
    if num_devices % 2 == 0 and num_devices > 2:
        half = num_devices // 2
        blocks += [tuple(range(half)), tuple(range(half, num_devices))]
    return blocks + [tuple(range(num_devices))]


def _on_block(problem: ConfigProblem, node: int, block: tuple[int, ...], with_sync: bool = False) -> int | None:
    """The cheapest candidate of `node` whose devices are exactly `block`, by its device time plus
    the row / column minima of its edges (`split_edges`: what any neighbour's choice costs at
    least), with its gradient sync or without (sync may hide behind other work; both are tried)."""
    options = [c for c, devices in enumerate(problem.node_devices[node]) if tuple(sorted(devices)) == block]
    split = split_edges(problem)
    return min(options, key=lambda c: split.charged[node][c] + (split.sync[node][c] if with_sync else 0.0)) \
        if options else None


TRIALS = 4  # joint branch placements simulated per fork, the best balanced by the estimate
MAX_BRANCHES = 6  # the heaviest branches of a fork that move (7^6 placements estimated at most)
MAX_SPLIT_BRANCHES = 5  # forks of at most this many branches also try every split between halves
MAX_ESTIMATED = 20_000  # joint placements estimated per fork at most


class _Search:
    """The plan being refined and its simulated step time. A trial changes a whole fork's branches
    (tens of operators) at once: only their tasks and their edges' are rebuilt, then one delta
    simulation runs (`StrategySimulator.change_many`); a rejected trial is reverted the same way
    without simulating (the next trial's simulation covers both). Rebuilding every task per trial
    took two thirds of each 45 ms full simulation of Inception-v3 on 4 devices."""

    def __init__(self, problem: ConfigProblem, plan):
        self.problem = problem
        self.simulator = StrategySimulator(*problem.context)
        self.plan = tuple(int(c) for c in plan)
        p = problem
        self.cost = self.simulator.load({p.names[i]: p.candidates[i][c] for i, c in enumerate(self.plan)})

    def _configs(self, nodes, plan) -> dict:
        p = self.problem
        return {p.names[i]: p.candidates[i][plan[i]] for i in nodes}

    def try_changes(self, target: dict[int, int]) -> bool:
        """Apply `target` (node -> candidate); keep it if it simulates faster and fits memory."""
        trial = list(self.plan)
        for node, choice in target.items():
            trial[node] = choice
        trial = tuple(trial)
        if trial == self.plan or not self.problem.memory_ok(trial):
            return False
        changed = [i for i in target if trial[i] != self.plan[i]]
        cost = self.simulator.change_many(self._configs(changed, trial))
        if cost < self.cost * (1 - 1e-9):
            self.plan, self.cost = trial, cost
            return True
        self.simulator.change_many(self._configs(changed, self.plan), simulate=False)
        return False


def _load(problem: ConfigProblem, node: int, choice: int) -> np.ndarray:
    """Per device, what `node` under `choice` adds to its step: device time plus edge minima on
    its devices and, under bulk owner-based sync (it follows the owner's backward work), its
    gradient sync on the owners (load_objective's busy_d + sync_d)."""
    split = split_edges(problem)
    load = np.zeros(problem.num_devices)
    load[problem.device_arrays[node][choice]] += split.charged[node][choice]
    if split.bulk:
        load[split.sync_on(problem, node, choice)] += split.sync[node][choice]
    return load


def _placements(problem: ConfigProblem, branches: list[list[int]], plan, blocks, with_sync: bool
                ) -> list[dict[int, int]]:
    """Joint placements of `branches` on `blocks` to simulate, as node -> candidate maps: every
    split between the two halves (the coordinated move of load_search's branch_moves) and the
    TRIALS placements on any blocks, all ranked by the estimated busiest device (`_load` summed
    over the plan, the branches placed)."""
    moving = {node for branch in branches for node in branch}
    base = np.zeros(problem.num_devices)
    for node, choice in enumerate(plan):
        if node not in moving:
            base += _load(problem, node, choice)
    options = []  # per branch: (block index, candidates, load vector) it can take
    for branch in branches:
        mine = []
        for b, block in enumerate(blocks):
            choices = [_on_block(problem, node, block, with_sync) for node in branch]
            if None not in choices:
                load = sum((_load(problem, n, c) for n, c in zip(branch, choices)), np.zeros(problem.num_devices))
                mine.append((b, tuple(choices), load))
        if not mine:
            return []
        options.append(mine)
    while np.prod([len(o) for o in options], dtype=float) > MAX_ESTIMATED:  # many blocks (large clusters)
        widest = max(options, key=len)  # drop its option whose own load is the most unbalanced
        widest.remove(max(widest, key=lambda option: float(option[2].max())))
    scored = []
    for index, combo in enumerate(itertools.product(*options)):
        load = base + sum(part for _, _, part in combo)
        scored.append((float(load.max()), float(load.sum()), index, combo))
    scored.sort(key=lambda item: item[:3])
    halves = [i for i, block in enumerate(blocks) if 1 < len(block) < problem.num_devices]
    split = [combo for *_, combo in scored
             if {b for b, _, _ in combo} == set(halves) and len(branches) <= MAX_SPLIT_BRANCHES]
    chosen, seen = [], set()
    for combo in split + [combo for *_, combo in scored[:TRIALS]]:
        key = tuple((b, choices) for b, choices, _ in combo)
        if key not in seen:
            seen.add(key)
            chosen.append({node: choice for branch, (_, choices, _) in zip(branches, combo)
                           for node, choice in zip(branch, choices)})
    return chosen


def refine_branches(problem: ConfigProblem, plan, deadline: Deadline) -> tuple[float, tuple[int, ...]]:
    """(simulated seconds, plan) after branch moves (module text) until none helps or the deadline."""
    search = _Search(problem, plan)
    groups = branch_regions(problem)
    blocks = device_blocks(problem.num_devices)
    idle = 0  # sweeps in a row without a gain; the two candidate rules alternate
    sweep = 0
    while idle < 2 and not deadline.expired():
        improved = False
        for branches in groups:
            heaviest = sorted(branches, key=lambda b: -float(sum(problem.node_costs[n].min() for n in b)))
            for target in _placements(problem, heaviest[:MAX_BRANCHES], search.plan, blocks,
                                      with_sync=sweep % 2 == 1):
                if deadline.expired():
                    return search.cost, search.plan
                improved |= search.try_changes(target)
        idle = 0 if improved else idle + 1
        sweep += 1
    return search.cost, search.plan


NODE_TRIALS = 6  # candidates tried per operator with gradient sync, cheapest first


def refine_nodes(problem: ConfigProblem, plan, deadline: Deadline) -> tuple[float, tuple[int, ...]]:
    """One pass of single-operator changes by delta simulation over the operators that have
    gradient sync in `plan` (where a change of placement pays off alone): each tries its
    NODE_TRIALS cheapest candidates (device time, edge minima and sync), kept when faster."""
    split = split_edges(problem)
    scorer = SimulatedObjective(problem, *problem.context)
    cost = scorer.load(plan)
    memory = problem.device_memory(list(plan)) if problem.memory_limit is not None else None
    for node in range(problem.num_nodes):
        if split.sync[node][scorer.assignment[node]] <= 0:
            continue
        for choice in np.argsort(split.charged[node] + split.sync[node], kind="stable")[:NODE_TRIALS]:
            if deadline.expired():
                return cost, tuple(scorer.assignment)
            old, choice = scorer.assignment[node], int(choice)
            if choice == old:
                continue
            if memory is not None:
                trial = memory.copy()
                trial[list(problem.node_devices[node][old])] -= problem.node_memory[node][old]
                trial[list(problem.node_devices[node][choice])] += problem.node_memory[node][choice]
                if trial.max() > problem.memory_limit * (1 + 1e-9):
                    continue
            value = scorer.change(node, choice)
            if value < cost * (1 - 1e-9):
                cost = value
                if memory is not None:
                    memory = trial
            else:
                scorer.undo()
    return cost, tuple(scorer.assignment)
