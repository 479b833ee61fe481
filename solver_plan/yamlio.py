"""Strict reading of YAML mappings: every error names the file and the key path."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from solver_plan.errors import InputError


def load_yaml(path: str | Path) -> Any:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror})", str(path)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise InputError(f"malformed YAML: {problem}", where) from None


class Section:
    """A YAML mapping being read; knows its key path, refuses unknown keys when closed."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise InputError(f"expected a mapping, got {type(data).__name__}", where)
        self.data = data
        self.where = where
        self._seen: set[str] = set()

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def has(self, key: str) -> bool:
        return key in self.data

    def get(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        self._seen.add(key)
        if key not in self.data:
            if required:
                raise InputError("missing required key", self.path(key))
            return default
        return self.data[key]

    def section(self, key: str, *, required: bool = False) -> "Section | None":
        value = self.get(key, required=required)
        if value is None:
            if required:  # `key:` with nothing after it
                raise InputError("missing value (expected a mapping)", self.path(key))
            return None
        return Section(value, self.path(key))

    def integer(self, key: str, default: int | None = None, *, required: bool = False,
                minimum: int = 1) -> int | None:
        value = self.get(key, default, required=required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {value!r}", self.path(key))
        if value < minimum:
            raise InputError(f"must be >= {minimum}, got {value}", self.path(key))
        return value

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.get(key, default, required=required)
        if value is not None and not isinstance(value, str):
            raise InputError(f"expected a string, got {value!r}", self.path(key))
        return value

    def close(self) -> None:
        unknown = sorted(set(map(str, self.data)) - self._seen)
        if unknown:
            allowed = ", ".join(sorted(self._seen))
            raise InputError(f"unknown key {unknown[0]!r} (allowed: {allowed})", self.path(unknown[0]))
