"""Time building every node cost and edge matrix of a synthetic transformer-like graph.

    python scripts/bench_cost.py [--layers 80] [--devices 16] [--cluster p100-4x4]

Each layer is ~12 operators (layernorm, q/k/v projections, attention, output projection, residual
adds, MLP), so 80 layers give ~1,000 operators. Prints operator, candidate and edge counts and the
time for (a) all candidates, (b) all node costs, (c) all edge matrices; then the time to price one
collective on groups of 8 to 4,096 devices and the predicted time of a 1 GB collective.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from solver_plan.cluster import resolve_cluster
from solver_plan.cost import CostModel, enumerate_configs
from solver_plan.cost.collectives import KINDS, collective_time
from solver_plan.graph import Graph, GraphBuilder


def transformer(layers: int, batch: int = 16, seq: int = 128, hidden: int = 512, heads: int = 8) -> Graph:
    b = GraphBuilder("bench-transformer")
    x = b.embedding(b.input((batch, seq), name="tokens"), 32000, hidden, name="embed")
    for i in range(layers):
        with b.scope(f"layer{i}"):
            h = b.layernorm(x, name="ln1")
            q, k, v = (b.linear(h, hidden, name=n) for n in ("q", "k", "v"))
            a = b.linear(b.attention(q, k, v, heads, name="attn"), hidden, name="o")
            x = b.add_(x, a, name="res1")
            h = b.layernorm(x, name="ln2")
            h = b.linear(b.gelu(b.linear(h, 4 * hidden, name="fc1"), name="act"), hidden, name="fc2")
            x = b.add_(x, h, name="res2")
    b.softmax_cross_entropy(b.linear(b.layernorm(x, name="lnf"), 1000, name="head"), name="loss")
    return b.build()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=80)
    parser.add_argument("--devices", type=int, default=16)
    parser.add_argument("--cluster", default="p100-4x4")
    args = parser.parse_args()
    graph = transformer(args.layers)
    cluster = resolve_cluster(args.cluster, args.devices)
    model = CostModel(cluster)

    start = time.perf_counter()
    candidates = {op.name: enumerate_configs(op, graph, cluster.num_devices) for op in graph}
    t_enum = time.perf_counter()
    for op in graph:
        for cfg in candidates[op.name]:
            model.node(graph, op, cfg)
    t_nodes = time.perf_counter()
    for edge in graph.edges:
        model.edge_matrix(graph, edge, candidates[edge.src], candidates[edge.dst])
    t_edges = time.perf_counter()

    total = sum(len(c) for c in candidates.values())
    print(f"{len(graph)} operators, {total} candidates, {len(graph.edges)} edges on {cluster.name}")
    print(f"enumerate {t_enum - start:.2f} s, node costs {t_nodes - t_enum:.2f} s, "
          f"edge matrices {t_edges - t_nodes:.2f} s, total {t_edges - start:.2f} s")
    collectives_at_scale()


def collectives_at_scale(preset: str = "h100-80gb-superpod", calls: int = 20_000) -> None:
    """Price collectives on groups of up to 4,096 devices from their shape alone: time per call and
    the predicted seconds of a 1 GB collective (hierarchical: 8 devices per node)."""
    pod = resolve_cluster(preset)
    for kind in KINDS:
        sizes = (2,) if kind == "p2p" else (8, 64, 512, 4096)
        start = time.perf_counter()
        for i in range(calls):
            collective_time(pod, kind, 1e9 + i, sizes[i % len(sizes)], 1 if kind == "p2p" else None)
        per_call = (time.perf_counter() - start) / calls
        figures = ", ".join(f"{n}: {collective_time(pod, kind, 1e9, n, 1 if kind == 'p2p' else None) * 1e3:.2f} ms"
                            for n in sizes)
        print(f"{kind:<15} {per_call * 1e6:.1f} us per call; 1 GB on {figures}")


if __name__ == "__main__":
    main()
