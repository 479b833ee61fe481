"""Wide & Deep (Cheng et al. 2016): a linear model over crossed sparse features plus an MLP over
per-field embeddings and dense features, their logits summed."""
from __future__ import annotations

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo.spec import ModelEntry

FIELDS_AXIS = 1


def wide_deep(graph_name: str, *, batch: int, fields: int, vocab: int, embed_dim: int, dense: int, wide: int,
              hidden: int, layers: int, classes: int) -> Graph:
    """Wide & Deep recommender (Cheng et al. 2016): a linear model over crossed features beside a deep tower
    of one embedding table per categorical field, dense features and shrinking ReLU layers.
    """
    b = GraphBuilder(graph_name)
    with b.scope("wide"):
        wide_logits = b.linear(b.input((batch, wide), name="crossed_features"), classes, name="linear")
    with b.scope("deep"):
        ids = b.split(b.input((batch, fields), name="categorical"), [1] * fields, FIELDS_AXIS, name="fields")
        # One table per field, as in the paper: the tables are what model parallelism splits.
        tables = [b.embedding(field_ids, vocab, embed_dim, name=f"embed{i}") for i, field_ids in enumerate(ids)]
        x = b.flatten(b.concat(tables, FIELDS_AXIS))
        x = b.concat([x, b.input((batch, dense), name="dense_features")], FIELDS_AXIS)
        for index in range(layers):
            x = b.relu(b.linear(x, max(1, hidden >> index), name=f"fc{index}"))
        deep_logits = b.linear(x, classes, name="logits")
    b.softmax_cross_entropy(b.add_(deep_logits, wide_logits, name="logits"))
    return b.build()


ENTRIES = (
    ModelEntry("wide_deep", "Wide & Deep: linear model over crossed features plus MLP (widths halving) over "
                            "per-field embeddings",
               {"batch": 512, "fields": 26, "vocab": 100000, "embed_dim": 32, "dense": 13, "wide": 10000,
                "hidden": 1024, "layers": 3, "classes": 2}, wide_deep),
)
