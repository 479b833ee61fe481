"""A planner's clock: started from a caller's limit, asked whether optional passes still fit, and
split into phases for the note saying where the time went."""
from __future__ import annotations

import time
from contextlib import contextmanager

from solver_plan.deadline import Deadline
from solver_plan.intra.problem import ConfigProblem

PASS_S_PER_NODE = 5e-4  # one simplify + heuristics pass, measured ~0.5 s for 1,160 operators


def start_clock(limit: "Deadline | float | None") -> Deadline:
    """A clock started now that ends no later than `limit`: a caller's Deadline (so time already
    spent by the command counts), a number of seconds, or None (no limit). Its `elapsed()` is
    this piece's own runtime."""
    if isinstance(limit, Deadline):
        return Deadline(None, parent=limit)
    return Deadline(limit)


MIN_LIMIT_S = 1e-3  # a planner handed an expired clock still gets a (tiny) positive limit


def seconds_left(limit: "Deadline | float | None") -> float | None:
    """`limit` as seconds from now for a registered planner's `time_limit=` (planners of other
    packages take plain seconds); never 0, which a planner would refuse as a bad limit."""
    if isinstance(limit, Deadline):
        left = limit.remaining()
        return None if left is None else max(MIN_LIMIT_S, left)
    return limit


def time_for_passes(deadline: Deadline, problem: ConfigProblem, passes: float) -> bool:
    """Whether `passes` whole-problem passes (simplify, relaxation, heuristics: PASS_S_PER_NODE
    each per node) fit in what is left: optional work is skipped when they do not."""
    left = deadline.remaining()
    return left is None or left > passes * PASS_S_PER_NODE * problem.num_nodes


class PhaseTimes:
    """Seconds per phase of an exact planner, for the note saying where the time went."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, label: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - started

    def note(self) -> str:
        return "time: " + ", ".join(f"{label} {seconds:.2f} s" for label, seconds in self.seconds.items())
