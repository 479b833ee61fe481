"""How a failed solver is told: one line for users, the traceback for the debug log only."""
from __future__ import annotations

import logging
import traceback


def failure_note(name: str, exc: BaseException) -> str:
    """A one-line note for a failed solver (no traceback: users see notes)."""
    if isinstance(exc, TimeoutError):
        return f"{name} stopped at the time limit: {exc}"
    text = str(exc).strip().splitlines()
    return f"{name} failed ({type(exc).__name__}: {text[-1] if text else 'no message'})"


def log_traceback(name: str) -> None:
    """Tracebacks go to the debug log, never into results users read."""
    logging.getLogger("solver_plan.intra").debug("%s failed:\n%s", name, traceback.format_exc())
