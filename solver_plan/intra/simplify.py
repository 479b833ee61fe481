"""Exact simplification of a `ConfigProblem`, and decoding back to the original operators.

1. Drop dominated candidates: b dominates a when it costs no more, is no worse on every incident
   edge entry, and (when the memory limit can bind) uses a subset of a's devices with no more
   memory. Replacing a by b anywhere (even at several nodes at once) never costs more. When the
   limit can bind, b also dominates a when it uses a subset of a's devices with no more memory and
   its node cost undercuts a's by more than the most its edges can cost extra (issue 28: ~8% of the
   candidates of the suite's random DAGs, where entrywise dominance finds none). Without a binding
   limit only the entrywise rule runs, so plans there are unchanged.
2. Fold leaves (DeePa node elimination at a degree-1 node w with neighbour u):
   cost_u[k] += min_l edge[k, l] + cost_w[l]; undo: w takes the argmin for u's choice.
3. Fold chains (degree-2 node w between u and v; direction is irrelevant to the cost):
   new edge (u, v)[k, m] = min_l edge_uw[k, l] + cost_w[l] + edge_wv[l, m], summed into any
   existing (u, v) edge (DeePa edge elimination); undo: w takes the argmin for (u's, v's) choices.
The last node of each connected component is kept, so the reduced objective of a plan equals the
original objective of its decoding exactly. Folding forgets a node's memory, so while the memory
limit can bind only nodes that use no memory are folded. Identical repeated blocks are not tied.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver_plan.intra.problem import ConfigProblem


def memory_can_bind(problem: ConfigProblem) -> bool:
    """Whether some device could exceed the limit if every node took its worst candidate."""
    if problem.memory_limit is None:
        return False
    return bool(problem.worst_memory_per_device().max() > problem.memory_limit)


def _subsets(arrays, known: dict) -> np.ndarray:
    """[b, a]: whether candidate b's devices are among candidate a's (`arrays`: the node's
    `ConfigProblem.device_arrays`, one shared array per distinct device set, so equal sets are the
    same object); `known` memoises pairs of sets by identity over one simplification."""
    count = len(arrays)
    out = np.empty((count, count), dtype=bool)
    for b in range(count):
        for a in range(count):
            key = (id(arrays[b]), id(arrays[a]))
            if key not in known:
                known[key] = (arrays[b] is arrays[a] or (len(arrays[b]) <= len(arrays[a]) and bool(
                    np.isin(arrays[b], arrays[a], assume_unique=True).all())), arrays[b], arrays[a])
            out[b, a] = known[key][0]  # (the arrays are kept in `known`: their ids stay theirs)
    return out


def dominated_candidates(problem: ConfigProblem, node: int, adjacency, with_memory: bool,
                         known_subsets: dict | None = None) -> np.ndarray:
    """Mask of the node's candidates that another candidate dominates (ties keep the lowest index).
    `known_subsets`: a memo of device-set inclusions shared by the calls of one simplification."""
    columns = [np.asarray(problem.node_costs[node], dtype=float)[:, None]]
    for edge, _, is_source in adjacency[node]:
        matrix = problem.edge_costs[edge]
        columns.append(matrix if is_source else matrix.T)
    profile = np.hstack(columns)  # one row per candidate
    no_worse = np.all(profile[:, None, :] <= profile[None, :, :], axis=2)  # [b, a]: b no worse than a
    better = np.any(profile[:, None, :] < profile[None, :, :], axis=2)
    strictly_cheaper = np.zeros_like(no_worse)
    if with_memory:
        memory = np.asarray(problem.node_memory[node], dtype=float)
        arrays = problem.device_arrays[node]
        subset = _subsets(arrays, {} if known_subsets is None else known_subsets)
        sizes = np.array([len(a) for a in arrays])
        fits = subset & (memory[:, None] <= memory[None, :])
        no_worse &= fits
        better |= subset & (memory[:, None] < memory[None, :]) | subset & (sizes[:, None] < sizes[None, :])
        strictly_cheaper = fits & _cheaper_in_any_context(problem, node, adjacency, columns[0][:, 0])
    index = np.arange(len(profile))
    earlier = index[:, None] < index[None, :]
    dominates = no_worse & (better | earlier) | strictly_cheaper
    np.fill_diagonal(dominates, False)
    return dominates.any(axis=0)


def _cheaper_in_any_context(problem: ConfigProblem, node: int, adjacency, costs: np.ndarray) -> np.ndarray:
    """[b, a]: switching the node from a to b saves time whatever its neighbours choose, i.e.
    cost[a] - cost[b] exceeds the sum over its edges of max over the neighbour's choice l of
    edge[b, l] - edge[a, l]. Exact even when neighbours switch too (the changes' worst cases add up),
    and transitive, so removing every such a keeps an optimal plan."""
    worst = np.zeros((len(costs), len(costs)))
    for edge, _, is_source in adjacency[node]:
        matrix = problem.edge_costs[edge] if is_source else problem.edge_costs[edge].T
        worst += (matrix[:, None, :] - matrix[None, :, :]).max(axis=2)
    slack = costs[None, :] - costs[:, None] - worst
    return slack > 1e-9 * (1.0 + np.abs(costs)[None, :])


@dataclass(frozen=True, eq=False)
class Simplified:
    """A reduced problem and how to map its plans back to the original problem."""
    original: ConfigProblem
    problem: ConfigProblem
    kept_nodes: tuple[int, ...]  # original node of each reduced node
    choices: tuple[np.ndarray, ...]  # per original node, original candidate index of each kept one
    steps: tuple  # fold log, undone in reverse: ("leaf", w, u, table) / ("chain", w, u, v, table)

    @property
    def removed_candidates(self) -> int:
        """Candidates dropped as dominated (folded nodes keep theirs)."""
        return self.original.num_candidates - sum(len(c) for c in self.choices)

    def decode(self, assignment) -> tuple[int, ...]:
        """Original plan (original candidate indices) of a plan of the reduced problem."""
        local = {node: int(choice) for node, choice in zip(self.kept_nodes, assignment)}
        for step in reversed(self.steps):
            if step[0] == "leaf":
                _, folded, neighbour, table = step
                local[folded] = int(table[local[neighbour]])
            else:
                _, folded, first, second, table = step
                local[folded] = int(table[local[first], local[second]])
        return tuple(int(self.choices[node][local[node]]) for node in range(self.original.num_nodes))

    def encode(self, assignment) -> tuple[int, ...] | None:
        """Reduced plan of an original plan, or None if it uses a dropped candidate."""
        reduced = []
        for node in self.kept_nodes:
            where = np.flatnonzero(self.choices[node] == assignment[node])
            if len(where) == 0:
                return None
            reduced.append(int(where[0]))
        return tuple(reduced)

    def describe(self) -> str:
        """One line: nodes / edges / candidates before and after simplification."""
        return (f"simplified {self.original.num_nodes} nodes / {len(self.original.edges)} edges / "
                f"{self.original.num_candidates} candidates to {self.problem.num_nodes} / "
                f"{len(self.problem.edges)} / {self.problem.num_candidates}")


class _Graph:
    """Mutable multigraph during folding; parallel edges are merged on insertion."""

    def __init__(self, problem: ConfigProblem, choices):
        self.costs = {i: np.asarray(problem.node_costs[i], dtype=float)[choices[i]] for i in range(problem.num_nodes)}
        self.edges: dict[int, list] = {}
        self.incident: dict[int, set[int]] = {i: set() for i in range(problem.num_nodes)}
        self.pair: dict[tuple[int, int], int] = {}
        self.next_id = 0
        for (u, v), matrix in zip(problem.edges, problem.edge_costs):
            self.add_edge(u, v, np.asarray(matrix, dtype=float)[np.ix_(choices[u], choices[v])])

    def add_edge(self, u: int, v: int, matrix: np.ndarray) -> None:
        key = (min(u, v), max(u, v))
        oriented = matrix if u < v else matrix.T
        if key in self.pair:
            self.edges[self.pair[key]][2] = self.edges[self.pair[key]][2] + oriented
            return
        edge = self.next_id
        self.next_id += 1
        self.edges[edge] = [key[0], key[1], oriented]
        self.pair[key] = edge
        self.incident[key[0]].add(edge)
        self.incident[key[1]].add(edge)

    def remove_edge(self, edge: int) -> None:
        u, v, _ = self.edges.pop(edge)
        del self.pair[(u, v)]
        self.incident[u].discard(edge)
        self.incident[v].discard(edge)

    def matrix_from(self, edge: int, node: int) -> tuple[int, np.ndarray]:
        """(other end, matrix with rows indexed by `node`'s candidates)."""
        u, v, matrix = self.edges[edge]
        return (v, matrix) if u == node else (u, matrix.T)

    def fold_leaf(self, node: int):
        (edge,) = self.incident[node]
        other, matrix = self.matrix_from(edge, node)  # rows: node, columns: other
        total = matrix + self.costs[node][:, None]
        self.costs[other] = self.costs[other] + total.min(axis=0)
        table = total.argmin(axis=0)
        self.remove_edge(edge)
        del self.incident[node]
        return ("leaf", node, other, table)

    def fold_chain(self, node: int):
        first_edge, second_edge = sorted(self.incident[node])
        first, to_first = self.matrix_from(first_edge, node)  # rows: node
        second, to_second = self.matrix_from(second_edge, node)
        # total[k, l, m] = edge(first=k, node=l) + cost_node[l] + edge(node=l, second=m)
        total = to_first.T[:, :, None] + self.costs[node][None, :, None] + to_second[None, :, :]
        table = total.argmin(axis=1)
        self.remove_edge(first_edge)
        self.remove_edge(second_edge)
        del self.incident[node]
        self.add_edge(first, second, total.min(axis=1))
        return ("chain", node, first, second, table)


def _foldable(problem: ConfigProblem, restrict_to_memory_free: bool) -> np.ndarray:
    if not restrict_to_memory_free:
        return np.ones(problem.num_nodes, dtype=bool)
    return np.array([not np.any(np.asarray(m) != 0) for m in problem.node_memory])


def _reduced_problem(problem: ConfigProblem, graph: _Graph, choices, absorbed: dict[int, list[int]]) -> tuple:
    kept = sorted(graph.incident)
    position = {node: index for index, node in enumerate(kept)}
    edges, matrices = [], []
    for u, v, matrix in graph.edges.values():
        edges.append((position[u], position[v]))
        matrices.append(matrix)
    members = []
    for node in kept:
        group = list(problem.members[node])
        for folded in absorbed.get(node, []):
            group += list(problem.members[folded])
        members.append(tuple(group))
    reduced = ConfigProblem(
        names=tuple(problem.names[i] for i in kept),
        candidates=tuple(tuple(problem.candidates[i][c] for c in choices[i]) for i in kept),
        node_costs=tuple(graph.costs[i] for i in kept),
        node_memory=tuple(np.asarray(problem.node_memory[i], dtype=float)[choices[i]] for i in kept),
        node_devices=tuple(tuple(problem.node_devices[i][c] for c in choices[i]) for i in kept),
        edges=tuple(edges), edge_costs=tuple(matrices), num_devices=problem.num_devices,
        memory_limit=problem.memory_limit, members=tuple(members), name=f"{problem.name}-simplified")
    return reduced, tuple(kept)


def simplify(problem: ConfigProblem, *, drop_dominated: bool = True, fold_leaves: bool = True,
             fold_chains: bool = True, deadline=None) -> Simplified:
    """Exact reduction; past `deadline` it stops dropping and folding (what is done stays exact)."""
    binds = memory_can_bind(problem)
    adjacency = problem.neighbours()
    choices = []
    known_subsets: dict = {}
    for node in range(problem.num_nodes):
        keep = np.arange(len(problem.node_costs[node]))
        if drop_dominated and not (deadline is not None and deadline.expired()):
            keep = keep[~dominated_candidates(problem, node, adjacency, binds, known_subsets)]
        choices.append(keep)
    graph = _Graph(problem, choices)
    foldable = _foldable(problem, binds)
    steps, absorbed = [], {}
    queue = list(range(problem.num_nodes))
    while queue:
        if deadline is not None and deadline.expired():
            break
        node = queue.pop()
        if node not in graph.incident or not foldable[node]:
            continue
        degree = len(graph.incident[node])
        if degree == 1 and fold_leaves:
            step = graph.fold_leaf(node)
            neighbours = [step[2]]
        elif degree == 2 and fold_chains:
            step = graph.fold_chain(node)
            neighbours = [step[2], step[3]]
        else:
            continue
        steps.append(step)
        absorbed.setdefault(neighbours[0], []).extend([node] + absorbed.pop(node, []))
        queue.extend(neighbours)
    reduced, kept = _reduced_problem(problem, graph, choices, absorbed)
    return Simplified(problem, reduced, kept, tuple(choices), tuple(steps))
