"""`solver-plan batch JOBS.yaml --out DIR [--workers N] [--executor local|ray]`."""
from __future__ import annotations

import os
import sys

DEFAULT_WORKERS = max(1, (os.cpu_count() or 2) // 2)  # planners use threads of their own


def register_command(subparsers) -> None:
    """Add the `batch` subcommand and its options to the command line's `subparsers`."""
    parser = subparsers.add_parser("batch", help="run the planning jobs of a YAML job file, resumably",
                                   description="Run every job of a job file (see configs/jobs/) and write one "
                                               "record per job to --out. A rerun skips recorded jobs.")
    parser.add_argument("jobs", help="job file (YAML), e.g. configs/jobs/quickstart.yaml")
    parser.add_argument("--out", required=True, help="folder of job records (created if missing)")
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                        help=f"jobs run at the same time (default {DEFAULT_WORKERS})")
    parser.add_argument("--executor", default="local", choices=("local", "ray"),
                        help="local process pool (default) or a Ray cluster (optional extra 'ray')")
    parser.add_argument("--ray-address", default=None, help="Ray cluster address (default: RAY_ADDRESS or local)")
    parser.add_argument("--retry-failed", action="store_true", help="also redo jobs recorded as failed or killed")
    parser.add_argument("--list", action="store_true", help="list the jobs and whether they are recorded; run nothing")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--wait", action="store_true",
                        help="if another batch is running on --out, wait for it to finish (default: refuse)")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Run `solver-plan batch` on parsed `args`: list the jobs, or run the pending ones under the
    folder's lock and print the summary; the exit status."""
    from solver_plan.batch.jobfile import load_jobs
    from solver_plan.batch.lock import BatchLock
    from solver_plan.batch.run import make_executor, pending_jobs, run_batch
    from solver_plan.batch.store import RecordStore
    from solver_plan.files import check_output_folder

    if not args.list:
        check_output_folder(args.out, "--out", f"cannot write records to {args.out!r}")  # before models are built
    jobs = load_jobs(args.jobs)
    if args.list:
        pending, _ = pending_jobs(jobs, RecordStore(args.out), args.retry_failed)
        waiting = {job.key for job in pending}
        for job in jobs:
            print(f"{'pending ' if job.key in waiting else 'recorded'} {job.group:<20} {job.label()}  [{job.key}]")
        print(f"{len(jobs)} jobs, {len(pending)} pending")
        return 0
    executor = make_executor(args.executor, args.workers, ray_address=args.ray_address)
    with BatchLock(args.out, wait=args.wait, command=f"solver-plan batch {args.jobs}"):  # one batch per folder
        summary = run_batch(jobs, args.out, executor, retry_failed=args.retry_failed, progress=not args.quiet)
    print(summary.describe(), file=sys.stderr)
    return 1 if summary.failed else 0
