"""Status enum and result types shared by every planner."""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field


class Status(str, enum.Enum):
    OPTIMAL = "OPTIMAL"  # objective proven optimal (within solver tolerance)
    FEASIBLE = "FEASIBLE"  # a valid plan, optimality not proven
    INFEASIBLE = "INFEASIBLE"  # proven that no plan meets the constraints (see notes for why)
    TIME_LIMIT = "TIME_LIMIT"  # stopped by the time limit; best incumbent (if any) and bound kept
    ERROR = "ERROR"  # the planner failed; see notes

    @property
    def has_solution(self) -> bool:
        return self in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT)


def relative_gap(objective: float | None, lower_bound: float | None) -> float | None:
    """(objective - bound) / objective; 0 when both are 0; None when either is unknown."""
    if objective is None or lower_bound is None or not math.isfinite(objective):
        return None
    if objective == 0:
        return 0.0 if lower_bound <= 1e-12 else None
    return max(0.0, (objective - lower_bound) / abs(objective))


@dataclass(frozen=True)
class ConfigResult:
    """Answer of a per-operator configuration planner on a `ConfigProblem`.

    `assignment[i]` is the chosen candidate index of problem node i (None without a solution).
    `solver_failure` is one line naming the planner's solver and why it failed (not a time-out)
    when the plan returned is a fallback (the heuristic warm start); None when the solver answered.
    """
    planner: str
    status: Status
    objective: float | None = None
    lower_bound: float | None = None
    runtime_s: float = 0.0
    assignment: tuple[int, ...] | None = None
    notes: tuple[str, ...] = field(default=())
    solver_failure: str | None = None

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.lower_bound)

    def with_notes(self, *notes: str) -> "ConfigResult":
        from dataclasses import replace
        return replace(self, notes=self.notes + tuple(notes))
