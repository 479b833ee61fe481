"""`solver-plan export`: a saved plan JSON (`--out` of plan or hybrid) as a runtime configuration."""
from __future__ import annotations

import sys

from solver_plan.export import HYBRID_KINDS, TARGETS

KIND_WORDS = {"config": "a per-operator plan (solver-plan plan --out)",
              "hybrid": "a hybrid plan (solver-plan hybrid --out)",
              "pipeline": "a pipeline plan (solver-plan pipeline --out), which no runtime export takes",
              "moe-hybrid": "an expert-parallel hybrid plan (solver-plan hybrid --out on a mixture of experts)"}


def register_command(subparsers) -> None:
    """Add the `export` subcommand and its options to the command line's subparsers."""
    parser = subparsers.add_parser(
        "export", help="turn a saved plan JSON into Megatron-LM / DeepSpeed / torchtitan / DTensor configuration",
        description="Read a plan written with --out and write it for a runtime: megatron, deepspeed, torchtitan "
                    "(hybrid and expert-parallel plans) or dtensor (per-operator plans; the MODEL the plan JSON records, or --model). "
                    "What the runtime cannot express is listed in the output.")
    parser.add_argument("plan", help="plan JSON (solver-plan plan/hybrid --out)")
    parser.add_argument("--target", required=True, choices=TARGETS)
    parser.add_argument("--model", help="the plan's MODEL (dtensor only: tensor axes come from the graph; "
                                         "default: the MODEL the plan JSON records)")
    parser.add_argument("--out", help="write here (default: standard output)")
    parser.set_defaults(func=run)


def run(args) -> int:
    """Run `solver-plan export` on parsed arguments: read the plan JSON, check its kind against the target,
    write the export to --out or standard output; returns the exit code.
    """
    from solver_plan.errors import InputError
    from solver_plan.export import export_plan
    from solver_plan.files import check_output_path, read_json, write_text_atomic
    check_output_path(args.out, "--out")
    plan = read_json(args.plan, "plan JSON")
    from solver_plan.export.common import plan_kind
    notes: list[str] = []
    try:
        kind, wanted = plan_kind(plan, notes), "config" if args.target == "dtensor" else "hybrid"
    except InputError as exc:  # named by the file, as export_plan's errors are below
        raise InputError(str(exc), args.plan) from None
    for note in notes:  # a plan from before the result envelope: its kind was read from its keys
        print(f"note: {args.plan}: {note}", file=sys.stderr)
    if kind != wanted and not (wanted == "hybrid" and kind in HYBRID_KINDS):  # said before any model is read
        raise InputError(f"the {args.target} export takes {KIND_WORDS[wanted]}; this is {KIND_WORDS[kind]}", args.plan)
    graph = None
    if args.target == "dtensor":
        model = args.model or plan.get("model")  # plan --out records the MODEL it was planned for
        if not isinstance(model, str) or not model:
            raise InputError("the dtensor export needs the plan's MODEL and the plan JSON records none", "--model")
        from solver_plan.graph.resolve import resolve_model
        graph = resolve_model(model)
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
