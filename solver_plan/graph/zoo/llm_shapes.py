"""Transformer shapes of public large language models, read from `<data>/llm-shapes/<name>.json`.

The data folder is `solver_plan.data.data_dir()`: $SOLVER_PLAN_DATA if set, else the vendored data/.
"""
from __future__ import annotations

import json
from pathlib import Path

from solver_plan.data import DATA_ENV, data_dir
from solver_plan.errors import InputError

SHAPE_KEYS = ("hidden", "feedforward", "seq_size", "attn_heads", "attn_size", "num_blocks")


def shapes_dir() -> Path:
    """The bundled folder of LLM shape files, data/llm-shapes/."""
    return data_dir() / "llm-shapes"


def shape_names() -> list[str]:
    """Stems of the shape files; empty when the folder is missing (see `missing_folder_hint`)."""
    folder = shapes_dir()
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def missing_folder_hint() -> str:
    """Why the LLM-shape models may be absent, or '' when their folder exists."""
    if shapes_dir().is_dir():
        return ""
    return (f"; the LLM-shape models (gpt3-175B, ...) need the folder {shapes_dir()}, "
            f"missing (set {DATA_ENV} to the data folder holding llm-shapes/)")


def load_shape(name: str) -> dict[str, int]:
    """The shape of LLM `name` from its JSON file (every key of SHAPE_KEYS, a positive integer); InputError
    otherwise.
    """
    path = shapes_dir() / f"{name}.json"
    try:
        document = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"shape file {path} not found (set {DATA_ENV} to the data folder)", name) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc})", name) from None
    if not isinstance(document, dict):
        raise InputError(f"{path} must hold an object with keys {', '.join(SHAPE_KEYS)}", name)
    shape = {}
    for key in SHAPE_KEYS:
        value = document.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise InputError(f"{path}: key {key!r} must be a positive integer, got {value!r}", name)
        shape[key] = value
    return shape
