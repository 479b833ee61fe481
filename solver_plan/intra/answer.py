"""What a planner's core returns to the harness: a plan (or None), what is proven about it, notes.
The harness turns it into the `ConfigResult` users see."""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.result import CONFIG_SCHEMA_VERSION, Envelope, Objective, Status


@dataclass(frozen=True)
class Answer:
    """A core's raw answer: a plan (or None), what is proven about it, and notes."""
    status: Status
    assignment: tuple[int, ...] | None = None
    lower_bound: float | None = None
    notes: tuple[str, ...] = ()

    @property
    def envelope(self) -> Envelope:
        """The cores answering with an `Answer` minimise the sum of operator costs; they report a
        plan, not its value (the harness prices it: objective value None here), and no runtime."""
        return Envelope("config", CONFIG_SCHEMA_VERSION, self.status, Objective("sum", None), self.lower_bound,
                        None, self.notes)
