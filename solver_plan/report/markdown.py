"""The comparison as Markdown: a summary table per planner and a table per instance."""
from __future__ import annotations

from typing import Sequence

from solver_plan.report.compare import GAP_SHIFT, TIME_FLOOR_S, Comparison, Entry
from solver_plan.units import format_seconds

NONE = "-"
PLOT_CAPTIONS = {
    "performance profile": "Dolan-More performance profiles over the instances every planner of the kind ran "
                           "on. Left: objective / best objective found; right: time to the target gap "
                           "(or infeasibility proof) / the fastest planner's, runtimes floored at 1 ms. A "
                           "planner that never got there on an instance stays below 1 (censored); log x "
                           "axis up to the largest finite ratio.",
    "gap versus time": "Per family, the shifted geometric-mean gap (shift 1%) of the planner's best "
                       "answer returned by time t, over the family's instances with a plan; before a run "
                       "returns (and if it returns none) it counts as 100%. Runs are credited when they "
                       "return; runtimes floored at 1 ms.",
}


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """A pipe table; `right[i]` right-aligns column i (numbers)."""
    rule = ["---:" if r else "---" for r in right]
    lines = [list(header), rule] + [[cell.replace("|", "\\|") for cell in row] for row in rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def percent(value: float | None) -> str:
    """A fraction as a percentage with two decimals (the placeholder for None)."""
    return NONE if value is None else f"{100 * value:.2f}%"


def seconds(value: float | None) -> str:
    """Seconds in readable units (the placeholder for None)."""
    return NONE if value is None else format_seconds(value)


def summary_table(comparison: Comparison) -> str:
    """Per planner, over the instances of its kind that every planner of that kind ran on."""
    return _planner_rows(comparison, [(group.name, group) for group in comparison.kinds], "kind")


def family_table(comparison: Comparison) -> str:
    """Per family and planner, over the family's instances."""
    return _planner_rows(comparison, [(group.name, group) for group in comparison.families], "family",
                         reference=any(s.speedup_vs_reference is not None
                                       for group in comparison.families for s in group.summary))


def _planner_rows(comparison: Comparison, groups, label: str, reference: bool = False) -> str:
    target = percent(comparison.target_gap)
    header = [label, "planner", "instances", "solved", "proven", "wins", "geo-mean gap", f"within {target}",
              f"time to {target}", "time to optimality"]
    if reference:
        header += ["speed vs reference", "objective vs reference"]
    rows = []
    for name, group in groups:
        for index, s in enumerate(group.summary):
            row = [name if index == 0 else "", s.planner, str(s.instances), str(s.solved), str(s.optimal),
                   str(s.wins), percent(s.geomean_gap), str(s.reached), seconds(s.time_to_target_s),
                   seconds(s.time_to_optimal_s)]
            if reference:
                row += [NONE if s.speedup_vs_reference is None else f"{s.speedup_vs_reference:.3g}x",
                        NONE if s.objective_vs_reference is None else
                        f"{s.objective_vs_reference:.4f} ({s.objective_vs_reference_n})"]
            rows.append(row)
        if group.omitted:
            rows.append(["" if group.summary else name, "not aggregated (ran on only some instances): "
                         + ", ".join(group.omitted)] + [""] * (len(header) - 2))
    return table(header, rows, [False, False] + [True] * (len(header) - 2))


def definitions(comparison: Comparison) -> str:
    """What every number of the tables means, with its floors and censoring."""
    target = percent(comparison.target_gap)
    return (
        "Reference of an instance: the best lower bound any planner proved; where none did (marked *), the "
        "best objective found; a bound above a plan some planner found is wrong, so it is ignored and listed "
        "below. Gap: (objective - reference) / objective. Every aggregate of a group is over "
        "the same instances for every planner listed; a planner that ran on only some of them is named, "
        "not aggregated. *Solved*: a plan, or infeasibility proven. *Proven*: optimality, or "
        "infeasibility, proven (an OPTIMAL whose bound is wrong proves nothing). *Wins*: best objective "
        "found (ties count). *Geo-mean gap*: shifted "
        f"geometric mean (shift {percent(GAP_SHIFT)}) over the instances some planner found a plan for; a "
        f"run without a plan counts as 100% (censored). *Time to {target}* / *to optimality*: geometric "
        "mean over all instances of the runtime where the planner returned within the target gap (or a "
        "proof of infeasibility) / with a proof, else its time limit or runtime, whichever is larger "
        f"(censored); runtimes floored at {format_seconds(TIME_FLOOR_S)}. A run is credited when it "
        "returns, not when it first held its answer. *Speed vs reference*: geometric mean of (best "
        "`reference-*` time to optimality) / (planner's), censored as above; above 1x is faster than the "
        "field's formulation. *Objective vs reference*: geometric mean of planner objective / best "
        "reference objective over the instances where both found a plan (their number in brackets).")


def instance_table(comparison: Comparison) -> str:
    """The per-instance table: reference (* where not proven), then each planner's status, objective, gap
    and time."""
    header = ["instance", "reference", "planner", "status", "objective", "gap", "time"]
    rows = []
    for result in comparison.instances:
        reference = seconds(result.reference_s) + ("" if result.proven or result.reference_s is None else " *")
        for index, entry in enumerate(result.entries):
            first = index == 0
            rows.append([result.instance if first else "", reference if first else "", entry.run.planner,
                         _status(entry), seconds(entry.run.objective_s), percent(entry.gap),
                         seconds(entry.run.runtime_s)])
    return table(header, rows, [False, True, False, False, True, True, True])


def failure_table(comparison: Comparison, width: int = 160) -> str | None:
    """Runs without a solution and why (error or killed), or None when every run has one."""
    rows = [[result.instance, entry.run.planner, _status(entry), _shorten(entry.run.error or NONE, width)]
            for result in comparison.instances for entry in result.entries if entry.gap is None]
    return table(["instance", "planner", "status", "why"], rows, [False] * 4) if rows else None


def _shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _status(entry: Entry) -> str:
    text = entry.run.status + (" (killed)" if entry.run.killed else "")
    return f"**{text}**" if entry.win else text


def render_report(comparison: Comparison, *, source: str, invalid: int, images: Sequence[tuple[str, str]] = (),
                  files: Sequence[str] = ()) -> str:
    """The Markdown report: summary by kind, by family, per instance, wrong bounds, failures, plots
    (`images` as (title, path)) and links to the data `files`."""
    planners_n, instances_n = len(comparison.planners), len(comparison.instances)
    runs_n = sum(len(result.entries) for result in comparison.instances)
    lines = [
        "# Planner comparison", "",
        f"{_count(runs_n, 'run')} of {_count(planners_n, 'planner')} on {_count(instances_n, 'instance')}, "
        f"from `{source}`"
        + (f" ({invalid} invalid records skipped)." if invalid else "."), "",
        definitions(comparison), "",
        "## Summary by kind", "", "Over the instances of each kind that every planner of that kind ran on "
        "(the instances of the performance profiles).", "",
        summary_table(comparison), "",
        "## By family", "", family_table(comparison), "",
        "## Per instance", "", instance_table(comparison), "",
    ]
    wrong = [(result.instance, planner) for result in comparison.instances for planner in result.invalid_bounds]
    if wrong:
        lines += ["## Lower bounds above a plan found (wrong; ignored)", "",
                  table(["instance", "planner"], [list(row) for row in wrong], [False, False]), ""]
    failures = failure_table(comparison)
    if failures:
        lines += ["## Runs without a solution", "", failures, ""]
    if images:
        lines += ["## Plots", ""]
        for title, path in images:
            lines += [f"![{title}]({path})", "", f"*{PLOT_CAPTIONS.get(title.split(':')[0], '')}*", ""]
    if files:
        lines += ["Data: " + ", ".join(f"`{name}`" for name in files) + " (one row per run).", ""]
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
