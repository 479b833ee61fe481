"""No process outlives the command: the persistent HiGHS worker ends with `solver-plan plan`, and
dies with its parent even when the parent is killed with SIGKILL."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

MARKER = "SOLVER_PLAN_PARENT_PID="


def _workers_of(parent: int) -> set[int]:
    """Live processes started as solver workers by `parent` (found by their environment)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z" and f"{MARKER}{parent}".encode() in environ:
            found.add(int(entry.name))
    return found


def _gone(pids: set[int], within_s: float) -> set[int]:
    """The pids still alive after waiting up to `within_s`."""
    end = time.monotonic() + within_s
    alive = set(pids)
    while alive and time.monotonic() < end:
        alive = {p for p in alive if Path(f"/proc/{p}").exists() and
                 (Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z")}
        time.sleep(0.05)
    return alive


def test_plan_command_leaves_no_highs_worker():
    command = [sys.executable, "-m", "solver_plan", "plan", "--model", "inception_v3", "--planner", "milp",
               "--time-limit", "30", "--quiet", "--rows", "1"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: set[int] = set()
    while process.poll() is None:
        seen |= _workers_of(process.pid)
        time.sleep(0.02)
    assert process.returncode == 0, process.stderr.read().decode()[-500:]
    assert seen, "the MILP never started its HiGHS worker: nothing was tested"
    assert not _gone(seen, 5.0)


def test_worker_dies_with_a_killed_parent(tmp_path):
    (tmp_path / "slow_task.py").write_text("import time\n\ndef wait(seconds):\n    time.sleep(seconds)\n")
    script = textwrap.dedent("""
        import threading, time
        from solver_plan.intra import isolated
        threading.Thread(target=isolated.call, args=("highspy", "slow_task", "wait"),
                         kwargs={"seconds": 60}, daemon=True).start()
        while "highspy" not in isolated._workers:
            time.sleep(0.01)
        print(isolated._workers["highspy"].process.pid, flush=True)
        time.sleep(60)
    """)
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=environment)
    try:
        worker = int(parent.stdout.readline())
        assert _workers_of(parent.pid) == {worker}
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert not _gone({worker}, 5.0), "the worker outlived its killed parent"
