"""A planner's clock: started from a caller's Deadline, asked whether optional passes fit its nominal
budget, and split into phases for the note saying where the time went."""
from __future__ import annotations

import time
from contextlib import contextmanager

from solver_plan.deadline import Deadline
from solver_plan.intra.problem import ConfigProblem

PASS_S_PER_NODE = 5e-4  # one simplify + heuristics pass, measured ~0.5 s for 1,160 operators


def start_clock(deadline: Deadline | None) -> Deadline:
    """A clock started now that ends with the caller's `deadline` (so time already spent by the
    command counts) and keeps its nominal budget, spending from the caller's what it spends (so
    planners run one after another on one budget leave the next what they did not use);
    unlimited for None. Its `elapsed()` is this piece's own runtime. Seconds are refused: they become a Deadline once, where a request enters
    (`solver_plan.deadline.time_budget`)."""
    if deadline is None:
        return Deadline(None)
    if not isinstance(deadline, Deadline):
        raise TypeError(f"a planner takes a Deadline (solver_plan.deadline.time_budget), not {deadline!r}")
    return deadline.child(charges_parent=True)


def time_for_passes(deadline: Deadline, problem: ConfigProblem, passes: float) -> bool:
    """Whether `passes` whole-problem passes (simplify, relaxation, heuristics: PASS_S_PER_NODE
    each per node) fit in the nominal budget left: optional work is skipped when they do not.
    Decided by the budget, not the clock, so a loaded machine makes the same choice (the wall clock
    only stops the pass if it overruns)."""
    budget = deadline.nominal_left()
    return budget is None or budget > passes * PASS_S_PER_NODE * problem.num_nodes


def out_of_budget(deadline: Deadline) -> bool:
    """Whether a heuristic without a plan ran out of time rather than failed (TIME_LIMIT, not
    ERROR): its nominal budget is spent, or the wall clock cut it short."""
    left = deadline.nominal_left()
    return deadline.cut_short or (left is not None and left <= 0.0)


class PhaseTimes:
    """Seconds per phase of an exact planner, for the note saying where the time went."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, label: str):
        """Context manager adding the wall-clock seconds of its block to phase `label`."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - started

    def note(self) -> str:
        """The note for the result: "time: label 0.41 s, ..." in the order phases first ran."""
        return "time: " + ", ".join(f"{label} {seconds:.2f} s" for label, seconds in self.seconds.items())
