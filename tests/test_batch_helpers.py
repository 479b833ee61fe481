"""Helpers shared by the batch tests (no tests here)."""
from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    """Whether process `pid` still runs (Linux /proc); a zombie has stopped, only its status is left."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state not in ("Z", "X")
