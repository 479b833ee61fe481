"""MODEL arguments: a zoo spec ("resnet50:batch=8"), a PipeDream profile file (graph.txt), or a model
file: ONNX, Hugging Face config.json, solver-plan graph file (graph/importers/graph_file.py)."""
from __future__ import annotations

from pathlib import Path

from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph

# Largest tensor accepted (elements): 2**44 is 70 TB in fp32, 400x gpt3-175B's largest activation;
# beyond it byte counts times device counts leave the cost model's 64-bit integer range.
MAX_TENSOR_ELEMENTS = 2**44


def check_sizes(graph: Graph, where: str) -> Graph:
    """Refuse graphs whose tensors or parameters are too large to price (instead of overflowing)."""
    for op in graph:
        for tensor in op.outputs:
            if tensor.numel > MAX_TENSOR_ELEMENTS:
                raise InputError(f"operator {op.name!r} outputs {tensor.numel:.3g} elements "
                                 f"(shape {tensor.shape}); at most {MAX_TENSOR_ELEMENTS:.3g} are supported", where)
        if op.params > MAX_TENSOR_ELEMENTS:
            raise InputError(f"operator {op.name!r} has {op.params:.3g} parameters; "
                             f"at most {MAX_TENSOR_ELEMENTS:.3g} are supported", where)
    return graph


def _names_path(test, path: Path) -> bool:
    """`path.is_file()` and friends, False (not an OSError) for names the system cannot look up:
    too long, or a loop of links; the zoo lookup that follows then names the spec."""
    try:
        return test(path)
    except OSError:
        return False


def resolve_model(spec: str) -> Graph:
    """`Graph` from a MODEL spec: a model file (ONNX, config.json, graph file), a PipeDream profile (graph.txt
    or its folder), or a zoo spec "name:key=value,..."; InputError when it names nothing.
    """
    from solver_plan.graph.importers.graph_file import is_model_file, load_model_file
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("empty model spec (expected a zoo name such as resnet50, or a model file)", "--model")
    if is_model_file(spec):  # model.onnx, config.json, hf:config.json, graph.yaml (with :key=value options)
        return check_sizes(load_model_file(spec), spec)
    path = Path(spec)
    if path.suffix == ".txt" or _names_path(Path.is_file, path) or _names_path(Path.is_dir, path):
        if _names_path(Path.is_dir, path):
            path = path / "graph.txt"
        if not _names_path(Path.exists, path):
            raise InputError("no such profile file", spec)
        from solver_plan.graph.importers.pipedream import load_pipedream_profile
        return check_sizes(load_pipedream_profile(path), str(path))
    from solver_plan.graph.zoo import build_model
    return check_sizes(build_model(spec), spec)
