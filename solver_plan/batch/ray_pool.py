"""Ray executor: the same jobs, each run by the local executor inside a Ray task on some node.

Ray is an optional extra (`pip install 'solver-plan[ray]'`). With no address, `ray.init()` joins
the cluster named by RAY_ADDRESS or starts a local instance. Inside its task a job runs exactly as
locally: in its own process group, stopped at time limit + grace and recorded as killed. The driver
keeps a backstop deadline (a further grace) for tasks lost with their node, force-cancels them and
records them as killed too. At most `workers` tasks are in flight.
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Sequence

from solver_plan.batch.attempt import Work, crashed_outcome, deadline_s, killed_outcome
from solver_plan.batch.job import Job
from solver_plan.batch.kinds import run_job
from solver_plan.batch.local import POLL_S, LocalExecutor, OnDone, OnStart
from solver_plan.errors import InputError

BACKSTOP_S = 30.0  # beyond the node's own deadline before the driver gives a task up


def run_on_node(work: Work, job: Job) -> dict[str, Any]:
    """One job through the local executor on this node: its own process group, its deadline."""
    results: list[dict[str, Any]] = []
    LocalExecutor(1, work).run([job], lambda started: None, lambda done, outcome, wall_s: results.append(outcome))
    return results[0]


def import_ray():
    """The `ray` module, or InputError saying how to install it."""
    try:
        import ray
    except ImportError:
        raise InputError("the ray executor needs Ray: pip install 'solver-plan[ray]' (or use --executor local)",
                         "--executor") from None
    return ray


class RayExecutor:
    """Runs jobs as Ray tasks, up to `workers` at a time, each through the local executor on its node (so
    each keeps its own process group and time limit)."""
    name = "ray"

    def __init__(self, workers: int = 1, work: Work = run_job, address: str | None = None):
        self.ray = import_ray()
        self.workers = workers
        self.work = work
        self.address = address

    def run(self, jobs: Sequence[Job], on_start: OnStart, on_done: OnDone) -> None:
        """Run every job, calling `on_start` and `on_done` as `LocalExecutor.run` does; Ray is started
        here (and shut down after) unless it already runs."""
        ray = self.ray
        started_here = not ray.is_initialized()
        if started_here:
            ray.init(address=self.address, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
        task = ray.remote(num_cpus=1, max_retries=0)(run_on_node)
        pending = deque(jobs)
        running: dict[Any, tuple[Job, float]] = {}
        try:
            while pending or running:
                while pending and len(running) < self.workers:
                    job = pending.popleft()
                    running[task.remote(self.work, job)] = (job, time.monotonic())
                    on_start(job)
                ready, _ = ray.wait(list(running), num_returns=1, timeout=self._timeout(running.values()))
                now = time.monotonic()
                for ref in ready:
                    job, started = running.pop(ref)
                    on_done(job, self._result(ref), now - started)
                for ref, (job, started) in list(running.items()):
                    limit = deadline_s(job)
                    if limit is not None and now - started > limit + job.grace + BACKSTOP_S:
                        ray.cancel(ref, force=True)
                        del running[ref]
                        on_done(job, killed_outcome(job, now - started), now - started)
        finally:
            for ref in running:
                ray.cancel(ref, force=True)
            if started_here:
                ray.shutdown()

    def _result(self, ref) -> dict[str, Any]:
        try:
            return self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the worker died; attempt() catches everything else
            return crashed_outcome(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")

    @staticmethod
    def _timeout(entries) -> float:
        now = time.monotonic()
        remaining = [deadline_s(job) + job.grace + BACKSTOP_S - (now - started)
                     for job, started in entries if deadline_s(job) is not None]
        return max(0.0, min([POLL_S] + remaining))
