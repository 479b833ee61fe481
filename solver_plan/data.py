"""Where the bundled real inputs live (PipeDream profiles, LLM shapes, pipeline blocks, hardware)."""
from __future__ import annotations

import os
from pathlib import Path

from solver_plan.resources import REPO_ROOT, resource_dir  # noqa: F401 (REPO_ROOT kept for importers)

DATA_ENV = "SOLVER_PLAN_DATA"


def data_dir() -> Path:
    """$SOLVER_PLAN_DATA if set, else the vendored data/ folder (the checkout's, or the copy
    installed with the package)."""
    override = os.environ.get(DATA_ENV)
    return Path(override) if override else resource_dir("data")


def pipedream_profile(model: str) -> Path:
    """Path of the bundled PipeDream profile (graph.txt) of `model`; returned even when missing."""
    return data_dir() / "pipedream-profiles" / model / "graph.txt"
