#!/usr/bin/env python3
"""The standard solver-versus-heuristic comparison in one command: run a job file's batch (resuming
whatever an earlier run recorded), then write the comparison report beside the records.

    python scripts/compare_planners.py                               # configs/jobs/compare.yaml
    python scripts/compare_planners.py configs/jobs/quickstart.yaml --out results/quick --workers 2

Same as `solver-plan batch JOBS --out DIR` then `solver-plan compare DIR --report DIR/report.md --jobs JOBS`;
failed jobs are recorded and reported, they do not stop the report.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from solver_plan.batch.cli import DEFAULT_WORKERS  # noqa: E402
from solver_plan.cli import main as solver_plan  # noqa: E402
from solver_plan.report.compare import DEFAULT_TARGET_GAP  # noqa: E402

BATCH_FAILED_JOBS = 1  # `batch` ran everything but some jobs failed: still worth a report


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("jobs", nargs="?", default=str(REPO / "configs" / "jobs" / "compare.yaml"),
                        help="job file (default configs/jobs/compare.yaml)")
    parser.add_argument("--out", default="results/compare", help="records folder (default results/compare)")
    parser.add_argument("--report", default=None, help="Markdown report (default OUT/report.md)")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS)
    parser.add_argument("--executor", default="local", choices=("local", "ray"))
    parser.add_argument("--target-gap", type=float, default=DEFAULT_TARGET_GAP)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    status = solver_plan(["batch", args.jobs, "--out", args.out, "--workers", str(args.workers),
                          "--executor", args.executor])
    if status not in (0, BATCH_FAILED_JOBS):
        return status
    report = args.report or str(Path(args.out) / "report.md")
    return solver_plan(["compare", args.out, "--report", report, "--target-gap", str(args.target_gap),
                        "--jobs", args.jobs]) or status


if __name__ == "__main__":
    sys.exit(main())
