"""Which activations stay in memory until the backward pass.

An operator's output is kept when some backward pass reads it: the operator's own (ReLU, tanh,
sigmoid and softmax differentiate through their output) or a consumer's that saves its input
(GEMMs, convolutions and norms need their input for the weight gradient or the statistics; pooling
its input for the argmax; GELU and dropout their input or mask; a product both factors). Anything
else is freed once its consumers ran: a BatchNorm output feeding a ReLU, an addition feeding a
ReLU (PyTorch's autograd saves exactly these tensors; Chen et al. 2016, "Training deep nets with
sublinear memory cost", section 3, count activation memory the same way). Profiled layers keep
what their profile measured.
"""
from __future__ import annotations

from solver_plan.graph.ir import Graph, Operator
from solver_plan.graph.ops import OpType

SAVES_INPUTS = frozenset({OpType.LINEAR, OpType.MATMUL, OpType.CONV2D, OpType.BATCHNORM, OpType.LAYERNORM,
                          OpType.POOL2D, OpType.ATTENTION, OpType.LSTM, OpType.SOFTMAX_CE, OpType.PROFILED})
OUTPUT_DIFFERENTIATED = ("relu", "tanh", "sigmoid")  # Unary kinds whose gradient reads their output
INPUT_DIFFERENTIATED = ("gelu", "dropout")  # Unary kinds whose gradient reads their input (or mask)


def saves_own_output(op: Operator) -> bool:
    """Whether the operator's backward reads its own output (ReLU/tanh/sigmoid, softmax, LSTM, profiled
    operators), so that output is kept for backward.
    """
    if op.op_type == OpType.UNARY:
        return op.attr("kind") in OUTPUT_DIFFERENTIATED
    return op.op_type in (OpType.SOFTMAX, OpType.LSTM, OpType.PROFILED)


def saves_input(op: Operator) -> bool:
    """Whether `op`'s backward reads its inputs (so their producers keep them)."""
    if op.op_type in SAVES_INPUTS:
        return True
    if op.op_type == OpType.UNARY:
        return op.attr("kind") in INPUT_DIFFERENTIATED
    return op.op_type == OpType.BINARY and op.attr("kind") == "mul"


def kept_outputs(graph: Graph) -> frozenset[str]:
    """Names of the operators whose outputs stay in memory until the backward pass (O(graph);
    callers cache it per graph: hashing a Graph walks all its operators)."""
    kept = set()
    for op in graph:
        if saves_own_output(op) or op.activation_bytes_override is not None:
            kept.add(op.name)
        if saves_input(op):
            kept.update(graph.producer(t).name for t in op.inputs)
    return frozenset(kept)


def keeps_output(graph: Graph, op: Operator) -> bool:
    """Whether `op`'s outputs stay in memory until the backward pass."""
    return op.name in kept_outputs(graph)
