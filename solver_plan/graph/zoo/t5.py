"""T5 v1.0 (Raffel et al. 2020): encoder-decoder with pre-norm blocks, ReLU feed-forward and no
biases. One embedding is shared by encoder input, decoder input and output projection; the
relative position biases (a few thousand parameters) are left out."""
from __future__ import annotations

from dataclasses import replace

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo.spec import ModelEntry
from solver_plan.graph.zoo.transformer import BlockShape, stack, tied_output, token_embedding

T5_SIZES = {"t5-small": (512, 2048, 8, 6), "t5-base": (768, 3072, 12, 12), "t5-large": (1024, 4096, 16, 24)}
T5_VOCAB = 32128
SHARED = "shared"


def t5(graph_name: str, *, batch: int, seq: int, target_seq: int, hidden: int, ffn: int, heads: int,
       head_dim: int, layers: int, vocab: int) -> Graph:
    """T5 encoder-decoder (Raffel et al. 2020): shared token embedding, pre-norm blocks without biases and
    with ReLU, cross-attention in the decoder, output tied to the shared embedding.
    """
    b = GraphBuilder(graph_name)
    shape = BlockShape(hidden, ffn, heads, head_dim, bias=False, activation="relu")
    sources = token_embedding(b, b.input((batch, seq), name="tokens"), vocab, hidden, SHARED)
    with b.scope("encoder"):
        memory = b.layernorm(stack(b, sources, shape, layers), name="final_norm")
    with b.scope("decoder"):
        targets = token_embedding(b, b.input((batch, target_seq), name="tokens"), vocab, hidden, "embed", SHARED)
        decoder = replace(shape, causal=True)  # the decoder's self-attention is causal, its cross-attention not
        x = b.layernorm(stack(b, targets, decoder, layers, memory), name="final_norm")
    b.softmax_cross_entropy(tied_output(b, x, vocab, SHARED))
    return b.build()


def t5_entry(name: str) -> ModelEntry:
    """Zoo entry of a T5 size (T5_SIZES), with its default options."""
    hidden, ffn, heads, blocks = T5_SIZES[name]
    defaults = {"batch": 32, "seq": 512, "target_seq": 128, "hidden": hidden, "ffn": ffn, "heads": heads,
                "head_dim": 64, "layers": blocks, "vocab": T5_VOCAB}
    return ModelEntry(name, f"T5 {name.partition('-')[2]}: {blocks} encoder + {blocks} decoder blocks, hidden {hidden}",
                      defaults, t5)


ENTRIES = tuple(t5_entry(name) for name in T5_SIZES)
