"""Writing `--export TARGET` files for commands that write plans (plan, hybrid); the options themselves
are cli_options.add_export_arguments, and the top-level command line hands `write_export` to the commands
(cli_options.write_export) so planning packages below export/ never import it."""
from __future__ import annotations

import sys


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
