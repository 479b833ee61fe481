"""What a planner's core returns to the harness: a plan (or None), what is proven about it, notes.
The harness turns it into the `ConfigResult` users see."""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.result import Status


@dataclass(frozen=True)
class Answer:
    """A core's raw answer: a plan (or None), what is proven about it, and notes."""
    status: Status
    assignment: tuple[int, ...] | None = None
    lower_bound: float | None = None
    notes: tuple[str, ...] = ()
