"""`solver-plan pipeline`: plan stages and a periodic schedule for a model on a cluster."""
from __future__ import annotations

import math

from solver_plan.units import format_bytes, format_seconds, parse_bandwidth, parse_bytes

DEFAULT_BLOCKS = 16
MAX_BLOCKS = 512  # 4x the deepest published transformer (megatron-1T: 128 blocks); the pipedream DP is O(blocks^2 P)
GANTT_SUFFIXES = (".png", ".svg", ".pdf", ".jpg", ".jpeg")  # formats matplotlib's Agg backend writes


def register_command(subparsers) -> None:
    parser = subparsers.add_parser(
        "pipeline", help="pipeline stages and a periodic schedule (PipeDream, MadPipe, exact)",
        description="Plan a pipelined training of MODEL on P processors: allocation of layers to processors "
                    "and a periodic pattern, validated by unrolling.")
    parser.add_argument("--model", required=True,
                        help="zoo spec (resnet50:batch=8,image=1000), a PipeDream graph.txt (or its folder), "
                             "or a pipeline-blocks JSON")
    parser.add_argument("--cluster", default="v100x8-nvlink",
                        help="preset name (`solver-plan clusters`) or YAML file (default v100x8-nvlink)")
    parser.add_argument("--processors", "-P", type=int, required=True, help="number of processors P")
    parser.add_argument("--memory", help="memory per processor, e.g. 8GB (default: the device memory)")
    parser.add_argument("--bandwidth", help="link bandwidth, e.g. 12GB/s (default: the slowest link between consecutive processors)")
    parser.add_argument("--no-comm", action="store_true", help="transfers take no time")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "tf32", "bf16", "fp16", "fp8"),
                        help="training precision of zoo models' layer times and sizes, as for `plan` (default "
                             "auto: the device's default; fp32 for profiles and block files, which keep their "
                             "measured times), and of every model's optimizer state in stage memory")
    parser.add_argument("--optimizer", default="adam", choices=("adam", "sgd-momentum", "sgd", "pipedream"),
                        help="optimizer whose state stage memory keeps per parameter with the precision's dtypes "
                             "(default adam: 16 B in mixed precision or fp32; sgd-momentum 12 B; sgd 8 B); "
                             "pipedream: PipeDream's rule, 3 x the weights, for comparisons with PipeDream")
    parser.add_argument("--planner", default="madpipe",
                        help="allocation planner: madpipe (default), pipedream or exact-joint (`solver-plan planners`)")
    parser.add_argument("--schedule", default="exact",
                        help="schedule: exact (default; CP-SAT on a time grid, period bisected), exact-milp (CBC, "
                             "real time), exact-zb (CP-SAT with each backward split into B and W, zero-bubble) or 1f1b* "
                             "(contiguous allocations only)")
    parser.add_argument("--max-layers", type=int, default=None,
                        help="merge adjacent layers until at most this many remain (default: madpipe keeps what "
                             "its share of --time-limit allows, 12 for exact-joint, no merging for pipedream)")
    parser.add_argument("--cut-inside-blocks", action="store_true",
                        help="allow stage boundaries inside transformer blocks (default: between blocks only, "
                             "so each stage can be exported to a runtime)")
    parser.add_argument("--blocks", type=int, default=None,
                        help=f"number of blocks for a pipeline-blocks JSON (default {DEFAULT_BLOCKS}, at most {MAX_BLOCKS})")
    parser.add_argument("--time-limit", type=float, default=60.0,
                        help="wall-clock seconds for the whole command, building the chain included (default 60)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="an allocation planner option (repeatable), checked against the planner's options")
    parser.add_argument("--out", help="write the pattern as JSON here")
    parser.add_argument("--gantt", help="write a Gantt chart here (.png, .svg, .pdf or .jpg; default: none)")
    parser.set_defaults(func=run)


def check_blocks(model: str, blocks: int | None) -> int:
    """--blocks only means something for a pipeline-blocks JSON; bounded so a typo cannot hang the DPs."""
    from pathlib import Path

    from solver_plan.errors import InputError
    if blocks is None:
        return DEFAULT_BLOCKS
    if Path(model).suffix != ".json":
        raise InputError(f"--blocks {blocks} applies only to a pipeline-blocks JSON model, not {model!r}", "--blocks")
    if not 1 <= blocks <= MAX_BLOCKS:
        raise InputError(f"must be between 1 and {MAX_BLOCKS}, got {blocks}", "--blocks")
    return blocks


def check_blocks_file(model: str) -> bool:
    """A pipeline-blocks JSON checked at the boundary: readable, finite non-negative measurements
    (Tf positive), positive integer shapes. (sources.chain_from_blocks reads only the types.)
    False when MODEL is not a pipeline-blocks JSON (not .json, or a model file)."""
    from pathlib import Path

    from solver_plan.errors import InputError
    from solver_plan.files import read_json
    from solver_plan.pipeline.sources import BLOCK_KEYS
    if Path(model).suffix != ".json" or model.startswith("hf:") or not Path(model).exists():
        return False
    data = read_json(model, "pipeline-blocks JSON")
    from solver_plan.graph.importers.graph_file import FORMAT
    from solver_plan.graph.importers.hf import looks_like_hf_config
    if isinstance(data, dict) and (data.get("format") == FORMAT or looks_like_hf_config(data)):
        return False  # a model file (sources.chain_from_model sends it to resolve_model)
    shape = data.get("model") if isinstance(data, dict) else None
    for key in BLOCK_KEYS if isinstance(data, dict) else ():
        value = data.get(key)
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value < 0 or (key == "Tf" and value == 0)):
            raise InputError(f"{key} must be a finite number {'> 0' if key == 'Tf' else '>= 0'}, got {value!r}", model)
    for key in ("hidden_dim", "seq_len") if isinstance(shape, dict) else ():
        value = shape.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"model.{key} must be a positive integer, got {value!r}", model)
    return True


def build_problem(args, deadline=None):
    from solver_plan.cluster import resolve_cluster
    from solver_plan.errors import InputError
    from solver_plan.pipeline.sources import build_chain_problem
    blocks = check_blocks(args.model, args.blocks)
    check_blocks_file(args.model)
    if args.max_layers is not None and args.max_layers < 1:
        raise InputError(f"must be at least 1, got {args.max_layers}", "--max-layers")
    cluster = resolve_cluster(args.cluster)
    memory = parse_bytes(args.memory, "--memory") if args.memory else None
    bandwidth = parse_bandwidth(args.bandwidth, "--bandwidth") if args.bandwidth else None
    return build_chain_problem(args.model, cluster, args.processors, memory=memory, bandwidth=bandwidth,
                               no_comm=args.no_comm, planner=args.planner,
                               # MadPipe is coarsened by the front door, after the full-granularity baseline
                               max_layers=None if args.planner == "madpipe" else args.max_layers,
                               blocks=blocks, cut_inside_blocks=getattr(args, "cut_inside_blocks", False),
                               precision=getattr(args, "precision", None), deadline=deadline,
                               optimizer=getattr(args, "optimizer", None) or "adam")


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
    from solver_plan.files import check_output_path, write_text_atomic
    from solver_plan.deadline import time_budget
    from solver_plan.pipeline.api import plan_pipeline
    from solver_plan.planners import get_planner
    from solver_plan.planning import parse_planner_options
    from solver_plan.errors import check_positive
    check_positive(args.time_limit, "--time-limit")
    deadline = time_budget(args.time_limit, start=getattr(args, "started", None))  # the command's one clock
    options = parse_planner_options(args.option, get_planner(args.planner, "pipeline"))
    check_output_path(args.out, "--out")
    check_output_path(args.gantt, "--gantt", GANTT_SUFFIXES)
    problem = build_problem(args, deadline)
    result = plan_pipeline(problem, args.planner, args.schedule, planner_options=options, deadline=deadline,
                           max_layers=args.max_layers if args.planner == "madpipe" else None)
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
