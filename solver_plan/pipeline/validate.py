"""Validator: unroll a periodic pattern and check it as a plain schedule.

Independent of how the pattern was built: instance (o, k) starts at k T + t_o and processes batch
k - h_o. Over enough periods that every batch of a middle window is complete, it checks
- every operation lasts at most T and starts in [0, T);
- every same-batch dependency (the consumer starts after the producer ends);
- no two instances overlap on a resource (processor or link);
- memory: at every operation start on a processor, weights and buffers plus abar_s for each batch
  of each stage s whose F_s has started and whose B_s (W_s where the backward is split) has not
  ended is at most M.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from solver_plan.pipeline.allocation import processor_name
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.split_backward import release_index

REL_TOL = 1e-9


@dataclass(frozen=True)
class Validation:
    """What unrolling a pattern showed: valid or not, the measured period, peak memory, violations."""
    valid: bool
    period_s: float  # measured between successive completions of a batch in steady state
    peak_memory: dict[int, float]  # bytes per processor, steady state
    violations: tuple[str, ...] = field(default=())


def validate(pattern: PeriodicPattern, max_violations: int = 20) -> Validation:
    """Unroll `pattern` and check it as a plain schedule (bounds, dependencies, resource overlap, memory;
    see the module text), naming at most `max_violations` violations."""
    ops, period = pattern.ops, pattern.period
    eps = REL_TOL * max(period, 1.0)
    problems: list[str] = []
    for op, t, h in zip(ops.operations, pattern.start, pattern.shift):
        if not (-eps <= t < period + eps) or h < 0 or op.duration > period + eps:
            problems.append(f"{op.name}: start {t:.6g} shift {h} duration {op.duration:.6g} outside "
                            f"[0, T={period:.6g}) / negative shift / longer than T")
    depth = max(pattern.shift) + 1
    periods = 3 * depth + 4
    start = {}  # (op index, batch) -> start time
    for k in range(periods):
        for i, (t, h) in enumerate(zip(pattern.start, pattern.shift)):
            if k - h >= 0:
                start[(i, k - h)] = k * period + t
    complete = range(0, periods - depth)
    durations = [op.duration for op in ops.operations]
    _check_dependencies(ops, start, complete, durations, eps, problems)
    _check_resources(ops, start, durations, eps, problems)
    peaks = _peak_memory(ops, start, durations, period, depth, periods, eps)
    for p, peak in peaks.items():
        if peak > ops.memory_limit * (1 + REL_TOL):
            problems.append(f"{processor_name(p)}: peak memory {peak:.6g} B exceeds M = {ops.memory_limit:.6g} B")
    achieved = _measured_period(ops, start, complete)
    return Validation(not problems, achieved, peaks, tuple(problems[:max_violations]))


def _check_dependencies(ops, start, complete, durations, eps, problems):
    for b in complete:
        for before, after in ops.dependencies:
            if start[(after, b)] < start[(before, b)] + durations[before] - eps:
                problems.append(f"batch {b}: {ops.operations[after].name} starts at {start[(after, b)]:.6g} "
                                f"before {ops.operations[before].name} ends at "
                                f"{start[(before, b)] + durations[before]:.6g}")
                return


def _check_resources(ops, start, durations, eps, problems):
    for resource, members in ops.on_resource().items():
        instances = sorted((start[key], key) for key in start if key[0] in members)
        for (t0, k0), (t1, k1) in zip(instances, instances[1:]):
            if t1 < t0 + durations[k0[0]] - eps:
                problems.append(f"{resource}: {ops.operations[k0[0]].name} (batch {k0[1]}) and "
                                f"{ops.operations[k1[0]].name} (batch {k1[1]}) overlap at {t1:.6g}")
                return


def _peak_memory(ops, start, durations, period, depth, periods, eps) -> dict[int, float]:
    import numpy as np
    f_index = {op.stage: i for i, op in enumerate(ops.operations) if op.kind == "F"}
    b_index = {s: release_index(ops, s) for s in range(len(ops.stage_processor))}  # W_s if split
    static = ops.static_by_processor
    names = [op.resource for op in ops.operations]
    peaks = {}
    # Steady state: look at starts in periods [depth, periods - depth), where every live batch exists.
    lo, hi = depth * period, (periods - depth) * period
    for p, base in static.items():
        stages = [s for s, q in enumerate(ops.stage_processor) if q == p]
        lives = [(ops.stored[s], start[(f_index[s], b)], start.get((b_index[s], b), float("inf")) + durations[b_index[s]])
                 for s in stages for b in range(periods) if (f_index[s], b) in start]
        here = processor_name(p)
        moments = np.array([t for (i, b), t in start.items() if names[i] == here and lo <= t < hi])
        peak = base
        if lives and moments.size:
            stored, born, freed = (np.array(column) for column in zip(*lives))
            alive = (born[None, :] <= moments[:, None] + eps) & (freed[None, :] > moments[:, None] + eps)
            peak = max(peak, base + float((alive * stored[None, :]).sum(axis=1).max()))
        peaks[p] = peak
    return peaks


def _measured_period(ops, start, complete) -> float:
    last_b = ops.index("B0")
    ends = [start[(last_b, b)] for b in complete]
    gaps = [b - a for a, b in zip(ends, ends[1:])]
    return max(gaps) if gaps else float("nan")
