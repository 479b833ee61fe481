"""Seeded generators of per-operator problems that do not fold (`ProblemSpec` -> `ConfigProblem`).

Shapes (n nodes):
- random-dag: node v > 0 joins a parent among the 4 nodes before it (so the graph is connected),
  plus n/2 extra edges u -> v with u uniform over *all* earlier nodes. The long-range edges leave
  no ordering with a small frontier, so elimination cannot fold the graph.
- series-parallel: a two-terminal series-parallel DAG grown by subdividing edges and adding
  parallel branches, plus n/10 cross edges forward in a topological order, which break the
  series-parallel structure that node/edge elimination would otherwise fold to two nodes.
- skip-chain: the chain 0 -> 1 -> ... -> n-1 plus, from each node with probability 0.3, a skip edge
  i -> i + s with s uniform in 2..16 (residual connections of varying reach).

Candidates are (device block, split) pairs: the aligned power-of-two blocks of the D devices (D of
width 1, D/2 of width 2, ..., one of width D) times the splits "sample" and "attribute". Every node
has the spread candidate (all devices, sample) and k - 1 others drawn without replacement.
- node cost (s) = compute_v * u(0.8, 1.2) / w + comm_v[split] * log2(w): compute shrinks with the
  width w, collectives grow with it, so each node has its own best width (compute_v ~ u(1, 10),
  comm_v[split] = compute_v * r with r log-uniform in [0.05, 2], drawn per split);
- edge cost (s) = t_e * u(0.8, 1.2) * overlap, t_e ~ u(0.1, 0.5) * (compute_u + compute_v) / 2 and
  overlap 0 for equal candidates (nothing to redistribute), 0.5 for the same block split otherwise,
  0.75 for nested blocks, 1 for disjoint ones;
- memory per used device (bytes) = ceil(S_v * f / w), S_v = D * u{1..1000} MiB, f = 1 for the two
  all-device candidates and u(1, 1.5) for the others (replicated state).
The least possible peak memory is then exactly M* = sum_v S_v / D: each node puts at least S_v bytes
on the devices (f >= 1), so the busiest device holds at least the average sum_v S_v / D, and
spreading every node attains it on every device. Memory limits: `binding` = M* + 0.5 (P - M*), P the
peak of the plan taking each node's cheapest candidate (which therefore breaks it, while spreading
fits); `infeasible` = 0.98 M* (no plan fits, by the argument above).
"""
from __future__ import annotations

import graphlib
import math

import numpy as np

from solver_plan.cost.config import ParallelConfig
from solver_plan.intra.problem import ConfigProblem
from solver_plan.suite.draws import advance, choices_without_replacement, lemire, uint32_outputs
from solver_plan.suite.spec import ProblemSpec, parse_problem_spec
from solver_plan.units import MIB

BINDING_FRACTION = 0.5  # of the way from the least possible peak to the cheapest plan's peak
INFEASIBLE_FRACTION = 0.98  # of the least possible peak
SPLITS = ("sample", "attribute")


class GenerationExpired(Exception):
    """The deadline passed while a problem was being generated (a 10,000-node problem takes seconds)."""


# Nominal seconds per node or edge generated (its random draws and arithmetic, vectorised): measured
# 0.23-0.29 s CPU for random-dag:nodes=10000,candidates=10-30,devices=16 (10,000 nodes, 14,979 edges;
# shared 2-core machine at load 2-3; 0.55-0.57 s with the loop per node and edge it replaced, charged
# 2.5e-5 an item). Charged to a job's nominal budget, so its planner plans with what is left.
GENERATE_S_PER_ITEM = 1.2e-5
EDGE_CHUNK = 200  # edges whose cost matrices are computed at once (measured: 200 in 0.12 s, 1,000 in 0.18 s)


def generation_seconds(problem: ConfigProblem) -> float:
    """The nominal seconds generating `problem` took (GENERATE_S_PER_ITEM per node and edge):
    a fixed estimate, the same on an idle or a loaded machine."""
    return GENERATE_S_PER_ITEM * (problem.num_nodes + len(problem.edges))


def resolve_problem(spec: str, deadline=None) -> ConfigProblem:
    """The problem a MODEL spec names (InputError for a bad spec); `GenerationExpired` when
    `deadline` (a `Deadline`) passes first."""
    return generate(parse_problem_spec(spec), deadline)


def _check_clock(deadline) -> None:
    if deadline is not None and deadline.expired():
        raise GenerationExpired()


def generate(spec: ProblemSpec, deadline=None) -> ConfigProblem:
    """The problem `spec` names, the same bit for bit for equal specs (see the module text for its costs
    and memory); `GenerationExpired` when `deadline` passes first.
    The draws are those of a loop per node, then per edge, in that order (each node: its candidates
    without replacement; then each node: its cost noise, its memory factors; then each edge: its
    scale, its noise matrix), taken in one call per kind and split: `Generator.uniform(low, high)`
    is low + (high - low) x `random()`, so the numbers are the loop's to the bit."""
    rng = np.random.default_rng([spec.seed, spec.nodes, spec.devices, spec.min_candidates, spec.max_candidates,
                                 ("random-dag", "series-parallel", "skip-chain").index(spec.family)])
    n, devices = spec.nodes, spec.devices
    edges = SHAPES[spec.family](n, rng)
    _check_clock(deadline)
    pairs = candidate_pairs(devices)
    counts = rng.integers(spec.min_candidates, spec.max_candidates + 1, size=n)
    chosen = _chosen(rng, len(pairs), counts)
    _check_clock(deadline)
    compute = rng.uniform(1.0, 10.0, size=n)
    comm = compute[:, None] * np.exp(rng.uniform(np.log(0.05), np.log(2.0), size=(n, len(SPLITS))))
    size = devices * rng.integers(1, 1001, size=n).astype(float) * MIB
    widths = np.array([len(block) for block, _ in pairs], dtype=float)
    pair_split = np.array([SPLITS.index(split) for _, split in pairs])
    # per candidate of every node, node by node (the loop's order): its node and its pair
    node_of = np.repeat(np.arange(n), counts)
    ids = chosen[np.arange(chosen.shape[1]) < counts[:, None]]
    starts = np.concatenate([[0], np.cumsum(counts)])
    draws = rng.random(2 * len(ids))  # node v: its k_v cost noises, then its k_v memory factors
    noise_at = starts[node_of] + np.arange(len(ids))  # 2 starts[v] + (its index - starts[v])
    noise = 0.8 + (1.2 - 0.8) * draws[noise_at]
    costs = compute[node_of] * noise / widths[ids] + comm[node_of, pair_split[ids]] * np.log2(widths)[ids]
    extra = np.where(widths[ids] == devices, 1.0, 1.0 + (1.5 - 1.0) * draws[noise_at + counts[node_of]])
    memory = np.ceil(size[node_of] * extra / widths[ids])
    node_costs, node_memory = _split(costs, starts), _split(memory, starts)
    _check_clock(deadline)
    edge_costs = _edge_costs(rng, edges, chosen, counts, compute, overlap_matrix(pairs), deadline)
    configs = [ParallelConfig(((split, len(block)),), block) for block, split in pairs]  # shared: 2 x 10^5
    # candidates of a 10,000-node problem are 62 distinct configurations (building each anew took 2.3 s)
    rows = [row[:k] for row, k in zip(chosen.tolist(), counts.tolist())]
    blocks = [block for block, _ in pairs]
    # the per-node cheapest plan's bytes per device (memory_limit), as ConfigProblem.device_memory adds them
    padded = np.full(chosen.shape, np.inf)
    padded[np.arange(chosen.shape[1]) < counts[:, None]] = costs
    cheapest = starts[:-1] + np.argmin(padded, axis=1)  # np.argmin per node: its first least cost
    first = np.array([block[0] for block in blocks])[ids[cheapest]]
    width = widths[ids[cheapest]].astype(np.int64)
    used = np.repeat(first - (np.cumsum(width) - width), width) + np.arange(int(width.sum()))
    cheapest_usage = np.bincount(used, weights=np.repeat(memory[cheapest], width), minlength=devices)
    return ConfigProblem(
        names=tuple(f"op{v}" for v in range(n)),
        candidates=tuple(tuple(map(configs.__getitem__, row)) for row in rows),
        node_costs=tuple(node_costs), node_memory=tuple(node_memory),
        node_devices=tuple(tuple(map(blocks.__getitem__, row)) for row in rows),
        edges=tuple(edges), edge_costs=tuple(edge_costs), num_devices=devices, name=spec_name(spec),
        memory_limit=memory_limit(spec.memory, float(size.sum()) / devices, float(cheapest_usage.max())))


def _chosen(rng: np.random.Generator, num_pairs: int, counts: np.ndarray) -> np.ndarray:
    """(nodes, most candidates): node v's pair indices in its first counts[v] entries (-1 after),
    the spread pair 0 first and counts[v] - 1 others drawn without replacement, node by node."""
    picks = choices_without_replacement(rng, num_pairs - 1, counts - 1)
    if picks is None:  # a draw the vectorised route cannot reproduce: the loop itself
        loop = [rng.choice(num_pairs - 1, size=k - 1, replace=False) for k in counts]
        picks = np.full((len(counts), int(counts.max()) - 1), -1, dtype=np.int64)
        for row, values in zip(picks, loop):
            row[:len(values)] = values
    chosen = np.zeros((len(counts), picks.shape[1] + 1), dtype=np.int64)
    chosen[:, 1:] = np.where(picks >= 0, picks + 1, -1)
    return chosen


def _edge_costs(rng, edges, chosen, counts, compute, overlap, deadline) -> list[np.ndarray]:
    """Each edge's (k_u, k_v) cost matrix (module text), EDGE_CHUNK edges at a time: edge e's draws
    are its scale, then its k_u x k_v noises row by row, as the loop per edge drew them."""
    out: list[np.ndarray] = []
    ends = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    width, flat_overlap = overlap.shape[0], overlap.ravel()
    for first in range(0, len(ends), EDGE_CHUNK):
        _check_clock(deadline)
        u, v = ends[first:first + EDGE_CHUNK, 0], ends[first:first + EDGE_CHUNK, 1]
        rows, cols = counts[u], counts[v]
        cells = rows * cols
        scale_at = np.concatenate([[0], np.cumsum(1 + cells)[:-1]])  # edge e's draws start with its scale
        draws = rng.random(int(scale_at[-1] + 1 + cells[-1]))
        scale = (0.1 + (0.5 - 0.1) * draws[scale_at]) * (compute[u] + compute[v]) / 2
        is_noise = np.ones(len(draws), dtype=bool)
        is_noise[scale_at] = False
        noise = 0.8 + (1.2 - 0.8) * draws[is_noise]
        # one entry per (edge, row of its matrix), then one per cell, row by row
        edge_of_row = np.repeat(np.arange(len(u)), rows)
        row = np.arange(len(edge_of_row)) - np.repeat(np.cumsum(rows) - rows, rows)
        row_cols = cols[edge_of_row]
        col = np.arange(int(cells.sum())) - np.repeat(np.cumsum(row_cols) - row_cols, row_cols)
        pair_pair = np.repeat(chosen[u[edge_of_row], row] * width, row_cols) + chosen[np.repeat(v[edge_of_row], row_cols), col]
        costs = np.repeat(scale[edge_of_row], row_cols) * noise * flat_overlap[pair_pair]
        out.extend(costs[end - size:end].reshape(r, size // r)
                   for end, size, r in zip(np.cumsum(cells).tolist(), cells.tolist(), rows.tolist()))
    return out


def _split(values: np.ndarray, starts: np.ndarray) -> list[np.ndarray]:
    """`values` cut at `starts` (with 0 and len(values) at its ends) into views."""
    bounds = starts.tolist()
    return [values[a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def candidate_pairs(devices: int) -> list[tuple[tuple[int, ...], str]]:
    """(device block, split) pairs, the spread candidate (all devices, sample) first."""
    blocks = [tuple(range(start, start + width)) for width in (2 ** p for p in range(int(math.log2(devices)), -1, -1))
              for start in range(0, devices, width)]
    return [(block, split) for block in blocks for split in SPLITS]


def overlap_matrix(pairs) -> np.ndarray:
    """Share of the data to redistribute between two candidates (see the module docstring)."""
    matrix = np.ones((len(pairs), len(pairs)))
    for a, (block_a, split_a) in enumerate(pairs):
        for b, (block_b, split_b) in enumerate(pairs):
            if block_a == block_b:
                matrix[a, b] = 0.0 if split_a == split_b else 0.5
            elif set(block_a) <= set(block_b) or set(block_b) <= set(block_a):
                matrix[a, b] = 0.75
    return matrix


def memory_limit(level: str, least_peak: float, cheapest_peak: float) -> float | None:
    """The memory limit of `level` given the least possible peak M* and the per-node cheapest plan's
    peak P: None, 0.98 M* ("infeasible") or M* + 0.5 (P - M*) ("binding")."""
    if level == "none":
        return None
    if level == "infeasible":
        return math.floor(INFEASIBLE_FRACTION * least_peak)
    return math.ceil(least_peak + BINDING_FRACTION * max(0.0, cheapest_peak - least_peak))


def spec_name(spec: ProblemSpec) -> str:
    """The canonical model spec of `spec` (every key written out), used as the problem's name."""
    candidates = (f"{spec.min_candidates}" if spec.min_candidates == spec.max_candidates
                  else f"{spec.min_candidates}-{spec.max_candidates}")
    return (f"{spec.family}:nodes={spec.nodes},candidates={candidates},seed={spec.seed},memory={spec.memory},"
            f"devices={spec.devices}")


def random_dag_edges(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Edges of a connected random DAG on n nodes with n/2 long-range edges (see the module text):
    `_random_dag_edges_at_once` where it can follow these draws, else this loop itself."""
    edges = _random_dag_edges_at_once(n, rng) if isinstance(rng.bit_generator, np.random.PCG64) else None
    if edges is not None:
        return edges
    edges = {(int(rng.integers(max(0, v - 4), v)), v) for v in range(1, n)}
    for _ in range(n // 2):
        v = int(rng.integers(1, n))
        edges.add((int(rng.integers(0, v)), v))
    return sorted(edges)


def _random_dag_edges_at_once(n: int, rng: np.random.Generator) -> list[tuple[int, int]] | None:
    """`random_dag_edges`'s draws taken from the generator's 32-bit outputs at once (suite/draws.py:
    a scalar `integers(low, high)` is one Lemire draw in 0..high - 1 - low, none where that range is
    0): node v's parent for v = 2..n-1 (node 1's is 0), then n // 2 pairs of v in 1..n-1 and u in
    0..v-1, u drawing nothing where v is 1. None (`rng` untouched) where numpy would reject a draw."""
    if n <= 2:  # every range is 0: no draw
        return [(0, 1)]
    nodes = np.arange(2, n)
    low = np.maximum(0, nodes - 4)
    outputs, state = uint32_outputs(rng, len(nodes) + 2 * (n // 2))
    offset, rejected = lemire(outputs[:len(nodes)], (nodes - 1 - low).astype(np.uint64))
    rest = outputs[len(nodes):]
    v_at, v_rejected = lemire(rest, np.full(len(rest), n - 2, dtype=np.uint64))
    v_at += 1
    at, position = [], 0
    for _ in range(n // 2):  # where each pair's v is drawn: after the previous pair's v, and its u unless v was 1
        at.append(position)
        position += 1 + (v_at[position] > 1)
    v = v_at[at]
    draws_u = v > 1
    u_at = np.array(at)[draws_u] + 1
    u_drawn, u_rejected = lemire(rest[u_at], (v[draws_u] - 1).astype(np.uint64))
    u = np.zeros(len(v), dtype=np.int64)
    u[draws_u] = u_drawn
    if rejected.any() or v_rejected[at].any() or u_rejected.any():
        return None
    advance(rng, state, len(nodes) + position)
    keys = np.unique(np.concatenate([[1], (low + offset) * n + nodes, u * n + v]))  # (0, 1) is key 1
    return list(zip((keys // n).tolist(), (keys % n).tolist()))


def series_parallel_edges(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Edges of a random series-parallel DAG on n nodes plus n/10 forward cross edges."""
    edges = [(0, 1)]
    for new in range(2, n):
        j = int(rng.integers(len(edges)))
        u, v = edges[j]
        if rng.random() < 0.5:
            edges[j] = (u, new)  # series: u -> new -> v replaces u -> v
        else:
            edges.append((u, new))  # parallel: a branch u -> new -> v beside u -> v
        edges.append((new, v))
    sorter = graphlib.TopologicalSorter()
    for u, v in edges:
        sorter.add(v, u)
    order = list(sorter.static_order())
    present = set(edges)
    for _ in range(n // 10):
        a, b = sorted(int(x) for x in rng.choice(n, size=2, replace=False))
        present.add((order[a], order[b]))  # forward in topological order: stays acyclic
    return sorted(present)


def skip_chain_edges(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Edges of the chain 0 -> ... -> n-1 plus random skip edges of reach 2..16."""
    edges = [(i, i + 1) for i in range(n - 1)]
    for i in range(n):
        reach = int(rng.integers(2, 17))
        if rng.random() < 0.3 and i + reach < n:
            edges.append((i, i + reach))
    return edges


SHAPES = {"random-dag": random_dag_edges, "series-parallel": series_parallel_edges, "skip-chain": skip_chain_edges}
