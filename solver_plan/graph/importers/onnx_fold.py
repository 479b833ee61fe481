"""Fold an ONNX model's shape arithmetic into constants, so shape inference can finish.

torch.onnx's classic exporter computes many shapes at run time from constants: ViT's class token
is `Expand(class_token, Where(Equal(Reshape(Concat(Constant...)), ConstantOfShape * -1), ...))`,
which ONNX shape inference (even with data propagation) leaves unknown, so every tensor after it
had no shape. Here each node whose inputs are all known small integer (or scalar) constants, and
each `Shape`/`Size` of a tensor whose shape inference knows, is evaluated once with onnx's
reference evaluator and replaced by an initializer; shape inference then runs again, until nothing
more folds. Float tensors of more than one element are never evaluated (weights and buffers stay
as they are: the importer reads their shapes only, and their bytes may be absent).
"""
from __future__ import annotations

import math

# outputs of these depend on more than their inputs' values
NEVER_FOLD = ("Dropout", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
              "Bernoulli", "If", "Loop", "Scan")
FLOAT_TYPES = (1, 10, 11, 16)  # TensorProto FLOAT, FLOAT16, DOUBLE, BFLOAT16
MAX_FOLDED_ELEMENTS = 4096  # a shape computation, not a tensor of data
MAX_ROUNDS = 8


def fold_shape_arithmetic(onnx, model, infer):
    """`model` with its shape arithmetic folded; `infer(model)` runs shape inference."""
    model = infer(model)
    for _ in range(MAX_ROUNDS):
        known = _known_constants(onnx, model)
        shapes = _inferred_shapes(model)
        folded, kept = [], []
        for node in model.graph.node:
            values = _evaluate(onnx, node, known, shapes, model)
            if values is None:
                kept.append(node)
                continue
            for name, value in zip(node.output, values):
                known[name] = value
                folded.append(onnx.numpy_helper.from_array(value, name))
        if not folded:
            return model
        del model.graph.node[:]
        model.graph.node.extend(kept)
        model.graph.initializer.extend(folded)
        model = infer(model)
    return model


def _has_data(t) -> bool:
    return bool(t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data
                or math.prod(t.dims) == 0)


def _small(array) -> bool:
    kind = array.dtype.kind
    return (kind in "iub" and array.size <= MAX_FOLDED_ELEMENTS) or (kind == "f" and array.size <= 1)


def _known_constants(onnx, model) -> dict:
    known = {}
    inputs = {t.name for t in model.graph.input}
    for t in model.graph.initializer:
        if t.name in inputs or not _has_data(t):  # an initializer that is also an input may be overridden
            continue
        if t.data_type in FLOAT_TYPES and math.prod(t.dims) > 1:
            continue
        if math.prod(t.dims) > MAX_FOLDED_ELEMENTS:
            continue
        known[t.name] = onnx.numpy_helper.to_array(t)
    return known


def _inferred_shapes(model) -> dict:
    shapes = {}
    for info in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        if not info.type.HasField("tensor_type") or not info.type.tensor_type.HasField("shape"):
            continue
        dims = info.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[info.name] = tuple(d.dim_value for d in dims)
    for t in model.graph.initializer:
        shapes[t.name] = tuple(t.dims)
    return shapes


def _evaluate(onnx, node, known: dict, shapes: dict, model):
    """The values of `node`'s outputs, or None when it is not (safely) foldable."""
    import numpy as np
    if node.op_type in NEVER_FOLD or node.domain not in ("", "ai.onnx") or not node.output:
        return None
    if node.op_type in ("Shape", "Size") and node.input and node.input[0] in shapes:
        shape = shapes[node.input[0]]
        if node.op_type == "Size":
            return [np.array(math.prod(shape), dtype=np.int64)]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        start, end = attrs.get("start", 0), attrs.get("end", len(shape))
        return [np.array(shape[start:end], dtype=np.int64)]
    if any(name and name not in known for name in node.input):
        return None
    if node.op_type == "Constant" and not any(a.name in ("value_ints", "value_int", "value") for a in node.attribute):
        return None  # float constants (value_float(s)) and sparse ones stay nodes
    try:
        from onnx.reference import ReferenceEvaluator
        opsets = {o.domain or "": o.version for o in model.opset_import}
        inputs = {name: known[name] for name in node.input if name}
        values = ReferenceEvaluator(node, opsets=opsets).run(None, inputs)
    except Exception:  # an operator the reference evaluator lacks: shape inference decides alone
        return None
    values = [np.asarray(v) for v in values]
    if not all(_small(v) for v in values):
        return None
    return values
