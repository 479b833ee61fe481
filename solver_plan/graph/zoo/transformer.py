"""Transformer building blocks shared by BERT, GPT and T5.

A block is self-attention, optional cross-attention over an encoder's output, and a two-layer
feed-forward network, each wrapped in a residual connection with layer normalisation either
before the sublayer (GPT-2, T5) or after the residual add (BERT).
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Tensor
from solver_plan.graph.ops import OpType

TIED_TO = "tied_to"  # attribute naming the embedding operator whose weight matrix this one shares


@dataclass(frozen=True)
class BlockShape:
    """Shape of one transformer block: widths, heads, bias, activation and norm placement, and the
    implementation choices that cost time but not parameters (fused attention, dropout operators).
    """
    hidden: int
    ffn: int
    heads: int
    head_dim: int  # heads * head_dim may differ from hidden (e.g. GPT-3 13B, PaLM)
    bias: bool = True
    activation: str = "gelu"
    pre_norm: bool = True
    # Implementation details that cost time, not parameters (defaults: fused attention, no dropout
    # operators; a residual add then stands for a fused bias-dropout-add).
    attention_scores: str = "fused"  # "materialized": no fused attention kernel (scores in memory)
    dropout: bool = False  # dropout after the attention and MLP outputs and on the probabilities
    causal: bool = False  # self-attention masked to earlier positions (a decoder: GPT, T5's decoder)


def check_sequence(seq: int, positions: int) -> None:
    """A learned position embedding has one row per position: longer sequences do not fit."""
    if seq > positions:
        raise InputError(f"option 'seq' ({seq}) must not exceed option 'positions' ({positions}), "
                         "the size of the position embedding")


def attention(b: GraphBuilder, x: Tensor, shape: BlockShape, memory: Tensor | None = None) -> Tensor:
    """Multi-head attention with its q/k/v and output projections; keys and values come from
    `memory` for cross-attention, from `x` otherwise."""
    source = x if memory is None else memory
    width = shape.heads * shape.head_dim
    q = b.linear(x, width, shape.bias, name="q")
    k = b.linear(source, width, shape.bias, name="k")
    v = b.linear(source, width, shape.bias, name="v")
    context = b.attention(q, k, v, shape.heads, name="attention", scores=shape.attention_scores,
                          dropout=shape.dropout, causal=shape.causal and memory is None)
    return b.linear(context, shape.hidden, shape.bias, name="out")


def feedforward(b: GraphBuilder, x: Tensor, shape: BlockShape) -> Tensor:
    """The MLP sublayer: linear to `ffn`, activation, linear back to `hidden`."""
    hidden = b.unary(b.linear(x, shape.ffn, shape.bias, name="fc1"), shape.activation)
    return b.linear(hidden, shape.hidden, shape.bias, name="fc2")


def residual(b: GraphBuilder, x: Tensor, shape: BlockShape, sublayer, name: str) -> Tensor:
    """A residual sublayer: pre-norm `x + sublayer(norm(x))` or post-norm `norm(x + sublayer(x))`, with
    dropout on the branch when the shape asks for it.
    """
    def branch(h: Tensor) -> Tensor:
        out = sublayer(h)
        return b.dropout(out, name="dropout") if shape.dropout else out

    with b.scope(name):
        if shape.pre_norm:
            return b.add_(x, branch(b.layernorm(x, name="norm")), name="residual")
        return b.layernorm(b.add_(x, branch(x), name="residual"), name="norm")


def block(b: GraphBuilder, x: Tensor, shape: BlockShape, memory: Tensor | None = None) -> Tensor:
    """One transformer block: self-attention, cross-attention over `memory` when given, then the MLP, each
    residual.
    """
    x = residual(b, x, shape, lambda h: attention(b, h, shape), "self_attn")
    if memory is not None:
        x = residual(b, x, shape, lambda h: attention(b, h, shape, memory), "cross_attn")
    return residual(b, x, shape, lambda h: feedforward(b, h, shape), "mlp")


def stack(b: GraphBuilder, x: Tensor, shape: BlockShape, layers: int, memory: Tensor | None = None) -> Tensor:
    """`layers` transformer blocks in sequence, scoped block0, block1, ..."""
    for index in range(layers):
        with b.scope(f"block{index}"):
            x = block(b, x, shape, memory)
    return x


def token_embedding(b: GraphBuilder, ids: Tensor, vocab: int, hidden: int, name: str,
                    tied_to: str | None = None) -> Tensor:
    """Token embedding of `ids`; `tied_to` names the embedding whose table this one shares (no parameters of
    its own).
    """
    attrs = {"num_embeddings": vocab, "embedding_dim": hidden}
    if tied_to:
        attrs[TIED_TO] = tied_to
    return b.add(OpType.EMBEDDING, (ids,), attrs, name)[0]


def tied_output(b: GraphBuilder, x: Tensor, vocab: int, embedding: str, bias: bool = False) -> Tensor:
    """The vocabulary projection whose weight is the (transposed) token embedding."""
    attrs = {"in_features": x.shape[-1], "out_features": vocab, "bias": bias, TIED_TO: embedding}
    return b.add(OpType.LINEAR, (x,), attrs, "lm_head")[0]

