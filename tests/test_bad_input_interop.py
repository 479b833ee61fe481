"""Bad model files and export requests: one line on stderr naming the file and the key or
operator, exit status 2, for every command that takes a MODEL."""
from __future__ import annotations

import json

import pytest

from solver_plan.cli import main
from solver_plan.data import data_dir

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import numpy as np  # noqa: E402


def _onnx(tmp_path, op="Relu", dims=(2, 4), name="m.onnx"):
    w = numpy_helper.from_array(np.zeros((4, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"), helper.make_node(op, ["h"], ["y"], name="act")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = tmp_path / name
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def truncated_onnx(tmp_path):
    good = _onnx(tmp_path).read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(good[: len(good) // 2])
    return str(path), ["cut.onnx", "cannot read the ONNX model"]


def unsupported_op(tmp_path):
    return str(_onnx(tmp_path, op="Einsum")), ["m.onnx", "Einsum"]


def unknown_dim(tmp_path):
    return str(_onnx(tmp_path, dims=("n", 4))), ["m.onnx", "'x'", "'n'"]


def hf_missing_key(tmp_path):
    config = json.loads((data_dir() / "hf-configs" / "llama-2-7b.json").read_text())
    del config["num_attention_heads"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return f"{path}:seq=64,batch=1", ["config.json", "'num_attention_heads'"]


def hf_bad_option(tmp_path):
    return f"{data_dir() / 'hf-configs' / 'gpt2.json'}:seq=0", ["gpt2.json", "'seq'"]


def hf_unknown_family(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "rwkv", "hidden_size": 8}))
    return str(path), ["config.json", "'rwkv'"]


def graph_unknown_type(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("format: solver-plan-graph\nversion: 1\nname: g\noperators:\n"
                    "  - {name: x, type: Input, attrs: {shape: [2, 4]}}\n  - {name: y, type: Gemm, inputs: [x]}\n")
    return str(path), ["g.yaml", "operator 'y'", "'Gemm'"]


def graph_missing_attribute(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"format": "solver-plan-graph", "version": 1, "name": "g", "operators": [
        {"name": "x", "type": "Input", "attrs": {"shape": [2, 4]}},
        {"name": "fc", "type": "Linear", "inputs": ["x"], "attrs": {"in_features": 4}}]}))
    return str(path), ["g.json", "operator 'fc'", "out_features"]


def graph_bad_yaml(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("operators: [\n")
    return str(path), ["g.yaml", "malformed YAML"]


CASES = [truncated_onnx, unsupported_op, unknown_dim, hf_missing_key, hf_bad_option, hf_unknown_family,
         graph_unknown_type, graph_missing_attribute, graph_bad_yaml]


@pytest.mark.parametrize("command", ["plan", "pipeline"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
def test_bad_model_file(tmp_path, capsys, case, command):
    model, needles = case(tmp_path)
    argv = [command, "--model", model] + (["--processors", "2"] if command == "pipeline" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err


def test_export_out_without_export(tmp_path, capsys):
    assert main(["plan", "--model", "mlp", "--export-out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--export-out" in err and "--export" in err


def test_no_such_model_file(capsys):
    assert main(["plan", "--model", "missing/model.onnx"]) == 2
    err = capsys.readouterr().err.strip()
    assert "missing/model.onnx" in err and "no such model file" in err


@pytest.mark.parametrize("name, text, key", [
    ("config.json", '{"model_type": "gpt2", "n_layer": 12, "n_layer": 2}', "n_layer"),
    ("g.yaml", "name: a\nformat: solver-plan-graph\nversion: 1\nname: b\noperators: []\n", "name"),
    ("g.json", '{"format": "solver-plan-graph", "format": "x"}', "format"),
])
def test_duplicate_keys_in_model_files(tmp_path, capsys, name, text, key):
    """JSON and YAML parsers keep the last of two equal keys; model files refuse them instead."""
    (tmp_path / name).write_text(text)
    assert main(["plan", "--model", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and name in err and "duplicate key" in err and repr(key) in err
