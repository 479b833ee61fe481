"""`key=value,key=value` option lists, as model specs, model files, `--fix` and generated-instance
specs write them, and repeated `--option KEY=VALUE`: one parser each, so every entry point refuses
the same mistakes with the same words."""
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


def parse_option_value(text: str):
    """A command-line option value: int, float, bool (true/false/yes/no/on/off), None (none/null)
    or the string itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_option_pairs(pairs, where: str) -> dict:
    """Repeated `KEY=VALUE` options (`--option`) -> {key: typed value}; a pair without '=' or a key
    given twice is refused at `where`."""
    options: dict = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {pair!r}", where)
        if key in options:
            raise InputError(f"option {key!r} given twice", where)
        options[key] = parse_option_value(value)
    return options
