"""Recurrent models: an LSTM language model (Zaremba et al. 2014) and a GNMT-like translator
(Wu et al. 2016): bidirectional first encoder layer, residual connections from the third layer,
attention of the first decoder layer over the encoder output fed to every later decoder layer."""
from __future__ import annotations

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.ops import OpType
from solver_plan.graph.zoo.spec import ModelEntry

FEATURES = 2  # axis of (batch, seq, features) tensors
FIRST_RESIDUAL_LAYER = 2  # GNMT adds residual connections from the third layer on


def rnnlm(graph_name: str, *, batch: int, seq: int, hidden: int, layers: int, vocab: int) -> Graph:
    """LSTM language model: embedding, `layers` LSTM layers with dropout, output projection over the
    vocabulary.
    """
    b = GraphBuilder(graph_name)
    x = b.embedding(b.input((batch, seq), name="tokens"), vocab, hidden, name="embed")
    for index in range(layers):
        x = b.lstm(b.dropout(x), hidden, name=f"lstm{index}")
    b.softmax_cross_entropy(b.linear(b.dropout(x), vocab, name="output"))
    return b.build()


def lstm_layer(b: GraphBuilder, inputs: Tensor, previous: Tensor, hidden: int, index: int) -> Tensor:
    """One LSTM layer over `inputs`, plus the previous layer's output where GNMT has a residual."""
    y = b.lstm(inputs, hidden, name=f"lstm{index}")
    return b.add_(y, previous, name=f"residual{index}") if index >= FIRST_RESIDUAL_LAYER else y


def gnmt_encoder(b: GraphBuilder, x: Tensor, hidden: int, layers: int) -> Tensor:
    """GNMT encoder (Wu et al. 2016): a bidirectional first LSTM layer, then `layers` - 1 LSTM layers (with
    residuals from FIRST_RESIDUAL_LAYER on, `lstm_layer`).
    """
    forward = b.lstm(x, hidden, name="lstm0_forward")
    backward = b.add(OpType.LSTM, (x,), {"input_size": x.shape[-1], "hidden_size": hidden, "reverse": True},
                     "lstm0_backward")[0]
    x = b.concat([forward, backward], FEATURES)
    for index in range(1, layers):
        x = lstm_layer(b, x, x, hidden, index)
    return x


def gnmt_decoder(b: GraphBuilder, x: Tensor, memory: Tensor, hidden: int, layers: int) -> Tensor:
    """GNMT decoder: an LSTM layer, attention over the encoder's `memory`, then LSTM layers fed the attention
    context.
    """
    x = b.lstm(x, hidden, name="lstm0")
    context = b.attention(x, memory, memory, heads=1, name="attention")
    for index in range(1, layers):
        x = lstm_layer(b, b.concat([x, context], FEATURES), x, hidden, index)
    return x


def nmt(graph_name: str, *, batch: int, seq: int, target_seq: int, hidden: int, layers: int, vocab: int) -> Graph:
    """GNMT-style translation model: embedded source through the encoder, embedded target through the
    attending decoder, output projection; InputError for fewer than 2 layers.
    """
    if layers < 2:
        raise InputError(f"option 'layers' must be at least 2 (a bidirectional layer, then one that "
                         f"merges its directions), got {layers}")
    b = GraphBuilder(graph_name)
    with b.scope("encoder"):
        sources = b.embedding(b.input((batch, seq), name="tokens"), vocab, hidden, name="embed")
        memory = gnmt_encoder(b, sources, hidden, layers)
    with b.scope("decoder"):
        targets = b.embedding(b.input((batch, target_seq), name="tokens"), vocab, hidden, name="embed")
        x = gnmt_decoder(b, targets, memory, hidden, layers)
    b.softmax_cross_entropy(b.linear(x, vocab, name="output"))
    return b.build()


ENTRIES = (
    ModelEntry("rnnlm", "LSTM language model (Zaremba et al. large): embedding, stacked LSTM, softmax over vocabulary",
               {"batch": 64, "seq": 35, "hidden": 1500, "layers": 2, "vocab": 10000}, rnnlm),
    ModelEntry("nmt", "GNMT-like translator: LSTM encoder (bidirectional first layer) and decoder with attention",
               {"batch": 128, "seq": 50, "target_seq": 50, "hidden": 1024, "layers": 4, "vocab": 32000}, nmt),
)
