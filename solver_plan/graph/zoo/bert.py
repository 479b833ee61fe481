"""BERT (Devlin et al. 2019) pre-trained with masked language modelling.

Word + position + segment embeddings and a layer norm, post-norm encoder blocks, then the MLM head
(dense + GELU + layer norm, output projection tied to the word embedding, with its own bias).
The pooler and next-sentence classifier are left out: the graph ends in the one MLM loss.
`predictions=P` runs the MLM head on P positions per sequence, as the reference pre-training scripts
do (Google's and NVIDIA's `max_predictions_per_seq`: 20 at sequence 128, 80 at 512, the masked
positions gathered before the head); the default (0) runs it on every position.
`dropout=0.1` adds the reference model's dropout operators (after the attention and MLP outputs,
and on the attention probabilities; BERT's hidden_dropout_prob and attention_probs_dropout_prob;
any probability above 0 costs the same, and the embeddings' dropout is left out);
`attention=unfused` prices attention without a fused kernel (scores and probabilities written to
memory, as frameworks ran it before FlashAttention-style kernels). Defaults: no dropout operators,
fused attention.
"""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo.spec import ModelEntry
from solver_plan.graph.zoo.transformer import (BlockShape, check_sequence, stack,
                                               tied_output, token_embedding)

BERT_SIZES = {"bert-base": (768, 12, 12), "bert-large": (1024, 24, 16)}  # hidden, blocks, heads
BERT_VOCAB = 30522
SEGMENTS = 2


def bert(graph_name: str, *, batch: int, seq: int, positions: int, hidden: int, ffn: int, heads: int,
         head_dim: int, layers: int, vocab: int, predictions: int = 0, dropout: float = 0.0,
         attention: str = "fused") -> Graph:
    """BERT encoder with the masked-language-model head: token, position and segment embeddings, `layers`
    post-norm blocks, the tied output projection over `predictions` positions (0: every one).
    """
    check_sequence(seq, positions)
    model = graph_name.partition(":")[0]
    if attention not in ("fused", "unfused"):
        raise InputError(f"option 'attention' expects 'fused' or 'unfused', got {attention!r}", model)
    if dropout >= 1:
        raise InputError(f"option 'dropout' expects a probability below 1, got {dropout}", model)
    if predictions > seq:
        raise InputError(f"option 'predictions' expects at most seq={seq} positions (0: every position), "
                         f"got {predictions}", model)
    b = GraphBuilder(graph_name)
    ids = {name: b.input((batch, seq), name=name) for name in ("tokens", "positions", "segments")}
    with b.scope("embeddings"):
        words = token_embedding(b, ids["tokens"], vocab, hidden, "word")
        x = b.add_(words, b.embedding(ids["positions"], positions, hidden, name="position"))
        x = b.layernorm(b.add_(x, b.embedding(ids["segments"], SEGMENTS, hidden, name="segment")))
    shape = BlockShape(hidden, ffn, heads, head_dim, pre_norm=False,
                       attention_scores="materialized" if attention == "unfused" else "fused", dropout=dropout > 0)
    x = stack(b, x, shape, layers)
    if 0 < predictions < seq:  # the gather of the masked positions: a slice of the same size
        x = b.split(x, [predictions, seq - predictions], axis=1, name="masked_positions")[0]
    with b.scope("mlm_head"):
        x = b.layernorm(b.gelu(b.linear(x, hidden, name="transform")))
    b.softmax_cross_entropy(tied_output(b, x, vocab, "embeddings/word", bias=True))
    return b.build()


def bert_entry(name: str) -> ModelEntry:
    """Zoo entry of a BERT size (BERT_SIZES), with its default options."""
    hidden, blocks, heads = BERT_SIZES[name]
    defaults = {"batch": 32, "seq": 512, "positions": 512, "hidden": hidden, "ffn": 4 * hidden, "heads": heads,
                "head_dim": 64, "layers": blocks, "vocab": BERT_VOCAB, "predictions": 0,
                "dropout": 0.0, "attention": "fused"}
    return ModelEntry(name, f"BERT-{name.partition('-')[2]} with MLM head: {blocks} encoder blocks, hidden {hidden}",
                      defaults, bert)


ENTRIES = tuple(bert_entry(name) for name in BERT_SIZES)
