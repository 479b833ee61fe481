"""The Ray executor on a local Ray instance gives the same records as the local executor, and stops
an overrunning job. Skipped when Ray (the optional extra) is not installed."""
from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from solver_plan.batch.job import Job  # noqa: E402
from solver_plan.batch.kinds import outcome  # noqa: E402
from solver_plan.batch.records import stable_view  # noqa: E402
from solver_plan.batch.run import make_executor, run_batch  # noqa: E402
from solver_plan.batch.store import iter_records  # noqa: E402
from solver_plan.result import Status  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def ray_standin(job: Job) -> dict:
    if job.planner == "hangs":
        time.sleep(600)
    if job.planner == "fails":
        raise RuntimeError("no plan")
    return outcome(Status.FEASIBLE, 1.0 + job.seed, 0.5, 0.01, {"seed": job.seed})


@pytest.fixture(scope="module")
def local_ray():
    # Workers import this module and the package by name, as an installed package would be.
    paths = ":".join([str(REPO), str(Path(__file__).parent)] + [p for p in sys.path if p])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": paths}})
    yield
    ray.shutdown()


def records(folder: Path) -> dict[str, dict]:
    return {record["key"]: stable_view(record) for _, record, _ in iter_records(folder) if record}


@pytest.mark.slow  # starting Ray takes most of half a minute on two cores
def test_ray_and_local_executors_write_the_same_records(tmp_path, local_ray):
    jobs = [Job("ray", "config", "mlp", "v100x8-nvlink", planner, seed=seed, time_limit=0.5, grace=0.5)
            for planner in ("ok", "fails", "hangs") for seed in (0, 1)]
    started = time.monotonic()
    summary = run_batch(jobs, tmp_path / "ray", make_executor("ray", 2, ray_standin), stream=io.StringIO())
    assert time.monotonic() - started < 60
    assert (summary.ran, summary.failed, summary.killed) == (6, 2, 2)
    run_batch(jobs, tmp_path / "local", make_executor("local", 2, ray_standin), stream=io.StringIO())
    from_ray, from_local = records(tmp_path / "ray"), records(tmp_path / "local")
    assert set(from_ray) == {job.key for job in jobs}
    for key in from_ray:
        assert {k: v for k, v in from_ray[key].items() if k != "detail"} == \
               {k: v for k, v in from_local[key].items() if k != "detail"}
    assert run_batch(jobs, tmp_path / "ray", make_executor("ray", 2, ray_standin), stream=io.StringIO()).ran == 0
