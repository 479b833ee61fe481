"""The catalog of zoo models: names, options, descriptions, and building from a spec string."""
from __future__ import annotations

from typing import Any

from solver_plan.errors import GraphError, InputError
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo import bert, cnn, densenet, gpt, inception, mlp, recsys, recurrent, resnet, t5
from solver_plan.graph.zoo.llm_shapes import missing_folder_hint, shape_names
from solver_plan.graph.zoo.spec import ModelEntry, resolve_options, split_spec

FIXED_ENTRIES = {entry.name: entry for family in (cnn, resnet, inception, densenet, bert, gpt, t5, recsys, recurrent, mlp)
                 for entry in family.ENTRIES}


def model_names() -> list[str]:
    """Built-in models, then one GPT-style model per llm-shapes file found."""
    return list(FIXED_ENTRIES) + [name for name in shape_names() if name not in FIXED_ENTRIES]


def model_entry(name: str) -> ModelEntry:
    """The zoo's `ModelEntry` named `name` (fixed models, then LLM shapes); InputError with suggestions when
    unknown.
    """
    if name in FIXED_ENTRIES:
        return FIXED_ENTRIES[name]
    if name in shape_names():
        return gpt.llm_entry(name)
    from solver_plan.suggest import did_you_mean
    raise InputError(f"unknown model {name!r}{did_you_mean(name, model_names())} (models: {', '.join(model_names())})"
                     f"{missing_folder_hint()}",
                     "model spec")


def model_options(name: str) -> dict[str, Any]:
    """The options of zoo model `name` with their defaults."""
    return dict(model_entry(name).defaults)


def model_description(name: str) -> str:
    """One-line description of zoo model `name`."""
    return model_entry(name).description


def build_model(spec: str) -> Graph:
    """Build the graph a spec names ("name" or "name:key=value,..."); the graph is named by the spec."""
    name, raw = split_spec(spec)
    entry = model_entry(name)
    options = resolve_options(entry, raw)
    try:
        return entry.build(spec.strip(), **options)
    except GraphError as exc:
        raise InputError(f"options {options} do not give a valid graph: {exc}", name) from None
    except InputError as exc:
        if exc.where is None:  # builders check option combinations without knowing the model's name
            raise InputError(str(exc), name) from None
        raise
