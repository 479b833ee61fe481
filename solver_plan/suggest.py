""""Did you mean": the known name a mistyped one was most probably meant to be.

Used where a name is looked up (models, cluster presets, planners) so a typo's error names the
likely choice first. Case is ignored when comparing (`gpt3-175b` -> `gpt3-175B`).
"""
from __future__ import annotations

import difflib

CUTOFF = 0.6  # difflib ratio; 0.6 catches one or two wrong, missing or swapped characters in short names


def closest(word: str, choices) -> str | None:
    """The choice `word` most probably meant, or None when nothing is close."""
    by_lower: dict[str, str] = {}
    for choice in choices:
        by_lower.setdefault(str(choice).lower(), str(choice))
    key = str(word).strip().lower()
    if key in by_lower:
        return by_lower[key]
    matches = difflib.get_close_matches(key, list(by_lower), n=1, cutoff=CUTOFF)
    return by_lower[matches[0]] if matches else None


def did_you_mean(word: str, choices) -> str:
    """" (did you mean 'x'?)" to append to an error message, or "" when nothing is close."""
    match = closest(word, choices)
    return f" (did you mean {match!r}?)" if match is not None and match != word else ""
