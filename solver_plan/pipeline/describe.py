"""A pipeline plan in the model's terms: which layers, by name, each stage holds.

A stage's layers are numbered in the chain the user's model gave (before any merging for a
planner), and summarised by scope: transformer blocks as ranges ("block0-5"), other scopes by
name ("stem", "Mixed_5b"), with "(part)" where a stage holds only some of a scope's layers;
layers with flat names (PipeDream's nodeN) as "first .. last".
"""
from __future__ import annotations

import re

from solver_plan.pipeline.chain import block_key

BLOCK_NUMBER = re.compile(r"^(.*?)(\d+)$")
MAX_ITEMS = 6  # scopes listed per stage before "... and k more"
MERGED = ".."  # how merged layers are named: "first..last" (chain.merge_layers)


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


def _kinds_text(names: list[str], kinds: dict[str, str]) -> str:
    """" (12 layers: 5 Conv2d, 4 BatchNorm2d, ...)" for a run of flat names whose kinds are known."""
    counts: dict[str, int] = {}
    for name in names:
        if name in kinds:
            counts[kinds[name]] = counts.get(kinds[name], 0) + 1
    if not counts:
        return ""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{count} {kind}" for kind, count in ranked[:3]) + (", ..." if len(ranked) > 3 else "")
    return f" ({len(names)} layers: {shown})"


def describe_layers(full_names: tuple[str, ...], first: int, last: int, kinds: dict[str, str] | None = None) -> str:
    """Layers first..last of the full chain, by scope; `kinds` (layer name -> type, e.g. from a
    PipeDream profile's descriptions) summarises runs of flat names."""
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
            run = names[a] if a == b else f"{names[a]} .. {_ends(full_names[b])[1]}"
            items.append(run + _kinds_text(names[a:b + 1], kinds or {}))
        else:
            items.append(scope if whole else f"{scope} (part)")
    flush_blocks()
    if len(items) > MAX_ITEMS:
        items = items[:MAX_ITEMS - 1] + [f"... ({len(items) - MAX_ITEMS} more)", items[-1]]
    return ", ".join(items)


def profile_layer_kinds(model: str) -> dict[str, str]:
    """Layer name -> module type ("Conv2d") of a PipeDream profile MODEL; {} for other models (their
    layer names already say what they are)."""
    from pathlib import Path
    path = Path(model)
    if not (path.suffix == ".txt" or (path.is_dir() and (path / "graph.txt").is_file())):
        return {}
    from solver_plan.graph.resolve import resolve_model
    graph = resolve_model(model)
    return {op.name: str(op.attrs.get("description", "")).split("(")[0].strip() or "layer" for op in graph}


def shared_processors(stages) -> list[str]:
    """Lines for processors running several stages (MadPipe's special processor)."""
    by_processor: dict[int, list[int]] = {}
    for i, s in enumerate(stages):
        by_processor.setdefault(s.processor, []).append(i)
    return [f"processor {p} runs stages {', '.join(map(str, idx))}: one processor holding several stages "
            "(MadPipe's special processor); the schedule interleaves their batches"
            for p, idx in sorted(by_processor.items()) if len(idx) > 1]
