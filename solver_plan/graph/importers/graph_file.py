"""The solver-plan graph file (YAML or JSON; docs/graph-file.md, schema docs/schemas/graph-file.v1.schema.json),
and `load_model_file`: which importer reads a MODEL that names a file.

A graph file lists operators in any order that has producers before consumers:

    format: solver-plan-graph
    version: 1
    name: tiny-mlp
    dtype_bytes: 4            # optional (default 4)
    operators:
      - {name: x, type: Input, attrs: {shape: [32, 784]}}
      - {name: fc1, type: Linear, inputs: [x], attrs: {in_features: 784, out_features: 256}}
      - {name: act, type: Unary, inputs: [fc1], attrs: {kind: relu}, outputs: [[32, 256]]}

Edges are the `inputs`: names of tensors, where an operator's output tensor is named after the
operator (or `name:i` for the i-th output of a multi-output operator such as Split). `outputs`
(shapes) is optional and, when given, must equal the shapes inferred from the inputs; FLOPs and
parameters always come from `graph.ops.infer`. `Profiled` is the opaque operator: its attributes
`output_shapes`, `flops` and `params` are taken as given.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from solver_plan.errors import GraphError, InputError
from solver_plan.files import read_input_bytes, read_json  # regular files only: a FIFO would block
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.ops import BINARY_KINDS, UNARY_FLOPS_PER_ELEMENT, OpType
from solver_plan.graph.importers.file_spec import HF_PREFIX, split_file_spec
from solver_plan.graph.importers.hf import load_hf_config, looks_like_hf_config
from solver_plan.yamlio import load_yaml

FORMAT = "solver-plan-graph"
VERSION = 1
TOP_KEYS = {"format", "version", "name", "dtype_bytes", "operators"}
OP_KEYS = {"name", "type", "inputs", "attrs", "outputs"}


# --- dispatch ------------------------------------------------------------------------------------
def model_file_parts(spec: str) -> tuple[str, str, str] | None:
    """('hf:', 'dir/config.json', ':seq=8') for 'hf:dir/config.json:seq=8'; None for specs naming no
    model file. Lets callers relocate or fingerprint the file and keep prefix and options."""
    if split_file_spec(spec) is None:
        return None
    text = spec.strip()
    prefix = HF_PREFIX if text.startswith(HF_PREFIX) else ""
    path = split_file_spec(spec)[0]
    return prefix, path, text[len(prefix) + len(path):]


def is_model_file(spec: str) -> bool:
    """Whether `spec` names a model file (ONNX, config.json, graph file, with optional `:key=value` options)
    rather than a zoo model or a profile.
    """
    return split_file_spec(spec) is not None


def is_model_document(path: str) -> bool:
    """Whether a .json file is a model (Hugging Face config or graph file) rather than another tool's
    JSON (e.g. pipeline-blocks profiles); unreadable files are not, so their reader reports them."""
    try:
        document = json.loads(read_input_bytes(path, "model file"))
    except (InputError, OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(document, dict) and (document.get("format") == FORMAT or looks_like_hf_config(document))


def load_model_file(spec: str) -> Graph:
    """An ONNX model, a Hugging Face config.json or a graph file (JSON/YAML), with options."""
    path_text, options = split_file_spec(spec)
    path = Path(path_text)
    try:
        if path.is_dir() and spec.strip().startswith(HF_PREFIX):  # a downloaded model folder
            path = path / "config.json"
        exists = path.exists()  # FIFOs, devices and folders: refused by name when read
    except OSError as exc:  # a name too long, a loop of links
        raise InputError(f"cannot read file ({exc.strerror or exc})", str(path)) from None
    if not exists:
        raise InputError("no such model file", str(path))
    label = path.parent.name if path.name == "config.json" and path.parent.name else path.name
    name = label + model_file_parts(spec)[2]  # "gpt2.json:seq=128": short, and says what was built
    if path.suffix.lower() == ".onnx":
        from solver_plan.graph.importers.onnx_import import load_onnx
        return load_onnx(path, options, name)
    document = read_document(path)
    if spec.strip().startswith(HF_PREFIX) or (isinstance(document, dict) and looks_like_hf_config(document)):
        return load_hf_config(path, options, name)
    if options:
        raise InputError(f"a graph file takes no options, got {', '.join(options)}", path_text)
    return graph_from_document(document, path_text)


def read_document(path: Path) -> Any:
    """The project's strict readers: duplicate keys, NaN and malformed text are errors naming the file."""
    if path.suffix.lower() == ".json":
        return read_json(path, "model file")
    return load_yaml(path)


# --- graph files ---------------------------------------------------------------------------------
def load_graph_file(path: str | Path) -> Graph:
    """`Graph` from a graph file (JSON or YAML in this module's format)."""
    return graph_from_document(read_document(Path(path)), str(path))


def graph_from_document(doc: Any, where: str) -> Graph:
    """`Graph` from a parsed graph-file document; InputError at `where` for unknown keys, a wrong format or
    version, or a bad operator.
    """
    if not isinstance(doc, dict):
        raise InputError("a graph file holds a mapping with 'format', 'version', 'name' and 'operators'", where)
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(map(repr, unknown))} (keys: {', '.join(sorted(TOP_KEYS))})", where)
    if doc.get("format") != FORMAT:
        raise InputError(f"key 'format' must be {FORMAT!r}, got {doc.get('format')!r}", where)
    if doc.get("version") != VERSION:
        raise InputError(f"key 'version' must be {VERSION}, got {doc.get('version')!r}", where)
    name = doc.get("name")
    if not isinstance(name, str) or not name:
        raise InputError("key 'name' must be a non-empty string", where)
    dtype = doc.get("dtype_bytes", 4)
    if dtype not in (1, 2, 4, 8):
        raise InputError(f"key 'dtype_bytes' must be 1, 2, 4 or 8, got {dtype!r}", where)
    ops = doc.get("operators")
    if not isinstance(ops, list) or not ops:
        raise InputError("key 'operators' must be a non-empty list", where)
    b = GraphBuilder(name, dtype_bytes=dtype)
    tensors = {}
    for index, op in enumerate(ops):
        at = f"{where}: operators[{index}]"
        if not isinstance(op, dict):
            raise InputError("each operator is a mapping with name, type, inputs, attrs, outputs", at)
        extra = sorted(set(op) - OP_KEYS)
        if extra:
            raise InputError(f"unknown key(s) {', '.join(map(repr, extra))} (keys: {', '.join(sorted(OP_KEYS))})", at)
        op_name = op.get("name")
        if not isinstance(op_name, str) or not op_name:
            raise InputError("key 'name' must be a non-empty string", at)
        at = f"{where}: operator {op_name!r}"
        try:
            op_type = OpType(op.get("type"))
        except ValueError:
            raise InputError(f"unknown type {op.get('type')!r} (types: {', '.join(t.value for t in OpType)})",
                             at) from None
        inputs = op.get("inputs", [])
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            raise InputError("key 'inputs' must be a list of tensor names", at)
        missing = [t for t in inputs if t not in tensors]
        if missing:
            raise InputError(f"unknown input tensor(s) {', '.join(map(repr, missing))} (inputs must be produced "
                             "by an operator listed earlier)", at)
        attrs = op.get("attrs", {})
        if not isinstance(attrs, dict):
            raise InputError("key 'attrs' must be a mapping", at)
        check_attrs(op_type, attrs, at)
        attrs = {k: _tuples(v) for k, v in attrs.items()}
        try:
            outs = b.add(op_type, tuple(tensors[t] for t in inputs), attrs, op_name)
        except GraphError as exc:
            raise InputError(str(exc), at) from None
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            raise InputError(f"missing or malformed attribute ({type(exc).__name__}: {exc})", at) from None
        expected = op.get("outputs")
        if expected is not None:
            got = [list(t.shape) for t in outs]
            if not isinstance(expected, list) or [list(s) for s in expected if isinstance(s, list)] != got:
                raise InputError(f"outputs {expected} differ from the inferred shapes {got}", at)
        for t in outs:
            tensors[t.name] = t
    try:
        graph = b.build()
    except GraphError as exc:
        raise InputError(str(exc), where) from None
    check_tied_weights(graph, where)
    return graph


# --- attributes: what each type takes (docs/graph-file.md), checked before `ops.infer` sees them ----
def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _non_negative_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _ints(value, test, length: int | None = None) -> bool:
    return (isinstance(value, list) and (length is None or len(value) == length) and len(value) >= 1
            and all(test(v) for v in value))


def _shape(value) -> bool:
    return _ints(value, _positive_int)


def _finite_non_negative(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


_CHECKS = {  # name -> (test, what the error says is expected)
    "positive": (_positive_int, "a positive integer"),
    "index": (_non_negative_int, "a non-negative integer"),
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "pair": (lambda v: _ints(v, _positive_int, 2), "two positive integers [h, w]"),
    "pads": (lambda v: _ints(v, _non_negative_int, 2), "two non-negative integers [h, w]"),
    "shape": (_shape, "a list of positive integers"),
    "indices": (lambda v: _ints(v, _non_negative_int), "a list of non-negative integers"),
    "shapes": (lambda v: isinstance(v, list) and len(v) >= 1 and all(_shape(s) for s in v),
               "a list of shapes (lists of positive integers)"),
    "amount": (_finite_non_negative, "a non-negative number"),
    "name": (lambda v: isinstance(v, str) and bool(v), "an operator name"),
    "text": (lambda v: isinstance(v, str), "a string"),
}
_KINDS = {OpType.UNARY: tuple(UNARY_FLOPS_PER_ELEMENT), OpType.BINARY: BINARY_KINDS, OpType.POOL2D: ("max", "avg")}
_WINDOW = {"kernel": "pair", "stride": "pair", "padding": "pads"}
ATTRS: dict[OpType, dict[str, str]] = {  # type -> attribute -> check (kinds: _KINDS)
    OpType.INPUT: {"shape": "shape"},
    OpType.LINEAR: {"in_features": "positive", "out_features": "positive", "bias": "bool", "tied_to": "name"},
    OpType.MATMUL: {},
    OpType.CONV2D: {"in_channels": "positive", "out_channels": "positive", **_WINDOW, "groups": "positive",
                    "bias": "bool"},
    OpType.POOL2D: {"kind": "kind", "global_pool": "bool", **_WINDOW},
    OpType.BATCHNORM: {},
    OpType.LAYERNORM: {"rms": "bool"},
    OpType.UNARY: {"kind": "kind"},
    OpType.BINARY: {"kind": "kind"},
    OpType.SOFTMAX: {"axis": "integer"},  # -1: the last axis, as in PyTorch
    OpType.EMBEDDING: {"num_embeddings": "positive", "embedding_dim": "positive", "tied_to": "name"},
    OpType.LSTM: {"input_size": "positive", "hidden_size": "positive", "reverse": "bool"},
    OpType.ATTENTION: {"heads": "positive", "kv_heads": "positive", "scores": "scores", "dropout": "bool",
                       "causal": "bool"},
    OpType.CONCAT: {"axis": "index"},
    OpType.SPLIT: {"axis": "index", "sizes": "shape"},
    OpType.RESHAPE: {"shape": "shape"},
    OpType.TRANSPOSE: {"perm": "indices"},
    OpType.SOFTMAX_CE: {},
    OpType.PROFILED: {"output_shapes": "shapes", "flops": "amount", "params": "index", "description": "text",
                      "onnx_op": "text"},
}


def check_attrs(op_type: OpType, attrs: dict, at: str) -> None:
    """Unknown attributes, and known ones of the wrong type or out of range, refused naming the
    attribute and its value (the file's values, before `ops.infer` would trip on them)."""
    allowed = ATTRS[op_type]
    for key, value in attrs.items():
        if key not in allowed:
            known = ", ".join(allowed) or "none"
            raise InputError(f"unknown attribute {key!r} of a {op_type.value} (attributes: {known})", at)
        check = allowed[key]
        if check == "kind":
            choices = _KINDS[op_type]
            ok, expected = value in choices, "one of " + ", ".join(choices)
        elif check == "scores":
            ok, expected = value in ("fused", "materialized"), "fused or materialized"
        else:
            test, expected = _CHECKS[check]
            ok = test(value)
        if not ok:
            raise InputError(f"attribute {key!r} expects {expected}, got {value!r}", at)


def _weight_shape(op) -> tuple[int, int] | None:
    """The weight matrix a tied operator shares: (rows, columns) as the embedding stores it."""
    if op.op_type == OpType.LINEAR:
        return op.attr("out_features"), op.attr("in_features")
    if op.op_type == OpType.EMBEDDING:
        return op.attr("num_embeddings"), op.attr("embedding_dim")
    return None


def check_tied_weights(graph: Graph, where: str) -> None:
    """`tied_to` names another Linear or Embedding operator whose weight has the same shape (the
    weight is then counted once, on the operator named)."""
    for op in graph:
        owner_name = op.attr("tied_to")
        if not owner_name:
            continue
        at = f"{where}: operator {op.name!r}"
        if owner_name == op.name or owner_name not in {other.name for other in graph}:
            raise InputError(f"attribute 'tied_to' names {owner_name!r}, which is not another operator of the graph", at)
        owner = graph.op(owner_name)
        mine, theirs = _weight_shape(op), _weight_shape(owner)
        if theirs is None:
            raise InputError(f"attribute 'tied_to' names {owner_name!r} (type {owner.op_type.value}): only a Linear or "
                             "an Embedding has a weight to share", at)
        if mine != theirs:
            raise InputError(f"attribute 'tied_to': this weight is {mine[0]} x {mine[1]}, the weight of "
                             f"{owner_name!r} is {theirs[0]} x {theirs[1]}", at)


def _tuples(value):
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def graph_to_document(graph: Graph) -> dict:
    """The graph file of any graph (zoo, ONNX, Hugging Face): `graph_from_document` reads it back."""
    def plain(value):
        if isinstance(value, tuple):
            return [plain(v) for v in value]
        return value
    dtypes = {op.dtype_bytes for op in graph.operators}
    return {
        "format": FORMAT, "version": VERSION, "name": graph.name, "dtype_bytes": max(dtypes) if dtypes else 4,
        "operators": [{
            "name": op.name, "type": op.op_type.value, "inputs": list(op.inputs),
            "attrs": {k: plain(v) for k, v in op.attr_items}, "outputs": [list(t.shape) for t in op.outputs],
        } for op in graph],
    }
