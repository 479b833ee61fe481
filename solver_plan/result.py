"""Results: the one status enum, the result protocol every answer conforms to, and its JSON envelope.

Every answer of the project (`ConfigResult`, the harness' `Answer`, a backend's `SolveOutcome`,
`Plan`, `PipelineResult`, `HybridResult`, `MoEResult`, a batch record) exposes an `Envelope`
through its `envelope` property: kind, schema_version, status, objective (name, value, unit and
meaning), bound, gap, runtime, notes and solver failures. Every JSON output starts with
`Envelope.to_dict()`; readers learn what a file is from its `kind` (`read_kind`), never from the
other keys it happens to hold, except for files written before the envelope, which say so in a note.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable


class Status(str, enum.Enum):
    """How a planner's answer ended: optimal, feasible, proven infeasible, stopped by the time limit, or
    failed.
    """
    OPTIMAL = "OPTIMAL"  # objective proven optimal (within solver tolerance)
    FEASIBLE = "FEASIBLE"  # a valid plan, optimality not proven
    INFEASIBLE = "INFEASIBLE"  # proven that no plan meets the constraints (see notes for why)
    TIME_LIMIT = "TIME_LIMIT"  # stopped by the time limit; best incumbent (if any) and bound kept
    ERROR = "ERROR"  # the planner failed; see notes

    @property
    def has_solution(self) -> bool:
        """Whether a plan comes with this status (optimal, feasible, or an incumbent kept at the time limit).
        """
        return self in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT)

    @classmethod
    def parse(cls, value: "Status | str") -> "Status":
        """A status from its name in either case: backends' lowercase "optimal", "time_limit" (the
        solver-neutral linear model's words) are the same five statuses."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).upper())
        except ValueError:
            raise ValueError(f"unknown status {value!r} (expected one of {', '.join(s.value for s in cls)})") from None


def relative_gap(objective: float | None, lower_bound: float | None) -> float | None:
    """(objective - bound) / objective; 0 when both are 0; None when either is unknown."""
    if objective is None or lower_bound is None or not math.isfinite(objective):
        return None
    if objective == 0:
        return 0.0 if lower_bound <= 1e-12 else None
    return max(0.0, (objective - lower_bound) / abs(objective))


@dataclass(frozen=True)
class ObjectiveKind:
    """What an objective number measures: `label` in a sentence ("objective 1.2 ms (label)"),
    `meaning` in full (the JSON envelope's objective.meaning)."""
    name: str
    unit: str
    label: str
    meaning: str


# Every objective a result reports. "sum" and "load" are also the config planners' registry
# objectives (planners.OBJECTIVES): what the validator recomputes.
OBJECTIVE_KINDS: dict[str, ObjectiveKind] = {kind.name: kind for kind in (
    ObjectiveKind("sum", "s", "sum of per-operator compute and communication costs, no overlap",
                  "sum over operators of compute, intra-operator collectives and gradient sync, plus the "
                  "redistribution between operators, forward and backward, with nothing overlapped: a cost "
                  "that ranks plans, not a step time (simulate the plan for one)"),
    ObjectiveKind("load", "s", "load-aware step-time estimate",
                  "estimated step time: the busiest device, link or dependency chain of the plan "
                  "(intra/load_objective.py) plus a small share of the sum of operator costs"),
    ObjectiveKind("period", "s", "pipeline period per mini-batch",
                  "period of the validated periodic pipeline pattern: time between two mini-batches in "
                  "steady state"),
    ObjectiveKind("step_time", "s", "predicted step time",
                  "predicted time of one training step: the pipeline schedule, the gradient sync not hidden "
                  "under compute, and the optimizer step"),
    ObjectiveKind("model", "model units", "linear model objective",
                  "objective of the linear model a backend solved, in that model's own units"),
)}

# What a result JSON is (its `kind`): the planner registry's question names (planners.KINDS),
# "moe-hybrid" for expert-parallel hybrid plans and "batch-record" for a batch job's record.
RESULT_KINDS = ("config", "pipeline", "hybrid", "moe-hybrid", "batch-record")


@dataclass(frozen=True)
class Objective:
    """A result's objective: which measure (`OBJECTIVE_KINDS`), its value (None without a plan)."""
    name: str
    value: float | None

    def __post_init__(self):
        if self.name not in OBJECTIVE_KINDS:
            raise ValueError(f"unknown objective {self.name!r} (known: {', '.join(OBJECTIVE_KINDS)})")

    @property
    def unit(self) -> str:
        """Unit of the objective's value (from `OBJECTIVE_KINDS`)."""
        return OBJECTIVE_KINDS[self.name].unit

    @property
    def meaning(self) -> str:
        """What the objective measures, in full (the JSON envelope's objective.meaning)."""
        return OBJECTIVE_KINDS[self.name].meaning

    @property
    def label(self) -> str:
        """Short label of the measure, for a sentence ("objective 1.2 ms (label)")."""
        return OBJECTIVE_KINDS[self.name].label

    def to_dict(self) -> dict:
        """JSON-ready dict of the objective: name, value (None when not finite), unit and meaning."""
        return {"name": self.name, "value": _finite(self.value), "unit": self.unit, "meaning": self.meaning}


@dataclass(frozen=True)
class Envelope:
    """The fields every result has, whatever the question: the result protocol's content and the
    first keys of every JSON output."""
    kind: str
    schema_version: int
    status: Status
    objective: Objective
    bound: float | None = None
    runtime_s: float | None = None
    notes: tuple[str, ...] = ()
    solver_failures: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in RESULT_KINDS:
            raise ValueError(f"unknown result kind {self.kind!r} (known: {', '.join(RESULT_KINDS)})")
        if isinstance(self.schema_version, bool) or not isinstance(self.schema_version, int) or self.schema_version < 1:
            raise ValueError(f"schema_version must be a positive integer, got {self.schema_version!r}")
        object.__setattr__(self, "status", Status.parse(self.status))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "solver_failures", tuple(f for f in self.solver_failures if f))

    @property
    def gap(self) -> float | None:
        """Relative gap (objective - bound) / objective (`relative_gap`; None when either is unknown)."""
        return relative_gap(self.objective.value, self.bound)

    def to_dict(self) -> dict:
        """The JSON envelope: kind, schema_version, status, objective {name, value, unit, meaning},
        bound, gap, runtime_s, notes, solver_failures (JSON has no infinities: null)."""
        return {"kind": self.kind, "schema_version": self.schema_version, "status": self.status.value,
                "objective": self.objective.to_dict(), "bound": _finite(self.bound), "gap": self.gap,
                "runtime_s": _finite(self.runtime_s), "notes": list(self.notes),
                "solver_failures": list(self.solver_failures)}


ENVELOPE_KEYS = ("kind", "schema_version", "status", "objective", "bound", "gap", "runtime_s", "notes",
                 "solver_failures")


@runtime_checkable
class Result(Protocol):
    """The result protocol: every answer has a status and its envelope."""
    status: Status

    @property
    def envelope(self) -> Envelope:
        """The result's `Envelope`: the fields every answer has."""


def with_envelope(envelope: Envelope, body: dict) -> dict:
    """A result's JSON: the envelope's keys first, then the result's own (which keep their values
    where they share a name: `status`, `gap`, `runtime_s`, `notes` mean the same in both)."""
    return {**envelope.to_dict(), **body}


def _finite(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


@dataclass(frozen=True)
class KindReading:
    """What a result JSON is, and a note when that was guessed (files from before the envelope)."""
    kind: str
    note: str | None = None


def read_kind(data: dict, where: str = "result JSON") -> KindReading:
    """The `kind` a result JSON declares. Files written before the envelope carry none (except
    hybrid plans): they are recognised by the keys their writers always wrote, and the reading says
    so in its note. Raises ValueError for anything else."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: a result is a JSON object")
    kind = data.get("kind")
    if kind is not None:
        if kind not in RESULT_KINDS:
            raise ValueError(f"{where}: unknown kind {kind!r} (known: {', '.join(RESULT_KINDS)})")
        return KindReading(kind)
    guessed = _kind_before_the_envelope(data)
    if guessed is None:
        raise ValueError(f"{where}: no 'kind' (expected a config, pipeline, hybrid or moe-hybrid result JSON)")
    return KindReading(guessed, f"{where} has no 'kind' (written before the result envelope): read as a "
                                f"{guessed} result from its keys")


def _kind_before_the_envelope(data: dict) -> str | None:
    if "operators" in data and "edges" in data:
        return "config"
    if "period_s" in data or "operations" in data:
        return "pipeline"
    if isinstance(data.get("plan"), dict) and data["plan"].get("kind") == "moe-hybrid":
        return "moe-hybrid"
    if data.get("schema") == "solver-plan/batch-record":
        return "batch-record"
    return None


def read_schema_version(data: dict) -> int | None:
    """A result JSON's schema_version; pipeline JSON from before the envelope called it `version`."""
    return data.get("schema_version", data.get("version"))


@dataclass(frozen=True)
class ConfigResult:
    """Answer of a per-operator configuration planner on a `ConfigProblem`.

    `assignment[i]` is the chosen candidate index of problem node i (None without a solution).
    `solver_failure` is one line naming the planner's solver and why it failed (not a time-out)
    when the plan returned is a fallback (the heuristic warm start); None when the solver answered.
    `objective_kind` names what `objective` measures (`OBJECTIVE_KINDS`: "sum" or "load", the
    planner's registry objective).
    """
    planner: str
    status: Status
    objective: float | None = None
    lower_bound: float | None = None
    runtime_s: float = 0.0
    assignment: tuple[int, ...] | None = None
    notes: tuple[str, ...] = field(default=())
    solver_failure: str | None = None
    objective_kind: str = "sum"

    @property
    def gap(self) -> float | None:
        """Relative gap (objective - lower bound) / objective (`relative_gap`; None when either is unknown).
        """
        return relative_gap(self.objective, self.lower_bound)

    @property
    def envelope(self) -> Envelope:
        """The result protocol's `Envelope` of this answer (kind "config")."""
        return Envelope("config", CONFIG_SCHEMA_VERSION, self.status, Objective(self.objective_kind, self.objective),
                        self.lower_bound, self.runtime_s, self.notes, (self.solver_failure or "",))

    def with_notes(self, *notes: str) -> "ConfigResult":
        """A copy with `notes` appended."""
        return replace(self, notes=self.notes + tuple(notes))


CONFIG_SCHEMA_VERSION = 1  # per-operator plan JSON (plan.py; docs/schemas/plan.v1.schema.json)
