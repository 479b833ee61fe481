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
from solver_plan.suite.spec import ProblemSpec, parse_problem_spec
from solver_plan.units import MIB

BINDING_FRACTION = 0.5  # of the way from the least possible peak to the cheapest plan's peak
INFEASIBLE_FRACTION = 0.98  # of the least possible peak
SPLITS = ("sample", "attribute")


class GenerationExpired(Exception):
    """The deadline passed while a problem was being generated (a 10,000-node problem takes seconds)."""


CHECK_EVERY = 1000  # nodes or edges generated between two looks at the clock
# Nominal seconds per node or edge generated (one loop step each, with its random draws): measured
# 0.55-0.57 s CPU for random-dag:nodes=10000,candidates=10-30 (10,000 nodes, 14,979 edges; shared
# 2-core machine). Charged to a job's nominal budget, so its planner plans with what is left.
GENERATE_S_PER_ITEM = 2.5e-5


def generation_seconds(problem: ConfigProblem) -> float:
    """The nominal seconds generating `problem` took (GENERATE_S_PER_ITEM per node and edge):
    a fixed estimate, the same on an idle or a loaded machine."""
    return GENERATE_S_PER_ITEM * (problem.num_nodes + len(problem.edges))


def resolve_problem(spec: str, deadline=None) -> ConfigProblem:
    """The problem a MODEL spec names (InputError for a bad spec); `GenerationExpired` when
    `deadline` (a `Deadline`) passes first."""
    return generate(parse_problem_spec(spec), deadline)


def _check_clock(deadline, index: int) -> None:
    if deadline is not None and index % CHECK_EVERY == 0 and deadline.expired():
        raise GenerationExpired()


def generate(spec: ProblemSpec, deadline=None) -> ConfigProblem:
    """The problem `spec` names, the same bit for bit for equal specs (see the module text for its costs
    and memory); `GenerationExpired` when `deadline` passes first."""
    rng = np.random.default_rng([spec.seed, spec.nodes, spec.devices, spec.min_candidates, spec.max_candidates,
                                 ("random-dag", "series-parallel", "skip-chain").index(spec.family)])
    n, devices = spec.nodes, spec.devices
    edges = SHAPES[spec.family](n, rng)
    pairs = candidate_pairs(devices)
    counts = rng.integers(spec.min_candidates, spec.max_candidates + 1, size=n)
    chosen = [np.concatenate([[0], 1 + rng.choice(len(pairs) - 1, size=k - 1, replace=False)]) for k in counts]
    compute = rng.uniform(1.0, 10.0, size=n)
    comm = compute[:, None] * np.exp(rng.uniform(np.log(0.05), np.log(2.0), size=(n, len(SPLITS))))
    size = devices * rng.integers(1, 1001, size=n).astype(float) * MIB
    widths = np.array([len(block) for block, _ in pairs], dtype=float)
    # per pair, looked up by index: the same numbers as computing them per node, a third of the time
    pair_split = np.array([SPLITS.index(split) for _, split in pairs])
    log_widths = np.log2(widths)
    overlap = overlap_matrix(pairs)
    node_costs, node_memory = [], []
    for v, ids in enumerate(chosen):
        _check_clock(deadline, v)
        node_costs.append(compute[v] * rng.uniform(0.8, 1.2, size=len(ids)) / widths[ids]
                          + comm[v, pair_split[ids]] * log_widths[ids])
        extra = np.where(widths[ids] == devices, 1.0, rng.uniform(1.0, 1.5, size=len(ids)))
        node_memory.append(np.ceil(size[v] * extra / widths[ids]))
    edge_costs = []
    for index, (u, v) in enumerate(edges):
        _check_clock(deadline, index)
        scale = rng.uniform(0.1, 0.5) * (compute[u] + compute[v]) / 2
        noise = rng.uniform(0.8, 1.2, size=(len(chosen[u]), len(chosen[v])))
        edge_costs.append(scale * noise * overlap[chosen[u][:, None], chosen[v]])
    configs = [ParallelConfig(((split, len(block)),), block) for block, split in pairs]  # shared: 2 x 10^5
    # candidates of a 10,000-node problem are 62 distinct configurations (building each anew took 2.3 s)
    problem = ConfigProblem(
        names=tuple(f"op{v}" for v in range(n)),
        candidates=tuple(tuple(configs[i] for i in ids) for ids in chosen),
        node_costs=tuple(node_costs), node_memory=tuple(node_memory),
        node_devices=tuple(tuple(pairs[i][0] for i in ids) for ids in chosen),
        edges=tuple(edges), edge_costs=tuple(edge_costs), num_devices=devices, name=spec_name(spec))
    return problem.with_memory_limit(memory_limit(problem, spec.memory, float(size.sum()) / devices))


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


def memory_limit(problem: ConfigProblem, level: str, least_peak: float) -> float | None:
    """The memory limit of `level` given the least possible peak M*: None, 0.98 M* ("infeasible") or M* +
    0.5 (P - M*) with P the per-node cheapest plan's peak ("binding")."""
    if level == "none":
        return None
    if level == "infeasible":
        return math.floor(INFEASIBLE_FRACTION * least_peak)
    cheapest = tuple(int(np.argmin(costs)) for costs in problem.node_costs)
    peak = float(problem.device_memory(cheapest).max())
    return math.ceil(least_peak + BINDING_FRACTION * max(0.0, peak - least_peak))


def spec_name(spec: ProblemSpec) -> str:
    """The canonical model spec of `spec` (every key written out), used as the problem's name."""
    candidates = (f"{spec.min_candidates}" if spec.min_candidates == spec.max_candidates
                  else f"{spec.min_candidates}-{spec.max_candidates}")
    return (f"{spec.family}:nodes={spec.nodes},candidates={candidates},seed={spec.seed},memory={spec.memory},"
            f"devices={spec.devices}")


def random_dag_edges(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """Edges of a connected random DAG on n nodes with n/2 long-range edges (see the module text)."""
    edges = {(int(rng.integers(max(0, v - 4), v)), v) for v in range(1, n)}
    for _ in range(n // 2):
        v = int(rng.integers(1, n))
        edges.add((int(rng.integers(0, v)), v))
    return sorted(edges)


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
