"""Local executor: up to N jobs at a time, each in its own child process and process group.

One process per job (rather than a reusable pool) is what lets the runner stop a single job that
overruns its time limit. The child leads a process group of its own, so stopping a job also stops
any solver process the planner started; a watchdog thread in the child ends that group if the
runner itself dies (e.g. SIGKILL), so no orphan keeps computing. Children ignore SIGINT: a Ctrl-C
reaches only the runner, which then stops every job it started.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from solver_plan.batch.attempt import Work, attempt, crashed_outcome, deadline_s, killed_outcome
from solver_plan.batch.job import Job
from solver_plan.batch.kinds import outcome, run_job
from solver_plan.result import Status

OnStart = Callable[[Job], None]
OnDone = Callable[[Job, dict[str, Any], float], None]
POLL_S = 1.0  # wake up at least this often, so the progress line stays current
WATCH_S = 0.5  # how often a job checks that its runner is alive


def _child(writer, work: Work, job: Job, runner_pid: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _lead_own_group()
    threading.Thread(target=_watch_runner, args=(runner_pid,), daemon=True).start()
    result = attempt(work, job)
    try:
        writer.send(result)
    except Exception as exc:  # noqa: BLE001 - e.g. a plan holding an object that does not pickle
        writer.send(outcome(Status.ERROR, None, None, None, None, error=f"cannot return the outcome: {exc!r}"))
    writer.close()


def _lead_own_group() -> None:
    try:
        os.setpgid(0, 0)
    except OSError:  # the runner already made it the leader (both try: whoever runs first wins)
        pass


def _watch_runner(runner_pid: int) -> None:
    while True:
        time.sleep(WATCH_S)
        if os.getppid() != runner_pid:  # reparented: the runner is gone, so is anyone to record us
            os.killpg(os.getpgrp(), signal.SIGKILL)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass
class _Running:
    job: Job
    process: Any
    reader: Any
    started: float

    def overdue(self, now: float) -> bool:
        limit = deadline_s(self.job)
        return limit is not None and now - self.started > limit


class LocalExecutor:
    """Runs jobs in up to `workers` child processes at a time, each in its own process group, killed at
    its time limit plus grace."""
    name = "local"

    def __init__(self, workers: int = 1, work: Work = run_job):
        if workers < 1:
            raise ValueError(f"LocalExecutor: workers must be >= 1, got {workers}")
        self.workers = workers
        self.work = work
        methods = multiprocessing.get_all_start_methods()
        # fork starts a worker in milliseconds and needs nothing importable by name.
        self.context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")

    def run(self, jobs: Sequence[Job], on_start: OnStart, on_done: OnDone) -> None:
        """Run every job, calling `on_start(job)` as each starts and `on_done(job, outcome, wall_s)` as
        it ends; children still running when this returns or raises are killed."""
        pending = deque(jobs)
        running: dict[Any, _Running] = {}
        try:
            while pending or running:
                while pending and len(running) < self.workers:
                    entry = self._start(pending.popleft())
                    running[entry.reader] = entry
                    on_start(entry.job)
                waitables = list(running) + [entry.process.sentinel for entry in running.values()]
                multiprocessing.connection.wait(waitables, timeout=self._timeout(running.values()))
                now = time.monotonic()
                for reader, entry in list(running.items()):
                    result = self._collect(entry, now)
                    if result is not None:
                        del running[reader]
                        on_done(entry.job, result, now - entry.started)
        finally:
            for entry in running.values():
                self._stop(entry)

    def _start(self, job: Job) -> _Running:
        reader, writer = self.context.Pipe(duplex=False)
        # Not a daemon: daemonic processes may not start children, and planners do (solver workers).
        process = self.context.Process(target=_child, args=(writer, self.work, job, os.getpid()))
        process.start()
        try:
            os.setpgid(process.pid, process.pid)
        except OSError:  # it already did so itself, or has already exited
            pass
        writer.close()  # the child holds the only write end: its death reads as end of file
        return _Running(job, process, reader, time.monotonic())

    def _collect(self, entry: _Running, now: float) -> dict[str, Any] | None:
        """The job's outcome if it has one now (answered, died or overdue), else None."""
        alive = entry.process.is_alive()  # before poll(): a child that died has sent all it ever will
        if entry.reader.poll():
            try:
                result = entry.reader.recv()
            except EOFError:
                result = None
            if result is None:  # it closed the pipe without an answer: let it finish dying first
                entry.process.join(timeout=10)
            self._stop(entry)  # whatever it left running (it answered: nothing else is needed)
            return result if result is not None else crashed_outcome(_exit_reason(entry.process.exitcode))
        if not alive:
            self._stop(entry)
            return crashed_outcome(_exit_reason(entry.process.exitcode))
        if entry.overdue(now):
            self._stop(entry)
            return killed_outcome(entry.job, now - entry.started)
        return None

    @staticmethod
    def _stop(entry: _Running) -> None:
        """Kill the job's process group (it, and whatever it started), then reap it."""
        _kill_group(entry.process.pid)
        entry.process.join()
        entry.reader.close()

    @staticmethod
    def _timeout(entries) -> float:
        now = time.monotonic()
        remaining = [deadline_s(e.job) - (now - e.started) for e in entries if deadline_s(e.job) is not None]
        return max(0.0, min([POLL_S] + remaining))


def _exit_reason(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit code {exitcode}"
