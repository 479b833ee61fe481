"""A progress line on stderr while a long solve runs: elapsed time, best plan so far, best bound.

The command line starts one `Progress` per solve (unless --quiet); planners report through
`report(incumbent=..., bound=...)`, which does nothing when no reporter runs. A daemon thread prints
at most one line per `every_s` seconds and nothing for solves shorter than that, so quick commands
stay silent and a 78 s solve is no longer 78 s of silence.
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time

from solver_plan.units import format_seconds

PROGRESS_EVERY_S = 2.0

_current: "Progress | None" = None
_muted = 0  # > 0 while plans may break constraints (e.g. the memory-free pre-solve): bounds only


class Progress:
    """The progress reporter of one solve: a context manager whose daemon thread prints `line()` every
    `every_s` seconds while it runs; planners feed it through `report`."""

    def __init__(self, label: str = "solving", stream=None, every_s: float = PROGRESS_EVERY_S,
                 enabled: bool = True):
        self.label, self.stream, self.every_s, self.enabled = label, stream or sys.stderr, every_s, enabled
        self.incumbent: float | None = None
        self.bound: float | None = None
        self.started = time.perf_counter()
        self.lines = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="solver-plan-progress", daemon=True)

    def update(self, incumbent: float | None = None, bound: float | None = None) -> None:
        """Keep the best (least) incumbent and the best (largest) bound reported so far."""
        if incumbent is not None and (self.incumbent is None or incumbent < self.incumbent):
            self.incumbent = float(incumbent)
        if bound is not None and (self.bound is None or bound > self.bound):
            self.bound = float(bound)

    def line(self) -> str:
        """The progress line: elapsed seconds, best plan's objective and best bound so far."""
        best = "-" if self.incumbent is None else format_seconds(self.incumbent)
        # the bound never shown above the best plan (an incumbent of 0.0 is one)
        bound = "-" if self.bound is None else format_seconds(
            self.bound if self.incumbent is None else min(self.bound, self.incumbent))
        return (f"{self.label}: {time.perf_counter() - self.started:.0f} s elapsed, "
                f"best plan {best} (objective), bound {bound}")

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                print(self.line(), file=self.stream, flush=True)
                self.lines += 1
            except (OSError, ValueError):  # stderr closed (e.g. a broken pipe): stop quietly
                return

    def __enter__(self) -> "Progress":
        global _current
        if self.enabled:
            _current = self
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        global _current
        if not self.enabled:
            return
        self._stop.set()
        self._thread.join(1.0)
        if _current is self:
            _current = None


def report(incumbent: float | None = None, bound: float | None = None) -> None:
    """Tell the running reporter (if any) about a plan's objective or a proven lower bound."""
    if _current is not None:
        _current.update(None if _muted else incumbent, bound)


@contextlib.contextmanager
def bounds_only():
    """Within this block plans are not reported (they may break constraints); bounds still are."""
    global _muted
    _muted += 1
    try:
        yield
    finally:
        _muted -= 1
