"""The local runner with stand-in jobs: records, skipping, failures, overruns, corrupt records."""
from __future__ import annotations

import io
import json
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from solver_plan.batch.job import Job
from solver_plan.batch.kinds import outcome
from solver_plan.batch.records import read_record, stable_view
from solver_plan.batch.run import make_executor, run_batch
from solver_plan.batch.store import RecordStore, iter_records
from solver_plan.errors import InputError
from solver_plan.result import Status
from test_batch_helpers import running

CALLS_ENV = "SOLVER_PLAN_TEST_CALLS"
PIDS_ENV = "SOLVER_PLAN_TEST_PIDS"


def standin_work(job: Job) -> dict:
    """Deterministic in the job's inputs; behaves as its planner name says."""
    calls = os.environ.get(CALLS_ENV)
    if calls:
        with open(calls, "a") as log:
            log.write(job.key + "\n")
    if job.planner == "fails":
        raise RuntimeError(f"planner bug on seed {job.seed}")
    if job.planner == "hangs":
        time.sleep(600)
    if job.planner == "crashes":
        os._exit(3)
    if job.planner == "spawns":  # a solver process of its own, as real planners start
        helper = multiprocessing.Process(target=time.sleep, args=(600,))
        helper.start()
        Path(os.environ[PIDS_ENV]).write_text(str(helper.pid))
        time.sleep(600)
    time.sleep(0.05)
    objective = 1.0 + 0.25 * job.seed + (0.5 if job.planner == "heuristic" else 0.0)
    bound = 1.0 if job.planner == "exact" else None
    return outcome(Status.OPTIMAL if bound else Status.FEASIBLE, objective, bound, 0.05,
                   {"planner": job.planner, "assignment": [job.seed, 2, 3]})


def make_jobs(planners=("exact", "heuristic"), seeds=range(3), **settings) -> list[Job]:
    return [Job("standin", "config", "mlp", "v100x8-nvlink", planner, seed=seed, **settings)
            for planner in planners for seed in seeds]


def run(jobs, folder, workers=2, **kwargs):
    stream = io.StringIO()
    summary = run_batch(jobs, folder, make_executor("local", workers, standin_work), stream=stream, **kwargs)
    return summary, stream.getvalue()


def stable_records(folder: Path) -> dict[str, dict]:
    return {record["key"]: stable_view(record) for _, record, _ in iter_records(folder) if record}


def calls(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_every_job_gets_one_valid_record_and_a_rerun_runs_nothing(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS_ENV, str(log))
    jobs = make_jobs()
    summary, progress = run(jobs, tmp_path / "out")
    assert (summary.total, summary.ran, summary.skipped, summary.failed) == (6, 6, 0, 0)
    records = stable_records(tmp_path / "out")
    assert set(records) == {job.key for job in jobs}
    assert sorted(calls(log)) == sorted(job.key for job in jobs)
    exact0 = records[jobs[0].key]
    assert (exact0["status"], exact0["objective_s"], exact0["lower_bound_s"], exact0["gap"]) == ("OPTIMAL", 1.0, 1.0, 0.0)
    assert exact0["job"]["planner"] == "exact" and exact0["plan"]["assignment"] == [0, 2, 3]
    assert "6/6 done" in progress and "ETA" in progress

    summary, _ = run(jobs, tmp_path / "out")
    assert (summary.ran, summary.skipped) == (0, 6)
    assert len(calls(log)) == 6


def test_results_are_deterministic_across_runs_and_worker_counts(tmp_path):
    jobs = make_jobs()
    run(jobs, tmp_path / "a", workers=1)
    run(jobs, tmp_path / "b", workers=3)
    assert stable_records(tmp_path / "a") == stable_records(tmp_path / "b")
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == sorted(p.name for p in (tmp_path / "b").iterdir())


def test_a_failing_a_crashing_and_an_overrunning_job_are_recorded_and_the_batch_goes_on(tmp_path):
    jobs = make_jobs(("fails", "crashes", "hangs", "exact"), seeds=[0], time_limit=0.3, grace=0.4)
    started = time.monotonic()
    summary, _ = run(jobs, tmp_path / "out", workers=2)
    assert time.monotonic() - started < 10
    assert (summary.ran, summary.failed, summary.killed) == (4, 2, 1)
    by_planner = {record["job"]["planner"]: record for _, record, _ in iter_records(tmp_path / "out")}
    assert by_planner["fails"]["status"] == "ERROR"
    assert by_planner["fails"]["error"] == "RuntimeError: planner bug on seed 0"
    assert "Traceback" in by_planner["fails"]["detail"]
    assert by_planner["crashes"]["status"] == "ERROR"
    assert by_planner["crashes"]["error"] == "worker died without an answer (exit code 3)"
    hung = by_planner["hangs"]
    assert (hung["status"], hung["killed"], hung["objective_s"]) == ("TIME_LIMIT", True, None)
    assert 0.7 <= hung["wall_s"] < 5 and "time limit 0.3 s + grace 0.4 s" in hung["error"]
    assert by_planner["exact"]["status"] == "OPTIMAL"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_stopping_an_overrunning_job_also_stops_the_processes_it_started(tmp_path, monkeypatch):
    pids = tmp_path / "pids.txt"
    monkeypatch.setenv(PIDS_ENV, str(pids))
    summary, _ = run(make_jobs(("spawns",), seeds=[0], time_limit=0.5, grace=0.5), tmp_path / "out")
    assert summary.killed == 1
    helper = int(pids.read_text())
    deadline = time.monotonic() + 5
    while running(helper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(helper)


def test_failed_jobs_are_kept_unless_retry_is_asked(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    jobs = make_jobs(("fails", "exact"), seeds=[0])
    run(jobs, tmp_path / "out")
    monkeypatch.setenv(CALLS_ENV, str(log))
    assert run(jobs, tmp_path / "out")[0].ran == 0
    summary, _ = run(jobs, tmp_path / "out", retry_failed=True)
    assert summary.ran == 1 and calls(log) == [jobs[0].key]


def test_corrupt_partial_and_misplaced_records_are_detected_and_redone(tmp_path, monkeypatch):
    jobs = make_jobs()
    out = tmp_path / "out"
    run(jobs, out)
    reference = stable_records(out)
    store = RecordStore(out)
    truncated, tampered, misplaced = (store.path(job) for job in jobs[:3])
    truncated.write_text(truncated.read_text()[:100])
    record = json.loads(tampered.read_text())
    record["objective_s"] = 0.5  # a better objective than the job found: must not be believed
    tampered.write_text(json.dumps(record))
    misplaced.write_text(store.path(jobs[4]).read_text())
    for path in (truncated, tampered, misplaced):
        assert store.load(next(job for job in jobs if store.path(job) == path))[0] is None

    log = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS_ENV, str(log))
    summary, messages = run(jobs, out)
    assert (summary.ran, summary.invalid) == (3, 3)
    assert sorted(calls(log)) == sorted(job.key for job in jobs[:3])
    assert "not valid JSON" in messages and "checksum mismatch" in messages and f"expected {jobs[2].key}" in messages
    assert stable_records(out) == reference
    for job in jobs:
        assert read_record(store.path(job), job.key)["key"] == job.key


def test_leftover_temporary_files_are_ignored(tmp_path):
    jobs = make_jobs(seeds=[0])
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / f".{jobs[0].record_name()}.x1.tmp").write_text('{"half": ')
    summary, _ = run(jobs, tmp_path / "out")
    assert summary.ran == 2 and len(stable_records(tmp_path / "out")) == 2


def test_an_unwritable_output_folder_is_an_input_error_before_any_job_runs(tmp_path, monkeypatch):
    log = tmp_path / "calls.txt"
    monkeypatch.setenv(CALLS_ENV, str(log))
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(InputError, match=r"^--out: cannot write records to .*file/records"):
        run(make_jobs(), blocker / "records")
    assert calls(log) == []


def test_unknown_executor_and_bad_worker_count_are_input_errors():
    with pytest.raises(InputError, match="--executor: unknown executor 'slurm'"):
        make_executor("slurm", 1)
    with pytest.raises(InputError, match="--workers: must be at least 1"):
        make_executor("local", 0)
