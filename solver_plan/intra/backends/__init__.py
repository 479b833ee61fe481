"""Solver backends for `LinearModel`s. Kept in a subpackage so that loading the planner registry
does not import highspy or ortools (they cannot both load in one process; see intra/isolated.py)."""
