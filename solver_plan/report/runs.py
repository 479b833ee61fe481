"""Batch records -> `Run`s: each planner run labelled by its instance and its planner setting.

An instance is everything that defines the problem (kind, model, cluster, devices or processors,
memory limit, candidates per operator); the planner setting is the rest (planner, seed, time limit,
options, schedule). A planner's label shows only the settings that vary among its runs of one family
(job name), so a plain comparison reads "milp", "greedy" (also where families have their own time
limits), and a seed sweep reads "mcmc seed=0", "mcmc seed=1".
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Collection, Iterable

from solver_plan.batch.job import digest, short_spec
from solver_plan.batch.store import iter_records
from solver_plan.suite.spec import GENERATED_CLUSTER
from solver_plan.units import format_bytes

INSTANCE_FIELDS = ("kind", "model", "cluster", "devices", "processors", "memory_limit", "max_candidates")
SETTING_FIELDS = ("seed", "time_limit", "schedule", "options")


@dataclass(frozen=True)
class Run:
    """One planner run read from a batch record, labelled by its instance and planner setting."""
    instance: str
    planner: str  # label: planner name plus the settings that vary among its runs
    planner_name: str
    status: str
    objective_s: float | None
    lower_bound_s: float | None
    runtime_s: float  # the planner's own time; the wall time when it has none (killed, crashed)
    killed: bool
    error: str | None
    record: dict[str, Any]  # the record it came from
    family: str = ""  # the job file entry (job name) it came from
    kind: str = "config"

    @property
    def has_solution(self) -> bool:
        """Whether the run returned a plan (an objective)."""
        return self.objective_s is not None


def load_runs(folder: str | Path, keys: Collection[str] | None = None) -> tuple[list[Run], list[tuple[Path, str]]]:
    """Runs from the trusted records of `folder` (only those whose key is in `keys`, if given), and
    the (path, why) of records skipped as invalid."""
    records, invalid = [], []
    for path, record, why in iter_records(folder):
        if record is None:
            invalid.append((path, why))
        elif keys is None or record["key"] in keys:
            records.append(record)
    return runs_from_records(records), invalid


def runs_from_records(records: Iterable[dict[str, Any]]) -> list[Run]:
    """The `Run` of each record, labelled so planner labels show only the settings that vary."""
    records = list(records)
    varying = _varying_settings(records)
    labels = _instance_labels(records)
    runs = []
    for record in records:
        job = record["job"]
        runtime = record.get("runtime_s")
        runs.append(Run(
            instance=labels[instance_key(record)], planner=planner_label(job, varying.get((job["planner"], job.get("group")), ())),
            planner_name=job["planner"], status=record["status"], objective_s=record.get("objective_s"),
            lower_bound_s=record.get("lower_bound_s"),
            runtime_s=float(runtime if runtime is not None else record.get("wall_s") or 0.0),
            killed=bool(record.get("killed")), error=record.get("error"), record=record,
            family=job.get("group") or "", kind=job.get("kind") or "config"))
    return sorted(runs, key=lambda run: (run.instance, run.planner))


def instance_key(record: dict[str, Any]) -> str:
    """Digest of the instance's inputs: files count by content, so equal labels may differ."""
    return digest({name: record["inputs"].get(name) for name in INSTANCE_FIELDS})


def _instance_labels(records: list[dict[str, Any]]) -> dict[str, str]:
    """A readable label per instance key; labels shared by different instances get the key's start."""
    labels = {instance_key(record): instance_label(record["job"]) for record in records}
    shared = {label for label in labels.values() if list(labels.values()).count(label) > 1}
    return {key: f"{label} #{key[:6]}" if label in shared else label for key, label in labels.items()}


def instance_label(job: dict[str, Any]) -> str:
    """'resnet50:batch=32 @ v100x8-nvlink, 4 devices, mem 16.00GB'."""
    extras = []
    if job.get("devices") is not None:
        extras.append(f"{job['devices']} devices")
    if job.get("processors") is not None:
        extras.append(f"{job['processors']} processors")
    if job.get("memory_limit") is not None:
        extras.append(f"mem {format_bytes(job['memory_limit']).replace(' ', '')}")
    if job.get("max_candidates") is not None:
        extras.append(f"k={job['max_candidates']}")
    if job.get("kind", "config") != "config":
        extras.append(job["kind"])
    where = "" if job["cluster"] == GENERATED_CLUSTER else f" @ {short_spec(job['cluster'])}"
    return ", ".join([f"{short_spec(job['model'])}{where}"] + extras)


def planner_label(job: dict[str, Any], varying: tuple[str, ...]) -> str:
    """The planner's name followed by name=value for each setting in `varying`."""
    return " ".join([job["planner"]] + [f"{name}={_setting_text(job.get(name))}" for name in varying])


def _varying_settings(records: list[dict[str, Any]]) -> dict[tuple[str, Any], tuple[str, ...]]:
    """For each planner name within a family (job name), the setting fields taking more than one value
    among its records: a family run at its own time limit keeps the plain planner name."""
    values: dict[tuple[str, Any], dict[str, set[str]]] = {}
    for record in records:
        job = record["job"]
        per_field = values.setdefault((job["planner"], job.get("group")), {name: set() for name in SETTING_FIELDS})
        for name in SETTING_FIELDS:
            per_field[name].add(_setting_text(job.get(name)))
    return {key: tuple(name for name in SETTING_FIELDS if len(seen[name]) > 1) for key, seen in values.items()}


def _setting_text(value: Any) -> str:
    if isinstance(value, dict):
        return ",".join(f"{k}:{_setting_text(v)}" for k, v in sorted(value.items())) or "{}"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "-" if value is None else str(value)

