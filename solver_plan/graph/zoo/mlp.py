"""A multilayer perceptron of equal-width linear layers: the simplest chain for tests and demos."""
from __future__ import annotations

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo.spec import ModelEntry


def mlp(graph_name: str, *, batch: int, hidden: int, layers: int) -> Graph:
    """Multi-layer perceptron: `layers` square `hidden`-wide linear layers with ReLUs between, and a loss."""
    b = GraphBuilder(graph_name)
    x = b.input((batch, hidden), name="features")
    for index in range(layers):
        if index:
            x = b.relu(x)
        x = b.linear(x, hidden, name=f"fc{index}")
    b.softmax_cross_entropy(x)
    return b.build()


ENTRIES = (
    ModelEntry("mlp", "MLP: `layers` linear layers of width `hidden` with ReLU between them",
               {"batch": 64, "hidden": 1024, "layers": 4}, mlp),
)
