"""A batch SIGKILLed mid-run (the whole process group: runner and workers) and rerun ends with the
same records as an uninterrupted batch, and the rerun redoes only the jobs that had no record.

Run as a script, this file is the batch under test: `python test_batch_resume.py OUT_DIR`.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from solver_plan.batch.job import Job  # noqa: E402
from solver_plan.batch.kinds import outcome  # noqa: E402
from solver_plan.batch.records import stable_view  # noqa: E402
from solver_plan.batch.run import make_executor, run_batch  # noqa: E402
from solver_plan.batch.store import iter_records  # noqa: E402
from solver_plan.result import Status  # noqa: E402
from test_batch_helpers import running  # noqa: E402

CALLS_ENV = "SOLVER_PLAN_TEST_CALLS"
PIDS_ENV = "SOLVER_PLAN_TEST_PIDS"
JOB_SECONDS = 0.25


def resume_jobs() -> list[Job]:
    return [Job("resume", "config", f"mlp:layers={layers}", "v100x8-nvlink", planner, seed=seed, time_limit=30)
            for layers in (2, 3) for planner in ("exact", "heuristic") for seed in range(3)]


def sleepy_work(job: Job) -> dict:
    for variable, line in ((CALLS_ENV, job.key), (PIDS_ENV, str(os.getpid()))):
        if os.environ.get(variable):
            with open(os.environ[variable], "a") as log:
                log.write(line + "\n")
    time.sleep(JOB_SECONDS)
    layers = int(job.model.rpartition("=")[2])
    objective = layers + 0.1 * job.seed + (0.5 if job.planner == "heuristic" else 0.0)
    return outcome(Status.FEASIBLE, objective, layers if job.planner == "exact" else None, JOB_SECONDS,
                   {"layers": layers, "seed": job.seed})


def records(folder: Path) -> dict[str, dict]:
    return {record["key"]: stable_view(record) for _, record, _ in iter_records(folder) if record}


def start_batch(out: Path, calls: Path | None = None, pids: Path | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for variable, path in ((CALLS_ENV, calls), (PIDS_ENV, pids)):
        env.pop(variable, None)
        if path is not None:
            env[variable] = str(path)
    return subprocess.Popen([sys.executable, __file__, str(out)], env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def test_killed_batch_resumes_to_the_same_records_redoing_only_unfinished_jobs(tmp_path):
    jobs = resume_jobs()
    reference = start_batch(tmp_path / "reference")
    pids = tmp_path / "pids.txt"
    interrupted = start_batch(tmp_path / "interrupted", pids=pids)
    deadline = time.monotonic() + 60
    while len(list((tmp_path / "interrupted").glob("*.json"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(interrupted.pid, signal.SIGKILL)  # the runner and its workers, at no chosen moment
    interrupted.wait()
    assert interrupted.returncode == -signal.SIGKILL
    survivors = set(records(tmp_path / "interrupted"))
    assert 3 <= len(survivors) < len(jobs)
    workers = [int(pid) for pid in pids.read_text().split()]
    deadline = time.monotonic() + 5  # each job notices its runner is gone and ends its process group
    while any(running(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(pid) for pid in workers)

    calls = tmp_path / "calls.txt"
    rerun = start_batch(tmp_path / "interrupted", calls)
    assert rerun.wait(timeout=120) == 0, rerun.stderr.read().decode()
    assert reference.wait(timeout=120) == 0, reference.stderr.read().decode()
    redone = calls.read_text().split()
    assert sorted(redone) == sorted({job.key for job in jobs} - survivors)
    assert records(tmp_path / "interrupted") == records(tmp_path / "reference")
    assert len(records(tmp_path / "reference")) == len(jobs)


if __name__ == "__main__":
    run_batch(resume_jobs(), sys.argv[1], make_executor("local", 2, sleepy_work), progress=False)
