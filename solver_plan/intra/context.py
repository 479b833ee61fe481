"""What a planner's core may use (`Context`) and the one exception a core raises for a missing
solver (`SolverUnavailable`)."""
from __future__ import annotations

from dataclasses import dataclass, field

from solver_plan.deadline import Deadline

REPAIR_HINT = "repair_hint"  # option: a cheap plan that may break memory, for heuristics to repair


@dataclass
class Context:
    """What a core may use: the clock, the seed, the warm start and planner options."""
    deadline: Deadline
    seed: int = 0
    incumbent: tuple[int, ...] | None = None
    options: dict = field(default_factory=dict)
    incumbent_source: str = ""  # what found the incumbent, for notes


class SolverUnavailable(RuntimeError):
    """The backend's solver is not installed or cannot run here."""
