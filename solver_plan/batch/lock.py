"""One batch per record folder: `DIR/.batch.lock`, held with an exclusive `flock` while a batch runs.

Without it two batches on one folder both run every pending job (nothing is lost, but the work is
done twice). The kernel releases an `flock` when its holder dies, however it dies, so a lock left
by a killed batch is free by construction ("stale locks are taken over"): nothing has to guess
from a pid whether the holder still lives. The file holds the holder's pid, host and start time
only so that a refused batch can name it. (On NFS, Linux emulates `flock` with POSIX byte-range
locks, so the lock also holds between hosts.) The file is never deleted (a batch waiting on the old
inode while a third one creates a new file would let two run); it is emptied on release.
"""
from __future__ import annotations

import datetime
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import TextIO

from solver_plan.errors import InputError

LOCK_NAME = ".batch.lock"
WAIT_POLL_S = 0.5


class FolderBusy(InputError):
    """Another batch holds the folder's lock (the message names it)."""


def _now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def describe_holder(info: dict) -> str:
    """'pid 1234 on host h, started 2026-11-23T01:02:03+00:00' (what a lock file says)."""
    if not info:
        return "a batch that has not yet written its details"
    return (f"pid {info.get('pid', '?')} on host {info.get('host', '?')}, started {info.get('started', '?')}"
            + (f" ({info['command']})" if info.get("command") else ""))


class BatchLock:
    """`with BatchLock(folder): ...` runs the body as the folder's only batch.

    `wait=False` refuses at once (`FolderBusy`, naming the holder); `wait=True` polls until the
    holder ends, saying once on `stream` whom it waits for.
    """

    def __init__(self, folder: str | Path, *, wait: bool = False, stream: TextIO | None = None,
                 command: str | None = None):
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self.wait = wait
        self.stream = stream or sys.stderr
        self.command = command
        self._fd: int | None = None

    def read_holder(self) -> dict:
        """What the lock file says about its holder (pid, host, start, command); {} if unreadable."""
        try:
            data = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def acquire(self) -> "BatchLock":
        """Take the folder's lock (FolderBusy, or wait, while another batch holds it) and record this
        process as the holder."""
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        announced = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = describe_holder(self.read_holder())
                if not self.wait:
                    os.close(fd)
                    raise FolderBusy(f"another batch is running on this folder: {holder}; wait for it to "
                                     "finish (or pass --wait)", str(self.folder)) from None
                if not announced:
                    print(f"solver-plan batch: waiting for the batch holding {self.folder} ({holder})",
                          file=self.stream)
                    announced = True
                time.sleep(WAIT_POLL_S)
        self._fd = fd
        self._note_stale(self.read_holder())
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": _now()}
        if self.command:
            info["command"] = self.command
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
        return self

    def _note_stale(self, previous: dict) -> None:
        """A lock file naming a batch that is gone: say it is taken over (its jobs may be redone)."""
        pid = previous.get("pid")
        if isinstance(pid, int) and previous.get("host") == socket.gethostname() and not _pid_alive(pid):
            print(f"solver-plan batch: taking over the lock of {describe_holder(previous)}, no longer running",
                  file=self.stream)

    def release(self) -> None:
        """Clear the holder and release the lock; does nothing when not held."""
        if self._fd is None:
            return
        import fcntl

        try:
            os.ftruncate(self._fd, 0)
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "BatchLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
