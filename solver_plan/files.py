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
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; outputs get the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


MAX_INPUT_BYTES = 64 * 2**20  # far above any JSON input of ours; refuse before parsing gigabytes


def unique_keys(pairs: list[tuple[str, object]], where) -> dict:
    """json `object_pairs_hook`: a key given twice is an error (JSON parsers silently keep the last)."""
    from solver_plan.errors import InputError

    data: dict = {}
    for key, value in pairs:
        if key in data:
            raise InputError(f"duplicate key {key!r}", str(where))
        data[key] = value
    return data


def read_json(path: str | Path, what: str = "JSON file"):
    """A JSON document, or one `InputError` naming the file: missing, not UTF-8 text, malformed,
    NaN / Infinity literals (not JSON), or nested too deeply for the parser."""
    from solver_plan.errors import InputError
    from solver_plan.yamlio import decode_text

    path = Path(path)
    try:
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise InputError(f"{what} is too large (at most {MAX_INPUT_BYTES} bytes)", str(path))
        text = decode_text(path.read_bytes(), str(path))
    except OSError as exc:
        raise InputError(f"cannot read {what} ({exc.strerror or exc})", str(path)) from None

    if not text.strip():
        raise InputError(f"file is empty (expected a {what})", str(path))

    def refuse_constant(name: str):
        raise InputError(f"{name} is not a JSON number", str(path))

    try:
        return json.loads(text, parse_constant=refuse_constant, object_pairs_hook=lambda pairs: unique_keys(pairs, path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})", str(path)) from None
    except RecursionError:
        raise InputError("JSON nested too deeply", str(path)) from None


def _umask() -> int:
    """The process umask, read without os.umask (which would change it for other threads)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def write_json_atomic(path: str | Path, data: dict) -> None:
    write_text_atomic(path, json.dumps(data, indent=2) + "\n")


def check_output_path(path: str | Path | None, where: str, suffixes: tuple[str, ...] | None = None,
                      what: str = "") -> None:
    """Fail before any work when an output file could not be written later, or, with `suffixes`,
    when its extension names a format the writer does not produce. Creates nothing: missing
    folders are checked through their nearest existing ancestor (the writer creates them)."""
    if path is None:
        return
    from solver_plan.errors import InputError

    label = f"cannot write {what + ' ' if what else ''}{str(path)!r}"
    if not str(path).strip():
        raise InputError("empty file name", where)
    if suffixes is not None and Path(path).suffix.lower() not in suffixes:
        raise InputError(f"cannot write {Path(path).suffix or 'a file without extension'} "
                         f"({str(path)!r}); expected one of {', '.join(suffixes)}", where)
    if Path(path).is_dir():
        raise InputError(f"{label}: it is a folder, expected a file name", where)
    check_output_folder(Path(path).parent, where, label)
    if Path(path).exists() and not os.access(path, os.W_OK):
        raise InputError(f"{label} (permission denied)", where)


def check_output_folder(folder: str | Path, where: str, label: str | None = None) -> None:
    """Fail unless files can be created in `folder` (or, if it is missing, it can be created)."""
    from solver_plan.errors import InputError

    folder = Path(folder)
    label = label or f"cannot write to {str(folder)!r}"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{label}: {str(existing)!r} is a file, not a folder", where)
    try:  # a probe file catches read-only file systems too, which os.access misses
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{label} ({exc.strerror or exc})", where) from None
