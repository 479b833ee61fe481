"""`Job`: one planner run on one (model, cluster) instance, and the key naming its record.

The key is a digest of the job's inputs, so a record file answers exactly one question: rerunning a
batch finds the answer by recomputing the key, and changing any input (a planner option, the content
of a cluster YAML file) names a different record. The job's group name and its grace period are not
inputs: they change neither what is computed nor the answer.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from solver_plan.deadline import DEFAULT_TIME_LIMIT_S

JOB_KINDS = ("config", "pipeline", "hybrid")
DEFAULT_GRACE_S = 30.0
KEY_LENGTH = 20  # hex digits of sha256: collisions are out of reach for any batch size


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces. Digests of it are stable across runs."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def digest(value: Any) -> str:
    """SHA-256 hex digest of `value`'s canonical JSON."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


@dataclass(frozen=True)
class Job:
    """One planner run on one instance, with everything its answer depends on (validated here); its key
    names its record, so a rerun recognises the job."""
    group: str  # the job file entry it came from; named in messages and reports
    kind: str  # "config" (per-operator planners), "pipeline" (stage allocation + schedule) or "hybrid"
    model: str  # zoo spec or path of a profile file, as the worker will resolve it
    cluster: str  # preset name or path of a cluster YAML file
    planner: str
    seed: int = 0
    devices: int | None = None  # config jobs: plan on the first N devices of the cluster
    processors: int | None = None  # pipeline jobs: number of pipeline processors
    # seconds; passed to the planner and enforced by the runner. The CLI's default: a job file has
    # to say `time_limit: null` for a run without one.
    time_limit: float | None = DEFAULT_TIME_LIMIT_S
    memory_limit: float | None = None  # bytes per device
    max_candidates: int | None = None  # config jobs
    schedule: str | None = None  # pipeline jobs: schedule planner
    options: tuple[tuple[str, Any], ...] = ()  # extra keyword arguments of the planner, sorted
    precision: str | None = None  # config, pipeline and hybrid jobs: as `--precision` (None: auto)
    all_devices: bool = False  # config jobs: every operator on all devices (`--all-devices`)
    optimizer: str | None = None  # pipeline jobs: as `--optimizer` (None: adam)
    grace: float = DEFAULT_GRACE_S  # seconds past time_limit before the runner kills the job
    # Content digests of input files (model profile, cluster YAML), keyed by the spec naming them.
    fingerprints: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self):
        if self.kind not in JOB_KINDS:
            raise ValueError(f"Job: kind must be one of {JOB_KINDS}, got {self.kind!r}")
        for label in ("group", "model", "cluster", "planner"):
            if not isinstance(getattr(self, label), str) or not getattr(self, label):
                raise ValueError(f"Job: {label} must be a non-empty string")
        for label in ("time_limit", "memory_limit"):
            value = getattr(self, label)
            if value is not None and not value > 0:
                raise ValueError(f"Job: {label} must be positive, got {value}")
        if self.grace < 0:
            raise ValueError(f"Job: grace must be >= 0, got {self.grace}")
        if self.precision is not None and not isinstance(self.precision, str):
            raise ValueError(f"Job: precision must be a string or None, got {self.precision!r}")
        if self.optimizer is not None and not isinstance(self.optimizer, str):
            raise ValueError(f"Job: optimizer must be a string or None, got {self.optimizer!r}")
        if not isinstance(self.all_devices, bool):
            raise ValueError(f"Job: all_devices must be a boolean, got {self.all_devices!r}")
        if list(self.options) != sorted(self.options):
            raise ValueError("Job: options must be sorted by name")

    def inputs(self) -> dict[str, Any]:
        """Everything the answer depends on; files stand for their name and content."""
        files = dict(self.fingerprints)

        def spec(value: str) -> str:
            return f"{short_spec(value)}#sha256:{files[value]}" if value in files else value

        inputs = {
            "kind": self.kind, "model": spec(self.model), "cluster": spec(self.cluster),
            "planner": self.planner, "seed": self.seed, "devices": self.devices,
            "processors": self.processors, "time_limit": self.time_limit,
            "memory_limit": self.memory_limit, "max_candidates": self.max_candidates,
            "schedule": self.schedule, "options": dict(self.options),
        }
        # Only when set: jobs that leave them at their defaults keep the keys (records) they had.
        if self.precision is not None:
            inputs["precision"] = self.precision
        if self.all_devices:
            inputs["all_devices"] = True
        if self.optimizer is not None:
            inputs["optimizer"] = self.optimizer
        return inputs

    @property
    def key(self) -> str:
        """The job's record key: a digest of its inputs, KEY_LENGTH hex digits."""
        return digest(self.inputs())[:KEY_LENGTH]

    def label(self) -> str:
        """Short human name: model, cluster, devices/processors, planner, seed."""
        parts = [short_spec(self.model), short_spec(self.cluster)]
        if self.devices is not None:
            parts.append(f"{self.devices}dev")
        if self.processors is not None:
            parts.append(f"{self.processors}proc")
        parts += [self.planner, f"seed{self.seed}"]
        return " ".join(parts)

    def record_name(self) -> str:
        """The record's file name: the job's label made safe for a file name, then its key."""
        slug = re.sub(r"[^A-Za-z0-9._=-]+", "_", self.label())[:90]
        return f"{slug}-{self.key}.json"

    def describe(self) -> dict[str, Any]:
        """The job as stored in its record: inputs as given, plus group and grace."""
        return {"group": self.group, "kind": self.kind, "model": self.model, "cluster": self.cluster,
                "planner": self.planner, "seed": self.seed, "devices": self.devices,
                "processors": self.processors, "time_limit": self.time_limit,
                "memory_limit": self.memory_limit, "max_candidates": self.max_candidates,
                "schedule": self.schedule, "options": dict(self.options), "precision": self.precision,
                "all_devices": self.all_devices, "optimizer": self.optimizer, "grace": self.grace}


def short_spec(spec: str) -> str:
    """'configs/clusters/x.yaml' -> 'x.yaml'; 'profiles/vgg16/graph.txt' -> 'vgg16/graph.txt'."""
    parts = spec.replace("\\", "/").rstrip("/").split("/")
    if len(parts) > 1 and parts[-1] == "graph.txt":
        return "/".join(parts[-2:])
    return parts[-1]
