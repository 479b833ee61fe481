"""The load-aware objective: a step-time estimate that rewards concurrent work on disjoint devices.

The sum objective adds every operator's time, so two Inception branches on disjoint device halves
cost as much as running them one after the other on all devices: branch parallelism never pays.
A step can end no earlier than (a) its busiest device is done and (b) its longest dependency chain
is done (the two classic makespan lower bounds of list scheduling, Graham 1969). The load
objective is

    load(plan) = max(max_d busy_d, max_d moved_d, max_d sync_d, critical_path, sync_tail, device_tail)
                 + SUM_WEIGHT x sum

- busy_d: the device time of every candidate placed on device d (its cost less gradient sync:
  compute + intra-operator collectives).
- moved_d: the redistribution (edge) time "counted on both ends": with each edge matrix written
  M[k, l] = a[k] + b[l] + R[k, l] (row minima, then column minima, as `normal_form` does), a[k] is
  charged to the source candidate's devices, b[l] to the target's and the residual R[k, l] to the
  devices of both. Transfers run on the links, beside the compute (FlexFlow's simulator models
  every connection as a device of its own; so does `simulate/`), so they are a resource of their
  own. They used to be added to busy_d, which ranked plans that move activations between branches
  far below the simulator (Inception-v3 on 4 P100: a branch-parallel plan at 418 ms by the load
  objective, 369 ms simulated, 322 ms of device time; docs/branch-parallelism.md). They still
  delay their consumers: they stay on the critical path.
- sync_d: the gradient sync of the candidates on device d. It runs on the links, beside the
  compute (as frameworks overlap it with backward and the simulator models it), so it is a resource
  of its own, not device time. Read from the cost model in `problem.context` (NodeCost.sync_s);
  zero for problems without one. Where the cluster's runtime syncs through parameter owners after
  the backward pass (`cluster.gradient_sync`, FlexFlow's runtime: cluster/sync.py), sync_d is the
  sync of the groups device d owns (their first device), received one after the other once d's own
  backward work is done, so the term is max_d (busy_d + sync_d) instead ("bulk"): the owner's
  sync tasks start after its backward barrier.
- critical_path: the longest path through the operator DAG with node time = device time and
  edge time = M[k, l] (forward and backward follow the same path, so the node costs, which hold
  both passes, add up along it).
- sync_tail: max over operators v of (longest path from v to the end + v's gradient sync): v's
  gradients exist only after the forward pass from v on and the backward pass back to v, and
  their all-reduce follows (the embeddings of a translation model sync after everything else).
- device_tail: for the TAIL_NODES operators v with the largest gradient sync and every device d
  that v runs on: the device time on d of v and all its descendants, plus v's sync. v's backward
  ends after every descendant's forward and backward, a device runs one task at a time, and only
  then does v's all-reduce start (data parallelism's embedding sync in NMT ends the step).
- SUM_WEIGHT x sum: a small tie-break towards less total work (among plans of equal makespan, the
  one that leaves devices idle longest). Fixed, so the validator recomputes exactly the value
  a planner reports.

`load_breakdown` evaluates a plan; `load_model` is the same objective as a MILP over the one-hot
configuration variables (solved by `milp-load`, see `simulate/milp_load.py`).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from solver_plan.intra.linear_model import LinearModel, _memory_rows, _one_hot_rows, _Rows, node_offsets
from solver_plan.intra.problem import ConfigProblem

SUM_WEIGHT = 0.01  # weight of the total-work tie-break


@dataclass(frozen=True)
class LoadBreakdown:
    """The parts of the load objective of one plan (seconds)."""
    device_busy: np.ndarray  # (num_devices,) device time
    critical_path: float
    total: float  # the sum objective of the same plan
    link_busy: np.ndarray | None = None  # gradient sync of each device's parameters (its links)
    sync_tail: float = 0.0  # max over operators of (longest path from it to the end + its gradient sync)
    device_tail: float = 0.0  # max over heavy-sync operators and devices (see the module text)
    bulk: bool = False  # owner-based sync after the backward pass: link_busy is each owner's sync
    moved: np.ndarray | None = None  # redistribution time charged to each device (its links)

    @property
    def busiest(self) -> float:
        """Device time of the busiest device (max_d busy_d)."""
        return float(self.device_busy.max()) if len(self.device_busy) else 0.0

    @property
    def most_moved(self) -> float:
        """Redistribution time charged to the most charged device's links (max_d moved_d)."""
        return float(self.moved.max()) if self.moved is not None and len(self.moved) else 0.0

    @property
    def busiest_link(self) -> float:
        """Gradient sync on the busiest device's links (max_d sync_d)."""
        return float(self.link_busy.max()) if self.link_busy is not None and len(self.link_busy) else 0.0

    @property
    def busy_then_sync(self) -> float:
        """max_d (busy_d + sync_d) under bulk owner-based sync, else 0."""
        if not self.bulk or self.link_busy is None or not len(self.device_busy):
            return 0.0
        return float((self.device_busy + self.link_busy).max())

    @property
    def makespan(self) -> float:
        """The step-time estimate: the largest of the makespan lower bounds (see the module text)."""
        return max(self.busiest, self.most_moved, self.busiest_link, self.critical_path, self.sync_tail,
                   self.device_tail, self.busy_then_sync)

    @property
    def objective(self) -> float:
        """The load objective: makespan plus SUM_WEIGHT times the sum objective (the tie-break)."""
        return self.makespan + SUM_WEIGHT * self.total

    def describe(self) -> str:
        """One line naming the objective and each of its terms, in seconds."""
        bulk = f"busy then owner sync {self.busy_then_sync:.6g} s, " if self.bulk else ""
        return (f"load objective {self.objective:.6g} s: busiest device {self.busiest:.6g} s, {bulk}"
                f"most moved {self.most_moved:.6g} s, "
                f"busiest link {self.busiest_link:.6g} s, critical path {self.critical_path:.6g} s, "
                f"sync tail {self.sync_tail:.6g} s, device tail {self.device_tail:.6g} s, sum {self.total:.6g} s")


def topological_order(problem: ConfigProblem) -> list[int] | None:
    """Nodes in an order where every edge goes forward; None if the edges contain a cycle."""
    indegree = np.zeros(problem.num_nodes, dtype=np.int64)
    successors: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for u, v in problem.edges:
        successors[u].append(v)
        indegree[v] += 1
    ready = [i for i in range(problem.num_nodes) if indegree[i] == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for nxt in successors[node]:
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                ready.append(nxt)
    return order if len(order) == problem.num_nodes else None


def _require_dag(problem: ConfigProblem) -> list[int]:
    order = topological_order(problem)
    if order is None:
        raise ValueError(f"load objective: the edges of {problem.name!r} contain a cycle (no critical path)")
    return order


@dataclass(frozen=True, eq=False)
class EdgeSplit:
    """Every edge matrix as M[k, l] = a[k] + b[l] + R[k, l] (row minima, then column minima), with
    `charged[i]` = node i's device time (its cost less gradient sync) plus the a and b of its
    edges (a heuristic price of a candidate), `moved[i]` = the a and b of its edges alone (what
    its devices' links are charged before residuals). `residual[j]` is None
    where R is zero everywhere, made on first use: only the load MILP
    reads whole residuals, a plan's breakdown and local search one entry of an edge each
    (`residual_at`), and 6 million entries at 10,000 nodes took 0.2-0.3 s to hold. `sync[i]` is
    the gradient-sync part of each candidate's cost, and `device_time[i]` the rest."""
    charged: tuple[np.ndarray, ...]
    moved: tuple[np.ndarray, ...]
    row_part: tuple[np.ndarray, ...]
    column_part: tuple[np.ndarray, ...]
    matrices: tuple[np.ndarray, ...]  # the problem's edge matrices M (not copies)
    sync: tuple[np.ndarray, ...]
    device_time: tuple[np.ndarray, ...]
    tails: tuple = ()  # (node, descendant mask) of the tail nodes, see `tail_nodes`
    # per node and candidate, the devices charged with its sync: all of its devices, or under bulk
    # owner-based sync the owners (first device) of its replica groups; None: all of its devices
    sync_devices: tuple | None = None
    # what every load breakdown of the problem reads, computed once with the split (`_Layout`)
    layout: "_Layout | None" = None

    @functools.cached_property
    def residual(self) -> tuple[np.ndarray | None, ...]:
        """R = (M - a[:, None]) - b[None, :] of every edge, None where zero everywhere."""
        residuals = ((m - a[:, None]) - b[None, :] for m, a, b in zip(self.matrices, self.row_part, self.column_part))
        return tuple(r if r.max() > 0 else None for r in residuals)

    def residual_at(self, edge: int, k: int, l: int) -> float:
        """R[k, l] of one edge: the same two subtractions as `residual`, so the same bits (0.0 where
        `residual[edge]` is None)."""
        return (self.matrices[edge].item(k, l) - self.row_part[edge].item(k)) - self.column_part[edge].item(l)

    @property
    def bulk(self) -> bool:
        """Whether gradient sync goes through parameter owners after the backward pass (`sync_devices`
        set)."""
        return self.sync_devices is not None

    def sync_on(self, problem: ConfigProblem, node: int, choice: int) -> np.ndarray:
        """Devices charged with the sync of `node` under candidate `choice`."""
        if self.sync_devices is None:
            return problem.device_arrays[node][choice]
        return self.sync_devices[node][choice]


def sync_parts(problem: ConfigProblem) -> tuple[np.ndarray, ...]:
    """Gradient-sync seconds of every candidate, from the cost model in `problem.context` (zero for
    problems without one, or whose nodes stand for several operators)."""
    zeros = tuple(np.zeros(len(c)) for c in problem.node_costs)
    context = problem.context
    if not (isinstance(context, tuple) and len(context) == 3 and hasattr(context[2], "node")):
        return zeros
    graph, _, cost_model = context
    parts = []
    for i, (members, candidates) in enumerate(zip(problem.members, problem.candidates)):
        if len(members) != 1:
            return zeros
        try:
            op = graph.op(members[0])
        except KeyError:
            return zeros
        sync = np.array([cost_model.node(graph, op, cfg).sync_s for cfg in candidates], dtype=float)
        parts.append(np.clip(sync, 0.0, problem.node_costs[i]))
    return tuple(parts)


def sync_owners(problem: ConfigProblem) -> tuple | None:
    """Per node and candidate, the owners of its replica groups (first device of each, as the
    simulator's owner-based sync), when the cluster in `problem.context` syncs through parameter
    owners; else None."""
    context = problem.context
    if not (isinstance(context, tuple) and len(context) == 3 and hasattr(context[2], "node")):
        return None
    graph, cluster, _ = context
    if not getattr(getattr(cluster, "gradient_sync", None), "owner_based", False):
        return None
    from solver_plan.cost.collectives import collective_groups
    from solver_plan.cost.dims import op_layout
    owners = []
    for members, candidates in zip(problem.members, problem.candidates):
        if len(members) != 1:
            return None
        op = graph.op(members[0])
        if op.params <= 0:
            owners.append(tuple(np.zeros(0, dtype=np.int64) for _ in candidates))
            continue
        layout = op_layout(op, graph)
        owners.append(tuple(np.array(sorted({g[0] for g in collective_groups(cfg, layout.names, layout.replica_dims)
                                             if len(g) > 1}), dtype=np.int64) for cfg in candidates))
    return tuple(owners)


_LAST_SPLIT: list = []  # (problem, split) of the last call: the planner and the validator ask in turn


def split_edges(problem: ConfigProblem) -> EdgeSplit:
    """The edge split of `problem` (recomputing it took 0.4 s at 10,000 nodes, asked for by the
    planner and again by the validator: the last one is kept)."""
    if _LAST_SPLIT and _LAST_SPLIT[0] is problem:
        return _LAST_SPLIT[1]
    split = _split_edges(problem)
    _LAST_SPLIT[:] = [problem, split]
    return split


@dataclass(frozen=True, eq=False)
class _Layout:
    """The problem's arrays as a load breakdown reads them, made once per split: every candidate's
    device time, moved and sync seconds flat (node i's at `starts[i]:starts[i + 1]`), the edges'
    ends, each node's outgoing edges, a topological order (None: the edges hold a cycle), and every
    edge's row and column minima flat (edge j's at `row_starts[j] + k`, `column_starts[j] + l`), so
    a plan's edge parts are a gather."""
    starts: np.ndarray
    device_time: np.ndarray
    moved: np.ndarray
    sync: np.ndarray
    sources: np.ndarray
    targets: np.ndarray
    outgoing: tuple[tuple[int, ...], ...]
    order: tuple[int, ...] | None
    rows: np.ndarray
    row_starts: np.ndarray
    columns: np.ndarray
    column_starts: np.ndarray


def _shape_groups(problem: ConfigProblem) -> list[np.ndarray]:
    """Edge indices grouped by the shape of their matrix, each group in edge order."""
    if not problem.edges:
        return []
    shapes = np.array([m.shape for m in problem.edge_costs], dtype=np.int64)
    key = shapes[:, 0] * (int(shapes[:, 1].max()) + 1) + shapes[:, 1]
    by_key = np.argsort(key, kind="stable")
    cuts = np.flatnonzero(np.diff(key[by_key])) + 1
    return np.split(by_key, cuts)


def _ramp(lengths: np.ndarray) -> np.ndarray:
    """0..n-1 for every n in `lengths`, concatenated."""
    total = int(lengths.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _split_edges(problem: ConfigProblem) -> EdgeSplit:
    """The split of every edge matrix, a shape of matrices at a time (the loop over 15,000 edges took
    0.25-0.34 s at 10,000 nodes). Bit for bit the loop's: the same minima and subtractions entry
    by entry, and each candidate's charged seconds add its edges' parts in edge order (`np.add.at`
    adds in index order), as `charged[u] += row_min; charged[v] += column_min` did per edge."""
    sync = sync_parts(problem)
    counts = np.fromiter(map(len, problem.node_costs), dtype=np.int64, count=problem.num_nodes)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    flat = np.concatenate([np.asarray(c, dtype=float) for c in problem.node_costs]) if problem.num_nodes \
        else np.zeros(0)
    sync_flat = np.concatenate(sync) if problem.num_nodes else np.zeros(0)
    device_flat = flat - sync_flat
    num_edges = len(problem.edges)
    sources = np.array([u for u, _ in problem.edges], dtype=np.int64)
    targets = np.array([v for _, v in problem.edges], dtype=np.int64)
    rows: list = [None] * num_edges
    columns: list = [None] * num_edges
    for members in _shape_groups(problem):
        stack = np.stack([problem.edge_costs[j] for j in members])
        row_min = stack.min(axis=2)
        column_min = (stack - row_min[:, :, None]).min(axis=1)
        for i, j in enumerate(members.tolist()):
            rows[j], columns[j] = row_min[i], column_min[i]
    charged_flat = device_flat.copy()
    k_u, k_v = counts[sources], counts[targets]
    row_flat = np.concatenate(rows) if num_edges else np.zeros(0)
    column_flat = np.concatenate(columns) if num_edges else np.zeros(0)
    if num_edges:
        # per edge its source's row minima, then its target's column minima, edges in order
        block = np.cumsum(k_u + k_v) - (k_u + k_v)
        index, amount = np.empty(int((k_u + k_v).sum()), dtype=np.int64), np.empty(int((k_u + k_v).sum()))
        at_u = np.repeat(block, k_u) + _ramp(k_u)
        at_v = np.repeat(block + k_u, k_v) + _ramp(k_v)
        index[at_u] = np.repeat(starts[sources], k_u) + _ramp(k_u)
        index[at_v] = np.repeat(starts[targets], k_v) + _ramp(k_v)
        amount[at_u] = row_flat
        amount[at_v] = column_flat
        np.add.at(charged_flat, index, amount)
    moved_flat = charged_flat - device_flat
    bounds = list(zip(starts[:-1].tolist(), starts[1:].tolist()))  # per node: views of the flat arrays
    charged, moved, device_time = (tuple(flat[a:b] for a, b in bounds) for flat in (charged_flat, moved_flat, device_flat))
    outgoing: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for j, u in enumerate(sources.tolist()):
        outgoing[u].append(j)
    order = topological_order(problem)
    layout = _Layout(starts, device_flat, moved_flat, sync_flat, sources, targets,
                     tuple(tuple(out) for out in outgoing), None if order is None else tuple(order),
                     row_flat, np.cumsum(k_u) - k_u, column_flat, np.cumsum(k_v) - k_v)
    split = EdgeSplit(charged, moved, tuple(rows), tuple(columns), tuple(problem.edge_costs), sync,
                      device_time, sync_devices=sync_owners(problem), layout=layout)
    return replace(split, tails=tuple(tail_nodes(problem, split)))


def _layout(problem: ConfigProblem, split: EdgeSplit) -> _Layout:
    """The split's layout (a split made without one, as by hand: made from the problem's)."""
    return split.layout if split.layout is not None else split_edges(problem).layout


def _tail_times(problem: ConfigProblem, assignment, order, split: EdgeSplit,
                weights: list[float] | None = None) -> np.ndarray:
    """Longest path from every node to the end of the DAG, the node included (node time = its
    device time, edge time = M[k, l]): the forward pass from the node on and the backward pass back
    to it, so its gradients exist no earlier than that. (Python floats over the split's cached
    outgoing edges: the same additions and comparisons, so the same bits, as numpy scalars.)"""
    layout = _layout(problem, split)
    plan = [int(c) for c in assignment]
    weight = _edge_weights(problem, plan) if weights is None else weights
    own = layout.device_time[layout.starts[:-1] + np.asarray(plan, dtype=np.int64)].tolist() if plan else []
    targets, outgoing = layout.targets.tolist(), layout.outgoing
    tail = [0.0] * problem.num_nodes
    for u in reversed(order):
        after = 0.0
        for j in outgoing[u]:
            through = weight[j] + tail[targets[j]]
            if through > after:
                after = through
        tail[u] = own[u] + after
    return np.array(tail, dtype=float)


def _edge_weights(problem: ConfigProblem, plan: list[int]) -> list[float]:
    """M[k, l] of every edge at the plan's pair of candidates."""
    return [m.item(plan[u], plan[v]) for (u, v), m in zip(problem.edges, problem.edge_costs)]


def _chosen_devices(used: list) -> tuple[np.ndarray, np.ndarray]:
    """(devices of every chosen candidate concatenated in node order, how many each)."""
    lengths = np.fromiter(map(len, used), dtype=np.int64, count=len(used))
    devices = np.concatenate(used).astype(np.int64) if used else np.zeros(0, dtype=np.int64)
    return devices, lengths


UNION_CELLS = 1 << 20  # (edge, device) cells of the union masks made at once: 1 MB


def _residual_devices(layout: _Layout, plan: np.ndarray, weights: list[float], devices: np.ndarray,
                      lengths: np.ndarray, num_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """(device, amount) pairs of the plan's non-zero edge residuals R[k, l] = (M[k, l] - a[k]) - b[l]
    (`EdgeSplit.residual`'s subtractions), each on the union of its two candidates' devices, edges
    in order (a device's amounts then add in the loop's order). The unions are rows of a boolean
    (edge, device) mask, UNION_CELLS at a time: sorting (edge, device) keys instead took 0.24 s on
    megatron-1T's 2,055 edges over 3,072 devices."""
    k, l = plan[layout.sources], plan[layout.targets]
    amount = (np.asarray(weights, dtype=float) - layout.rows[layout.row_starts + k]) - layout.columns[layout.column_starts + l]
    chosen = np.flatnonzero(amount)
    if not len(chosen):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    first = np.cumsum(lengths) - lengths
    step = max(1, UNION_CELLS // max(1, num_devices))
    found_devices, found_amounts = [], []
    for begin in range(0, len(chosen), step):
        edges = chosen[begin:begin + step]
        mask = np.zeros((len(edges), num_devices), dtype=bool)
        for ends in (layout.sources[edges], layout.targets[edges]):
            count = lengths[ends]
            at = np.repeat(first[ends], count) + _ramp(count)
            mask[np.repeat(np.arange(len(edges)), count), devices[at]] = True
        row, device = np.nonzero(mask)  # by edge, then device: each device of the union once
        found_devices.append(device)
        found_amounts.append(amount[edges][row])
    return np.concatenate(found_devices), np.concatenate(found_amounts)


def load_breakdown(problem: ConfigProblem, assignment, split: EdgeSplit | None = None) -> LoadBreakdown:
    """Busy time of every device, critical path and sum of `assignment` (see the module text)."""
    split = split or split_edges(problem)
    layout = _layout(problem, split)
    if layout.order is None:
        raise ValueError(f"load objective: the edges of {problem.name!r} contain a cycle (no critical path)")
    # per-device sums by bincount over (device, amount) pairs in node order, then edge order (the
    # residuals, on the union of their two device sets), each device's amounts added in that order
    plan = np.asarray([int(c) for c in assignment], dtype=np.int64)
    at = layout.starts[:-1] + plan
    arrays = problem.device_arrays
    used = [arrays[node][choice] for node, choice in enumerate(plan.tolist())]
    devices, lengths = _chosen_devices(used)
    busy = _per_device(problem.num_devices, devices, np.repeat(layout.device_time[at], lengths))
    weights = _edge_weights(problem, plan.tolist())
    edge_devices, edge_amounts = _residual_devices(layout, plan, weights, devices, lengths, problem.num_devices)
    moving = _per_device(problem.num_devices, np.concatenate([devices, edge_devices]),
                         np.concatenate([np.repeat(layout.moved[at], lengths), edge_amounts]))
    sync = layout.sync[at]
    links = plan_links(problem, split, plan, (devices, lengths))
    tail = _tail_times(problem, plan, layout.order, split, weights)
    critical = float(tail.max()) if problem.num_nodes else 0.0
    sync_tail = float((tail + sync).max()) if problem.num_nodes else 0.0
    return LoadBreakdown(busy, critical, problem.objective(assignment), links, sync_tail,
                         _device_tail(problem, assignment, split), split.bulk, moving)


def plan_links(problem: ConfigProblem, split: EdgeSplit, plan: np.ndarray, chosen=None) -> np.ndarray:
    """Gradient sync charged to each device's links under `plan` (an int array): each candidate's
    sync on the devices `EdgeSplit.sync_on` names, nodes in order. `chosen`: the plan's
    (devices, lengths) from `_chosen_devices`, where the caller has them."""
    layout = _layout(problem, split)
    sync = layout.sync[layout.starts[:-1] + plan]
    if split.sync_devices is None:
        if chosen is None:
            arrays = problem.device_arrays
            chosen = _chosen_devices([arrays[node][choice] for node, choice in enumerate(plan.tolist())])
        devices, lengths = chosen
    else:
        devices, lengths = _chosen_devices([split.sync_devices[node][choice] for node, choice in enumerate(plan.tolist())])
    return _per_device(problem.num_devices, devices, np.repeat(sync, lengths))


TAIL_NODES = 16  # operators with the largest gradient sync that get a device-tail bound
TAIL_MAX_NODES = 3000  # above this many operators the descendant sets are not built


def tail_nodes(problem: ConfigProblem, split: EdgeSplit) -> list[tuple[int, np.ndarray]]:
    """(node, mask of the node and its descendants) for the TAIL_NODES nodes of largest possible
    gradient sync (none for problems without sync or beyond TAIL_MAX_NODES)."""
    layout = _layout(problem, split)
    heaviest = (np.maximum.reduceat(layout.sync, layout.starts[:-1]).tolist() if len(layout.sync) and all(map(len, split.sync))
                else [float(s.max()) if len(s) else 0.0 for s in split.sync])
    chosen = [i for i in sorted(range(problem.num_nodes), key=lambda i: (-heaviest[i], i))[:TAIL_NODES]
              if heaviest[i] > 0]
    if not chosen or problem.num_nodes > TAIL_MAX_NODES:
        return []
    order = topological_order(problem)
    if order is None:
        return []
    successors: list[list[int]] = [[] for _ in range(problem.num_nodes)]
    for u, v in problem.edges:
        successors[u].append(v)
    reach = np.zeros((problem.num_nodes, problem.num_nodes), dtype=bool)
    for u in reversed(order):
        reach[u, u] = True
        for v in successors[u]:
            reach[u] |= reach[v]
    return [(i, reach[i]) for i in chosen]


def _device_tail(problem: ConfigProblem, assignment, split: EdgeSplit) -> float:
    """max over tail nodes v and devices d of: device time on d of v and its descendants + v's sync.
    v's backward pass ends after the forward and backward passes of all its descendants, and a
    device runs its tasks one at a time, so on d that much work precedes v's gradient sync."""
    nodes = split.tails
    if not nodes:
        return 0.0
    work = np.zeros((problem.num_nodes, problem.num_devices))
    arrays = problem.device_arrays
    for node, choice in enumerate(assignment):
        work[node, arrays[node][choice]] = split.device_time[node][choice]
    best = 0.0
    for v, mask in nodes:
        on = work.sum(axis=0, where=mask[:, None])  # the masked rows' sum in row order, without copying them
        own = arrays[v][assignment[v]]
        if len(own):
            best = max(best, float(on[own].max()) + float(split.sync[v][assignment[v]]))
    return best


def _per_device(num_devices: int, devices: np.ndarray, amounts: np.ndarray) -> np.ndarray:
    """Sum of amounts per device (each device's amounts added in the order given)."""
    return np.bincount(devices, weights=amounts, minlength=num_devices).astype(float)


def load_objective(problem: ConfigProblem, assignment) -> float:
    """The load objective of a plan (seconds): `load_breakdown(problem, assignment).objective`."""
    return load_breakdown(problem, assignment).objective


@dataclass(frozen=True, eq=False)
class LoadModel:
    """The MILP and where its columns are: x first (decoded), then edge y, path p, makespan z."""
    model: LinearModel
    split: EdgeSplit
    edge_columns: tuple[np.ndarray | None, ...]  # per edge, the (k_u, k_v) grid of its y columns
    path_offset: int
    makespan_column: int


class LoadModelExpired(Exception):
    """The deadline passed while the load MILP was being built (its rows grow with edges x devices)."""


CHECK_EVERY = 64  # edges or nodes between two looks at the clock while building


def _check_clock(deadline, index: int) -> None:
    if deadline is not None and index % CHECK_EVERY == 0 and deadline.expired():
        raise LoadModelExpired()


def load_model(problem: ConfigProblem, deadline=None) -> LoadModel:
    """minimise z + SUM_WEIGHT x sum subject to z >= busy_d and z >= sync_d (every device),
    z >= p_v + sync_v (every node), p_u >= t_u + M_uv + p_v (every edge), p_v >= t_v (tail times), one-hot x, y tied to x by both marginals
    (only for edges with a non-zero residual: the rest of an edge is linear in x), memory rows
    when limited. The optimum is the least `load_objective` over all plans. `LoadModelExpired` when
    `deadline` (a `Deadline`) passes while building."""
    _require_dag(problem)
    split = split_edges(problem)
    offsets = node_offsets(problem)
    num_x = int(offsets[-1])
    column = num_x
    grids: list[np.ndarray | None] = []
    for residual in split.residual:
        if residual is None:
            grids.append(None)
            continue
        grids.append(column + np.arange(residual.size).reshape(residual.shape))
        column += residual.size
    path_offset = column
    z = path_offset + problem.num_nodes
    num_columns = z + 1
    cost = np.zeros(num_columns)
    # the sum term is the sum objective: device time + edge parts (charged) + gradient sync
    cost[:num_x] = SUM_WEIGHT * np.concatenate([c + y for c, y in zip(split.charged, split.sync)])
    for residual, grid in zip(split.residual, grids):
        if grid is not None:
            cost[grid.ravel()] = SUM_WEIGHT * residual.ravel()
    cost[z] = 1.0
    integer = np.zeros(num_columns, dtype=bool)
    integer[:num_x] = True
    upper = np.ones(num_columns)
    upper[path_offset:] = np.inf
    rows = _Rows()
    _one_hot_rows(rows, offsets)
    for (u, v), grid in zip(problem.edges, grids):
        if grid is None:
            continue
        k_u, k_v = grid.shape
        # sum_l y[k, l] = x[u, k] for every k, and sum_k y[k, l] = x[v, l] for every l
        rows.add_many(np.hstack([grid, (offsets[u] + np.arange(k_u))[:, None]]), np.append(np.ones(k_v), -1.0), 0.0, 0.0)
        rows.add_many(np.hstack([grid.T, (offsets[v] + np.arange(k_v))[:, None]]), np.append(np.ones(k_u), -1.0), 0.0, 0.0)
    _check_clock(deadline, 0)
    _busy_rows(rows, problem, split, offsets, grids, z, deadline=deadline)
    _moved_rows(rows, problem, split, offsets, grids, z, deadline)
    _link_rows(rows, problem, split, offsets, z)
    if split.bulk:  # busy_d + sync_d <= z
        _busy_rows(rows, problem, split, offsets, grids, z, with_sync=True, deadline=deadline)
    _path_rows(rows, problem, split, offsets, grids, path_offset, z, deadline)
    _tail_rows(rows, problem, split, offsets, z, deadline)
    if problem.memory_limit is not None:
        _memory_rows(rows, problem, offsets, float(problem.memory_limit))
    row_index, column_index, values, row_lower, row_upper = rows.arrays()
    model = LinearModel(cost, 0.0, np.zeros(num_columns), upper, integer, row_index, column_index, values,
                        row_lower, row_upper, num_x, offsets)
    return LoadModel(model, split, tuple(grids), path_offset, z)


def _busy_rows(rows: _Rows, problem, split: EdgeSplit, offsets, grids, z: int, with_sync: bool = False,
               deadline=None) -> None:
    """busy_d - z <= 0 for every device d (with_sync: busy_d + the sync d is charged with - z <= 0)."""
    columns: list[list[int]] = [[] for _ in range(problem.num_devices)]
    values: list[list[float]] = [[] for _ in range(problem.num_devices)]
    if with_sync:
        _add_sync_terms(problem, split, offsets, columns, values)
    _add_node_terms(problem, split.device_time, offsets, columns, values, deadline)
    _add_rows(rows, problem, columns, values, z, merge=with_sync)


def _moved_rows(rows: _Rows, problem, split: EdgeSplit, offsets, grids, z: int, deadline=None) -> None:
    """moved_d - z <= 0 for every device d: edge minima of its candidates plus residuals."""
    columns: list[list[int]] = [[] for _ in range(problem.num_devices)]
    values: list[list[float]] = [[] for _ in range(problem.num_devices)]
    _add_node_terms(problem, split.moved, offsets, columns, values, deadline)
    for index, ((u, v), residual, grid) in enumerate(zip(problem.edges, split.residual, grids)):
        _check_clock(deadline, index)
        if grid is None:
            continue
        for k, l in zip(*np.nonzero(residual)):
            for device in set(problem.node_devices[u][k]) | set(problem.node_devices[v][l]):
                columns[device].append(int(grid[k, l]))
                values[device].append(float(residual[k, l]))
    _add_rows(rows, problem, columns, values, z, merge=False)


def _add_node_terms(problem, amounts, offsets, columns, values, deadline=None) -> None:
    """amounts[node][choice] on every device of the candidate (the clock looked at every node: one
    holds ~18,000 terms on 3,072 devices)."""
    for node in range(problem.num_nodes):
        _check_clock(deadline, 0)
        for choice, devices in enumerate(problem.node_devices[node]):
            amount = float(amounts[node][choice])
            if amount:
                for device in devices:
                    columns[device].append(int(offsets[node] + choice))
                    values[device].append(amount)


def _add_rows(rows: _Rows, problem, columns, values, z: int, merge: bool) -> None:
    """sum of the terms on d - z <= 0 for every device d (rows with no term are left out)."""
    for device in range(problem.num_devices):
        if not columns[device]:
            continue
        cols, vals = np.asarray(columns[device], dtype=np.int64), np.asarray(values[device], dtype=float)
        if merge:  # a candidate's device time and its sync: one coefficient
            cols, where = np.unique(cols, return_inverse=True)
            vals = np.bincount(where.ravel(), weights=vals, minlength=len(cols))
        rows.add(np.append(cols, z), np.append(vals, -1.0), -np.inf, 0.0)


def _add_sync_terms(problem, split: EdgeSplit, offsets, columns, values) -> None:
    """The sync of every candidate on the devices it is charged to (`EdgeSplit.sync_on`)."""
    for node in range(problem.num_nodes):
        for choice in range(len(problem.node_devices[node])):
            amount = float(split.sync[node][choice])
            if amount:
                for device in split.sync_on(problem, node, choice):
                    columns[int(device)].append(int(offsets[node] + choice))
                    values[int(device)].append(amount)


def _link_rows(rows: _Rows, problem, split: EdgeSplit, offsets, z: int) -> None:
    """sync_d - z <= 0 for every device whose candidates have gradient sync."""
    columns: list[list[int]] = [[] for _ in range(problem.num_devices)]
    values: list[list[float]] = [[] for _ in range(problem.num_devices)]
    _add_sync_terms(problem, split, offsets, columns, values)
    for device in range(problem.num_devices):
        if columns[device]:
            rows.add(columns[device] + [z], values[device] + [-1.0], -np.inf, 0.0)


def _tail_rows(rows: _Rows, problem, split: EdgeSplit, offsets, z: int, deadline=None) -> None:
    """For each tail node v and device d: device time on d of v and its descendants + v's sync on
    d - z <= 0. Where v is not on d this is at most busy_d, so the row is valid for every plan."""
    for v, mask in split.tails:
        for d in range(problem.num_devices):
            _check_clock(deadline, d)
            columns, values = [], []
            for u in np.flatnonzero(mask):
                for c, devices in enumerate(problem.node_devices[u]):
                    if d in devices:
                        amount = float(split.device_time[u][c]) + (float(split.sync[v][c]) if u == v else 0.0)
                        if amount:
                            columns.append(int(offsets[u] + c))
                            values.append(amount)
            if columns:
                rows.add(columns + [z], values + [-1.0], -np.inf, 0.0)


def _path_rows(rows: _Rows, problem, split: EdgeSplit, offsets, grids, path_offset: int, z: int,
               deadline=None) -> None:
    """Tail times p: p_v - t_v >= 0 and z - p_v - sync_v >= 0 for every node;
    p_u - p_v - t_u - M_uv >= 0 for every edge, with M_uv = a x_u + b x_v + R y, linear in the columns."""
    for node in range(problem.num_nodes):
        _check_clock(deadline, node)
        x = offsets[node] + np.arange(len(problem.node_costs[node]))
        rows.add(np.append(x, path_offset + node), np.append(-split.device_time[node], 1.0), 0.0, np.inf)
        rows.add(np.append(x, [z, path_offset + node]), np.append(-split.sync[node], [1.0, -1.0]), 0.0, np.inf)
    for j, (u, v) in enumerate(problem.edges):
        _check_clock(deadline, j)
        x_u = offsets[u] + np.arange(len(problem.node_costs[u]))
        x_v = offsets[v] + np.arange(len(problem.node_costs[v]))
        columns = [path_offset + u, path_offset + v, *x_u, *x_v]
        values = [1.0, -1.0, *(-split.row_part[j] - split.device_time[u]), *(-split.column_part[j])]
        if grids[j] is not None:
            nonzero = split.residual[j] > 0
            columns += list(grids[j][nonzero])
            values += list(-split.residual[j][nonzero])
        rows.add(columns, values, 0.0, np.inf)


def encode_load(load: LoadModel, problem: ConfigProblem, assignment) -> np.ndarray:
    """Column values of a plan (a warm start): x, y at the chosen pairs, p by longest path, z."""
    model = load.model
    values = np.zeros(model.num_columns)
    for node, choice in enumerate(assignment):
        values[model.node_offsets[node] + choice] = 1.0
    for (u, v), grid in zip(problem.edges, load.edge_columns):
        if grid is not None:
            values[grid[assignment[u], assignment[v]]] = 1.0
    tail = _tail_times(problem, assignment, _require_dag(problem), load.split)
    values[load.path_offset:load.path_offset + problem.num_nodes] = tail
    values[load.makespan_column] = load_breakdown(problem, assignment, load.split).makespan
    return values
