"""The comparison as Markdown: a summary table per planner and a table per instance."""
from __future__ import annotations

from typing import Sequence

from solver_plan.report.compare import Comparison, Entry
from solver_plan.units import format_seconds

NONE = "-"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool]) -> str:
    """A pipe table; `right[i]` right-aligns column i (numbers)."""
    rule = ["---:" if r else "---" for r in right]
    lines = [list(header), rule] + [[cell.replace("|", "\\|") for cell in row] for row in rows]
    return "\n".join("| " + " | ".join(cells) + " |" for cells in lines)


def percent(value: float | None) -> str:
    return NONE if value is None else f"{100 * value:.2f}%"


def seconds(value: float | None) -> str:
    return NONE if value is None else format_seconds(value)


def summary_table(comparison: Comparison) -> str:
    target = percent(comparison.target_gap)
    header = ["planner", "instances", "solved", "optimal", "wins", "geo-mean gap", f"within {target}",
              f"time to {target} (geo-mean)"]
    rows = [[s.planner, str(s.instances), str(s.solved), str(s.optimal), str(s.wins), percent(s.geomean_gap),
             str(s.reached), seconds(s.time_to_target_s)] for s in comparison.summary]
    return table(header, rows, [False] + [True] * 7)


def instance_table(comparison: Comparison) -> str:
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
    planners_n, instances_n = len(comparison.planners), len(comparison.instances)
    runs_n = sum(len(result.entries) for result in comparison.instances)
    lines = [
        "# Planner comparison", "",
        f"{_count(runs_n, 'run')} of {_count(planners_n, 'planner')} on {_count(instances_n, 'instance')}, "
        f"from `{source}`"
        + (f" ({invalid} invalid records skipped)." if invalid else "."), "",
        "Reference: the best lower bound any planner proved on the instance; where none did (marked *), "
        "the best objective found. Gap: (objective - reference) / objective. Geo-mean gap: "
        "1 - geometric mean of (1 - gap) over solved instances. Wins: best objective found (ties count, "
        "in bold below). Time to target: geometric mean of the runtimes of the instances solved within "
        "the target gap.", "",
        "## Summary", "", summary_table(comparison), "",
        "## Per instance", "", instance_table(comparison), "",
    ]
    failures = failure_table(comparison)
    if failures:
        lines += ["## Runs without a solution", "", failures, ""]
    if images:
        lines += ["## Plots", ""] + [f"![{title}]({path})" for title, path in images] + [""]
    if files:
        lines += ["Data: " + ", ".join(f"`{name}`" for name in files) + " (one row per run).", ""]
    return "\n".join(lines)


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
