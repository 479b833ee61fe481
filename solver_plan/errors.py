"""Error types.

Bad *input* (YAML, CLI arguments, model options, profile files) raises an `InputError` whose
message names where the problem is (file, key path, line or operator) and what was expected.
The CLI turns it into a one-line message and exit status 2. Infeasibility is never an error:
planners report it as a status.
"""
from __future__ import annotations

# Exit statuses of every command (README, "Exit statuses"): 0 a plan (or the asked output), 1 no
# plan (INFEASIBLE, ERROR, or a time-out without one), 2 bad input, 3 a solver failed and the plan
# printed is the fallback it was replaced with, 130 interrupted.
EXIT_NO_PLAN = 1
EXIT_BAD_INPUT = 2
EXIT_SOLVER_FAILED = 3
EXIT_INTERRUPTED = 130


def solver_failure_exit(failure: str) -> int:
    """The plan printed is the fallback of a failed solver: one line on stderr saying which and why,
    and the exit status that says so (every command that plans ends this way)."""
    import sys
    print(f"solver-plan: solver failed: {failure}", file=sys.stderr)
    return EXIT_SOLVER_FAILED


class SolverPlanError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(SolverPlanError, ValueError):
    """The user's input is malformed; the message says where and what was expected."""

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        super().__init__(f"{where}: {message}" if where else message)


class GraphError(InputError):
    """A model graph is invalid (unknown input, cycle, duplicate name, shape mismatch)."""


class ClusterError(InputError):
    """A cluster specification is invalid."""


def check_positive(value: float | None, where: str) -> None:
    """None passes (no limit); anything else must be a finite positive number."""
    import math

    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InputError(f"must be positive, got {value}", where)
