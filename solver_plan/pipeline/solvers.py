"""The solver libraries of the pipeline planners, loaded on first use and in one order.

Why lazily: ortools takes about 0.45 s to import and pulp (which imports highspy when present)
about 0.3 s, and every pipeline command imports every planner module of this package (`planners.py`),
while most planners need neither library. Why here: ortools must load before pulp -- the ortools and
highspy wheels have each bundled a `libhighs`, and whichever loaded second broke the other's import
(docs/architecture.md, "Solver isolation"); HiGHS itself always runs in the worker of
`intra/isolated.py`, and CBC in a child process of its own.
"""
from __future__ import annotations

from types import ModuleType


def cp_model() -> ModuleType:
    """`ortools.sat.python.cp_model` (CP-SAT runs in this process)."""
    from ortools.sat.python import cp_model as module  # lazy: see the module docstring
    return module


def pulp() -> ModuleType:
    """`pulp`, loaded after ortools (see the module docstring)."""
    cp_model()
    import pulp as module  # lazy: see the module docstring
    return module
