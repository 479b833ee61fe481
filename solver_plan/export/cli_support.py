"""`--export TARGET` and `--export-out PATH` for commands that write plans (plan, hybrid)."""
from __future__ import annotations

import sys


def add_export_arguments(parser, targets: tuple[str, ...]) -> None:
    """Add `--export TARGET` and `--export-out FILE` to a planning subcommand."""
    parser.add_argument("--export", choices=targets, default=None,
                        help=f"also write the plan as a runtime configuration: {', '.join(targets)}")
    parser.add_argument("--export-out", default=None, help="file for --export (default: standard output)")


def check_export_arguments(args) -> None:
    """Before any work: an unwritable --export-out, or --export-out without --export, fails at once."""
    from solver_plan.errors import InputError
    from solver_plan.files import check_output_path
    if getattr(args, "export_out", None):
        if not args.export:
            raise InputError("needs --export TARGET", "--export-out")
        check_output_path(args.export_out, "--export-out")


def write_export(args, plan_dict: dict, graph=None) -> None:
    """Write the plan as the `--export` target asked for (to --export-out, or standard output); nothing
    without --export.
    """
    if not getattr(args, "export", None):
        return
    from solver_plan.export import export_files
    from solver_plan.files import write_text_atomic
    for path, text in export_files(plan_dict, args.export, args.export_out, graph=graph):
        if path:
            write_text_atomic(path, text)
            print(f"{args.export} export written to {path}")
        else:
            sys.stdout.write(text)
