"""The bundled job files and the real planners, end to end through `batch` and `compare`."""
from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest

from solver_plan.batch.jobfile import load_jobs
from solver_plan.batch.store import iter_records
from solver_plan.cli import main
from solver_plan.report.runs import load_runs
from solver_plan.report.compare import compare

JOBS = Path(__file__).resolve().parents[1] / "configs" / "jobs"


@pytest.mark.parametrize("name, kinds", [("quickstart", {"config", "pipeline"}), ("compare", {"config"}),
                                         ("seeds", {"config", "pipeline"}), ("moe", {"hybrid"})])
def test_bundled_job_files_are_valid(name, kinds):
    jobs = load_jobs(JOBS / f"{name}.yaml")
    assert {job.kind for job in jobs} == kinds
    assert len({job.key for job in jobs}) == len(jobs)
    assert all(job.time_limit is not None for job in jobs)  # every bundled job is bounded


def test_seeds_file_holds_the_papers_settings():
    jobs = load_jobs(JOBS / "seeds.yaml")
    groups = {job.group for job in jobs}
    assert {"deepa", "flexflow-p100", "flexflow-k80", "smsg", "madpipe-8gb", "madpipe-16gb"} <= groups
    deepa = {(job.model, job.cluster, job.devices) for job in jobs if job.group == "deepa"}
    assert deepa == {(model, "p100-4x4", 16) for model in ("alexnet", "vgg16", "inception_v3")}
    assert {job.cluster for job in jobs if job.group == "flexflow-k80"} == {"k80-16x4"}
    madpipe = [job for job in jobs if job.kind == "pipeline"]
    assert {job.model for job in madpipe} == {"resnet50:batch=8,image=1000"} and {job.processors for job in madpipe} == {2, 4, 8}


def test_real_planners_through_batch_and_compare(tmp_path, capsys):
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent("""
        defaults: {time_limit: 20, max_candidates: 8}
        jobs:
          - name: tiny
            models: ["mlp:layers=2,hidden=256,batch=32"]
            clusters: [v100x8-nvlink]
            devices: [4]
            planners: [milp, greedy, data-parallel]
          - name: tiny-pipeline
            kind: pipeline
            models: ["mlp:layers=6,hidden=256,batch=32"]
            clusters: [v100x8-nvlink]
            processors: [2]
            planners: [pipedream]
            schedule: 1f1b*
    """))
    out = tmp_path / "out"
    assert main(["batch", str(path), "--out", str(out), "--workers", "2", "--quiet"]) == 0
    records = {record["job"]["planner"]: record for _, record, _ in iter_records(out)}
    assert set(records) == {"milp", "greedy", "data-parallel", "pipedream"}
    milp = records["milp"]
    assert milp["status"] == "OPTIMAL" and milp["gap"] == pytest.approx(0.0, abs=1e-6)
    assert milp["plan"]["operators"] and milp["plan"]["planner"] == "milp"
    assert records["pipedream"]["status"] in ("OPTIMAL", "FEASIBLE") and records["pipedream"]["objective_s"] > 0
    comparison = compare(load_runs(out)[0])
    config = next(result for result in comparison.instances if "4 devices" in result.instance)
    best = {entry.run.planner: entry for entry in config.entries}
    assert best["milp"].win and best["milp"].gap == pytest.approx(0.0, abs=1e-6)
    assert best["data-parallel"].run.objective_s >= best["milp"].run.objective_s * (1 - 1e-9)

    capsys.readouterr()
    assert main(["compare", str(out), "--no-plots"]) == 0
    assert "| milp | 1 | 1 | 1 | 1 | 0.00% |" in capsys.readouterr().out


@pytest.mark.slow
def test_quickstart_runs_in_under_a_minute(tmp_path):
    started = time.monotonic()
    assert main(["batch", str(JOBS / "quickstart.yaml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert time.monotonic() - started < 60
