"""Integer time for the CP-SAT models: durations are rounded up to whole ticks, so a pattern
valid in ticks stays valid with the real (shorter or equal) durations."""
from __future__ import annotations

import math


def tick_for(load_bound: float, resolution: int) -> float:
    """The tick length: the load bound over `resolution` (1 s when the bound is zero)."""
    return load_bound / resolution if load_bound > 0 else 1.0


def to_ticks(seconds: float, tick: float) -> int:
    """Seconds rounded up to whole ticks, so a pattern valid in ticks stays valid in real time."""
    return int(math.ceil(seconds / tick - 1e-9)) if seconds > 0 else 0


def memory_unit(limit: float) -> float:
    """Bytes per integer memory unit: exact for small integer instances, ~1e7 levels otherwise."""
    return max(1.0, limit / 1e7)


def to_memory_units(size: float, unit: float) -> int:
    """Bytes rounded up to whole memory units (static parts and stored bytes: a pattern valid in units
    stays valid in bytes)."""
    return int(math.ceil(size / unit - 1e-9))


def limit_memory_units(limit: float, unit: float) -> int:
    """A memory limit rounded down to whole memory units."""
    return int(math.floor(limit / unit + 1e-9))
