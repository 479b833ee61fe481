"""The Python API: the example of docs/api.md runs as written, and importing the package is cheap."""
from __future__ import annotations

import subprocess
import sys

import pytest

from solver_plan.resources import REPO_ROOT


def test_docs_example_runs(monkeypatch, capsys):
    text = (REPO_ROOT / "docs" / "api.md").read_text()
    blocks = [b.split("```", 1)[0] for b in text.split("```python\n")[1:]]
    assert blocks, "docs/api.md has no python example"
    monkeypatch.chdir(REPO_ROOT)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "docs/api.md", "exec"), namespace)  # noqa: S102 - our own documentation
    out = capsys.readouterr().out
    assert "--tensor-model-parallel-size" in out
    graph, result, hybrid = namespace["graph"], namespace["result"], namespace["hybrid"]
    assert graph.total_params > 0 and result.objective_s >= result.lower_bound_s * (1 - 1e-9)
    p = hybrid.to_dict()["parallelism"]
    assert p["dp"] * p["tp"] * p["pp"] == 8


def test_import_is_cheap_and_never_loads_highs():
    code = ("import sys, solver_plan\n"
            "from solver_plan import load_model, load_cluster, plan_operators, plan_pipeline, plan_hybrid, "
            "export_plan, Plan, Status, InputError\n"
            "from solver_plan import (Graph, Cluster, PipelineResult, HybridResult, MoEResult, PlanRequest, "
            "PipelineRequest, HybridRequest, PlanReport, PipelineReport, HybridReport, answer, UNLIMITED)\n"
            "from solver_plan.api import plan, pipeline, hybrid\n"
            "load_model('mlp'); load_cluster('v100x8-nvlink', 2)\n"
            "print(sorted(m for m in ('highspy', 'ortools', 'pulp', 'onnx', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_names_survive_subpackage_imports():
    """`solver_plan.plan` (module) and `plan_operators` (function) do not collide."""
    import solver_plan
    import solver_plan.hybrid  # noqa: F401
    import solver_plan.pipeline  # noqa: F401
    import solver_plan.plan  # noqa: F401
    from solver_plan import plan_hybrid, plan_operators, plan_pipeline
    assert all(callable(f) for f in (plan_operators, plan_pipeline, plan_hybrid))
    with pytest.raises(AttributeError):
        solver_plan.no_such_name  # noqa: B018


def test_load_model_options_and_objects():
    from solver_plan import InputError, load_model
    g = load_model("mlp", layers=2, batch=16)
    assert load_model(g) is g
    assert load_model("mlp:layers=2", batch=16).total_params == g.total_params
    with pytest.raises(InputError, match="not to a built Graph"):
        load_model(g, batch=2)


def test_pipeline_takes_a_built_graph_like_a_model_string():
    from solver_plan import api
    spec = "gpt2:layers=4,hidden=256,heads=4,head_dim=64,ffn=1024,seq=128,positions=128,vocab=1024"
    by_name = api.pipeline(spec, "a100x8-80gb", processors=2, planner="pipedream", schedule="1f1b*")
    by_graph = api.pipeline(api.load_model(spec), "a100x8-80gb", processors=2, planner="pipedream", schedule="1f1b*")
    assert by_graph.status.has_solution
    assert by_graph.period_s == pytest.approx(by_name.period_s)


def test_answer_is_typed_per_request_kind():
    """`answer` has one overload per request type, so a type checker knows the report it returns."""
    import typing

    from solver_plan import api
    hints = [(f.__annotations__["request"], f.__annotations__["return"]) for f in typing.get_overloads(api.answer)]
    assert hints == [("PlanRequest", "PlanReport"), ("PipelineRequest", "PipelineReport"),
                     ("HybridRequest", "HybridReport")]


@pytest.mark.parametrize("given, taken", [(None, "device"), ("unlimited", None), ("16GB", 16e9), (2e9, 2e9)])
def test_hybrid_memory_limit_as_the_planners_take_it(given, taken):
    from solver_plan.hybrid.answer import hybrid_memory_limit
    from solver_plan.hybrid.request import HybridRequest
    assert hybrid_memory_limit(HybridRequest(memory_limit=given)) == taken
