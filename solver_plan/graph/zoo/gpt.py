"""GPT decoders: GPT-2 (Radford et al. 2019) sizes and every shape in llm-shapes/*.json.

Token + learned position embeddings, pre-norm blocks, a final layer norm and an output projection
tied to the token embedding (so GPT-2 small has 124M parameters, not 163M).
"""
from __future__ import annotations

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo.llm_shapes import load_shape
from solver_plan.graph.zoo.spec import ModelEntry
from solver_plan.graph.zoo.transformer import (BlockShape, check_sequence, stack,
                                               tied_output, token_embedding)

GPT2_VOCAB = 50257
GPT2_SIZES = {  # name: (hidden, blocks, heads); feed-forward is 4x hidden, heads are 64 wide
    "gpt2": (768, 12, 12), "gpt2-medium": (1024, 24, 16), "gpt2-large": (1280, 36, 20), "gpt2-xl": (1600, 48, 25),
}


def gpt(graph_name: str, *, batch: int, seq: int, positions: int, hidden: int, ffn: int, heads: int,
        head_dim: int, layers: int, vocab: int) -> Graph:
    """GPT-style decoder: token and position embeddings, `layers` pre-norm blocks, final norm, and the output
    projection tied to the token embedding.
    """
    check_sequence(seq, positions)
    b = GraphBuilder(graph_name)
    tokens = b.input((batch, seq), name="tokens")
    position_ids = b.input((batch, seq), name="positions")
    x = b.add_(token_embedding(b, tokens, vocab, hidden, "wte"),
               b.embedding(position_ids, positions, hidden, name="wpe"))
    x = b.layernorm(stack(b, x, BlockShape(hidden, ffn, heads, head_dim, causal=True), layers), name="final_norm")
    b.softmax_cross_entropy(tied_output(b, x, vocab, "wte"))
    return b.build()


def gpt2_entry(name: str) -> ModelEntry:
    """Zoo entry of a GPT-2 size (GPT2_SIZES), with its default options."""
    hidden, blocks, heads = GPT2_SIZES[name]
    defaults = {"batch": 8, "seq": 1024, "positions": 1024, "hidden": hidden, "ffn": 4 * hidden, "heads": heads,
                "head_dim": 64, "layers": blocks, "vocab": GPT2_VOCAB}
    return ModelEntry(name, f"GPT-2 {name.partition('-')[2] or 'small'}: {blocks} decoder blocks, hidden {hidden}",
                      defaults, gpt)


def llm_entry(name: str) -> ModelEntry:
    """A GPT-style decoder with the shape of llm-shapes/<name>.json (read on each call)."""
    shape = load_shape(name)
    defaults = {"batch": 8, "seq": shape["seq_size"], "positions": shape["seq_size"], "hidden": shape["hidden"],
                "ffn": shape["feedforward"], "heads": shape["attn_heads"], "head_dim": shape["attn_size"],
                "layers": shape["num_blocks"], "vocab": GPT2_VOCAB}
    return ModelEntry(name, f"GPT-style decoder shaped as llm-shapes/{name}.json: {shape['num_blocks']} blocks, "
                            f"hidden {shape['hidden']}", defaults, gpt)


ENTRIES = tuple(gpt2_entry(name) for name in GPT2_SIZES)
