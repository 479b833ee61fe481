"""Pipeline jobs take a pipeline-blocks JSON as MODEL (as `solver-plan pipeline` does); it is
checked as one when the job file is read, and other .json models still go to resolve_model."""
from __future__ import annotations

import json
import textwrap

import pytest

from solver_plan.batch.jobfile import load_jobs
from solver_plan.data import data_dir
from solver_plan.errors import InputError

JOB = textwrap.dedent("""
    jobs:
      - name: p
        kind: pipeline
        models: [{model}]
        clusters: [v100x8-nvlink]
        processors: [2]
        planners: [pipedream]
        schedule: "1f1b*"
""")


def test_pipeline_job_reads_a_blocks_json(tmp_path):
    blocks = data_dir() / "pipeline-blocks" / "default.json"
    path = tmp_path / "jobs.yaml"
    path.write_text(JOB.format(model=blocks))
    (job,) = load_jobs(path)
    assert job.model == str(blocks) and job.fingerprints  # the file's digest keys the record


@pytest.mark.parametrize("change, fragment", [({"Tf": -1}, "Tf must be a finite number > 0, got -1"),
                                              ({"Mf": "x"}, "Mf"), ({"model": {"hidden_dim": 0, "seq_len": 8}}, "hidden_dim")])
def test_bad_blocks_json_is_refused_naming_the_job(tmp_path, change, fragment):
    data = json.loads((data_dir() / "pipeline-blocks" / "default.json").read_text())
    data.update(change)
    (tmp_path / "b.json").write_text(json.dumps(data))
    path = tmp_path / "jobs.yaml"
    path.write_text(JOB.format(model="b.json"))  # found next to the job file
    with pytest.raises(InputError, match=f"job 'p': jobs\\[0\\].models\\[0\\]: .*b.json: .*{fragment}"):
        load_jobs(path)


def test_config_jobs_do_not_take_blocks_json(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(JOB.format(model=data_dir() / "pipeline-blocks" / "default.json")
                    .replace("kind: pipeline", "kind: config").replace("processors: [2]", "")
                    .replace("planners: [pipedream]", "planners: [greedy]").replace('schedule: "1f1b*"', ""))
    with pytest.raises(InputError, match="default.json"):
        load_jobs(path)


def test_pipeline_job_optimizer_and_precision_reach_the_plan(tmp_path):
    """Blocks are measured in fp32 (Mparams: 4 B per parameter): Adam keeps 16 B per parameter = 4 x W
    whatever the precision, PipeDream's rule 3 x W. Same allocation (8 + 8 identical blocks) and
    schedule, so processor 0's peaks differ by exactly 8 x Mparams MiB."""
    from solver_plan.batch.kinds import run_job
    blocks = data_dir() / "pipeline-blocks" / "default.json"
    mparams = json.loads(blocks.read_text())["Mparams"] * 2.0 ** 20
    plans = {}
    for name, extra in (("adam", "precision: bf16\n"), ("rule", "optimizer: pipedream\n")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(JOB.format(model=blocks) + "    " + extra)
        (job,) = load_jobs(path)
        plans[name] = run_job(job)["plan"]
    adam, rule = plans["adam"], plans["rule"]
    assert (adam["precision"], adam["optimizer"], adam["state_bytes_per_parameter"]) == ("mixed-bf16", "adam", 16.0)
    assert (rule["precision"], rule["optimizer"], rule["memory_rule"]) == ("fp32", "pipedream", "pipedream-3w")
    assert adam["weight_bytes_per_parameter"] == rule["weight_bytes_per_parameter"] == 4.0
    assert adam["stages"] == rule["stages"] and [s["last_layer"] for s in adam["stages"]] == [7, 15]
    assert adam["peak_memory_bytes"]["0"] - rule["peak_memory_bytes"]["0"] == pytest.approx(8 * mparams)
