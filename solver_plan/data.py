"""Where the bundled real inputs live (PipeDream profiles, LLM shapes, pipeline blocks, hardware)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_ENV = "SOLVER_PLAN_DATA"


def data_dir() -> Path:
    """$SOLVER_PLAN_DATA if set, else the repository's data/ folder (vendored copies)."""
    override = os.environ.get(DATA_ENV)
    return Path(override) if override else REPO_ROOT / "data"


def pipedream_profile(model: str) -> Path:
    return data_dir() / "pipedream-profiles" / model / "graph.txt"
