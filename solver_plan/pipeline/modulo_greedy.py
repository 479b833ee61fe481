"""A quick periodic pattern for any allocation: greedy modulo scheduling, then the validator.

For a period T, operations are placed in the order of one batch's path (forwards, then backwards),
each at the earliest absolute time after its predecessors end whose position modulo T is free on
its resource; start t = s mod T, shift h = floor(s / T). The smallest T on a geometric scan from
the load bound whose pattern passes the validator (memory included) is kept: it seeds the exact
schedulers with a first incumbent and hints. At T = sum of all durations it is the sequential
schedule, which keeps one batch per stage, so the scan ends with a pattern whenever any exists.
"""
from __future__ import annotations

import math

from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.operations import PipelineOps, pipeline_operations
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.validate import validate

EPS = 1e-12


def path_order(ops: PipelineOps) -> list[int]:
    """Operations along one batch's path: F0, CF0, F1, ..., F_last, B_last, CB, ..., B0."""
    n = len(ops.stage_processor)
    rank = {"F": lambda s: 2 * s, "CF": lambda s: 2 * s + 1,
            "CB": lambda s: 2 * n + 2 * (n - s) - 1, "B": lambda s: 2 * n + 2 * (n - s)}
    return sorted(range(len(ops.operations)), key=lambda i: rank[ops.operations[i].kind](ops.operations[i].stage))


def _overlaps(a: float, da: float, b: float, db: float, period: float) -> bool:
    """Do [a, a + da) and [b, b + db) intersect modulo the period? (Empty intervals never do.)"""
    if da <= EPS or db <= EPS:
        return False
    return (b - a) % period < da - EPS or (a - b) % period < db - EPS


def _free(start: float, duration: float, busy: list[tuple[float, float]], period: float) -> bool:
    return not any(_overlaps(start % period, duration, b, d, period) for b, d in busy)


def greedy_pattern(allocation: Allocation, ops: PipelineOps, period: float) -> PeriodicPattern | None:
    """The greedy modulo pattern of period `period` (not validated), or None when an operation is longer
    than the period or does not fit."""
    if max(op.duration for op in ops.operations) > period + EPS:
        return None
    preds: dict[int, list[int]] = {}
    for a, b in ops.dependencies:
        preds.setdefault(b, []).append(a)
    busy: dict[str, list[tuple[float, float]]] = {}
    absolute = [0.0] * len(ops.operations)
    for i in path_order(ops):
        op = ops.operations[i]
        ready = max((absolute[p] + ops.operations[p].duration for p in preds.get(i, [])), default=0.0)
        slots = busy.setdefault(op.resource, [])
        candidates = sorted({ready} | {ready + ((b + d - ready) % period) for b, d in slots})
        start = next((c for c in candidates if _free(c, op.duration, slots, period)), None)
        if start is None:
            return None
        absolute[i] = start
        slots.append((start % period, op.duration))
    start = tuple(s - period * math.floor(s / period + EPS) for s in absolute)
    shift = tuple(int(math.floor(s / period + EPS)) for s in absolute)
    return PeriodicPattern(allocation, ops, period, tuple(max(0.0, t) for t in start), shift, "greedy")


def scan(problem: ChainProblem, allocation: Allocation, growth: float = 1.03) -> PeriodicPattern | None:
    """The first valid greedy pattern on periods bound * growth^k up to the sequential period."""
    ops = pipeline_operations(problem, allocation)
    bound = max(allocation.load_bound(problem), max(op.duration for op in ops.operations))
    sequential = sum(op.duration for op in ops.operations)
    period = bound
    while True:
        pattern = greedy_pattern(allocation, ops, min(period, sequential))
        if pattern is not None and validate(pattern).valid:
            return pattern
        if period >= sequential:
            return None
        period *= growth
