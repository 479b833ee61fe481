"""Model specs: "name" or "name:key=value,key=value", and a catalog entry's typed options.

Values take the type of the option's default (int, float or str); sizes must be positive, because
a zero or negative dimension would only fail later, far from the user's typo, and bounded, because
a huge one (batch=99999999999999999999999) would overflow the cost model's 64-bit arrays or build
for hours.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Mapping

from solver_plan.errors import InputError
from solver_plan.keyvalues import parse_key_values
from solver_plan.graph.ir import Graph


# Largest value of an integer option: 2**24 (16.7M) is above every published width, vocabulary,
# sequence or batch, and three such sizes multiplied stay far below 2**63. Counts of repeated
# blocks get a tighter bound: each adds operators, and 4,096 is 30x the deepest model here.
MAX_SIZE = 2**24
MAX_COUNT = {"layers": 4096}


@dataclass(frozen=True)
class ModelEntry:
    """A named model: its one-line description, its options with defaults, and its builder.

    `build(graph_name, **options)` receives every option (defaults filled in).
    """
    name: str
    description: str
    defaults: Mapping[str, Any]
    build: Callable[..., Graph]

    def __post_init__(self):
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """'resnet50:batch=8,image=1000' -> ('resnet50', {'batch': '8', 'image': '1000'})."""
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("expected 'name' or 'name:key=value,...', got an empty model spec", "model spec")
    name, _, rest = spec.strip().partition(":")
    name = name.strip()
    if not name:
        raise InputError(f"missing model name in {spec!r} (expected 'name:key=value,...')", "model spec")
    return name, parse_key_values(rest, name, "name:key=value,key=value")


def _convert(model: str, key: str, text: str, default: Any) -> Any:
    if isinstance(default, str):
        return text
    kind = "integer" if isinstance(default, int) else "number"
    try:
        if not text.isascii():  # int() reads '１' (full-width) and other scripts' digits: a typo here
            raise ValueError(text)
        value = int(text) if isinstance(default, int) else float(text)
    except ValueError:
        raise InputError(f"option {key!r} expects a positive {kind}, got {text!r}", model) from None
    # an option whose default is 0 (off) may be set back to 0; every other must be positive
    if not math.isfinite(value) or value < 0 or (value == 0 and default != 0):
        raise InputError(f"option {key!r} expects a {'non-negative' if default == 0 else 'positive'} {kind}, "
                         f"got {text!r}", model)
    limit = MAX_COUNT.get(key, MAX_SIZE)
    if isinstance(default, int) and value > limit:
        raise InputError(f"option {key!r} is too large: {text} (at most {limit})", model)
    return value


def resolve_options(entry: ModelEntry, raw: Mapping[str, str]) -> dict[str, Any]:
    """The entry's defaults overridden by the spec's values, each converted and checked."""
    options = dict(entry.defaults)
    for key, text in raw.items():
        if key not in entry.defaults:
            choices = ", ".join(sorted(entry.defaults))
            raise InputError(f"unknown option {key!r} (options: {choices})", entry.name)
        options[key] = _convert(entry.name, key, text, entry.defaults[key])
    _check_attention_width(entry, raw, options)
    return options


def _check_attention_width(entry: ModelEntry, raw: Mapping[str, str], options: dict[str, Any]) -> None:
    """A transformer whose default shape has hidden = heads x head_dim keeps it when the spec changes
    `hidden` or `heads` without `head_dim`: 'gpt2:heads=7' (7 x 64 = 448 wide attention in a 768
    model) or 'gpt2:hidden=3' (3 features, 12 heads) is a typo, not a shape anyone trains. Setting
    `head_dim` too states the width on purpose (GPT-3 13B's 40 x 128 in 5140 is such a shape)."""
    keys = ("hidden", "heads", "head_dim")
    if not all(key in entry.defaults for key in keys) or "head_dim" in raw or not {"hidden", "heads"} & set(raw):
        return
    if entry.defaults["hidden"] != entry.defaults["heads"] * entry.defaults["head_dim"]:
        return
    hidden, heads, head_dim = (options[key] for key in keys)
    if hidden != heads * head_dim:
        fit = f"; head_dim={hidden // heads} fits" if hidden % heads == 0 else ""
        raise InputError(f"options hidden={hidden} and heads={heads} do not fit head_dim={head_dim} "
                         f"(hidden must be heads x head_dim; set head_dim too{fit})", entry.name)
