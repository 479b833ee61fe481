"""`ConfigProblem`: the solver-agnostic per-operator configuration problem.

Node i has k_i candidates; candidate c costs `node_costs[i][c]` seconds and puts
`node_memory[i][c]` bytes on each device of `node_devices[i][c]` (shards are equal, so one number
per candidate). Edge j joins nodes `edges[j] = (u, v)` and costs `edge_costs[j][cu, cv]` seconds.
The objective of an assignment is the sum of chosen node costs plus chosen edge costs; a memory
limit bounds, on every device, the sum of memory of the candidates placed on it.

`names[i]` and `candidates[i]` (ParallelConfig objects) let results be decoded to operators;
`members[i]` lists the original operators a (merged) node stands for. Planners only read arrays.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotations only: the HiGHS worker imports this module, and solver_plan.cost's
    # package (collectives, cluster, YAML) added ~0.1 s to each worker's start (issue 28)
    from solver_plan.cost.config import ParallelConfig


DENSE_MEMORY_ENTRIES = 20_000_000  # nodes x devices above which per-node tables are not materialised
# Devices a candidate uses on average up to which memory tables are computed over entries at once
# (`_few_devices_a_candidate`); a numpy call a candidate costs about what 64 entries do
ENTRIES_A_CANDIDATE = 64
_DEVICE_ARRAYS: dict[int, tuple] = {}  # id(node_devices) -> (node_devices, arrays), a few recent problems


@dataclass(frozen=True, eq=False)
class ConfigProblem:
    """The per-operator configuration problem: choose one candidate per node to minimise node plus edge
    costs (seconds), each device's memory within `memory_limit`. Arrays only, so every solver and
    heuristic reads the same thing; built from a graph and cluster by
    `intra.build.build_config_problem`."""
    names: tuple[str, ...]
    candidates: tuple[tuple[ParallelConfig, ...], ...]
    node_costs: tuple[np.ndarray, ...]  # (k_i,) seconds
    node_memory: tuple[np.ndarray, ...]  # (k_i,) bytes on each device the candidate uses
    node_devices: tuple[tuple[tuple[int, ...], ...], ...]  # per candidate, the devices it uses
    edges: tuple[tuple[int, int], ...]
    edge_costs: tuple[np.ndarray, ...]  # (k_u, k_v) seconds
    num_devices: int
    memory_limit: float | None = None  # bytes per device; None = unlimited
    members: tuple[tuple[str, ...], ...] = field(default=())
    name: str = "problem"
    # Where the problem came from, (graph, cluster, cost_model), for planners that must simulate a
    # plan (MCMC); solvers never read it. None for synthetic problems.
    context: Any = None
    # What building the problem had to give up (e.g. candidates cut at the time limit); shown with
    # every result on it.
    notes: tuple[str, ...] = ()
    # The candidates per operator the time limit cut the build to (None: every candidate the request
    # allows was built). A proof on a capped problem (optimal, infeasible) holds for the candidates
    # built, not for the request: `intra.solve` reports it as such.
    capped_candidates: int | None = None

    def __post_init__(self):
        n = len(self.names)
        for label, seq in (("candidates", self.candidates), ("node_costs", self.node_costs),
                           ("node_memory", self.node_memory), ("node_devices", self.node_devices)):
            if len(seq) != n:
                raise ValueError(f"ConfigProblem: {label} has {len(seq)} entries for {n} nodes")
        for i in range(n):
            k = len(self.node_costs[i])
            if k == 0:
                raise ValueError(f"ConfigProblem: node {self.names[i]!r} has no candidate")
            if len(self.node_memory[i]) != k or len(self.node_devices[i]) != k or len(self.candidates[i]) != k:
                raise ValueError(f"ConfigProblem: node {self.names[i]!r} candidate arrays differ in length")
        if len(self.edges) != len(self.edge_costs):
            raise ValueError("ConfigProblem: edges and edge_costs differ in length")
        for (u, v), matrix in zip(self.edges, self.edge_costs):
            if not (0 <= u < n and 0 <= v < n) or u == v:
                raise ValueError(f"ConfigProblem: bad edge ({u}, {v})")
            if matrix.shape != (len(self.node_costs[u]), len(self.node_costs[v])):
                raise ValueError(f"ConfigProblem: edge ({u}, {v}) matrix has shape {matrix.shape}")
        if not self.members:
            object.__setattr__(self, "members", tuple((name,) for name in self.names))

    # --- sizes -----------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        """Nodes (operators, or groups of operators) of the problem."""
        return len(self.names)

    @property
    def num_candidates(self) -> int:
        """Candidates over all nodes."""
        return sum(len(c) for c in self.node_costs)

    def with_memory_limit(self, memory_limit: float | None) -> "ConfigProblem":
        """The same problem under another memory limit (bytes per device; None: unlimited)."""
        from dataclasses import replace
        return replace(self, memory_limit=memory_limit)

    # --- evaluation (used by planners, validator and tests) --------------------------------
    def breakdown(self, assignment) -> tuple[float, float]:
        """(seconds in operators, seconds of redistribution between them) under an assignment."""
        operators = sum(float(self.node_costs[i][c]) for i, c in enumerate(assignment))
        edges = sum(float(m[assignment[u], assignment[v]]) for (u, v), m in zip(self.edges, self.edge_costs))
        return operators, edges

    def objective(self, assignment) -> float:
        """The sum objective of a plan: operator plus redistribution seconds. It cannot see overlap, so
        it is not a step time (see load_objective)."""
        return sum(self.breakdown(assignment))

    @functools.cached_property
    def device_arrays(self) -> tuple[tuple[np.ndarray, ...], ...]:
        """node_devices as index arrays (shared between equal device sets): memory bookkeeping on
        clusters of thousands of devices indexes with them instead of converting tuples each time."""
        cached = _DEVICE_ARRAYS.get(id(self.node_devices))
        if cached is not None and cached[0] is self.node_devices:  # same tuples (with_memory_limit, replace)
            return cached[1]
        shared: dict[tuple[int, ...], np.ndarray] = {}
        arrays = []
        for per_node in self.node_devices:
            row = []
            for devices in per_node:
                if devices not in shared:
                    shared[devices] = np.asarray(devices, dtype=np.int64)
                    shared[devices].setflags(write=False)
                row.append(shared[devices])
            arrays.append(tuple(row))
        if len(_DEVICE_ARRAYS) >= 8:
            _DEVICE_ARRAYS.pop(next(iter(_DEVICE_ARRAYS)))
        _DEVICE_ARRAYS[id(self.node_devices)] = (self.node_devices, tuple(arrays))  # keeps the key's object alive
        return tuple(arrays)

    @functools.cached_property
    def memory_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every (node, choice, device, bytes) of the problem as flat arrays, in node then choice
        order: memory bookkeeping over all nodes at once without a Python loop per candidate."""
        arrays = self.device_arrays
        counts = np.array([len(a) for per_node in arrays for a in per_node], dtype=np.int64)
        choices_per_node = np.array([len(per_node) for per_node in arrays], dtype=np.int64)
        node_of_choice = np.repeat(np.arange(self.num_nodes, dtype=np.int64), choices_per_node)
        choice_of = np.concatenate([np.arange(k, dtype=np.int64) for k in choices_per_node]) if self.num_nodes else \
            np.zeros(0, dtype=np.int64)
        amount = np.concatenate([np.asarray(m, dtype=float) for m in self.node_memory]) if self.num_nodes else \
            np.zeros(0)
        device = np.concatenate([a for per_node in arrays for a in per_node]) if counts.sum() else \
            np.zeros(0, dtype=np.int64)
        return (np.repeat(node_of_choice, counts), np.repeat(choice_of, counts), device, np.repeat(amount, counts))

    def least_memory_matrix(self) -> np.ndarray | None:
        """(nodes, devices): the memory each node must put on each device whatever it chooses (0
        where some candidate avoids the device); None when that matrix would be too big. Node by
        node: its least candidate memory on the devices every candidate uses (counted over a
        chunk of nodes at once: `_entry_chunks`)."""
        if self.num_nodes * self.num_devices > DENSE_MEMORY_ENTRIES:
            return None
        least = np.zeros((self.num_nodes, self.num_devices))
        if not self._few_devices_a_candidate:
            for node, (memory, devices) in enumerate(zip(self.node_memory, self.device_arrays)):
                common = devices[0]
                for other in devices[1:]:
                    if common.size == 0:
                        break
                    if other is not common:  # equal device sets share one array
                        common = np.intersect1d(common, other, assume_unique=True)
                if common.size:
                    least[node, common] = float(np.min(memory))
            return least
        all_counts, candidate_at = self._candidate_devices[2:4]
        for first, last, node, device, amount in self._entry_chunks():
            chunk = last - first
            covering = np.bincount(node * self.num_devices + device, minlength=chunk * self.num_devices)
            counts = all_counts[first:last]
            starts = candidate_at[first:last] - candidate_at[first]
            fewest = np.minimum.reduceat(np.concatenate(self.node_memory[first:last]).astype(float), starts)
            least[first:last] = np.where(covering.reshape(chunk, self.num_devices) == counts[:, None],
                                         fewest[:, None], 0.0)
        return least

    def worst_memory_per_device(self) -> np.ndarray:
        """Per device, the memory if every node took its most memory-hungry candidate there (computed
        once per problem; a copy)."""
        return self._worst_memory.copy()

    @functools.cached_property
    def _worst_memory(self) -> np.ndarray:
        """`worst_memory_per_device`: per node and device, the largest memory of the node's
        candidates on it (at least 0), added up node by node (the order the sums had when this was
        a loop per node and candidate, so the same bits). A chunk of nodes at a time
        (`_entry_chunks`), without all (node, candidate, device) entries at once (7 million on
        1,024 devices)."""
        total = np.zeros(self.num_devices)
        if not self._few_devices_a_candidate:
            buffer = np.zeros(self.num_devices)
            for memory, devices in zip(self.node_memory, self.device_arrays):
                buffer[:] = 0.0
                for choice in np.argsort(memory, kind="stable"):  # the largest covering a device stays
                    buffer[devices[choice]] = max(float(memory[choice]), 0.0)
                total += buffer
            return total
        for first, last, node, device, amount in self._entry_chunks():
            largest = np.zeros((last - first) * self.num_devices)
            np.maximum.at(largest, node * self.num_devices + device, amount)
            for row in largest.reshape(last - first, self.num_devices):
                total += row
        return total

    @functools.cached_property
    def _candidate_devices(self) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every candidate's device array node by node, their lengths, each node's candidate count,
        where each node's candidates start, and the entries (candidate, device) up to each node."""
        flat = [a for per_node in self.device_arrays for a in per_node]
        lengths = np.fromiter(map(len, flat), dtype=np.int64, count=len(flat))
        counts = np.fromiter(map(len, self.node_costs), dtype=np.int64, count=self.num_nodes)
        candidate_at = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        through = np.cumsum(np.add.reduceat(lengths, candidate_at[:-1])) if len(flat) else np.zeros(0, dtype=np.int64)
        return flat, lengths, counts, candidate_at, through

    def candidate_devices(self, node: int) -> tuple[np.ndarray, np.ndarray] | None:
        """The devices of `node`'s candidates end to end, and where each candidate's start among
        them (for one `np.maximum.reduceat` over all the node's candidates); None where one of them
        uses no device (`reduceat` would not see its empty set). Slices of one array for the whole
        problem where candidates use few devices, else joined per call."""
        flat, lengths, counts, candidate_at, through = self._candidate_devices
        low, high = int(candidate_at[node]), int(candidate_at[node + 1])
        if self._few_devices_a_candidate:
            devices, entry_at, empty = self._device_entries
            if empty[node]:
                return None
            first = entry_at[low]
            return devices[first:entry_at[high]], entry_at[low:high] - first
        if not lengths[low:high].all():
            return None
        return np.concatenate(flat[low:high]), np.concatenate([[0], np.cumsum(lengths[low:high - 1])])

    @functools.cached_property
    def _device_entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every candidate's devices end to end, where each candidate's start (and the end), and
        whether each node has a candidate without devices."""
        flat, lengths, counts, candidate_at, through = self._candidate_devices
        entry_at = np.concatenate([[0], np.cumsum(lengths)]).astype(np.intp)
        return np.concatenate(flat), entry_at, np.minimum.reduceat(lengths, candidate_at[:-1]) == 0

    @functools.cached_property
    def _few_devices_a_candidate(self) -> bool:
        """Whether the memory tables are computed over (node, candidate, device) entries, a chunk of
        nodes at a time, rather than node by node with one numpy call a candidate: where candidates
        use few devices each (random-dag:nodes=10000, 16 devices, 3.5 a candidate:
        `_worst_memory` 0.15 -> 0.04 s, `least_memory_matrix` 0.07 -> 0.03 s of CPU; megatron-1T
        on 3,072 devices, ~1,500 a candidate: 0.13 -> 0.20 s and 0.08 -> 0.36 s, so not there)."""
        flat, lengths = self._candidate_devices[:2]
        return len(flat) > 0 and int(lengths.sum()) <= ENTRIES_A_CANDIDATE * len(flat)

    def _entry_chunks(self, entries: int = 1 << 20):
        """(first node, last node + 1, node - first, device, bytes) for every (node, candidate,
        device) of consecutive nodes, about `entries` entries a chunk (at least one node)."""
        flat, lengths, counts, candidate_at, through = self._candidate_devices
        ends = np.unique(np.concatenate([np.searchsorted(through, np.arange(entries, through[-1], entries), side="right"),
                                         [self.num_nodes]])) if self.num_nodes else []
        first = 0
        for last in (int(end) for end in ends):
            last = max(last, first + 1)
            low, high = candidate_at[first], candidate_at[last]
            device = np.concatenate(flat[low:high]) if high > low else np.zeros(0, dtype=np.int64)
            amount = np.repeat(np.concatenate(self.node_memory[first:last]).astype(float), lengths[low:high])
            node = np.repeat(np.repeat(np.arange(last - first), counts[first:last]), lengths[low:high])
            yield first, last, node, device, amount
            first = last
            if first >= self.num_nodes:
                break

    def device_memory(self, assignment) -> np.ndarray:
        """Bytes on each device under an assignment. Operators on one device array (`device_arrays`
        shares the equal ones) are summed first, then each sum added to its devices once (a
        configuration's devices are distinct): megatron-1T's 1,544 operators over 3,072 devices use
        three arrays, 3.1 million entries that one bincount took 0.05 s to add."""
        arrays = self.device_arrays
        sums: dict[int, list] = {}
        for i, c in enumerate(assignment):
            devices, amount = arrays[i][c], float(self.node_memory[i][c])
            found = sums.get(id(devices))
            if found is None:
                sums[id(devices)] = [devices, amount]
            else:
                found[1] += amount
        memory = np.zeros(self.num_devices)
        for devices, amount in sums.values():
            memory[devices] += amount
        return memory

    def memory_ok(self, assignment, tolerance: float = 1e-6) -> bool:
        """Whether no device holds more than the memory limit (relative `tolerance`) under the plan."""
        if self.memory_limit is None:
            return True
        return bool(self.device_memory(assignment).max() <= self.memory_limit * (1 + tolerance))

    def neighbours(self) -> list[list[tuple[int, int, bool]]]:
        """For each node, (edge index, other node, node is the edge's source)."""
        adjacency: list[list[tuple[int, int, bool]]] = [[] for _ in range(self.num_nodes)]
        for j, (u, v) in enumerate(self.edges):
            adjacency[u].append((j, v, True))
            adjacency[v].append((j, u, False))
        return adjacency
