"""`solver-plan export`: a saved plan JSON (`--out` of plan or hybrid) as a runtime configuration."""
from __future__ import annotations

import sys

from solver_plan.export import TARGETS


def register_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "export", help="turn a saved plan JSON into Megatron-LM / DeepSpeed / torchtitan / DTensor configuration",
        description="Read a plan written with --out and write it for a runtime: megatron, deepspeed, torchtitan "
                    "(hybrid plans) or dtensor (per-operator plans; needs --model, the MODEL it was planned for). "
                    "What the runtime cannot express is listed in the output.")
    parser.add_argument("plan", help="plan JSON (solver-plan plan/hybrid --out)")
    parser.add_argument("--target", required=True, choices=TARGETS)
    parser.add_argument("--model", help="the plan's MODEL (dtensor only: tensor axes come from the graph)")
    parser.add_argument("--out", help="write here (default: standard output)")
    parser.set_defaults(func=run)


def run(args) -> int:
    from solver_plan.errors import InputError
    from solver_plan.export import export_plan
    from solver_plan.files import check_output_path, read_json, write_text_atomic
    check_output_path(args.out, "--out")
    plan = read_json(args.plan, "plan JSON")
    graph = None
    if args.target == "dtensor":
        if not args.model:
            raise InputError("the dtensor export needs the plan's MODEL", "--model")
        from solver_plan.graph.resolve import resolve_model
        graph = resolve_model(args.model)
    elif args.model:
        raise InputError(f"only the dtensor export reads a model, not {args.target}", "--model")
    try:
        text = export_plan(plan, args.target, graph=graph)
    except InputError as exc:
        raise InputError(str(exc), args.plan) from None
    if args.out:
        write_text_atomic(args.out, text)
        print(f"{args.target} export written to {args.out}")
    else:
        sys.stdout.write(text)
    return 0
