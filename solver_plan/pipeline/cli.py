"""`solver-plan pipeline`: plan stages and a periodic schedule for a model on a cluster."""
from __future__ import annotations

import math

from solver_plan.pipeline.answer import DEFAULT_BLOCKS, MAX_BLOCKS, check_blocks, check_blocks_file  # noqa: F401 (re-exported)
from solver_plan.units import format_bytes, format_seconds, parse_bandwidth
GANTT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")  # formats matplotlib's Agg backend writes


def register_command(subparsers) -> None:
    """Add the `pipeline` subcommand and its options to the command line's `subparsers`."""
    from solver_plan import cli_options as o
    from solver_plan.requests import DEFAULT_PIPELINE_PLANNER, DEFAULT_SCHEDULE, OPTIMIZERS
    parser = subparsers.add_parser(
        "pipeline", help="pipeline stages and a periodic schedule (PipeDream, MadPipe, exact)",
        description="Plan a pipelined training of MODEL on the first N devices (processors): allocation of "
                    "layers to processors and a periodic pattern, validated by unrolling.")
    o.add_model(parser, required=True,
                help="zoo spec (resnet50:batch=8,image=1000), a PipeDream graph.txt (or its folder), "
                     "or a pipeline-blocks JSON")
    o.add_cluster(parser)
    o.add_devices(parser, "--processors", "-P", help="number of pipeline processors: the first N devices (required)")
    o.add_memory_limit(parser, "--memory", unlimited=False)
    parser.add_argument("--bandwidth", help="link bandwidth, e.g. 12GB/s (default: the slowest link between consecutive processors)")
    parser.add_argument("--no-comm", action="store_true", help="transfers take no time")
    o.add_precision(parser, help="training precision of zoo models' layer times and sizes, as for `plan` (default "
                                 "auto: the device's default; fp32 for profiles and block files, which keep their "
                                 "measured times), and of every model's optimizer state in stage memory")
    parser.add_argument("--optimizer", default="adam", choices=OPTIMIZERS,
                        help="optimizer whose state stage memory keeps per parameter with the precision's dtypes "
                             "(default adam: 16 B in mixed precision or fp32; sgd-momentum 12 B; sgd 8 B); "
                             "pipedream: PipeDream's rule, 3 x the weights, for comparisons with PipeDream")
    o.add(parser, "--planner", default=DEFAULT_PIPELINE_PLANNER,
          help="allocation planner: madpipe (default), pipedream or exact-joint (`solver-plan planners`)")
    o.add(parser, "--schedule", default=DEFAULT_SCHEDULE,
          help="schedule: exact (default; CP-SAT on a time grid, period bisected), exact-milp (CBC, "
               "real time), exact-zb (CP-SAT with each backward split into B and W, zero-bubble) or 1f1b* "
               "(contiguous allocations only)")
    o.add(parser, "--max-layers", type=int, default=None,
          help="merge adjacent layers until at most this many remain (default: madpipe keeps what "
               "its share of --time-limit allows, 12 for exact-joint, no merging for pipedream)")
    parser.add_argument("--cut-inside-blocks", action="store_true",
                        help="allow stage boundaries inside transformer blocks (default: between blocks only, "
                             "so each stage can be exported to a runtime)")
    o.add(parser, "--blocks", type=int, default=None,
          help=f"number of blocks for a pipeline-blocks JSON (default {DEFAULT_BLOCKS}, at most {MAX_BLOCKS})")
    o.add_solve_arguments(parser, "an allocation planner option (repeatable), checked against the planner's options")
    parser.add_argument("--out", help="write the pattern as JSON here")
    parser.add_argument("--gantt", help="write a Gantt chart here (.png, .svg, .pdf or .jpg; default: none)")
    parser.set_defaults(func=run)


def pipeline_request(args):
    """The `PipelineRequest` of parsed `pipeline` arguments."""
    from solver_plan import cli_options as o
    from solver_plan.errors import InputError
    from solver_plan.requests import PipelineRequest
    if args.devices is None:
        raise InputError("required: the number of pipeline processors (the first N devices)", "--devices")
    bandwidth = parse_bandwidth(args.bandwidth, "--bandwidth") if args.bandwidth else None
    return o.build(PipelineRequest, args, model=args.model, cluster=args.cluster, devices=args.devices,
                   planner=args.planner, schedule=args.schedule, time_limit=args.time_limit,
                   memory_limit=args.memory_limit, bandwidth=bandwidth, no_comm=args.no_comm,
                   precision=args.precision, optimizer=args.optimizer, max_layers=args.max_layers,
                   cut_inside_blocks=args.cut_inside_blocks, blocks=args.blocks, seed=args.seed,
                   options=o.parse_options(args))


def build_problem(args, deadline=None):
    """The full chain problem of parsed `pipeline` arguments (`answer.chain_for`)."""
    from solver_plan import cli_options as o
    from solver_plan.pipeline.answer import chain_for
    request = pipeline_request(args)
    return o.check(args, request, chain_for, request, deadline)


def print_result(result, full=None, kinds: dict[str, str] | None = None) -> None:
    """The plan in the model's terms. `full`: the chain problem the command built (the result's
    may be merged for the planner; layers are numbered and named in `full`'s chain); `kinds`:
    layer types by name where names alone do not say (PipeDream profiles)."""
    from solver_plan.pipeline.describe import describe_layers, original_span, shared_processors
    problem = result.problem
    full = full or problem
    merged = f" (the planner ran on {problem.layers} merged layers)" if problem.layers != full.layers else ""
    print(f"model {full.name}: a chain of {full.layers} layers{merged}, P = {full.processors} processors, "
          f"M = {format_bytes(full.memory)} per processor, link bandwidth "
          f"{'unlimited' if math.isinf(full.bandwidth) else format_bytes(full.bandwidth) + '/s'}")
    print(f"memory: {problem.state.describe()}; a stage keeps {problem.state.weight_factor:g} x its weights "
          f"+ activations in flight + transfer buffers")
    print(f"planner {result.planner} + schedule {result.scheduler}: {result.status.value}")
    if result.period_s is not None:
        bound = result.lower_bound_s
        print(f"period {format_seconds(result.period_s)} per mini-batch (allocation's estimate "
              f"{format_seconds(result.allocation.period_s)}, lower bound "
              f"{format_seconds(bound) if bound is not None else '-'}, pattern valid: {result.valid})")
    for note in problem.chain.notes + result.allocation.notes + result.notes:
        print(f"  note: {note}")
    if result.allocation.allocation is not None:
        stages = result.allocation.allocation.stages
        peaks = result.validation.peak_memory if result.validation else {}
        print(f"{'stage':>5} {'processor':>9} {f'layers (of {full.layers})':>16} {'load':>11} "
              f"{'peak memory':>12}  contents")
        for i, s in enumerate(stages):
            first, last = original_span(full.chain.layer_names, problem.chain.layer_names, s.first, s.last)
            peak = format_bytes(peaks[s.processor]) if s.processor in peaks else "-"
            print(f"{i:>5} {s.processor:>9} {f'{first}..{last}':>16} "
                  f"{format_seconds(problem.load(s.first, s.last)):>11} {peak:>12}  "
                  f"{describe_layers(full.chain.layer_names, first, last, kinds)}")
        print("  (load: forward + backward time of the stage per mini-batch; peak memory: the processor's, "
              "all its stages)")
        for line in shared_processors(stages):
            print(f"  {line}")


def run(args) -> int:
    """Run `solver-plan pipeline` on parsed `args`: answer the request, write --out and --gantt, print
    the plan; the exit status."""
    from solver_plan import cli_options as o
    from solver_plan.deadline import command_budget
    from solver_plan.files import check_output_path, write_text_atomic
    from solver_plan.pipeline.answer import answer_pipeline
    from solver_plan.planners import get_planner
    request = pipeline_request(args)
    o.check(args, request, lambda: get_planner(request.planner, "pipeline", "planner").check_options(
        request.option_dict(), "options"))
    check_output_path(args.out, "--out")
    check_output_path(args.gantt, "--gantt", GANTT_SUFFIXES)
    deadline = command_budget(request.time_limit, getattr(args, "started", None))  # the command's one clock
    report = o.check(args, request, answer_pipeline, request, deadline)
    problem, result = report.problem, report.result
    if args.out:  # before any printing: a closed pipe (`| head`) must not lose the pattern
        write_text_atomic(args.out, result.to_json())
    from solver_plan.pipeline.describe import profile_layer_kinds
    print_result(result, problem, profile_layer_kinds(args.model))
    if args.out:
        print(f"wrote {args.out}")
    if args.gantt:
        if result.pattern is None:
            print("no valid pattern: no Gantt chart written")
        else:
            from solver_plan.pipeline.gantt import save_gantt
            save_gantt(result.pattern, args.gantt,
                       title=f"{problem.name} on {problem.processors} processors (M = {format_bytes(problem.memory)} "
                             f"each): {result.planner} allocation + {result.scheduler} schedule")
            print(f"wrote {args.gantt}")
    print(f"wall time {deadline.elapsed():.2f} s since the command started (planning {result.runtime_s:.2f} s)")
    return 0 if result.valid else 1
