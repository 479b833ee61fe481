"""Batch jobs of kind hybrid: a job file plans with the hybrid planner and its baselines and records them."""
from __future__ import annotations

import textwrap

import pytest

from solver_plan.batch.jobfile import load_jobs
from solver_plan.batch.store import iter_records
from solver_plan.cli import main
from solver_plan.errors import InputError

MODEL = "gpt2:layers=4,hidden=256,heads=4,head_dim=64,ffn=1024,seq=128,positions=128,vocab=1024"


def job_file(tmp_path, body: str):
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(body))
    return path


def test_hybrid_jobs_run_and_record_every_planner(tmp_path, capsys):
    path = job_file(tmp_path, f"""
        defaults: {{time_limit: 30, grace: 30}}
        jobs:
          - name: tiny-gpt
            kind: hybrid
            models: ["{MODEL}"]
            clusters: [a100x8-80gb]
            devices: [8]
            planners:
              - {{name: hybrid, options: {{batch: 16}}}}
              - {{name: megatron-rule, options: {{batch: 16}}}}
              - {{name: data-parallel, options: {{batch: 16}}}}
        """)
    out = tmp_path / "runs"
    assert main(["batch", str(path), "--out", str(out), "--workers", "1"]) == 0
    records = {record["job"]["planner"]: record for _, record, _ in iter_records(out)}
    assert set(records) == {"hybrid", "megatron-rule", "data-parallel"}
    best = records["hybrid"]
    assert best["status"] in ("OPTIMAL", "FEASIBLE")
    assert best["plan"]["kind"] == "hybrid"
    parallelism = best["plan"]["parallelism"]
    assert parallelism["dp"] * parallelism["tp"] * parallelism["pp"] == 8
    for name in ("megatron-rule", "data-parallel"):  # the search is never predicted slower than a baseline
        other = records[name]
        if other["objective_s"] is not None:
            assert best["objective_s"] <= other["objective_s"] * (1 + 1e-9)


def test_pipeline_only_keys_are_refused_in_hybrid_jobs(tmp_path):
    path = job_file(tmp_path, f"""
        jobs:
          - name: j
            kind: hybrid
            models: ["{MODEL}"]
            clusters: [a100x8-80gb]
            processors: [4]
            planners: [{{name: hybrid, options: {{batch: 16}}}}]
        """)
    with pytest.raises(InputError, match="only pipeline jobs take 'processors'"):
        load_jobs(path)


def test_hybrid_jobs_take_precision(tmp_path):
    """precision is validated like the other kinds' (unknown names: one line naming the key) and
    reaches the job, its record key and the planner: auto is the device's default (A100: mixed bf16),
    fp32 is planned in fp32, and a dtype the device has no units for (fp8 on an A100) is refused
    when the jobs load."""
    from solver_plan.batch.kinds import run_job
    entry = f"""
        jobs:
          - name: j
            kind: hybrid
            models: ["{MODEL}"]
            clusters: [a100x8-80gb]
            devices: [8]
            planners: [{{name: hybrid, options: {{batch: 16}}}}]
            time_limit: 30
        """
    plain, = load_jobs(job_file(tmp_path, entry))
    job, = load_jobs(job_file(tmp_path, entry + "    precision: BF16\n"))
    assert (plain.precision, job.precision) == (None, "bf16")
    assert job.inputs()["precision"] == "bf16" and "precision" not in plain.inputs() and job.key != plain.key
    auto, = load_jobs(job_file(tmp_path, entry + "    precision: auto\n"))
    assert auto.key == plain.key
    with pytest.raises(InputError, match=r"jobs\[0\]\.precision: unknown precision 'fp64'"):
        load_jobs(job_file(tmp_path, entry + "    precision: fp64\n"))
    with pytest.raises(InputError, match=r"jobs\[0\]\.precision: A100-SXM-80GB has no fp8 units; use precision: "
                                         r"auto or bf16"):
        load_jobs(job_file(tmp_path, entry + "    precision: fp8\n"))
    outcome = run_job(job)
    assert outcome["status"] in ("OPTIMAL", "FEASIBLE") and outcome["error"] is None
    assert outcome["plan"]["precision"] == "mixed-bf16"
    fp32, = load_jobs(job_file(tmp_path, entry + "    precision: fp32\n"))
    assert fp32.precision == "fp32" and fp32.key != plain.key
    slow = run_job(fp32)
    assert slow["status"] in ("OPTIMAL", "FEASIBLE") and slow["error"] is None
    assert slow["plan"]["precision"] == "fp32" and slow["objective_s"] > outcome["objective_s"]
