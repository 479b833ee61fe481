"""The solver worker's private channel, its deadline, and what users see when a solver fails.

The worker answers on a pipe of its own, never on standard output: a solver library that prints
(highspy >= 1.16 prints a banner when a `Highs()` is made) can neither corrupt the protocol nor
reach the terminal. These tests run stand-in solver modules that print on both standard streams,
from Python and from the file descriptors, while they are imported and while they run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from solver_plan.deadline import time_budget
from solver_plan.intra import isolated
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.result import Status

ROOT = Path(__file__).resolve().parents[1]
BANNER = "Running STAND-IN 9.9 Copyright (c) banner"

NOISY_MODULE = f'''
import os, sys
print({BANNER!r})                       # Python's stdout, at import
sys.stderr.write("stand-in import log\\n")
os.write(1, b"\\x00\\x01 raw bytes on fd 1 at import\\n")
os.write(2, b"raw bytes on fd 2 at import\\n")

class Solver:                            # prints again when constructed, like highspy.Highs()
    def __init__(self):
        print({BANNER!r}, flush=True)
        os.write(1, b"SPW1" + b"\\xff" * 64)  # even the channel's magic word, on stdout
        os.write(2, b"constructor log on fd 2\\n")

def solve(values):
    Solver()
    os.write(1, b"x" * 1_000_000)         # more than any pipe buffer: must not block the worker
    return sum(values)

def crash():
    Solver()
    raise RuntimeError("stand-in solver crashed")

def die():
    os._exit(7)

def sleep(seconds):
    import time
    time.sleep(seconds)
'''


@pytest.fixture
def noisy(tmp_path, monkeypatch):
    """A stand-in solver module importable by the worker (fresh workers see PYTHONPATH)."""
    (tmp_path / "noisy_solver.py").write_text(NOISY_MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    monkeypatch.delenv(isolated.SOLVER_OUTPUT_VARIABLE, raising=False)
    isolated.shutdown()
    yield "noisy_solver"
    isolated.shutdown()


def _in_worker(function: str, timeout: float | None = 30, **kwargs):
    return isolated.call("stand-in", "noisy_solver", function, timeout=timeout, killable=True, **kwargs)


def test_output_of_a_solver_library_neither_breaks_the_channel_nor_reaches_the_terminal(noisy, capfd):
    assert _in_worker("solve", values=list(range(10))) == 45
    assert _in_worker("solve", values=[1.5, 2.5]) == 4.0  # the same worker, still in step
    out, err = capfd.readouterr()
    assert "STAND-IN" not in out + err and "raw bytes" not in out + err and "log" not in err


def test_a_failing_solver_is_reported_with_its_reason(noisy):
    with pytest.raises(isolated.SolverFailure, match="RuntimeError: stand-in solver crashed"):
        _in_worker("crash")
    assert _in_worker("solve", values=[2]) == 2  # the worker survives a failed call


def test_a_dying_worker_is_a_failure_not_a_hang(noisy):
    with pytest.raises(isolated.SolverFailure, match="died"):
        _in_worker("die")


def test_every_read_is_bounded_by_the_deadline(noisy):
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        _in_worker("sleep", timeout=0.5, seconds=60)
    assert time.monotonic() - started < 0.5 + isolated.GRACE_S + 2.0
    assert "stand-in" not in isolated._workers  # killed, not left running


def test_highs_runs_in_its_worker_whatever_was_imported_before():
    import highspy  # noqa: F401  (loaded here first, as pulp does when the pipeline package is imported)
    assert isolated.runs_in_worker("highspy")
    isolated.shutdown()
    problem = random_problem(12, seed=3, shape="dag")
    result = solve(problem, "milp", simplify=False, deadline=time_budget(60))
    assert result.status is Status.OPTIMAL, result.notes
    assert result.solver_failure is None
    assert "highspy" in isolated._workers, "HiGHS ran in this process"


def test_a_failing_solver_falls_back_but_says_so(monkeypatch):
    def broken(*args, **kwargs):
        raise isolated.SolverFailure("RuntimeError: solver crashed")
    monkeypatch.setattr(isolated, "call", broken)
    problem = random_problem(30, seed=2, shape="dag")
    for planner in ("milp", "cpsat", "milp-load"):
        result = solve(problem, planner, simplify=False, deadline=time_budget(30))
        assert result.status.has_solution, result.notes  # the fallback plan is kept ...
        assert result.solver_failure and "solver crashed" in result.solver_failure  # ... and named
        assert result.solver_failure.startswith(planner)


def test_a_time_out_is_not_a_solver_failure(monkeypatch):
    def slow(*args, **kwargs):
        raise TimeoutError("solver process killed after 1.0 s of wall clock")
    monkeypatch.setattr(isolated, "call", slow)
    result = solve(random_problem(30, seed=2, shape="dag"), "milp", simplify=False, deadline=time_budget(30))
    assert result.status.has_solution and result.solver_failure is None


# --- what users run: fresh processes --------------------------------------------------------------

def _run(arguments: list[str], cwd: Path, extra_path: Path | None = None, timeout: float = 240):
    environment = {k: v for k, v in os.environ.items() if k != isolated.SOLVER_OUTPUT_VARIABLE}
    if extra_path is not None:
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), environment.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "solver_plan", *arguments], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=timeout)


def _no_solver_output(process) -> None:
    text = process.stdout + process.stderr
    for marker in ("Running HiGHS", "Copyright (c)", "THIRD_PARTY_NOTICES", "STAND-IN", "Welcome to the CBC"):
        assert marker not in text, f"solver output reached the terminal: {marker!r}"


def test_plan_with_milp_is_optimal_in_a_fresh_process(tmp_path):
    process = _run(["plan", "--model", "mlp:layers=2,hidden=1024,batch=128", "--cluster", "a100x8-80gb",
                    "--planner", "milp", "--out", "plan.json", "--rows", "1", "--quiet"], tmp_path)
    assert process.returncode == 0, process.stderr[-800:]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["status"] == "OPTIMAL" and plan["solver_failure"] is None, plan["notes"]
    assert "status OPTIMAL" in process.stdout
    _no_solver_output(process)


def test_exact_milp_schedule_is_optimal_in_a_fresh_process(tmp_path):
    process = _run(["pipeline", "--model", "mlp:layers=4,hidden=1024,batch=64", "--processors", "2",
                    "--planner", "madpipe", "--schedule", "exact-milp", "--time-limit", "30", "--out", "p.json"],
                   tmp_path)
    assert process.returncode == 0, process.stderr[-800:]
    compared = json.loads((tmp_path / "p.json").read_text())["compared"]
    milp = next(c for c in compared if c["scheduler"] == "exact-milp")
    assert milp["schedule_status"] == "OPTIMAL", compared
    _no_solver_output(process)


def test_hybrid_is_optimal_in_a_fresh_process(tmp_path):
    process = _run(["hybrid", "--model", "gpt2", "--cluster", "a100x8-80gb", "--devices", "8", "--batch", "16",
                    "--planner", "milp", "--time-limit", "60", "--out", "h.json"], tmp_path)
    assert process.returncode == 0, process.stderr[-800:]
    result = json.loads((tmp_path / "h.json").read_text())
    assert result["status"] == "OPTIMAL" and result["solver_failure"] is None, result["notes"]
    _no_solver_output(process)


FAKE_HIGHSPY = f'''
"""A stand-in for highspy that prints a banner when a Highs() is made, then fails."""
import os
print({BANNER!r}, flush=True) if os.environ.get("STAND_IN_BANNER_AT_IMPORT") else None

class Highs:
    def __init__(self):
        print({BANNER!r}, flush=True)
        os.write(2, b"stand-in log on fd 2\\n")
        raise RuntimeError("stand-in HiGHS crashed")

def __getattr__(name):  # HighsLp, HighsVarType, ...: whatever the backend touches
    return type(name, (), {{}})
'''


@pytest.fixture
def broken_highs(tmp_path):
    package = tmp_path / "fake" / "highspy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(FAKE_HIGHSPY)
    return tmp_path / "fake"


def test_a_solver_failure_is_named_in_json_and_stderr_with_a_distinct_exit_status(tmp_path, broken_highs):
    process = _run(["plan", "--model", "mlp:layers=2,hidden=1024,batch=128", "--cluster", "a100x8-80gb",
                    "--planner", "milp", "--out", "plan.json", "--rows", "1", "--quiet"], tmp_path, broken_highs)
    from solver_plan.errors import EXIT_SOLVER_FAILED
    assert process.returncode == EXIT_SOLVER_FAILED, process.stderr[-800:]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["solver_failure"] and "stand-in HiGHS crashed" in plan["solver_failure"]
    assert plan["operators"], "the fallback plan is kept"
    failure_lines = [line for line in process.stderr.splitlines() if "solver failed" in line]
    assert len(failure_lines) == 1 and "milp" in failure_lines[0], process.stderr
    _no_solver_output(process)


def test_batch_and_compare_count_a_failed_solver_as_failed(tmp_path, broken_highs):
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text(textwrap.dedent("""
        defaults: {time_limit: 30}
        jobs:
          - name: tiny
            models: ["random-dag:nodes=12,candidates=3-4,seed=1"]
            planners: [milp, greedy]
    """))
    process = _run(["batch", str(jobs), "--out", "runs", "--workers", "1", "--quiet"], tmp_path, broken_highs)
    assert process.returncode != 0, "a failed solver run must fail the batch"
    records = [json.loads(line) for path in (tmp_path / "runs").rglob("*.json")
               for line in [path.read_text()] if '"planner"' in line]
    by_planner = {}
    for record in records:
        planner = record.get("job", {}).get("planner") or record.get("planner")
        by_planner[planner] = record
    assert by_planner["milp"]["status"] == "ERROR" and "stand-in HiGHS crashed" in by_planner["milp"]["error"]
    assert by_planner["milp"]["objective_s"] is None
    assert by_planner["greedy"]["status"] != "ERROR"
    report = _run(["compare", "runs", "--report", "report.md"], tmp_path)
    assert report.returncode == 0, report.stderr[-800:]
    table = (tmp_path / "report.md").read_text()
    milp_rows = [line for line in table.splitlines() if line.startswith("|") and "| milp |" in line]
    assert milp_rows and "| milp | 1 | 0 | 0 |" in milp_rows[0], milp_rows
    _no_solver_output(process)


def test_our_highs_backend_and_pulps_highs_do_not_share_a_process():
    """HiGHS fixes its thread count per process at the first solve: PuLP's HiGHS (1 thread) after
    our backend in one worker answered "Not Solved" at once, read as a time-out."""
    problem = random_problem(10, seed=4, shape="dag")
    assert solve(problem, "milp", deadline=time_budget(60)).status is Status.OPTIMAL
    reference = solve(problem, "reference-highs", deadline=time_budget(60))
    assert reference.status is Status.OPTIMAL, reference.notes
    assert {"highspy", "highspy:pulp"} <= set(isolated._workers)


def test_the_worker_imports_the_parents_copy_not_one_in_the_current_folder(tmp_path):
    """Run from a folder holding another `solver_plan` (an older checkout's root, say): `python -m`
    puts the current folder first on the path, and the HiGHS worker imported that copy and died
    (SolverFailure, the greedy fallback). The worker now imports the parent's own copy."""
    stale = tmp_path / "solver_plan"
    (stale / "intra").mkdir(parents=True)
    for init in (stale / "__init__.py", stale / "intra" / "__init__.py"):
        init.write_text('raise SystemExit("the stale copy was imported")\n')
    environment = {k: v for k, v in os.environ.items() if k != isolated.SOLVER_OUTPUT_VARIABLE}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    process = subprocess.run([sys.executable, "-P", "-m", "solver_plan", "plan", "--model", "lenet", "--cluster",
                              "k80-16x4", "--devices", "4", "--planner", "milp", "--out", "plan.json", "--quiet"],
                             cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=240)
    assert process.returncode == 0, process.stderr[-800:]
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["status"] == "OPTIMAL" and plan["solver_failure"] is None, plan["notes"]


def test_highs_worker_imports_no_cost_model():
    """The HiGHS worker imports the backend (highspy, the linear model, the problem's arrays) and
    not solver_plan.cost's package (collectives, cluster, YAML): its start is on the critical path
    of every milp run (0.27-0.33 s with it, 0.14-0.18 s without, issue 28)."""
    environment = {k: v for k, v in os.environ.items() if k != isolated.SOLVER_OUTPUT_VARIABLE}
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), environment.get("PYTHONPATH")]))
    probe = ("import sys, solver_plan.intra.isolated, solver_plan.intra.backends.highs; "
             "print(sorted(m for m in sys.modules if m.startswith('solver_plan.cost')))")
    process = subprocess.run([sys.executable, "-P", "-c", probe], env=environment, capture_output=True, text=True,
                             timeout=120)
    assert process.returncode == 0, process.stderr[-800:]
    assert process.stdout.strip().splitlines()[-1] == "[]"
