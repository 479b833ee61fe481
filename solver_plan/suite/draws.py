"""numpy `Generator.choice(population, size=s, replace=False)` for many sizes at once (and, through
`uint32_outputs`, `lemire` and `advance`, scalar `Generator.integers` calls), drawing exactly
what the per-call loop draws, so the generators stay bit-identical while they stop paying ~10 us of
Python per node (random-dag:nodes=10000: 0.08-0.16 s of CPU -> ~0.03 s).

What the loop does (numpy's `_generator.pyx`, unchanged from 1.17 to 2.4 for populations of at most
10,000 without weights): Floyd's algorithm, for j = population - s .. population - 1 a draw `val`
uniform in 0..j (taken where not yet chosen, else j), then a Fisher-Yates shuffle of the s picks,
for i = s - 1 .. 1 a draw uniform in 0..i swapped with position i. Each draw is Lemire's bounded
integer on the bit generator's 32-bit output (PCG64: the low half of a 64-bit word, then its high
half, the spare half kept in the generator's state between calls; a range of 0 draws nothing).
Lemire's method rejects an output with probability below population / 2^32 (~1e-8 a draw here); the
vectorised steps below take each draw's output from a precomputed stream and cannot skip one, so a
rejection anywhere returns None, with the generator untouched, and the caller runs the loop.
tests/test_suite_draws.py checks the result and the generator's state after it against the loop.
"""
from __future__ import annotations

from typing import Any

import numpy as np

_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def uint32_outputs(rng: np.random.Generator, count: int) -> tuple[np.ndarray, dict[str, Any]]:
    """The next `count` (or one more) 32-bit outputs of `rng`'s PCG64 (the generator every
    `default_rng` has), as uint64, without advancing it; and its state before them."""
    state = dict(rng.bit_generator.state)
    clone = np.random.PCG64()
    clone.state = state  # type: ignore[assignment]  # numpy's stub wants its TypedDict; this is one
    words = clone.random_raw((count + 1) // 2 + 1)
    halves = np.empty(2 * len(words), dtype=np.uint64)
    halves[0::2], halves[1::2] = words & _LOW32, words >> _SHIFT32
    if state["has_uint32"]:
        halves = np.concatenate([np.array([state["uinteger"]], dtype=np.uint64), halves])
    return halves, state


def advance(rng: np.random.Generator, state: dict[str, Any], used: int) -> None:
    """Leave `rng` where `used` 32-bit outputs from `state` leave it (the spare half kept, as PCG64 does)."""
    fresh = used - 1 if state["has_uint32"] else used  # outputs taken from new 64-bit words
    if fresh <= 0:
        if used:  # the spare half only
            rng.bit_generator.state = {**state, "has_uint32": 0}
        return
    words = rng.bit_generator.random_raw((fresh + 1) // 2)
    rng.bit_generator.state = {**rng.bit_generator.state, "has_uint32": fresh % 2,
                               "uinteger": int(words[-1] >> _SHIFT32)}


def lemire(outputs: np.ndarray, top: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Draws uniform in 0..top from 32-bit `outputs` by Lemire's multiply-shift, and which of them
    numpy would have rejected (and redrawn)."""
    span = top + np.uint64(1)
    product = outputs * span
    threshold = (np.uint64(2 ** 32) - span) % span
    return (product >> _SHIFT32).astype(np.int64), (product & _LOW32) < threshold


def choices_without_replacement(rng: np.random.Generator, population: int, sizes) -> np.ndarray | None:
    """Row r holds `rng.choice(population, size=sizes[r], replace=False)` in its first sizes[r]
    entries (the rest -1), the rows drawn in order, and `rng` is advanced exactly as those calls
    would; None (`rng` untouched) where a call would have rejected a draw, or the bit generator is
    not PCG64, or the population takes numpy's other route (over 10,000)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if (not isinstance(rng.bit_generator, np.random.PCG64) or population > 10_000 or len(sizes) == 0
            or sizes.min() < 1 or sizes.max() > population):
        return None
    rows, widest = len(sizes), int(sizes.max())
    floyd_draws = sizes - (sizes == population)  # j = population - s = 0 draws nothing
    per_row = floyd_draws + sizes - 1
    outputs, state = uint32_outputs(rng, int(per_row.sum()))
    position = np.concatenate([[0], np.cumsum(per_row)[:-1]])
    picks = np.full((rows, widest), -1, dtype=np.int64)
    taken = np.zeros((rows, population), dtype=bool)
    rejected = False
    for step in range(widest):  # Floyd's algorithm, every row's step-th draw at once
        live = np.flatnonzero(sizes > step)
        top = population - sizes[live] + step
        values, rejects = lemire(outputs[position[live]], top.astype(np.uint64))
        rejected |= bool(rejects.any())
        position[live] += top > 0
        pick = np.where(taken[live, values], top, values)
        picks[live, step] = pick
        taken[live, pick] = True
    for step in range(widest - 1):  # the shuffle: i = s - 1 down to 1
        i = sizes - 1 - step
        live = np.flatnonzero(i >= 1)
        i = i[live]
        j, rejects = lemire(outputs[position[live]], i.astype(np.uint64))
        rejected |= bool(rejects.any())
        position[live] += 1
        at_i, at_j = picks[live, i], picks[live, j]
        picks[live, j] = at_i
        picks[live, i] = at_j
    if rejected:
        return None
    advance(rng, state, int(per_row.sum()))
    return picks
