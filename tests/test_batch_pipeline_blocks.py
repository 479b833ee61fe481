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
