"""Solver-versus-heuristic comparison: per instance the reference value and every planner's gap to it;
per planner wins, geometric-mean gap and time to a target gap. Pure functions of `Run`s.

Reference of an instance: the best (largest) lower bound any planner proved; where none did, the
best objective found (the instance is then marked `proven=False`). Gap of an objective:
(objective - reference) / objective, as `relative_gap` defines it, so 0 is optimal and 1 is hopeless.
Geometric-mean gap: 1 - geomean(1 - gap) over the instances a planner solved, i.e. the gap of the
geometric mean of objective/reference ratios. Time to target: runtimes of the solved instances
within the target gap, summarised by their geometric mean (times floored at 1 ms so it is defined).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from solver_plan.report.runs import Run
from solver_plan.result import relative_gap

WIN_TOLERANCE = 1e-6  # relative: objectives this close to the best tie
TIME_FLOOR_S = 1e-3
DEFAULT_TARGET_GAP = 0.01


@dataclass(frozen=True)
class Entry:
    run: Run
    gap: float | None  # to the instance's reference; None without a solution
    ratio: float | None  # objective / best objective found on the instance
    win: bool


@dataclass(frozen=True)
class InstanceResult:
    instance: str
    reference_s: float | None  # best proven bound, else best objective
    proven: bool  # reference is a proven bound
    best_objective_s: float | None
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class PlannerSummary:
    planner: str
    instances: int
    solved: int
    optimal: int  # status OPTIMAL
    wins: int
    geomean_gap: float | None
    reached: int  # solved within the target gap
    time_to_target_s: float | None  # geometric mean over the reached instances


@dataclass(frozen=True)
class Comparison:
    instances: tuple[InstanceResult, ...]
    planners: tuple[str, ...]
    summary: tuple[PlannerSummary, ...]
    target_gap: float


def compare(runs: Sequence[Run], target_gap: float = DEFAULT_TARGET_GAP) -> Comparison:
    by_instance: dict[str, list[Run]] = {}
    for run in runs:
        by_instance.setdefault(run.instance, []).append(run)
    instances = tuple(compare_instance(name, sorted(group, key=lambda r: r.planner))
                      for name, group in sorted(by_instance.items()))
    planners = tuple(sorted({run.planner for run in runs}))
    summary = tuple(summarise(planner, instances, target_gap) for planner in planners)
    return Comparison(instances, planners, summary, target_gap)


def compare_instance(name: str, runs: Sequence[Run]) -> InstanceResult:
    objectives = [run.objective_s for run in runs if run.has_solution]
    bounds = [run.lower_bound_s for run in runs if run.lower_bound_s is not None]
    best_objective = min(objectives) if objectives else None
    proven = bool(bounds)
    reference = max(bounds) if bounds else best_objective
    entries = []
    for run in runs:
        if not run.has_solution:
            entries.append(Entry(run, None, None, False))
            continue
        win = run.objective_s <= best_objective + WIN_TOLERANCE * abs(best_objective)
        ratio = run.objective_s / best_objective if best_objective > 0 else (1.0 if win else math.inf)
        entries.append(Entry(run, relative_gap(run.objective_s, reference), ratio, win))
    return InstanceResult(name, reference, proven, best_objective, tuple(entries))


def summarise(planner: str, instances: Sequence[InstanceResult], target_gap: float) -> PlannerSummary:
    entries = [entry for result in instances for entry in result.entries if entry.run.planner == planner]
    solved = [entry for entry in entries if entry.gap is not None]
    reached = [entry for entry in solved if entry.gap <= target_gap + 1e-12]
    return PlannerSummary(
        planner=planner, instances=len(entries), solved=len(solved),
        optimal=sum(entry.run.status == "OPTIMAL" for entry in entries),
        wins=sum(entry.win for entry in entries),
        geomean_gap=geomean_gap([entry.gap for entry in solved]) if solved else None,
        reached=len(reached),
        time_to_target_s=geomean([max(entry.run.runtime_s, TIME_FLOOR_S) for entry in reached]) if reached else None)


def geomean_gap(gaps: Sequence[float]) -> float:
    """1 - geomean(1 - gap): the gap of the geometric mean of objective/reference ratios."""
    return 1.0 - geomean([max(1.0 - gap, 1e-12) for gap in gaps])


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def performance_ratios(comparison: Comparison) -> dict[str, list[float]]:
    """For each planner, objective / best objective on every instance (inf where it has no solution):
    the data of a Dolan-More performance profile."""
    ratios: dict[str, list[float]] = {planner: [] for planner in comparison.planners}
    for result in comparison.instances:
        for entry in result.entries:
            ratios[entry.run.planner].append(math.inf if entry.ratio is None else entry.ratio)
    return ratios
