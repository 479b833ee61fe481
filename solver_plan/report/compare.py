"""Solver-versus-heuristic comparison: per instance the reference value and every planner's gap to it;
per planner, per family and per kind the aggregates a reader can trust. Pure functions of `Run`s.

Reference of an instance: the best (largest) lower bound any planner proved; where none did, the
best objective found (`proven=False`). A bound above a plan some planner found is wrong: it is
ignored and its planner listed in `invalid_bounds`. An instance is infeasible when some planner
proved it (INFEASIBLE from a config planner or from an exact pipeline planner) and none found a
plan. Gap of an objective: (objective - reference) / objective, as `relative_gap` defines it (0
optimal, 1 hopeless).

Every aggregate of a group (a family; a kind, over the instances every planner of the kind ran on)
is taken over the same instances for every planner in it; a planner that did not run on all of them
is left out and named:
- solved: a plan, or infeasibility proven; proven: OPTIMAL (unless its bound is wrong), or INFEASIBLE
  on an infeasible instance;
- geo-mean gap: shifted geometric mean, exp(mean(log(gap + s))) - s with s = GAP_SHIFT, over the
  instances some planner found a plan for; a run without a plan counts as gap 1 (100%, censored);
- time to target / to optimality: geometric mean over all instances of the planner's runtime where it
  reached the target gap (or proved infeasibility) / proved optimality (or infeasibility), else the
  larger of its time limit and runtime (censored). Runtimes are floored at TIME_FLOOR_S. Times are
  when the planner returned: a run that had its answer earlier is not credited for it;
- against the reference formulation (planners named `reference-*`, the best of them per instance):
  geometric mean of reference time / planner time to optimality (censored as above; > 1: faster than
  the reference) over all instances, and of planner objective / reference objective over the
  instances where both found a plan.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from solver_plan.report.runs import Run
from solver_plan.result import relative_gap

WIN_TOLERANCE = 1e-6  # relative: objectives this close to the best tie
BOUND_TOLERANCE = 1e-6  # relative: a bound further above the best plan found is wrong
TIME_FLOOR_S = 1e-3
GAP_SHIFT = 1e-2  # as large as the target gap: a few exact zeros must not hide runs without a plan
UNSOLVED_GAP = 1.0
DEFAULT_TARGET_GAP = 0.01
REFERENCE_PREFIX = "reference-"


@dataclass(frozen=True)
class Entry:
    """One run judged on its instance: gap to the reference, ratio to the best objective, win, target
    reached, proof."""
    run: Run
    gap: float | None  # to the instance's reference; None without a solution
    ratio: float | None  # objective / best objective found on the instance
    win: bool
    reached: bool  # within the target gap, or infeasibility proven
    proven: bool  # optimality or infeasibility proven

    @property
    def censored_s(self) -> float:
        """The time charged to a run that never got there: its time limit, or its runtime if longer."""
        limit = self.run.record["job"].get("time_limit") or 0.0
        return max(float(limit), self.run.runtime_s, TIME_FLOOR_S)

    def time_to(self, arrived: bool) -> float:
        """Seconds charged for getting there: the runtime if `arrived`, else the censored time."""
        return max(self.run.runtime_s, TIME_FLOOR_S) if arrived else self.censored_s


@dataclass(frozen=True)
class InstanceResult:
    """One instance: its reference value (see the module text) and every planner's entry on it."""
    instance: str
    reference_s: float | None  # best proven bound, else best objective
    proven: bool  # reference is a proven bound
    best_objective_s: float | None
    entries: tuple[Entry, ...]
    infeasible: bool = False  # proven infeasible by some planner, and no planner found a plan
    invalid_bounds: tuple[str, ...] = ()  # planners whose lower bound exceeds a plan found (ignored)

    @property
    def family(self) -> str:
        """The job file entry (family) the instance's runs came from."""
        return self.entries[0].run.family

    @property
    def kind(self) -> str:
        """The kind of planner that ran on the instance ("config", "pipeline", ...)."""
        return self.entries[0].run.kind

    def entry(self, planner: str) -> Entry | None:
        """The entry of planner label `planner`, None if it did not run here."""
        return next((entry for entry in self.entries if entry.run.planner == planner), None)


@dataclass(frozen=True)
class PlannerSummary:
    """One planner's aggregates over a group of instances (see the module text for each)."""
    planner: str
    instances: int
    solved: int  # a plan or proven infeasibility
    optimal: int  # proven optimal or proven infeasible
    wins: int
    geomean_gap: float | None  # None when no instance of the group has a plan
    reached: int  # within the target gap (or proven infeasible)
    time_to_target_s: float | None
    time_to_optimal_s: float | None
    speedup_vs_reference: float | None = None  # reference time / planner time to optimality
    objective_vs_reference: float | None = None  # planner objective / reference objective
    objective_vs_reference_n: int = 0  # instances both solved


@dataclass(frozen=True)
class GroupSummary:
    """Aggregates over one set of instances every listed planner ran on."""
    name: str  # family (job name) or kind
    kind: str
    instances: tuple[str, ...]
    summary: tuple[PlannerSummary, ...]
    omitted: tuple[str, ...] = ()  # planners that ran on only some of the instances


@dataclass(frozen=True)
class Comparison:
    """The whole comparison: per instance, per planner (over the common instances of its kind), per
    family and per kind."""
    instances: tuple[InstanceResult, ...]
    planners: tuple[str, ...]
    summary: tuple[PlannerSummary, ...]  # per planner over the common instances of its kind
    target_gap: float
    families: tuple[GroupSummary, ...] = ()
    kinds: tuple[GroupSummary, ...] = ()


def compare(runs: Sequence[Run], target_gap: float = DEFAULT_TARGET_GAP) -> Comparison:
    """Compare `runs`: grouped by instance, then summarised per family and per kind (see the module
    text)."""
    by_instance: dict[str, list[Run]] = {}
    for run in runs:
        by_instance.setdefault(run.instance, []).append(run)
    instances = tuple(compare_instance(name, sorted(group, key=lambda r: r.planner), target_gap)
                      for name, group in sorted(by_instance.items()))
    planners = tuple(sorted({run.planner for run in runs}))
    families = _groups(instances, lambda result: result.family, target_gap)
    kinds = tuple(_kind_summary(kind, instances, target_gap) for kind in sorted({r.kind for r in instances}))
    summary = tuple(sorted((s for group in kinds for s in group.summary), key=lambda s: s.planner))
    return Comparison(instances, planners, summary, target_gap, families, kinds)


def compare_instance(name: str, runs: Sequence[Run], target_gap: float = DEFAULT_TARGET_GAP) -> InstanceResult:
    """Judge the runs of one instance: the reference (best valid bound, else best objective), wrong
    bounds, infeasibility proven, and each run's gap, ratio and win."""
    objectives = [run.objective_s for run in runs if run.has_solution]
    best_objective = min(objectives) if objectives else None
    proofs = [run for run in runs if run.status == "INFEASIBLE" and proves_infeasibility(run)]
    # A bound above a plan that was found is wrong: it must not become the reference.
    invalid = tuple(run.planner for run in runs if run.lower_bound_s is not None and best_objective is not None
                    and run.lower_bound_s > best_objective + BOUND_TOLERANCE * max(1.0, abs(best_objective)))
    bounds = [run.lower_bound_s for run in runs if run.lower_bound_s is not None and run.planner not in invalid]
    infeasible = not objectives and bool(proofs)
    proven = bool(bounds)
    reference = max(bounds) if bounds else best_objective
    entries = []
    for run in runs:
        if not run.has_solution:
            proved = infeasible and run in proofs
            entries.append(Entry(run, None, None, False, proved, proved))
            continue
        win = run.objective_s <= best_objective + WIN_TOLERANCE * abs(best_objective)
        ratio = run.objective_s / best_objective if best_objective > 0 else (1.0 if win else math.inf)
        gap = relative_gap(run.objective_s, reference)
        entries.append(Entry(run, gap, ratio, win, gap is not None and gap <= target_gap + 1e-12,
                             run.status == "OPTIMAL" and run.planner not in invalid))  # a wrong bound proves nothing
    return InstanceResult(name, reference, proven, best_objective, tuple(entries), infeasible, invalid)


def proves_infeasibility(run: Run) -> bool:
    """INFEASIBLE is a proof from config planners (the harness confirms it by a memory bound) and from
    exact pipeline planners; a pipeline heuristic only says its own search space has no plan."""
    if run.kind == "config":
        return True
    from solver_plan.planners import planners
    info = planners(run.kind).get(run.planner_name)
    return info is not None and info.exact


def _groups(instances: Sequence[InstanceResult], key, target_gap: float) -> tuple[GroupSummary, ...]:
    grouped: dict[str, list[InstanceResult]] = {}
    for result in instances:
        grouped.setdefault(key(result), []).append(result)
    return tuple(group_summary(name, members, target_gap) for name, members in sorted(grouped.items()))


def _kind_summary(kind: str, instances: Sequence[InstanceResult], target_gap: float) -> GroupSummary:
    """A kind's planners over the instances every one of them ran on (as its performance profiles),
    or, where there are none, over all its instances with the incomplete planners named."""
    members = [result for result in instances if result.kind == kind]
    planners = {entry.run.planner for result in members for entry in result.entries}
    common = [result for result in members if {entry.run.planner for entry in result.entries} == planners]
    return group_summary(kind, common or members, target_gap)


def group_summary(name: str, members: Sequence[InstanceResult], target_gap: float) -> GroupSummary:
    """Aggregates over the instances every planner of the group ran on (the others are named)."""
    planners = sorted({entry.run.planner for result in members for entry in result.entries})
    counts = {planner: sum(result.entry(planner) is not None for result in members) for planner in planners}
    complete = [planner for planner in planners if counts[planner] == len(members)]
    omitted = tuple(planner for planner in planners if planner not in complete)
    summary = tuple(summarise(planner, members, target_gap) for planner in complete)
    return GroupSummary(name, members[0].kind, tuple(result.instance for result in members), summary, omitted)


def summarise(planner: str, instances: Sequence[InstanceResult], target_gap: float) -> PlannerSummary:
    """The aggregates of `planner` over `instances` (all of which it ran on; see the module text)."""
    pairs = [(result, result.entry(planner)) for result in instances if result.entry(planner) is not None]
    entries = [entry for _, entry in pairs]
    with_plans = [(result, entry) for result, entry in pairs if result.reference_s is not None]
    gaps = [UNSOLVED_GAP if entry.gap is None else entry.gap for _, entry in with_plans]
    references = [_reference_entries(result) for result, _ in pairs]
    speedups, objective_ratios = [], []
    if not planner.startswith(REFERENCE_PREFIX) and all(references):
        for (_, entry), refs in zip(pairs, references):
            speedups.append(min(ref.time_to(ref.proven) for ref in refs) / entry.time_to(entry.proven))
            ref_objectives = [ref.run.objective_s for ref in refs if ref.run.has_solution]
            if entry.run.has_solution and ref_objectives and min(ref_objectives) > 0:
                objective_ratios.append(entry.run.objective_s / min(ref_objectives))
    return PlannerSummary(
        planner=planner, instances=len(entries),
        solved=sum(entry.run.has_solution or entry.proven for entry in entries),
        optimal=sum(entry.proven for entry in entries), wins=sum(entry.win for entry in entries),
        geomean_gap=shifted_geomean(gaps, GAP_SHIFT) if gaps else None,
        reached=sum(entry.reached for entry in entries),
        time_to_target_s=geomean([entry.time_to(entry.reached) for entry in entries]) if entries else None,
        time_to_optimal_s=geomean([entry.time_to(entry.proven) for entry in entries]) if entries else None,
        speedup_vs_reference=geomean(speedups) if speedups else None,
        objective_vs_reference=geomean(objective_ratios) if objective_ratios else None,
        objective_vs_reference_n=len(objective_ratios))


def _reference_entries(result: InstanceResult) -> list[Entry]:
    return [entry for entry in result.entries if entry.run.planner_name.startswith(REFERENCE_PREFIX)]


def shifted_geomean(values: Sequence[float], shift: float) -> float:
    """exp(mean(log(v + shift))) - shift, at least 0: a geometric mean that tolerates zeros."""
    return max(0.0, geomean([value + shift for value in values]) - shift)


def geomean_gap(gaps: Sequence[float]) -> float:
    """The shifted geometric mean of gaps (see the module docstring)."""
    return shifted_geomean(gaps, GAP_SHIFT)


def geomean(values: Sequence[float]) -> float:
    """Geometric mean of positive `values` (at least one)."""
    return math.exp(sum(math.log(v) for v in values) / len(values))


def common_instances(comparison: Comparison, kind: str) -> tuple[InstanceResult, ...]:
    """The instances of `kind` the kind's summary is over (those every planner of the kind ran on)."""
    group = next((group for group in comparison.kinds if group.name == kind), None)
    names = set(group.instances) if group is not None else set()
    return tuple(result for result in comparison.instances if result.instance in names)


def performance_ratios(comparison: Comparison, kind: str | None = None, metric: str = "objective") -> dict[str, list[float]]:
    """Data of a Dolan-More performance profile over the common instances of `kind` (all kinds if
    None): per planner, its value / the best planner's on every instance (inf where it never got
    there). metric "objective": objective; "time": time to the target gap (or infeasibility proof)."""
    kinds = sorted({result.kind for result in comparison.instances}) if kind is None else [kind]
    members = [result for k in kinds for result in common_instances(comparison, k)]
    planners = sorted({entry.run.planner for result in members for entry in result.entries})
    ratios: dict[str, list[float]] = {planner: [] for planner in planners}
    for result in members:
        if metric == "objective":
            values = {e.run.planner: (e.ratio if e.ratio is not None else math.inf) for e in result.entries}
            if result.infeasible:  # nothing to compare but the proof: proved = 1, else never
                values = {e.run.planner: 1.0 if e.proven else math.inf for e in result.entries}
        else:
            times = {e.run.planner: (e.time_to(True) if e.reached else math.inf) for e in result.entries}
            best = min(times.values())
            values = {p: (t / best if math.isfinite(best) else math.inf) for p, t in times.items()}
        for planner, value in values.items():
            ratios[planner].append(value)
    return ratios
