"""Seeded random `ConfigProblem`s for tests and benchmarks.

Shapes: "chain", "series_parallel" (built by series and parallel composition, so node/edge
elimination reduces it to two nodes) and "dag" (random forward edges, generally not
series-parallel). Costs are random seconds; memory is integer bytes per device so exact models can
compare memory without rounding.
"""
from __future__ import annotations

import numpy as np

from solver_plan.cost.config import ParallelConfig
from solver_plan.errors import InputError
from solver_plan.intra.problem import ConfigProblem

SHAPES = ("chain", "series_parallel", "dag")


def _series_parallel_edges(num_nodes: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Grow a two-terminal series-parallel DAG by subdividing edges (series) and adding branches
    between the ends of an existing edge (parallel)."""
    edges = [(0, 1)]
    for new in range(2, num_nodes):
        u, v = edges[int(rng.integers(len(edges)))]
        if rng.random() < 0.5:
            edges.remove((u, v))  # series: u -> new -> v replaces u -> v
            edges += [(u, new), (new, v)]
        else:
            edges += [(u, new), (new, v)]  # parallel branch beside u -> v
    return edges


def _dag_edges(num_nodes: int, rng: np.random.Generator, extra_edge_ratio: float) -> list[tuple[int, int]]:
    """A connected random DAG: a random tree towards earlier nodes plus extra forward edges."""
    edges = {(int(rng.integers(max(0, v - 4), v)), v) for v in range(1, num_nodes)}
    for _ in range(int(extra_edge_ratio * num_nodes)):
        v = int(rng.integers(1, num_nodes)) if num_nodes > 1 else 0
        if v == 0:
            continue
        edges.add((int(rng.integers(max(0, v - 6), v)), v))
    return sorted(edges)


def _candidates(num: int, num_devices: int, rng: np.random.Generator):
    """Candidates: data parallel over all devices, everything on device 0, then random
    data-parallel degrees over contiguous blocks of devices."""
    blocks = [tuple(range(num_devices)), (0,)]
    while len(blocks) < num:
        width = int(2 ** rng.integers(0, int(np.log2(num_devices)) + 1))
        start = int(rng.integers(0, num_devices - width + 1))
        blocks.append(tuple(range(start, start + width)))
    blocks = blocks[:num]
    configs = tuple(ParallelConfig((("sample", len(used)),), used) for used in blocks)
    return configs, tuple(blocks)


def random_problem(num_nodes: int, *, seed: int = 0, shape: str = "dag", min_candidates: int = 2,
                   max_candidates: int = 5, num_devices: int = 4, memory_tightness: float | None = None,
                   extra_edge_ratio: float = 0.3, zero_diagonal: bool = True) -> ConfigProblem:
    """A random instance. `memory_tightness` in (0, 1] sets the limit between the least possible
    busiest-device memory (roughly 0) and the memory of the worst plan (1); None = no limit."""
    if shape not in SHAPES:
        raise InputError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES)}", "shape")
    if num_nodes < 1:
        raise InputError("need at least one node", "num_nodes")
    rng = np.random.default_rng(seed)
    if shape == "chain" or num_nodes == 1:
        edges = [(i, i + 1) for i in range(num_nodes - 1)]
    elif shape == "series_parallel":
        edges = _series_parallel_edges(num_nodes, rng)
    else:
        edges = _dag_edges(num_nodes, rng, extra_edge_ratio)
    sizes = rng.integers(min_candidates, max_candidates + 1, size=num_nodes)
    node_costs = tuple(np.round(rng.uniform(0.0, 10.0, size=k), 3) for k in sizes)
    node_memory = tuple(rng.integers(1, 100, size=k).astype(float) for k in sizes)
    candidate_sets = [_candidates(int(k), num_devices, rng) for k in sizes]
    edge_costs = []
    for u, v in edges:
        matrix = np.round(rng.uniform(0.0, 8.0, size=(sizes[u], sizes[v])), 3)
        if zero_diagonal:  # matching configurations need no redistribution, as in real graphs
            diagonal = min(sizes[u], sizes[v])
            matrix[np.arange(diagonal), np.arange(diagonal)] = 0.0
        edge_costs.append(matrix)
    memory_limit = None
    if memory_tightness is not None:
        worst = np.zeros(num_devices)
        for memory, (_, devices) in zip(node_memory, candidate_sets):
            per_device = np.zeros(num_devices)
            for used, amount in zip(devices, memory):
                per_device[list(used)] = np.maximum(per_device[list(used)], amount)
            worst += per_device
        memory_limit = float(np.floor(memory_tightness * worst.max()))
    return ConfigProblem(
        names=tuple(f"op{i}" for i in range(num_nodes)),
        candidates=tuple(c for c, _ in candidate_sets),
        node_costs=node_costs,
        node_memory=node_memory,
        node_devices=tuple(d for _, d in candidate_sets),
        edges=tuple(edges),
        edge_costs=tuple(edge_costs),
        num_devices=num_devices,
        memory_limit=memory_limit,
        name=f"random-{shape}-{num_nodes}-s{seed}",
    )
