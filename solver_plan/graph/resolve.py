"""MODEL arguments: a zoo spec ("resnet50:batch=8") or a PipeDream profile file (graph.txt)."""
from __future__ import annotations

from pathlib import Path

from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph


def resolve_model(spec: str) -> Graph:
    path = Path(spec)
    if path.suffix == ".txt" or path.is_file() or path.is_dir():
        if path.is_dir():
            path = path / "graph.txt"
        if not path.is_file():
            raise InputError("no such profile file", spec)
        from solver_plan.graph.importers.pipedream import load_pipedream_profile
        return load_pipedream_profile(path)
    from solver_plan.graph.zoo import build_model
    return build_model(spec)
