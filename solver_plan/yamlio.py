"""Strict reading of YAML mappings: every error names the file and the key path.

Reading refuses what YAML itself lets through silently: duplicate keys (YAML keeps the last one),
files that are not UTF-8 text (binary, UTF-16), empty files, and nesting deeper than any real input
needs (which would otherwise end in a RecursionError). Misspelt keys are reported with the key they
were probably meant to be.
"""
from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any

import yaml

from solver_plan.errors import InputError
from solver_plan.files import decode_text, read_input_bytes
from solver_plan.units import MIB

MAX_DEPTH = 64  # deepest nesting accepted; real cluster and job files use fewer than 6 levels
MAX_BYTES = 16 * MIB  # no input of ours is near this; refuse before parsing gigabytes


# libyaml's parser where PyYAML was built with it: the same documents and marks, about 10x faster
# than the pure-Python scanner, which cost ~0.13 s of every command's start-up on devices.yaml alone
# (a 1 s time limit counts start-up). The constructors, and so what is accepted, are PyYAML's own.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_BaseLoader):  # type: ignore[valid-type,misc]
    """SafeLoader that refuses duplicate keys in a mapping (naming the key and its line)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: later keys override it by design
            continue
        key = loader.construct_object(key_node, deep=deep)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable key: let PyYAML's own error report it
            break
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first given on line {first})", key_node.start_mark)
        seen[key] = key_node.start_mark.line + 1
    return yaml.constructor.SafeConstructor.construct_mapping(loader, node, deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def read_text(path: str | Path, what: str = "file") -> str:
    """A small UTF-8 text file, or an `InputError` naming it (missing, unreadable, binary, huge, or
    not a regular file: FIFOs, devices and /proc files are refused, see `files.read_input_bytes`)."""
    return decode_text(read_input_bytes(path, what, MAX_BYTES), str(path))


def _depth(value: Any) -> int:
    """Nesting depth of lists and mappings, without recursion (aliases counted once)."""
    deepest, stack, seen = 0, [(value, 1)], set()
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, (dict, list)) or id(item) in seen:
            continue
        seen.add(id(item))
        deepest = max(deepest, depth)
        if deepest > MAX_DEPTH:
            return deepest
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return deepest


_OPEN = (yaml.FlowSequenceStartToken, yaml.FlowMappingStartToken, yaml.BlockSequenceStartToken,
         yaml.BlockMappingStartToken)
_CLOSE = (yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken, yaml.BlockEndToken)


_DEEP_FLOW = re.compile(r"(?:[\[{]\s*){%d}" % (MAX_DEPTH + 1))


def _check_depth(text: str, where: str) -> None:
    """Refuse deep nesting from the token stream (PyYAML's scanner is iterative; its composer
    recurses once per level and would end in a slow RecursionError)."""
    if _DEEP_FLOW.search(text):  # '[[[[...': the common shape, found without scanning
        raise InputError(f"nested too deeply (at most {MAX_DEPTH} levels)", where)
    if text.count("\n") + text.count("[") + text.count("{") <= MAX_DEPTH:
        return  # too small to nest that deep
    depth = 0
    try:
        for token in yaml.scan(text, Loader=_BaseLoader):
            if isinstance(token, _OPEN):
                depth += 1
                if depth > MAX_DEPTH:
                    raise InputError(f"nested too deeply (at most {MAX_DEPTH} levels)",
                                     f"{where}:{token.start_mark.line + 1}")
            elif isinstance(token, _CLOSE):
                depth -= 1
    except yaml.YAMLError:
        return  # malformed: the parse below reports it with its line


def parse_yaml(text: str, where: str) -> Any:
    """YAML text -> Python data; errors name `where` and the line."""
    _check_depth(text, where)
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(exc, "problem", None) or "malformed YAML"
        raise InputError(f"malformed YAML: {problem}", at) from None
    except RecursionError:
        raise InputError(f"nested too deeply (at most {MAX_DEPTH} levels)", where) from None
    if _depth(data) > MAX_DEPTH:
        raise InputError(f"nested too deeply (at most {MAX_DEPTH} levels)", where)
    return data


def load_yaml(path: str | Path) -> Any:
    """A YAML file's data; an empty file (or one of comments only) is an error, not None."""
    text = read_text(path, "YAML file")
    data = parse_yaml(text, str(path))
    if data is None:
        raise InputError("file is empty (expected a YAML mapping)", str(path))
    return data


def describe(value: Any) -> str:
    """A value as an error message shows it: 'null', 'a list', 'a string 'x''."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def near_miss(word: str, choices) -> str | None:
    """The choice `word` was most probably meant to be (a typo), if any."""
    matches = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.75)
    return matches[0] if matches else None


class Section:
    """A YAML mapping being read; knows its key path, refuses unknown keys when closed."""

    def __init__(self, data: Any, where: str):
        if not isinstance(data, dict):
            raise InputError(f"expected a mapping, got {describe(data)}", where)
        self.data = data
        self.where = where
        self._seen: set[str] = set()

    def path(self, key: str) -> str:
        """The dotted key path of `key` in this section, for error messages."""
        return f"{self.where}.{key}" if self.where else str(key)

    def has(self, key: str) -> bool:
        """Whether `key` is present (without marking it as read)."""
        return key in self.data

    def get(self, key: str, default: Any = None, *, required: bool = False) -> Any:
        """The raw value of `key`, marked as read; `default` when absent, InputError when absent and
        `required`.
        """
        self._seen.add(key)
        if key not in self.data:
            if required:
                self._missing(key)
            return default
        return self.data[key]

    def _missing(self, key: str) -> None:
        """A required key is absent: blame a misspelt key if one looks like it."""
        unread = [k for k in self.data if isinstance(k, str) and k not in self._seen]
        typo = near_miss(key, unread)
        if typo is not None:
            raise InputError(f"unknown key {typo!r} (did you mean {key!r}?)", self.path(typo))
        raise InputError("missing required key", self.path(key))

    def _present_null(self, key: str, default: Any, required: bool, expected: str) -> None:
        """`key:` with nothing after it, where a value is needed (required, or with a default)."""
        if key in self.data and self.data[key] is None and (required or default is not None):
            raise InputError(f"missing value (expected {expected})", self.path(key))

    def section(self, key: str, *, required: bool = False) -> "Section | None":
        """The mapping under `key` as a `Section`; None when absent or empty (InputError when `required`)."""
        value = self.get(key, required=required)
        if value is None:
            if required:  # `key:` with nothing after it
                raise InputError("missing value (expected a mapping)", self.path(key))
            return None
        return Section(value, self.path(key))

    def integer(self, key: str, default: int | None = None, *, required: bool = False,
                minimum: int = 1, maximum: int | None = None) -> int | None:
        """The integer under `key`, checked against `minimum` and `maximum` (booleans refused); `default` when
        absent.
        """
        self._present_null(key, default, required, "an integer")
        value = self.get(key, default, required=required)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {describe(value)}", self.path(key))
        if value < minimum:
            raise InputError(f"must be >= {minimum}, got {value}", self.path(key))
        if maximum is not None and value > maximum:
            raise InputError(f"must be at most {maximum}, got {value}", self.path(key))
        return value

    def string(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        """The string under `key`; `default` when absent."""
        self._present_null(key, default, required, "a string")
        value = self.get(key, default, required=required)
        if value is not None and not isinstance(value, str):
            raise InputError(f"expected a string, got {describe(value)}", self.path(key))
        return value

    def close(self) -> None:
        """Refuse unknown keys: InputError naming the first key never read, with a near-miss suggestion or the
        allowed keys.
        """
        unknown = sorted(set(map(str, self.data)) - self._seen)
        if unknown:
            typo = near_miss(unknown[0], self._seen)
            hint = f"did you mean {typo!r}?" if typo else f"allowed: {', '.join(sorted(self._seen))}"
            raise InputError(f"unknown key {unknown[0]!r} ({hint})", self.path(unknown[0]))
