"""The record folder: one JSON file per job, named by a readable label and the job's key.

Writes are atomic (temporary file + rename), so a batch killed at any moment leaves each record
either complete or absent; hidden temporary files it leaves behind are ignored.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from solver_plan.batch.job import Job
from solver_plan.batch.records import InvalidRecord, read_record
from solver_plan.errors import InputError
from solver_plan.files import write_json_atomic


class RecordStore:
    """The record folder of a batch: one JSON file per job, checked on every read."""

    def __init__(self, folder: str | Path, where: str = "--out"):
        self.folder = Path(folder)
        check_writable(self.folder, where)

    def path(self, job: Job) -> Path:
        """Where the record of `job` lives."""
        return self.folder / job.record_name()

    def load(self, job: Job) -> tuple[dict[str, Any] | None, str | None]:
        """(record, None) if the job has a trusted record; (None, why) if its file is invalid;
        (None, None) if it has none."""
        path = self.path(job)
        if not path.exists():
            return None, None
        try:
            return read_record(path, job.key), None
        except InvalidRecord as exc:
            return None, str(exc)

    def write(self, record: dict[str, Any], job: Job) -> Path:
        """Write `record` for `job` atomically; its path."""
        path = self.path(job)
        write_json_atomic(path, record)
        return path


def iter_records(folder: str | Path) -> Iterator[tuple[Path, dict[str, Any] | None, str | None]]:
    """Every record file of a folder in name order: (path, record, None) or (path, None, why invalid)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError("no such folder of batch records", str(folder))
    for path in sorted(folder.glob("*.json")):
        if path.name.startswith("."):
            continue
        try:
            yield path, read_record(path), None
        except InvalidRecord as exc:
            yield path, None, str(exc)


def check_writable(folder: Path, where: str) -> None:
    """Fail before any job runs if records could not be written here."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".probe.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"cannot write records to {str(folder)!r} ({exc.strerror or exc})", where) from None
