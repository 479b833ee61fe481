"""`solver-plan compare DIR --report report.md`: compare the planners of a folder of batch records."""
from __future__ import annotations

import sys

from solver_plan.report.compare import DEFAULT_TARGET_GAP


def register_command(subparsers) -> None:
    """Add the `compare` subcommand and its options to the command line's `subparsers`."""
    parser = subparsers.add_parser("compare", help="compare planners over a folder of batch records",
                                   description="Per instance the best proven bound and every planner's gap; "
                                               "a summary with wins, geometric-mean gaps and time to target; "
                                               "plots; CSV and JSONL beside the Markdown report.")
    parser.add_argument("records", metavar="DIR", help="folder written by `solver-plan batch --out DIR`")
    parser.add_argument("--report", default=None, help="Markdown report to write (default DIR/report.md)")
    parser.add_argument("--target-gap", type=float, default=DEFAULT_TARGET_GAP,
                        help=f"gap counted as reaching the target (default {DEFAULT_TARGET_GAP})")
    parser.add_argument("--jobs", default=None, metavar="JOBS.yaml",
                        help="report only the jobs of this job file (default: every record in DIR)")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Run `solver-plan compare DIR` on parsed `args`: write the report beside its CSV, JSONL and plots
    and print the summary; the exit status."""
    from pathlib import Path

    from solver_plan.errors import InputError
    from solver_plan.files import check_output_path
    from solver_plan.report.markdown import summary_table
    from solver_plan.report.write import write_report

    if not Path(args.records).is_dir():
        raise InputError("no such folder of batch records", args.records)
    report_path = Path(args.report) if args.report else Path(args.records) / "report.md"
    check_output_path(report_path, "--report", (".md",), what="the report")  # before reading any record
    keys = None
    if args.jobs:
        from solver_plan.batch.jobfile import load_jobs
        keys = {job.key for job in load_jobs(args.jobs)}
    report = write_report(args.records, report_path, args.target_gap, plots=not args.no_plots, keys=keys)
    for path, why in report.invalid:
        print(f"solver-plan compare: skipped invalid record {path.name} ({why})", file=sys.stderr)
    print(summary_table(report.comparison))
    print(f"\nreport written to {report.files[0]} (also {', '.join(p.name for p in report.files[1:])})")
    return 0
