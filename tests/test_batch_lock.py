"""One batch per record folder: a second batch refuses naming the holder, or waits with --wait; a
lock left by a dead batch is taken over."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import solver_plan.planners as planner_registry
from solver_plan.batch import kinds
from solver_plan.batch.kinds import outcome
from solver_plan.batch.lock import LOCK_NAME, BatchLock, FolderBusy
from solver_plan.cli import main
from solver_plan.result import Status


@pytest.fixture
def standins(monkeypatch):
    """A stand-in planner and config runner, so a batch takes milliseconds."""
    monkeypatch.setattr(planner_registry, "_REGISTRY", {kind: {} for kind in planner_registry.KINDS})
    monkeypatch.setattr(planner_registry, "load_builtin_planners", lambda *kinds: None)
    planner_registry.register("stand-in", "config")(lambda problem, **options: None)
    monkeypatch.setitem(kinds.RUNNERS, "config", lambda job: outcome(Status.FEASIBLE, 1.0, None, 0.01, {}))


def job_file(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent("""
        jobs:
          - name: small
            models: ["mlp:layers=2,hidden=64,batch=8"]
            clusters: [v100x8-nvlink]
            planners: [stand-in]
            seeds: [0, 1]
    """))
    return path


def records(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("*.json"))


def test_second_batch_refuses_naming_the_holder(tmp_path, standins, capsys):
    out = tmp_path / "out"
    with BatchLock(out, command="solver-plan batch other.yaml"):
        assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"pid {os.getpid()} on host {socket.gethostname()}, started " in err[0]
    assert "another batch is running" in err[0] and "--wait" in err[0] and str(out) in err[0]
    assert records(out) == []  # nothing ran
    # released: the same batch now runs, and the lock file is left empty (no stale details)
    assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--quiet"]) == 0
    assert len(records(out)) == 2
    assert (out / LOCK_NAME).read_text() == ""


def test_wait_runs_once_the_holder_finishes(tmp_path, standins, capsys):
    out = tmp_path / "out"
    lock = BatchLock(out).acquire()
    timer = threading.Timer(0.6, lock.release)
    timer.start()
    try:
        assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--quiet", "--wait"]) == 0
    finally:
        timer.join()
    assert f"waiting for the batch holding {out} (pid {os.getpid()}" in capsys.readouterr().err
    assert len(records(out)) == 2


def test_lock_of_a_killed_batch_is_taken_over(tmp_path, standins, capsys):
    out = tmp_path / "out"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from solver_plan.batch.lock import BatchLock\n"
                               f"BatchLock({str(out)!r}).acquire(); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy, match=f"pid {holder.pid} on host"):
            BatchLock(out).acquire()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--quiet"]) == 0
    assert f"taking over the lock of pid {holder.pid}" in capsys.readouterr().err
    assert len(records(out)) == 2


def test_list_and_bad_job_files_take_no_lock(tmp_path, standins, capsys):
    out = tmp_path / "out"
    with BatchLock(out):  # --list only reads; a bad job file fails on its own error before locking
        assert main(["batch", str(job_file(tmp_path)), "--out", str(out), "--list"]) == 0
        assert "2 jobs, 2 pending" in capsys.readouterr().out
        bad = tmp_path / "bad.yaml"
        bad.write_text("jobs: []\n")
        assert main(["batch", str(bad), "--out", str(out)]) == 2
        assert "expected a non-empty list of jobs" in capsys.readouterr().err
