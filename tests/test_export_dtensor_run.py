"""The DTensor export executed (solver_plan/export/dtensor_run.py): per-operator plans made by the
greedy planner (tests/fixtures/plans) applied with DTensor on 4 gloo CPU processes equal one
process's forward and gradients, in float64."""
from __future__ import annotations

import json

import pytest

from solver_plan.errors import InputError
from solver_plan.export import export_plan
from solver_plan.graph.resolve import resolve_model
from solver_plan.resources import REPO_ROOT

PLANS = REPO_ROOT / "tests" / "fixtures" / "plans"
MODELS = json.loads((PLANS / "models.json").read_text())


def _export(name: str):
    graph = resolve_model(MODELS[name])
    return export_plan(json.loads((PLANS / name).read_text()), "dtensor", graph=graph), graph


@pytest.mark.slow
@pytest.mark.parametrize("name", ["operators-mlp.json", "operators-gpt2-alldevices.json"])
def test_plan_runs_on_four_gloo_processes(name):
    """The MLP: fc0 sample x out, fc1 sample x in (partial sums), meshes changing between
    operators. The 2-layer GPT (--all-devices): embeddings, norms, attention and projections by
    sample, each MLP's fc1 split by `in` (partial sums) and fc2 by `out`."""
    pytest.importorskip("torch")
    from solver_plan.export.dtensor_run import run_dtensor_export
    text, graph = _export(name)
    doc = json.loads(text)
    assert any("Partial()" in p for m in doc["modules"].values() for p in sum(m["output_placements"], []))
    assert bool(doc["cross_mesh_edges"]) == (name == "operators-mlp.json")  # 1-D and 2-D meshes of 0-3
    result = run_dtensor_export(text, graph, world_size=4)
    weights = {f"{op.name}.{part}" for op in graph if op.params for part in ("weight", "bias")
               if part == "weight" or op.attr("bias", op.op_type.value == "LayerNorm")}
    assert set(result["parameters"]) == weights and not result["missing_gradients"]
    # float64 throughout: only summation order differs
    assert result["loss"] < 1e-9 and result["logits"] < 1e-9 and result["gradients"] < 1e-9


def test_runner_names_what_it_cannot_run():
    pytest.importorskip("torch")
    from solver_plan.export.dtensor_run import run_dtensor_export
    with pytest.raises(InputError, match="is not executed by the DTensor runner"):
        run_dtensor_export("{}", resolve_model("resnet50:batch=1"), world_size=1)
    text, graph = _export("operators-gpt2.json")  # the MLPs on devices 0-1 only
    with pytest.raises(InputError, match="runs on a part of the 4 ranks"):
        run_dtensor_export(text, graph, world_size=4)
