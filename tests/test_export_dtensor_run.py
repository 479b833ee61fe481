"""The DTensor export executed: a per-operator plan of an MLP (tests/fixtures/plans, made by the
greedy planner on 4 devices: fc0 split by sample x out, fc1 by sample x in, so partial sums and
meshes that change between operators) applied with DTensor on 4 gloo CPU processes equals one
process's forward and gradients."""
from __future__ import annotations

import json

import pytest

from solver_plan.errors import InputError
from solver_plan.export import export_plan
from solver_plan.graph.resolve import resolve_model
from solver_plan.resources import REPO_ROOT

PLANS = REPO_ROOT / "tests" / "fixtures" / "plans"


@pytest.mark.slow
def test_mlp_plan_runs_on_four_gloo_processes():
    pytest.importorskip("torch")
    from solver_plan.export.dtensor_run import run_dtensor_export
    plan = json.loads((PLANS / "operators-mlp.json").read_text())
    graph = resolve_model(json.loads((PLANS / "models.json").read_text())["operators-mlp.json"])
    text = export_plan(plan, "dtensor", graph=graph)
    doc = json.loads(text)
    assert doc["cross_mesh_edges"] and any("Partial()" in p for m in doc["modules"].values()
                                           for p in sum(m["output_placements"], []))
    result = run_dtensor_export(text, graph, world_size=4)
    assert result["parameters"] == ["fc0.bias", "fc0.weight", "fc1.bias", "fc1.weight"]
    # float64 throughout: only summation order differs
    assert result["loss"] < 1e-9 and result["logits"] < 1e-9 and result["gradients"] < 1e-9


def test_runner_names_what_it_cannot_run():
    pytest.importorskip("torch")
    from solver_plan.export.dtensor_run import run_dtensor_export
    graph = resolve_model("gpt2:layers=1,hidden=64,heads=4,head_dim=16,seq=16,vocab=64,batch=2")
    with pytest.raises(InputError, match="is not executed by the DTensor runner"):
        run_dtensor_export("{}", graph, world_size=1)
