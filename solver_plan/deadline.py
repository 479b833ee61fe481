"""One wall-clock deadline per command.

A `Deadline` is started once, where a command (or a Python front door) begins, and passed down to
everything that spends time: parsing, building problems, simplification, every solver, decoding,
validation. Each piece asks `remaining()` before it starts and checks `expired()` in its loops, so
the whole command ends within its limit, not just the solver. `share(fraction)` hands a sub-task a
deadline of its own that never outlives its parent.
"""
from __future__ import annotations

import math
import time

from solver_plan.errors import InputError

DEFAULT_TIME_LIMIT_S = 60.0  # every command that solves stops by then unless told otherwise
# Longest limit accepted (115 days): beyond it, waits on threads and processes overflow
# (threading.TIMEOUT_MAX); `time_limit: 1e30` is a typo for "no limit" (null), not a plan.
MAX_TIME_LIMIT_S = 1e7


class Deadline:
    """Wall-clock budget started at construction; `remaining()` is None without a limit."""

    def __init__(self, time_limit: float | None, *, start: float | None = None,
                 parent: "Deadline | None" = None):
        if time_limit is not None and not (isinstance(time_limit, (int, float))
                                           and math.isfinite(time_limit) and time_limit > 0):
            raise InputError(f"time limit must be a positive number of seconds, got {time_limit!r}",
                             "time_limit")
        if time_limit is not None and time_limit > MAX_TIME_LIMIT_S:
            raise InputError(f"time limit {time_limit:g} s is too long (at most {MAX_TIME_LIMIT_S:g} s; "
                             "none for no limit)", "time_limit")
        self.time_limit = time_limit
        self.start = time.perf_counter() if start is None else start
        self.parent = parent

    @classmethod
    def of(cls, value: "Deadline | float | None") -> "Deadline":
        """A deadline from either a Deadline (returned as is) or a limit in seconds (started now)."""
        return value if isinstance(value, Deadline) else cls(value)

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def remaining(self) -> float | None:
        own = None if self.time_limit is None else max(0.0, self.time_limit - self.elapsed())
        above = None if self.parent is None else self.parent.remaining()
        if own is None:
            return above
        return own if above is None else min(own, above)

    def expired(self) -> bool:
        left = self.remaining()
        return left is not None and left <= 0.0

    def share(self, fraction: float, floor_s: float = 0.0) -> "Deadline":
        """A child deadline with `fraction` of what is left now (at least `floor_s`, never past
        this one); unlimited when this one is."""
        left = self.remaining()
        if left is None:
            return Deadline(None, parent=self)
        budget = max(min(left, floor_s), left * fraction)
        return Deadline(max(budget, 1e-6), parent=self)
