"""JSON text of our results, fast where a plan repeats long arrays.

A per-operator plan over thousands of devices lists each operator's devices: megatron-1T over 3,072
devices lists 3.1 million numbers for 1,544 operators, but only three distinct device tuples. Python's
encoder spent 0.25 s on them, a quarter of a 1 s time limit. Here each distinct long tuple is encoded
once, keyed by identity (a tuple cannot change, and it stays alive while `data` refers to it), and
its text spliced in wherever it recurs; producers make equal tuples one object (`interned`). The text
equals `json.dumps(data)` (compact; indented output is for small results and needs no help).
"""
from __future__ import annotations

import json
import re
import secrets

LONG_ARRAY = 64  # items from which an array is encoded once per object (shorter ones cost less to redo)


def shared(values: tuple, pool: dict[tuple, list]) -> list:
    """A list of `values`, the same list object for equal `values` (hashing a tuple of 3,072 ints costs
    ~10 us, encoding it ~100 us). Callers must not change it: other entries share it."""
    found = pool.get(values)
    if found is None:
        found = pool[values] = list(values)
    return found


def json_text(data) -> str:
    """`json.dumps(data)`, each long list or tuple object (>= LONG_ARRAY items) encoded once."""
    token = secrets.token_hex(8)  # a marker no string of the data can equal by chance
    texts: list[str] = []
    seen: dict[int, int] = {}

    def marked(value):
        if isinstance(value, dict):
            return {key: marked(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            # walked into: short arrays, and arrays of objects (the operators), whose long arrays recur;
            # any other array is encoded whole, exactly as json.dumps would (only speed depends on this)
            if len(value) < LONG_ARRAY or isinstance(value[0], (dict, list, tuple)):
                return [marked(item) for item in value]
            at = seen.get(id(value))
            if at is None:
                at = seen[id(value)] = len(texts)
                texts.append(json.dumps(value))
            return f"{token}:{at}"
        return value

    text = json.dumps(marked(data))
    if not texts:
        return text
    return re.sub(f'"{token}:([0-9]+)"', lambda m: texts[int(m.group(1))], text)
