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
from pathlib import Path
from typing import Any

from solver_plan.errors import GraphError, InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.ops import OpType
from solver_plan.keyvalues import parse_key_values

FORMAT = "solver-plan-graph"
VERSION = 1
TOP_KEYS = {"format", "version", "name", "dtype_bytes", "operators"}
OP_KEYS = {"name", "type", "inputs", "attrs", "outputs"}
GRAPH_SUFFIXES = (".json", ".yaml", ".yml")
MODEL_SUFFIXES = GRAPH_SUFFIXES + (".onnx",)
HF_PREFIX = "hf:"


# --- dispatch ------------------------------------------------------------------------------------
def split_file_spec(spec: str) -> tuple[str, dict[str, str]] | None:
    """'dir/model.onnx:batch=8,seq=128' -> ('dir/model.onnx', {...}); None if `spec` names no model
    file (a zoo spec or a profile)."""
    text = spec.strip()
    hf = text.startswith(HF_PREFIX)
    if hf:
        text = text[len(HF_PREFIX):]
    path, options = text, ""
    for suffix in MODEL_SUFFIXES:
        marker = text.rfind(suffix + ":")
        if marker >= 0 and "=" in text[marker:]:
            path, options = text[:marker + len(suffix)], text[marker + len(suffix) + 1:]
            break
    else:
        head, colon, tail = text.rpartition(":")
        if hf and colon and "=" in tail and "/" not in tail:  # hf:model-folder:seq=8
            path, options = head, tail
    if Path(path).suffix.lower() not in MODEL_SUFFIXES and not spec.strip().startswith(HF_PREFIX):
        return None
    return path, parse_key_values(options, path, "FILE:key=value,key=value")


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
    return split_file_spec(spec) is not None


def is_model_document(path: str) -> bool:
    """Whether a .json file is a model (Hugging Face config or graph file) rather than another tool's
    JSON (e.g. pipeline-blocks profiles); unreadable files are not, so their reader reports them."""
    try:
        document = json.loads(Path(path).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    from solver_plan.graph.importers.hf import looks_like_hf_config
    return isinstance(document, dict) and (document.get("format") == FORMAT or looks_like_hf_config(document))


def load_model_file(spec: str) -> Graph:
    """An ONNX model, a Hugging Face config.json or a graph file (JSON/YAML), with options."""
    path_text, options = split_file_spec(spec)
    path = Path(path_text)
    if path.is_dir() and spec.strip().startswith(HF_PREFIX):  # a downloaded model folder
        path = path / "config.json"
    if not path.is_file():
        raise InputError("no such model file", str(path))
    label = path.parent.name if path.name == "config.json" and path.parent.name else path.name
    name = label + model_file_parts(spec)[2]  # "gpt2.json:seq=128": short, and says what was built
    if path.suffix.lower() == ".onnx":
        from solver_plan.graph.importers.onnx_import import load_onnx
        return load_onnx(path, options, name)
    document = read_document(path)
    from solver_plan.graph.importers.hf import load_hf_config, looks_like_hf_config
    if spec.strip().startswith(HF_PREFIX) or (isinstance(document, dict) and looks_like_hf_config(document)):
        return load_hf_config(path, options, name)
    if options:
        raise InputError(f"a graph file takes no options, got {', '.join(options)}", path_text)
    return graph_from_document(document, path_text)


def read_document(path: Path) -> Any:
    """The project's strict readers: duplicate keys, NaN and malformed text are errors naming the file."""
    if path.suffix.lower() == ".json":
        from solver_plan.files import read_json
        return read_json(path, "model file")
    from solver_plan.yamlio import load_yaml
    return load_yaml(path)


# --- graph files ---------------------------------------------------------------------------------
def load_graph_file(path: str | Path) -> Graph:
    return graph_from_document(read_document(Path(path)), str(path))


def graph_from_document(doc: Any, where: str) -> Graph:
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
        return b.build()
    except GraphError as exc:
        raise InputError(str(exc), where) from None


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
