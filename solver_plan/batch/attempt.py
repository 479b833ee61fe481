"""One attempt at a job, as every executor makes it: failures become outcomes, never exceptions.

A job's work runs in a worker (a child process or a Ray task). Whatever goes wrong there, be it bad
input discovered late, a planner bug, an overrun killed by the runner or a crashed worker, the batch
records it and goes on.
"""
from __future__ import annotations

import traceback
from typing import Any, Callable

from solver_plan.batch.job import Job
from solver_plan.batch.kinds import outcome
from solver_plan.errors import InputError
from solver_plan.result import Status

Work = Callable[[Job], dict[str, Any]]


def attempt(work: Work, job: Job) -> dict[str, Any]:
    """Run `work(job)`; a bad input or any exception becomes an ERROR outcome (with the traceback), so
    one failing job never stops the batch."""
    try:
        return work(job)
    except InputError as exc:
        return outcome(Status.ERROR, None, None, None, None, error=f"bad input: {exc}")
    except Exception as exc:  # noqa: BLE001 - a failing job is recorded and the batch goes on
        return outcome(Status.ERROR, None, None, None, None, error=f"{type(exc).__name__}: {exc}",
                       detail=traceback.format_exc())


def deadline_s(job: Job) -> float | None:
    """Wall-clock seconds after which the runner stops the job; None when it has no time limit."""
    return None if job.time_limit is None else job.time_limit + job.grace


def killed_outcome(job: Job, elapsed_s: float) -> dict[str, Any]:
    """The TIME_LIMIT outcome of a job the runner stopped after `elapsed_s` seconds (limit plus grace).
    The measured seconds are the outcome's runtime; its message names the limit only, so that the same
    job stopped under any executor or load reads the same (records are compared across executors)."""
    return outcome(Status.TIME_LIMIT, None, None, elapsed_s, None, killed=True,
                   error=f"stopped by the runner at its limit "
                         f"(time limit {job.time_limit:g} s + grace {job.grace:g} s)")


def crashed_outcome(reason: str) -> dict[str, Any]:
    """The ERROR outcome of a job whose worker died without answering, saying `reason`."""
    return outcome(Status.ERROR, None, None, None, None, error=f"worker died without an answer ({reason})")
