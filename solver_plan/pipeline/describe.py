"""A pipeline plan in the model's terms: which layers, by name, each stage holds.

A stage's layers are numbered in the chain the user's model gave (before any merging for a
planner), and summarised by scope: transformer blocks as ranges ("block0-5"), other scopes by
name ("stem", "Mixed_5b"), with "(part)" where a stage holds only some of a scope's layers;
layers with flat names (PipeDream's nodeN) as "first .. last".
"""
from __future__ import annotations

import re

from solver_plan.graph.chain import block_key

BLOCK_NUMBER = re.compile(r"^(.*?)(\d+)$")
MAX_ITEMS = 6  # scopes listed per stage before "... and k more"
MERGED = ".."  # how merged layers are named: "first..last" (graph.chain.merge_layers)


def _ends(name: str) -> tuple[str, str]:
    first, _, last = name.partition(MERGED)
    return first, last or first


def original_span(full_names: tuple[str, ...], work_names: tuple[str, ...], first: int, last: int) -> tuple[int, int]:
    """Layers first..last of a (possibly merged) chain as positions in the full chain."""
    position = {name: i for i, name in enumerate(full_names)}
    begin, end = _ends(work_names[first])[0], _ends(work_names[last])[1]
    if begin in position and end in position:
        return position[begin], position[end]
    return first, last  # names not found (the chains differ): the planner's numbering


def _scope(name: str) -> str | None:
    key = block_key(name)
    if key is not None:
        return key
    return name.split("/")[0] if "/" in name else None


def _expand(names: tuple[str, ...]) -> list[str]:
    """Merged names ("a..b") stand for their first layer's scope."""
    return [_ends(n)[0] for n in names]


def describe_layers(full_names: tuple[str, ...], first: int, last: int) -> str:
    """Layers first..last of the full chain, by scope."""
    names = _expand(full_names)
    scopes = [_scope(n) for n in names]
    size: dict[str, int] = {}
    for s in scopes:
        if s is not None:
            size[s] = size.get(s, 0) + 1
    runs: list[list] = []  # [scope or None, first, last]
    for i in range(first, last + 1):
        if runs and runs[-1][0] == scopes[i] and runs[-1][2] == i - 1:
            runs[-1][2] = i
        else:
            runs.append([scopes[i], i, i])
    items: list[str] = []
    blocks: list[tuple[str, int, int]] = []  # (prefix, first number, last number) of whole blocks in a row

    def flush_blocks():
        for prefix, a, b in blocks:
            items.append(f"{prefix}{a}" if a == b else f"{prefix}{a}-{b} ({b - a + 1} blocks)")
        blocks.clear()

    for scope, a, b in runs:
        whole = scope is not None and b - a + 1 == size[scope]
        match = BLOCK_NUMBER.match(scope) if scope is not None and block_key(names[a]) == scope else None
        if match and whole:
            prefix, number = match.group(1), int(match.group(2))
            if blocks and blocks[-1][0] == prefix and blocks[-1][2] == number - 1:
                blocks[-1] = (prefix, blocks[-1][1], number)
            else:
                flush_blocks()
                blocks.append((prefix, number, number))
            continue
        flush_blocks()
        if scope is None:
            items.append(names[a] if a == b else f"{names[a]} .. {_ends(full_names[b])[1]}")
        else:
            items.append(scope if whole else f"{scope} (part)")
    flush_blocks()
    if len(items) > MAX_ITEMS:
        items = items[:MAX_ITEMS - 1] + [f"... ({len(items) - MAX_ITEMS} more)", items[-1]]
    return ", ".join(items)


def shared_processors(stages) -> list[str]:
    """Lines for processors running several stages (MadPipe's special processor)."""
    by_processor: dict[int, list[int]] = {}
    for i, s in enumerate(stages):
        by_processor.setdefault(s.processor, []).append(i)
    return [f"processor {p} runs stages {', '.join(map(str, idx))}: one processor holding several stages "
            "(MadPipe's special processor); the schedule interleaves their batches"
            for p, idx in sorted(by_processor.items()) if len(idx) > 1]
