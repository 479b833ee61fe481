"""Running a batch: skip jobs with a trusted record, run the rest, record each as it finishes.

Records are written by this process alone, one file per job, atomically, as soon as the job ends.
Killing the batch therefore loses at most the jobs that were running; a rerun finds every record
written so far, redoes invalid ones (reporting them), and runs only what is missing.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence, TextIO

from solver_plan.batch.attempt import Work
from solver_plan.batch.job import Job
from solver_plan.batch.kinds import run_job
from solver_plan.batch.local import LocalExecutor
from solver_plan.batch.progress import Progress
from solver_plan.batch.records import build_record
from solver_plan.batch.store import RecordStore
from solver_plan.errors import InputError

EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class BatchSummary:
    """What a batch did: jobs in all, skipped, run, failed, killed and invalid records redone."""
    folder: Path
    total: int
    skipped: int  # had a trusted record already
    ran: int
    failed: int  # status ERROR
    killed: int  # stopped by the runner at time limit + grace
    invalid: int  # record files found invalid and redone

    def describe(self) -> str:
        """The summary printed at the end of a batch."""
        return (f"{self.total} jobs: {self.skipped} already recorded, {self.ran} run "
                f"({self.failed} failed, {self.killed} killed at their time limit); "
                f"{self.invalid} invalid records redone; records in {self.folder}")


def make_executor(name: str, workers: int, work: Work = run_job, ray_address: str | None = None):
    """The executor named `name` ("local" or "ray") with `workers` jobs at a time; InputError otherwise.
    """
    if workers < 1:
        raise InputError(f"must be at least 1, got {workers}", "--workers")
    if name == "local":
        return LocalExecutor(workers, work)
    if name == "ray":
        from solver_plan.batch.ray_pool import RayExecutor
        return RayExecutor(workers, work, ray_address)
    raise InputError(f"unknown executor {name!r}; expected one of {', '.join(EXECUTORS)}", "--executor")


def pending_jobs(jobs: Sequence[Job], store: RecordStore, retry_failed: bool = False,
                 stream: TextIO | None = None) -> tuple[list[Job], int]:
    """Jobs without a trusted record (or whose record failed, with `retry_failed`); invalid count."""
    pending, invalid = [], 0
    for job in jobs:
        record, why = store.load(job)
        if why is not None:
            invalid += 1
            print(f"solver-plan batch: record {store.path(job).name} is invalid ({why}); redoing it",
                  file=stream or sys.stderr)
        if record is None or (retry_failed and (record["status"] == "ERROR" or record["killed"])):
            pending.append(job)
    return pending, invalid


def run_batch(jobs: Sequence[Job], folder: str | Path, executor, *, retry_failed: bool = False,
              progress: bool = True, stream: TextIO | None = None) -> BatchSummary:
    """Run the jobs without a trusted record in `folder` on `executor`, writing each record as the job
    ends; the summary."""
    store = RecordStore(folder)
    stream = stream or sys.stderr
    pending, invalid = pending_jobs(jobs, store, retry_failed, stream)
    bar = Progress(len(jobs), len(jobs) - len(pending), stream, enabled=progress)
    counts = {"failed": 0, "killed": 0}

    def on_done(job: Job, outcome: dict[str, Any], wall_s: float) -> None:
        record = build_record(job, outcome, wall_s)
        try:
            store.write(record, job)
        except OSError as exc:
            raise InputError(f"cannot write record ({exc.strerror or exc}); records written so far are intact",
                             str(store.path(job))) from None
        counts["failed"] += record["status"] == "ERROR"
        counts["killed"] += record["killed"]
        bar.job_finished(job.label(), record["status"], record["killed"])

    try:
        executor.run(pending, lambda job: bar.job_started(), on_done)
    finally:
        bar.close()
    return BatchSummary(store.folder, len(jobs), len(jobs) - len(pending), len(pending), counts["failed"],
                        counts["killed"], invalid)
