"""Planner settings in a job file, inherited defaults -> job -> planner entry.

Each level may set any of SETTING_KEYS; a key present at a level (even as null) overrides what it
inherits, except `options`, which merges key by key. Lists make grid axes: `seeds`, `devices`,
`processors` may each be one value or a list.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from solver_plan.batch.job import DEFAULT_GRACE_S
from solver_plan.cost.precision import Precision
from solver_plan.deadline import DEFAULT_TIME_LIMIT_S, MAX_TIME_LIMIT_S
from solver_plan.errors import InputError
from solver_plan.units import parse_bytes, parse_seconds
from solver_plan.yamlio import Section

SETTING_KEYS = ("time_limit", "memory_limit", "seed", "seeds", "devices", "processors", "max_candidates",
                "schedule", "grace", "options", "precision", "all_devices", "optimizer")
# Keys that only some kinds of job take; the other kinds reject them (except in `defaults`).
KIND_ONLY_KEYS = {"devices": ("config", "hybrid"), "max_candidates": ("config",),
                  "processors": ("pipeline",), "schedule": ("pipeline",), "precision": ("config", "pipeline", "hybrid"),
                  "all_devices": ("config",), "optimizer": ("pipeline",)}
OPTION_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class Settings:
    """The planner settings a job file entry sets or inherits (defaults -> job -> planner entry)."""
    seeds: tuple[int, ...] = (0,)
    devices: tuple[int | None, ...] = (None,)
    processors: tuple[int | None, ...] = (None,)
    time_limit: float | None = DEFAULT_TIME_LIMIT_S  # as the CLI; `time_limit: null` for none
    memory_limit: float | None = None
    max_candidates: int | None = None
    schedule: str | None = None
    grace: float = DEFAULT_GRACE_S
    precision: str | None = None  # None: auto (the device's default)
    all_devices: bool = False
    optimizer: str | None = None  # pipeline jobs, as `--optimizer` (None: adam)
    options: tuple[tuple[str, Any], ...] = ()


def reject_foreign_keys(section: Section, kind: str) -> None:
    """InputError when `section` sets a key that jobs of `kind` do not take."""
    for key, kinds in KIND_ONLY_KEYS.items():
        if kind not in kinds and section.has(key):
            raise InputError(f"only {' and '.join(kinds)} jobs take {key!r}; this job's kind is {kind!r}",
                             section.path(key))


def read_settings(section: Section, inherited: Settings) -> Settings:
    """The settings `section` sets, over those it inherits. Marks every setting key as read."""
    changes: dict[str, Any] = {}
    if section.has("seed") and section.has("seeds"):
        raise InputError("give either 'seed' or 'seeds', not both", section.path("seeds"))
    for key in ("seed", "seeds"):
        if section.has(key):
            changes["seeds"] = _integers(section, key, minimum=0)
    for key in ("devices", "processors"):
        if section.has(key):
            changes[key] = _integers(section, key, minimum=1)
    if section.has("time_limit"):
        changes["time_limit"] = _optional_positive_seconds(section, "time_limit")
    if section.has("memory_limit"):
        value = section.get("memory_limit")
        changes["memory_limit"] = None if value is None else parse_bytes(value, section.path("memory_limit"))
    if section.has("max_candidates"):
        changes["max_candidates"] = section.integer("max_candidates", minimum=2)
    if section.has("schedule"):
        changes["schedule"] = section.string("schedule")
    if section.has("grace"):
        changes["grace"] = parse_seconds(section.get("grace"), section.path("grace"))
    if section.has("precision"):
        changes["precision"] = _precision(section)
    if section.has("optimizer"):
        changes["optimizer"] = _optimizer(section)
    if section.has("all_devices"):
        value = section.get("all_devices")
        if not isinstance(value, bool):
            raise InputError(f"expected true or false, got {value!r}", section.path("all_devices"))
        changes["all_devices"] = value
    if section.has("options"):
        merged = dict(inherited.options)
        merged.update(_options(section))
        changes["options"] = tuple(sorted(merged.items()))
    for key in SETTING_KEYS:
        section.get(key)  # mark as read, so close() only rejects keys no level knows
    return replace(inherited, **changes)


def _integers(section: Section, key: str, minimum: int) -> tuple[int, ...]:
    value = section.get(key)
    values = value if isinstance(value, list) else [value]
    if not values:
        raise InputError("expected an integer or a non-empty list of integers", section.path(key))
    for index, item in enumerate(values):
        where = section.path(key) + (f"[{index}]" if isinstance(value, list) else "")
        if isinstance(item, bool) or not isinstance(item, int):
            raise InputError(f"expected an integer, got {item!r}", where)
        if item < minimum:
            raise InputError(f"must be >= {minimum}, got {item}", where)
    if len(set(values)) != len(values):
        raise InputError(f"repeated value in {values}", section.path(key))
    return tuple(values)


def _optional_positive_seconds(section: Section, key: str) -> float | None:
    value = section.get(key)
    if value is None:
        return None
    seconds = parse_seconds(value, section.path(key))
    if seconds <= 0:
        raise InputError(f"must be positive, got {value!r}", section.path(key))
    if seconds > MAX_TIME_LIMIT_S:  # waits on workers overflow; null means no limit
        raise InputError(f"must be at most {MAX_TIME_LIMIT_S:g} s (null for no limit), got {value!r}",
                         section.path(key))
    return seconds


def _precision(section: Section) -> str | None:
    """auto/null (the device's default) or one of the `Precision` names, as `--precision` takes."""
    value = section.get("precision")
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    if not isinstance(value, str):
        raise InputError(f"expected auto or one of {', '.join(p.value for p in Precision)}, got {value!r}",
                         section.path("precision"))
    return Precision.parse(value, section.path("precision")).value


def _optimizer(section: Section) -> str | None:
    """null (adam) or an optimizer whose state pipeline stages keep, as `pipeline --optimizer` takes."""
    from solver_plan.pipeline.memory import check_optimizer
    value = section.get("optimizer")
    return None if value is None else check_optimizer(value, section.path("optimizer"))


def _options(section: Section) -> dict[str, Any]:
    options = Section(section.get("options"), section.path("options"))
    result: dict[str, Any] = {}
    for name, value in options.data.items():
        where = options.path(str(name))
        if not isinstance(name, str):
            raise InputError(f"option names must be strings, got {name!r}", where)
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(item, OPTION_SCALARS) for item in items):
            raise InputError(f"expected a number, string, boolean or a list of them, got {value!r}", where)
        result[name] = tuple(value) if isinstance(value, list) else value
    return result
