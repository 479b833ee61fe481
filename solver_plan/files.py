"""Atomic file writes: readers (and a resumed batch) never see half a file."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: str | Path, data: dict) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def check_output_path(path: str | Path | None, where: str) -> None:
    """Fail before any work when an output file cannot be written (its folder is created)."""
    if path is None:
        return
    from solver_plan.errors import InputError

    folder = Path(path).parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create folder {str(folder)!r} ({exc.strerror})", where) from None
    if Path(path).is_dir() or not os.access(folder, os.W_OK):
        raise InputError(f"cannot write {str(path)!r}", where)
