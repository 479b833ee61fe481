"""Progress on stderr: a bar with counts and ETA, redrawn in place on a terminal, one line per
finished job otherwise (logs stay readable)."""
from __future__ import annotations

import sys
import time
from typing import TextIO


BAR_WIDTH = 24


class Progress:
    """The batch's progress bar on `stream`: redrawn in place on a terminal, one line per finished job
    otherwise; nothing when not `enabled`."""

    def __init__(self, total: int, skipped: int, stream: TextIO | None = None, enabled: bool = True):
        self.total = total
        self.skipped = skipped
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interactive = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.done = self.failed = self.killed = self.running = 0
        self.started = time.monotonic()

    def job_started(self) -> None:
        """Count a job as running."""
        self.running += 1
        if self.interactive:
            self._draw("")

    def job_finished(self, label: str, status: str, killed: bool) -> None:
        """Count a job as finished with `status` (and killed or not), and show it."""
        self.running -= 1
        self.done += 1
        self.failed += status == "ERROR"
        self.killed += killed
        self._draw(f"{label}: {status}{' (killed)' if killed else ''}")

    def line(self) -> str:
        """The bar: jobs finished of the total, skipped, failed, killed, running, and the ETA."""
        finished = self.skipped + self.done
        filled = round(BAR_WIDTH * finished / self.total) if self.total else BAR_WIDTH
        counts = f"{finished}/{self.total} done"
        extras = [f"{n} {word}" for n, word in ((self.skipped, "skipped"), (self.failed, "failed"),
                                               (self.killed, "killed")) if n]
        if extras:
            counts += f" ({', '.join(extras)})"
        return f"[{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {counts} | running {self.running} | ETA {self.eta()}"

    def eta(self) -> str:
        """Time left at the mean time per job run so far ("?" before the first finishes)."""
        remaining = self.total - self.skipped - self.done
        if remaining == 0:
            return "0s"
        if self.done == 0:
            return "?"
        elapsed = time.monotonic() - self.started
        return clock(elapsed / self.done * remaining)

    def close(self) -> None:
        """End the bar's line on a terminal."""
        if self.interactive:
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, last: str) -> None:
        if not self.enabled:
            return
        if self.interactive:
            self.stream.write("\r\x1b[K" + self.line())
        else:
            self.stream.write(f"{self.line()} | {last}\n")
        self.stream.flush()


def clock(seconds: float) -> str:
    """45s, 3m05s, 2h07m: a duration as a person reads an ETA."""
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
