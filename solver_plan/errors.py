"""Error types.

Bad *input* (YAML, CLI arguments, model options, profile files) raises an `InputError` whose
message names where the problem is (file, key path, line or operator) and what was expected.
The CLI turns it into a one-line message and exit status 2. Infeasibility is never an error:
planners report it as a status.
"""
from __future__ import annotations


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
