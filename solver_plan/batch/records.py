"""Job records: a job's inputs and outcome, sealed with a checksum and checked on every read.

A record is trusted only if it parses, has this schema, its checksum matches its content, and its
inputs hash to its key (and, when read for a job, that key is the job's). Anything else, such as a
file cut short by a crash or edited by hand, is reported as invalid and the job is redone.
"""
from __future__ import annotations

import datetime
import enum
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from solver_plan.batch.job import Job, canonical_json, digest, KEY_LENGTH
from solver_plan.result import Envelope, Objective, Status, with_envelope

SCHEMA = "solver-plan/batch-record"
VERSION = 1
# Fields that differ between two runs of the same deterministic job: timings and timestamps.
VOLATILE_FIELDS = ("runtime_s", "wall_s", "finished_at", "checksum")
OUTCOME_FIELDS = ("status", "objective_s", "lower_bound_s", "gap", "runtime_s", "killed", "error", "detail", "plan")


class InvalidRecord(ValueError):
    """A record file that must not be trusted; the message says why."""


# What a job kind's objective measures when its plan does not say (no plan, or one from before the envelope)
KIND_OBJECTIVES = {"config": "sum", "pipeline": "period", "hybrid": "step_time"}


def record_envelope(job: Job, outcome: dict[str, Any]) -> Envelope:
    """The record's result envelope (kind "batch-record"): the outcome's status, objective and bound
    (none credited when the solver failed, `kinds.outcome`), the objective's measure, notes and
    solver failures as the plan's own envelope gives them, else the job kind's and the error."""
    plan = outcome.get("plan") if isinstance(outcome.get("plan"), dict) else {}
    measure = plan.get("objective", {}).get("name") if isinstance(plan.get("objective"), dict) else None
    notes = plan.get("notes") or ([outcome["error"]] if outcome.get("error") else [])
    return Envelope("batch-record", VERSION, outcome.get("status") or Status.ERROR,
                    Objective(measure or KIND_OBJECTIVES[job.kind], outcome.get("objective_s")),
                    outcome.get("lower_bound_s"), outcome.get("runtime_s"), tuple(str(n) for n in notes),
                    tuple(str(f) for f in plan.get("solver_failures") or ()))


def build_record(job: Job, outcome: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """The sealed record of `job`: its inputs and outcome in the result envelope, timestamped, with its
    checksum."""
    record = with_envelope(record_envelope(job, outcome), {
        "schema": SCHEMA, "version": VERSION, "key": job.key, "job": job.describe(), "inputs": job.inputs()})
    record.update({name: outcome.get(name) for name in OUTCOME_FIELDS})
    record["killed"] = bool(record["killed"])
    record["wall_s"] = round(wall_s, 6)
    record["finished_at"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record = jsonable(record)
    record["checksum"] = checksum(record)
    return record


def checksum(record: dict[str, Any]) -> str:
    """SHA-256 of the record's canonical JSON without its checksum field."""
    content = {name: value for name, value in record.items() if name != "checksum"}
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def read_record(path: str | Path, expected_key: str | None = None) -> dict[str, Any]:
    """The record in `path`, or `InvalidRecord` saying why it cannot be trusted."""
    from solver_plan.errors import InputError
    from solver_plan.files import read_input_bytes
    try:  # regular files only: a FIFO in the folder would block `compare`
        text = read_input_bytes(path, "batch record").decode("utf-8", errors="replace")
    except InputError as exc:
        raise InvalidRecord(f"unreadable ({str(exc).removeprefix(f'{path}: ')})") from None
    try:
        record = json.loads(text)
    except ValueError:
        raise InvalidRecord("not valid JSON (cut short?)") from None
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise InvalidRecord("not a batch record")
    if record.get("version") != VERSION:
        raise InvalidRecord(f"record version {record.get('version')!r}, expected {VERSION}")
    if record.get("checksum") != checksum(record):
        raise InvalidRecord("checksum mismatch (content changed after it was written)")
    if not isinstance(record.get("inputs"), dict) or record.get("key") != digest(record["inputs"])[:KEY_LENGTH]:
        raise InvalidRecord("key does not match its inputs")
    if expected_key is not None and record["key"] != expected_key:
        raise InvalidRecord(f"holds job {record['key']}, expected {expected_key}")
    if record.get("status") not in {status.value for status in Status}:
        raise InvalidRecord(f"unknown status {record.get('status')!r}")
    return record


def stable_view(record: dict[str, Any]) -> dict[str, Any]:
    """The record without timings: equal for two runs of a deterministic job."""
    view = {name: value for name, value in record.items() if name not in VOLATILE_FIELDS}
    if isinstance(view.get("plan"), dict):
        view["plan"] = {name: value for name, value in view["plan"].items() if name not in VOLATILE_FIELDS}
    return view


def jsonable(value: Any) -> Any:
    """Plain JSON values: numpy scalars unwrapped, tuples as lists, non-finite floats as null."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)  # an enum or other object a planner put in its plan
