"""Inter-operator search: contiguous block ranges per pipeline stage.

Alpa's inter-op dynamic program (Zheng et al. 2022, section 5.2) cuts a layer chain into stages
minimising the slowest stage. For a uniform transformer stack on equal submeshes a stage's time
per micro-batch is k x t + e_i (k blocks of t seconds, e_i the embedding on the first stage and the
output layer on the last) and its memory is a_i k + c_i (a_i grows with the micro-batches stage i
holds in flight), so the DP's optimum has a closed form checked stage by stage:

    T* = min T such that sum_i min(floor((T - e_i) / t), floor((M - c_i) / a_i)) >= L, each >= 1.

T* is one of the values k t + e_i, found by bisection on k for each distinct e_i. For 1F1B and
GPipe, sum_i T_i = L t + sum_i e_i is the same for every cut, so minimising the slowest stage
minimises the step time (schedule.py); the brute force of tests/test_hybrid_brute.py checks this
against every composition of L. Interleaved schedules take the same cut with at least v blocks a
stage (one per chunk; stages.py): their pipeline m max T + (sum T - max T) / v also falls with the
slowest stage alone when the sum is fixed.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np


def _caps(T: float, t: float, extras: Sequence[float], mem_caps: Sequence[int], least: int = 1) -> list[int] | None:
    caps = []
    for e, kmem in zip(extras, mem_caps):
        k = math.floor((T - e) / t + 1e-9) if t > 0 else 10 ** 9
        k = min(k, kmem)
        if k < least:
            return None
        caps.append(k)
    return caps


def memory_caps(layers: int, pp: int, memory: Callable[[int, int], float], limit: float | None) -> list[int]:
    """Per stage, the most blocks that fit: memory(stage, k) is affine in k >= 1."""
    if limit is None:
        return [layers] * pp
    caps = []
    for i in range(pp):
        one, two = memory(i, 1), memory(i, 2)
        slope = two - one
        if one > limit:
            caps.append(0)
        elif slope <= 0:
            caps.append(layers)
        else:
            caps.append(min(layers, 1 + math.floor((limit - one) / slope + 1e-9)))
    return caps


def monotone_caps(layers: int, pp: int, memory: Callable[[int, int], float], limit: float | None) -> list[int]:
    """Per stage, the most blocks that fit when memory(stage, k) is only non-decreasing in k (the
    interleaved schedule's in-flight blocks depend on how k splits into chunks, stages.held_layers):
    bisection on k, log2(L) evaluations a stage."""
    if limit is None:
        return [layers] * pp
    caps = []
    for i in range(pp):
        lo, hi = 0, layers  # memory(i, lo) fits (0: vacuously), the answer is in [lo, hi]
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if memory(i, mid) <= limit else (lo, mid - 1)
        caps.append(lo)
    return caps


def balanced_cut(layers: int, t: float, extras: Sequence[float], mem_caps: Sequence[int],
                 least: int = 1) -> tuple[int, ...] | None:
    """Blocks per stage minimising the slowest stage k_i t + e_i under the memory caps, each stage
    holding at least `least` blocks (interleaved: one per chunk, stages.least_layers); None when no
    cut fits (some stage cannot hold `least` blocks, or the caps sum to less than `layers`)."""
    pp = len(extras)
    if pp * least > layers or min(mem_caps) < least or sum(mem_caps) < layers:
        return None
    best = None
    for e in sorted(set(extras)):
        lo, hi = 1, layers  # smallest k with T = k t + e feasible
        if _feasible(hi * t + e, layers, t, extras, mem_caps, least) is None:
            continue
        while lo < hi:
            mid = (lo + hi) // 2
            if _feasible(mid * t + e, layers, t, extras, mem_caps, least) is None:
                lo = mid + 1
            else:
                hi = mid
        T = lo * t + e
        if best is None or T < best:
            best = T
    if best is None:
        return None
    caps = _feasible(best, layers, t, extras, mem_caps, least)
    # Take blocks off the stages holding the most in flight (the first ones) until the sum is L.
    cut, surplus = list(caps), sum(caps) - layers
    for i in range(pp):
        take = min(surplus, cut[i] - least)
        cut[i] -= take
        surplus -= take
    return tuple(cut)


def _feasible(T, layers, t, extras, mem_caps, least=1):
    caps = _caps(T, t, extras, mem_caps, least)
    return caps if caps is not None and sum(caps) >= layers else None


def equal_cut(layers: int, pp: int, mem_caps: Sequence[int]) -> tuple[int, ...] | None:
    """Equal blocks per stage (interleaved schedules: p v chunks of L / (p v) blocks)."""
    if layers % pp:
        return None
    k = layers // pp
    return tuple([k] * pp) if all(k <= c for c in mem_caps) else None


def mixed_cut(layers: int, times: np.ndarray, m: int, least: int = 1) -> tuple[int, ...] | None:
    """Per-stage recomputation (1F1B / GPipe): blocks per stage minimising the pipeline time
    sum_i T_i + (m - 1) max_i T_i, where `times[i, k]` is stage i's time per micro-batch holding k
    blocks (column 0 unused; inf where no recomputation mode fits k blocks in its memory;
    non-decreasing in k: more blocks need as much recomputation or more). The sum no longer is the
    same for every cut, so the closed form above does not apply. Exact, parametrically: for each
    candidate slowest time X (the values of `times`, ascending), a dynamic program over stages gives
    f(X) = min sum_i T_i with every T_i <= X; the optimum is min_X f(X) + (m - 1) X, and the scan
    stops once f(inf) + (m - 1) X reaches the best found. None when no cut fits. Every stage holds
    at least `least` blocks (interleaved: one per chunk; the interleaved pipeline
    m max T + (sum T - max T) / v is this objective with m v for m, divided by v)."""
    pp = times.shape[0]
    if pp * least > layers:
        return None
    if pp == 1:
        return (layers,) if np.isfinite(times[0, layers]) else None
    if least > 1:
        times = times.copy()
        times[:, 1:least] = np.inf
    finite = np.isfinite(times[:, 1:])
    if not finite[:, least - 1].all():
        return None

    def solve(limit: float):
        """(min sum, cut) with every stage time <= limit; None if infeasible."""
        best = np.full(layers + 1, np.inf)
        best[0] = 0.0
        choices = []
        for i in range(pp):
            row = np.where(times[i] <= limit, times[i], np.inf)
            k_max = min(layers - (pp - 1 - i) * least, layers)
            ks = np.arange(1, k_max + 1)
            j = np.arange(layers + 1)[:, None]
            prev = np.where(j - ks >= 0, best[np.clip(j - ks, 0, None)], np.inf)
            total = prev + row[ks]
            arg = np.argmin(total, axis=1)
            best = total[np.arange(layers + 1), arg]
            choices.append(ks[arg])
        if not np.isfinite(best[layers]):
            return None
        cut, j = [], layers
        for i in reversed(range(pp)):
            k = int(choices[i][j])
            cut.append(k)
            j -= k
        return float(best[layers]), tuple(reversed(cut))

    unconstrained = solve(math.inf)
    if unconstrained is None:
        return None
    floor_sum = unconstrained[0]
    best_value, best_cut = math.inf, None
    limits = np.unique(times[np.isfinite(times)])
    lo, hi = 0, len(limits) - 1  # feasibility grows with the limit: skip the infeasible ones by bisection
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if solve(float(limits[mid])) is not None else (mid + 1, hi)
    for limit in limits[lo:]:
        if floor_sum + (m - 1) * limit >= best_value:
            break
        found = solve(float(limit))
        if found is None:
            continue
        total, cut = found
        value = total + (m - 1) * max(times[i, k] for i, k in enumerate(cut))
        if value < best_value:
            best_value, best_cut = value, cut
    return best_cut
