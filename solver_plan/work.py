"""Deterministic work limits for the CP-SAT solvers (pipeline schedules and allocations, the
per-operator `cpsat` planner), with the wall clock only as a safety net.

A time limit that decides when a search stops makes the answer depend on the machine's load. So
each CP-SAT call runs single-threaded with a fixed seed and a limit in CP-SAT's deterministic time
(`max_deterministic_time`, work units of roughly a second on an idle core), drawn from a
`WorkBudget`; the wall-clock deadline is also passed (`max_time_in_seconds`) but only stops a call
when the machine is far slower than expected, and then the budget records that the search was cut
short, so the result can say so.
"""
from __future__ import annotations

from solver_plan.deadline import Deadline, time_budget

SEED = 0
# Deterministic work units granted per second of time limit. CP-SAT's deterministic time runs far
# slower than the wall clock on the pipeline models (measured 1.2 units in 14.6 s on a 144-layer,
# 32-processor allocation on the 2-core development machine; about 1:1 on small ones), so a
# tenth keeps large models inside their limit and small ones still get seconds of work. On the
# one-hot configuration models (random DAGs of 50-1,000 operators, with and without a binding
# memory limit) it measured 0.2-0.5 units per second: a tenth leaves the wall clock 2-5x slack.
WORK_PER_SECOND = 0.1
MIN_CALL_WORK = 0.02  # every CP-SAT call may use at least this much work
WALL_PER_WORK = 3.0 / WORK_PER_SECOND  # a call's wall-clock cap: 3x the time its work should take


class WorkBudget:
    """Work units to share among solver calls, plus the wall-clock safety net."""

    def __init__(self, time_limit: float | None, deadline: Deadline | None = None):
        self.total = None if time_limit is None else time_limit * WORK_PER_SECOND
        self.used = 0.0
        self.deadline = deadline if deadline is not None else time_budget(None if time_limit is None
                                                                          else 2.0 * time_limit + 5.0)
        self.cut_short = False

    def remaining(self) -> float | None:
        """Work units left (None: unlimited)."""
        return None if self.total is None else max(0.0, self.total - self.used)

    def exhausted(self) -> bool:
        """Whether the work is spent or the wall-clock safety net has expired (which marks the budget cut
        short).
        """
        if self.deadline.expired():
            self.cut_short = True
            return True
        left = self.remaining()
        return left is not None and left <= 1e-3

    def share(self, fraction: float = 1 / 3) -> float | None:
        """Work for the next solver call: `fraction` of what is left, at least MIN_CALL_WORK and at most all
        of it (None: unlimited).
        """
        left = self.remaining()
        return None if left is None else min(left, max(MIN_CALL_WORK, left * fraction))

    def configure(self, solver, work: float | None) -> None:
        """CP-SAT parameters for one call with `work` units (None: unlimited)."""
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = SEED
        if work is not None:
            solver.parameters.max_deterministic_time = max(1e-3, work)
        wall = self.deadline.remaining()
        if work is not None:
            wall = work * WALL_PER_WORK if wall is None else min(wall, work * WALL_PER_WORK)
        if wall is not None:
            solver.parameters.max_time_in_seconds = max(0.05, wall)

    def record(self, solver) -> None:
        """Charge a finished call; flag a call the wall clock stopped before its work limit."""
        self.used += solver.deterministic_time
        limit = solver.parameters.max_time_in_seconds
        if solver.wall_time >= 0.98 * limit and solver.deterministic_time < solver.parameters.max_deterministic_time:
            self.cut_short = True
