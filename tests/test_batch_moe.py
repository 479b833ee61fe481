"""Batch jobs of kind hybrid on a mixture of experts: planned by the expert-parallel planner (as the hybrid
command plans them), the record holding the moe-hybrid result in the common envelope; the expert
options (fix pins ep / etp / capacity, routing, a2a_overlap) checked when the jobs load, each error
one line naming the job, the key and the value."""
from __future__ import annotations

import json
import textwrap

import pytest

from solver_plan.batch.jobfile import load_jobs
from solver_plan.batch.store import iter_records
from solver_plan.cli import main
from solver_plan.errors import InputError
from solver_plan.resources import REPO_ROOT

QWEN3 = str(REPO_ROOT / "data" / "hf-configs" / "qwen3-30b-a3b.json") + ":seq=4096,layers=4"


def job_file(tmp_path, options: str, model: str = QWEN3):
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(f"""
        defaults: {{time_limit: 30, grace: 30}}
        jobs:
          - name: qwen-ep
            kind: hybrid
            models: ["{model}"]
            clusters: [h100-80gb-superpod]
            devices: [8]
            planners: [hybrid]
            options: {options}
        """))
    return path


def test_expert_parallel_job_records_a_moe_hybrid_result(tmp_path, capsys):
    """The record's plan is the expert-parallel planner's result (kind moe-hybrid, envelope first) with
    the pins, routing and overlap asked; its objective is the plan's step time; it exports."""
    path = job_file(tmp_path, '{batch: 16, fix: "ep=4,capacity=1.25", routing: "zipf:0.2", a2a_overlap: full}')
    out = tmp_path / "runs"
    assert main(["batch", str(path), "--out", str(out), "--workers", "1"]) == 0
    (_, record, _), = list(iter_records(out))
    result = record["plan"]
    assert record["status"] == result["status"] == "OPTIMAL"
    assert result["kind"] == "moe-hybrid" and result["schema_version"] == 1
    assert result["objective"]["name"] == "step_time" and result["objective"]["value"] == record["objective_s"]
    plan = result["plan"]
    p = plan["parallelism"]
    assert (p["ep"], p["capacity"]) == (4, 1.25) and p["ep"] * p["etp"] * p["edp"] == p["dp"] * p["tp"] * p["cp"]
    assert plan["routing"] == "zipf:0.2" and plan["a2a_overlap"] == "full"
    assert record["objective_s"] == pytest.approx(plan["step_time_s"])
    from solver_plan.export import export_plan
    assert "--expert-model-parallel-size 4" in export_plan(result, "megatron")
    capsys.readouterr()
    jsonschema = pytest.importorskip("jsonschema")
    for document, name in ((record, "batch-record"), (result, "moe-hybrid")):
        schema = json.loads((REPO_ROOT / "docs" / "schemas" / f"{name}.v1.schema.json").read_text())
        jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator)


def test_same_answer_as_the_hybrid_command(tmp_path, capsys):
    """A batch job and `solver-plan hybrid` with the same pins choose the same configuration."""
    path = job_file(tmp_path, '{batch: 16, fix: "ep=2"}')
    out = tmp_path / "runs"
    assert main(["batch", str(path), "--out", str(out), "--workers", "1"]) == 0
    (_, record, _), = list(iter_records(out))
    command = tmp_path / "plan.json"
    assert main(["hybrid", "--model", QWEN3, "--cluster", "h100-80gb-superpod", "--devices", "8", "--batch", "16",
                 "--fix", "ep=2", "--time-limit", "30", "--out", str(command)]) == 0
    assert record["plan"]["plan"]["parallelism"] == json.loads(command.read_text())["plan"]["parallelism"]
    capsys.readouterr()


@pytest.mark.parametrize("options,key,message", [
    ('{batch: 16, fix: "ep=3"}', "options.fix", "'ep=3': ep (3) must divide the experts (128)"),
    ('{batch: 16, fix: "etp=7"}', "options.fix", "'etp=7': etp (7) must divide the expert width (768)"),
    ('{batch: 16, fix: "ep=4,bogus=1"}', "options.fix", "unknown key 'bogus'"),
    ('{batch: 16, fix: "capacity=0.5"}', "options.fix", "'capacity=0.5'"),
    ('{batch: 16, routing: "zipf:x"}', "options.routing", "'zipf:x'"),
    ('{batch: 16, routing: "histogram:1/2"}', "options.routing", "the histogram has 2 counts, the model 128 experts"),
    ('{batch: 16, a2a_overlap: sometimes}', "options.a2a_overlap", "got 'sometimes'"),
    ('{batch: 16, fix: "ep=4", colour: red}', "planners[0]", "no option 'colour'"),
])
def test_bad_expert_options_fail_when_the_jobs_load(tmp_path, options, key, message):
    with pytest.raises(InputError) as caught:
        load_jobs(job_file(tmp_path, options))
    text = str(caught.value)
    assert "job 'qwen-ep'" in text and f"jobs[0].{key}" in text and message in text and "\n" not in text


def test_expert_options_on_a_dense_model_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"options\.a2a_overlap: 'full': a2a_overlap is an option of mixtures of "
                                         r"experts .* not of 'gpt2'"):
        load_jobs(job_file(tmp_path, "{batch: 16, a2a_overlap: full}", model="gpt2"))
