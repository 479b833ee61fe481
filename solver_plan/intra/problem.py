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
        node: its least candidate memory on the devices every candidate uses."""
        if self.num_nodes * self.num_devices > DENSE_MEMORY_ENTRIES:
            return None
        least = np.zeros((self.num_nodes, self.num_devices))
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

    def worst_memory_per_device(self) -> np.ndarray:
        """Per device, the memory if every node took its most memory-hungry candidate there (computed
        once per problem; a copy)."""
        return self._worst_memory.copy()

    @functools.cached_property
    def _worst_memory(self) -> np.ndarray:
        """`worst_memory_per_device`: node by node, its candidates written onto a per-device buffer in
        increasing memory (the largest covering a device stays), added up. One pass over the
        candidates, without the (node, candidate, device) entries (7 million on 1,024 devices)."""
        total = np.zeros(self.num_devices)
        buffer = np.zeros(self.num_devices)
        for memory, devices in zip(self.node_memory, self.device_arrays):
            buffer[:] = 0.0
            for choice in np.argsort(memory, kind="stable"):
                buffer[devices[choice]] = max(float(memory[choice]), 0.0)
            total += buffer
        return total

    def device_memory(self, assignment) -> np.ndarray:
        """Bytes on each device under an assignment."""
        arrays = self.device_arrays
        used = [arrays[i][c] for i, c in enumerate(assignment)]
        amounts = np.repeat([float(self.node_memory[i][c]) for i, c in enumerate(assignment)], [len(u) for u in used])
        used = np.concatenate(used) if used else np.zeros(0, dtype=np.int64)
        return np.bincount(used, weights=amounts, minlength=self.num_devices).astype(float)

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
