"""The comparison as flat rows, one per run, for pandas: CSV and JSON Lines with the same columns.

`pandas.read_csv(path)` and `pandas.read_json(path, lines=True)` give the same frame.
"""
from __future__ import annotations

import csv
import io
import json
from typing import Any

from solver_plan.batch.records import jsonable
from solver_plan.report.compare import Comparison

COLUMNS = ("instance", "kind", "model", "cluster", "devices", "processors", "memory_limit", "max_candidates",
           "planner", "planner_name", "seed", "time_limit", "status", "killed", "objective_s", "lower_bound_s",
           "reference_s", "reference_proven", "gap_to_reference", "ratio_to_best", "win", "runtime_s", "wall_s",
           "error", "key")


def rows(comparison: Comparison) -> list[dict[str, Any]]:
    """One flat row per run of the comparison, with the columns of `COLUMNS`."""
    result = []
    for instance in comparison.instances:
        for entry in instance.entries:
            record, job = entry.run.record, entry.run.record["job"]
            result.append({
                "instance": instance.instance, "kind": job["kind"], "model": job["model"],
                "cluster": job["cluster"], "devices": job.get("devices"), "processors": job.get("processors"),
                "memory_limit": job.get("memory_limit"), "max_candidates": job.get("max_candidates"),
                "planner": entry.run.planner, "planner_name": entry.run.planner_name, "seed": job.get("seed"),
                "time_limit": job.get("time_limit"), "status": entry.run.status, "killed": entry.run.killed,
                "objective_s": entry.run.objective_s, "lower_bound_s": entry.run.lower_bound_s,
                "reference_s": instance.reference_s, "reference_proven": instance.proven,
                "gap_to_reference": entry.gap, "ratio_to_best": entry.ratio, "win": entry.win,
                "runtime_s": entry.run.runtime_s, "wall_s": record.get("wall_s"), "error": entry.run.error,
                "key": record["key"],
            })
    return jsonable(result)  # infinities (no finite ratio) become empty cells


def to_csv(comparison: Comparison) -> str:
    """The rows as CSV (None as an empty cell)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for row in rows(comparison):
        writer.writerow({name: "" if value is None else value for name, value in row.items()})
    return buffer.getvalue()


def to_jsonl(comparison: Comparison) -> str:
    """The rows as JSON Lines, one object per run."""
    return "".join(json.dumps(row, sort_keys=False) + "\n" for row in rows(comparison))
