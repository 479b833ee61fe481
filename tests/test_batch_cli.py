"""`solver-plan batch`: bad input is one line and exit 2, never a traceback, and records stay intact."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import solver_plan.planners as planner_registry
from solver_plan.batch import kinds
from solver_plan.batch.kinds import outcome
from solver_plan.cli import main
from solver_plan.result import Status

REPO = Path(__file__).resolve().parents[1]


def standin_config_job(job):
    return outcome(Status.FEASIBLE, 2.0 + job.seed, None, 0.01, {"seed": job.seed})


@pytest.fixture
def standins(monkeypatch):
    """Stand-in planners in the registry and a stand-in config runner (inherited by forked workers)."""
    monkeypatch.setattr(planner_registry, "_REGISTRY", {kind: {} for kind in planner_registry.KINDS})
    monkeypatch.setattr(planner_registry, "load_builtin_planners", lambda *kinds: None)
    for name in ("exact-a", "heuristic-b"):
        planner_registry.register(name, "config")(lambda problem, **options: None)
    monkeypatch.setitem(kinds.RUNNERS, "config", standin_config_job)


def job_file(tmp_path: Path, planners: str = "[exact-a, heuristic-b]") -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(f"""
        jobs:
          - name: small
            models: ["mlp:layers=2,hidden=64,batch=8"]
            clusters: [v100x8-nvlink]
            planners: {planners}
            seeds: [0, 1]
            time_limit: 5
    """))
    return path


def snapshot(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("solver-plan: error: ")
    return lines[0]


def test_batch_runs_lists_and_skips(tmp_path, standins, capsys):
    out = tmp_path / "out"
    assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert "4/4 done" in err and "4 jobs: 0 already recorded, 4 run" in err
    assert len(list(out.glob("*.json"))) == 4
    assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--list"]) == 0
    listing = capsys.readouterr().out
    assert listing.count("recorded small") == 4 and "4 jobs, 0 pending" in listing


def test_bad_job_file_is_one_line_and_leaves_finished_records_intact(tmp_path, standins, capsys):
    out = tmp_path / "out"
    assert main(["batch", str(job_file(tmp_path)), "--out", str(out)]) == 0
    capsys.readouterr()
    before = snapshot(out)
    path = job_file(tmp_path, planners="[exact-a, gurobi]")
    assert main(["batch", str(path), "--out", str(out)]) == 2
    line = one_error_line(capsys)
    assert f"{path}: job 'small': jobs[0].planners[1]: unknown config planner 'gurobi'" in line
    assert snapshot(out) == before


def test_unknown_key_and_missing_file_are_one_line(tmp_path, standins, capsys):
    path = job_file(tmp_path)
    path.write_text(path.read_text().replace("time_limit: 5", "time_limt: 5"))
    assert main(["batch", str(path), "--out", str(tmp_path / "out")]) == 2
    assert "job 'small': jobs[0].time_limt: unknown key 'time_limt'" in one_error_line(capsys)
    assert main(["batch", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out")]) == 2
    assert "nope.yaml: cannot read file" in one_error_line(capsys)


def test_unwritable_output_folder_is_one_line(tmp_path, standins, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["batch", str(job_file(tmp_path)), "--out", str(blocker / "out")]) == 2
    assert "--out: cannot write records to" in one_error_line(capsys)


def test_a_failing_job_makes_exit_status_1_after_recording_it(tmp_path, standins, monkeypatch, capsys):
    def fail_on_seed_one(job):
        if job.seed == 1:
            raise ValueError("no plan for seed 1")
        return standin_config_job(job)

    monkeypatch.setitem(kinds.RUNNERS, "config", fail_on_seed_one)
    out = tmp_path / "out"
    assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--quiet"]) == 1
    assert "(2 failed, 0 killed" in capsys.readouterr().err
    assert len(list(out.glob("*.json"))) == 4


def test_ray_executor_without_ray_says_how_to_install_it(tmp_path, standins, monkeypatch, capsys):
    import sys
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the optional extra were not installed
    assert main(["batch", str(job_file(tmp_path)), "--out", str(tmp_path / "out"), "--executor", "ray"]) == 2
    assert "--executor: the ray executor needs Ray: pip install 'solver-plan[ray]'" in one_error_line(capsys)
