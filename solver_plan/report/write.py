"""A report from a folder of batch records: Markdown, CSV, JSON Lines and PNG plots side by side.

For `--report out/report.md`: out/report.md, out/report.csv, out/report.jsonl and, per kind of
planner (config, pipeline), out/report-profile-KIND.png and out/report-gap-time-KIND.png (links in
the Markdown are relative to it).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from solver_plan.errors import InputError
from solver_plan.report.compare import DEFAULT_TARGET_GAP, Comparison, compare
from solver_plan.report.export import to_csv, to_jsonl
from solver_plan.report.markdown import render_report
from solver_plan.report.runs import load_runs


@dataclass(frozen=True)
class Report:
    """What `write_report` produced: the comparison, the files written and the records it skipped as
    invalid."""
    comparison: Comparison
    files: tuple[Path, ...]
    invalid: tuple[tuple[Path, str], ...]  # record files skipped, with the reason


def write_report(folder: str | Path, report_path: str | Path, target_gap: float = DEFAULT_TARGET_GAP,
                 plots: bool = True, keys: Collection[str] | None = None) -> Report:
    """`keys`: report only these jobs' records (e.g. one job file's), not the whole folder."""
    if not (0 <= target_gap < 1):
        raise InputError(f"must be in [0, 1), got {target_gap}", "--target-gap")
    runs, invalid = load_runs(folder, keys)
    if not runs:
        raise InputError("no valid batch records to compare (run `solver-plan batch` first)", str(folder))
    comparison = compare(runs, target_gap)
    report_path = Path(report_path)
    stem = report_path.with_suffix("")
    data = {stem.with_suffix(".csv"): to_csv(comparison), stem.with_suffix(".jsonl"): to_jsonl(comparison)}
    images = []
    try:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        for path, text in data.items():
            path.write_text(text)
        if plots:
            from solver_plan.report.plots import gap_versus_time, kinds, performance_profile
            for kind in kinds(comparison):
                profile, curves = Path(f"{stem}-profile-{kind}.png"), Path(f"{stem}-gap-time-{kind}.png")
                performance_profile(comparison, profile, kind, source=folder)
                gap_versus_time(comparison, curves, kind, source=folder)
                images += [(f"performance profile: {kind} planners", profile),
                           (f"gap versus time: {kind} planners", curves)]
        markdown = render_report(comparison, source=str(folder), invalid=len(invalid),
                                 images=[(title, path.name) for title, path in images],
                                 files=[path.name for path in data])
        report_path.write_text(markdown)
    except OSError as exc:
        raise InputError(f"cannot write the report ({exc.strerror or exc})", str(report_path)) from None
    return Report(comparison, (report_path, *data, *(path for _, path in images)), tuple(invalid))
