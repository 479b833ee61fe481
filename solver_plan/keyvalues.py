"""`key=value,key=value` option lists, as model specs, model files, `--fix` and generated-instance
specs write them: one parser, so every entry point refuses the same mistakes with the same words."""
from __future__ import annotations

from solver_plan.errors import InputError


def parse_key_values(text: str, where: str, form: str) -> dict[str, str]:
    """'a=1, b=x' -> {'a': '1', 'b': 'x'} (values stay strings; empty items are skipped).

    InputError at `where` for an item that is not key=value (the message shows `form`, e.g.
    "name:key=value,key=value") and for a key given twice."""
    values: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = (s.strip() for s in item.partition("="))
        if not eq or not key or not value:
            raise InputError(f"expected 'key=value' in {item!r} (form: {form})", where)
        if key in values:
            raise InputError(f"option {key!r} given twice", where)
        values[key] = value
    return values
