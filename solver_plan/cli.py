"""Command line: `solver-plan models | clusters | check | plan | ...`.

Bad input never shows a traceback: `InputError` becomes one line on stderr and exit status 2.
Subcommands of other packages (pipeline, simulate, batch, compare) register themselves through a
`register_command(subparsers)` function in their package's `cli` module.
"""
from __future__ import annotations

import argparse
import os
import importlib
import importlib.util
import re
import sys
import time

from solver_plan.deadline import process_started
from solver_plan.errors import InputError, solver_failure_exit
from solver_plan.requests import DEFAULT_CLUSTER, DEFAULT_MAX_CANDIDATES, DEFAULT_MODEL, DEFAULT_PLANNER, DEFAULT_RUNTIME
from solver_plan.units import format_seconds

# command -> the package module that registers it; only the command asked for is imported (each
# package's __init__ imports its planners: all of them took ~0.1 s of every command's start-up)
PACKAGE_COMMANDS = {"pipeline": "solver_plan.pipeline.cli", "simulate": "solver_plan.simulate.cli",
                    "batch": "solver_plan.batch.cli", "hybrid": "solver_plan.hybrid.cli",
                    "export": "solver_plan.export.cli", "compare": "solver_plan.report.cli",
                    "calibrate": "solver_plan.calibrate.cli"}
BUILT_IN_COMMANDS = ("models", "clusters", "planners", "check", "plan")


def _cmd_models(args) -> int:
    from solver_plan.graph.zoo import model_description, model_names, model_options
    print(f"{'model':<16} description / options (MODEL is NAME or NAME:key=value,..., a PipeDream graph.txt, "
          "a model.onnx, a Hugging Face config.json or a graph file; see docs/api.md)")
    for name in model_names():
        options = ", ".join(f"{k}={v}" for k, v in model_options(name).items())
        print(f"{name:<16} {model_description(name)}\n{'':<16} options: {options}")
    from pathlib import Path

    from solver_plan.data import data_dir
    configs = [p for p in sorted((data_dir() / "hf-configs").glob("*.json")) if p.stem != "published"]
    if configs:  # bundled Hugging Face configs: usable as MODEL by path
        here = Path.cwd()
        shown = [str(p.relative_to(here)) if p.is_relative_to(here) else str(p) for p in configs]
        print("Hugging Face configs (options batch, seq, layers; target_seq for T5): " + ", ".join(shown))
    return 0


def _cmd_clusters(args) -> int:
    from solver_plan.cluster import preset_names, resolve_cluster
    for name in preset_names():
        print(resolve_cluster(name).describe())
    return 0


def _cmd_check(args) -> int:
    from solver_plan.cluster import LinkLevel, resolve_cluster
    cluster = resolve_cluster(args.cluster)
    print(f"ok: {cluster.describe()}")
    print(f"devices {cluster.num_devices}; w = {cluster.w:.3e} s/FLOP; "
          f"g intra-node = {cluster.g(LinkLevel.INTRA_NODE):.3e} s/B"
          + (f"; g inter-node = {cluster.g(LinkLevel.INTER_NODE):.3e} s/B" if cluster.nodes > 1 else ""))
    return 0


def _cmd_plan(args) -> int:
    from solver_plan import cli_options
    from solver_plan.cli_options import check_export_arguments, write_export
    from solver_plan.files import check_output_path, write_json_atomic
    from solver_plan.plan import render_plan
    from solver_plan.planning import answer_plan, request_planner
    from solver_plan.requests import PlanRequest

    request = cli_options.build(
        PlanRequest, args, model=args.model, cluster=args.cluster, planner=args.planner, devices=args.devices,
        time_limit=args.time_limit, memory_limit=args.memory_limit, precision=args.precision,
        runtime=args.runtime, max_candidates=args.max_candidates, all_devices=args.all_devices, seed=args.seed,
        options=cli_options.parse_options(args), baselines=True, simulate=args.simulate)
    cli_options.check(args, request, request_planner, request)  # an unknown name or option fails before any work
    check_output_path(args.out, "--out")
    check_export_arguments(args)  # --export-out checked before any work, like --out
    if args.rows < 1:
        raise InputError(f"must be at least 1, got {args.rows}", "--rows")
    loader = None
    if args.host_loader is not None:
        from solver_plan.cost.input_pipeline import parse_host_loader
        loader = parse_host_loader(args.host_loader)
    report = cli_options.check(args, request, answer_plan, request, _command_deadline(request, args),
                               progress=not args.quiet, on_problem=_describe_problem)
    plan, result = report.plan, report.result
    if args.out:  # before any printing: a closed pipe (`| head`) must not lose the plan
        write_json_atomic(args.out, plan.to_dict())
    print(render_plan(plan, max_rows=args.rows))
    step_s = plan.objective_s
    if report.simulation is not None:
        from solver_plan.simulate import format_simulation
        print(format_simulation(report.simulation))
        step_s = report.simulation.iteration_s
    if loader is not None and step_s:
        print(_host_loader_line(loader, report.graph, report.cluster, step_s,
                                default_rate="images_per_core" not in args.host_loader))
    if report.baselines_note:
        print(f"baselines: {report.baselines_note}")
    elif report.baselines:
        print(f"baselines ({plan.objective.label}): " + "; ".join(
            f"{b.planner} {format_seconds(b.objective_s)} ({b.objective_s / plan.objective_s:.2f}x)"
            if b.objective_s is not None else f"{b.planner} {b.status}" for b in report.baselines))
    if result.assignment is not None:
        write_export(args, plan.to_dict(), report.graph)
    if args.out:
        print(f"plan written to {args.out}")
    if result.solver_failure:  # the plan is a fallback: say so on stderr and exit distinctly
        return solver_failure_exit(result.solver_failure)
    return 0 if result.assignment is not None else 1  # a time-out without any plan is a failure too


def _command_deadline(request, args):
    """The command's one clock: the request's time limit, counted from when the command started."""
    from solver_plan.deadline import command_budget
    return command_budget(request.time_limit, getattr(args, "started", None))


def _describe_problem(graph, cluster, problem, cost_model, build_s: float) -> None:
    print(f"{graph.name}: {len(graph)} operators, {graph.total_params / 1e6:.1f}M parameters; "
          f"{cluster.describe()}; precision {cost_model.precision.name}; "
          f"problem built in {build_s:.2f} s "
          f"({problem.num_candidates} candidates, {len(problem.edges)} edges)", file=sys.stderr)


def _host_loader_line(loader, graph, cluster, step_s: float, default_rate: bool) -> str:
    """The host input-pipeline bound beside the plan's step (cost/input_pipeline.py)."""
    from solver_plan.cost.input_pipeline import image_batch
    batch = image_batch(graph)
    if batch is None:
        return "host loader: not applied (the model's first input is not an (N, C, H, W) image batch)"
    bound, per_node, nodes = loader.bound_for(cluster.num_devices, cluster.devices_per_node)
    if bound <= 0:
        return (f"host loader: no core left for workers ({loader.cpu_cores_per_node} cores, "
                f"{per_node} training processes per node)")
    loader_s = batch / bound
    verdict = (f"binding: the step waits for data, {format_seconds(loader_s)}" if loader_s > step_s
               else f"not binding (the plan needs {batch / step_s:,.0f} images/s)")
    rate = " (the build machine's EPYC core, not yours: pass images_per_core)" if default_rate else ""
    return (f"host loader: {bound:,.0f} images/s ({nodes} node(s) x {loader.busy_cores(per_node)} cores x "
            f"{loader.images_per_core_s:.0f}/s{rate}), a batch of {batch} in {format_seconds(loader_s)}; {verdict}")


def _add_plan_parser(subparsers) -> None:
    from solver_plan import cli_options as o
    p = subparsers.add_parser("plan", help="plan per-operator parallel configurations")
    o.add_model(p, default=DEFAULT_MODEL,
                help=f"zoo spec (e.g. mlp:layers=2,hidden=1024,batch=128), PipeDream graph.txt, model.onnx[:batch=N,...], "
                     f"Hugging Face config.json[:batch=N,seq=N] or graph file (default {DEFAULT_MODEL})")
    o.add_cluster(p, help=f"preset name or YAML file (default {DEFAULT_CLUSTER})")
    o.add_devices(p, help="plan on the first N devices only (default: all of the cluster)")
    o.add_precision(p, help="training precision: auto (mixed bf16 on A100/H100, mixed fp16 on V100, fp32 on "
                            "K80/P100), fp32/tf32, or mixed bf16/fp16/fp8 (default auto)")
    o.add(p, "--runtime", default=DEFAULT_RUNTIME,
          help="software stack whose attention kernels are priced (fused or not, kernel family, causal skipping; "
               "solver_plan/runtime/profiles.py); default megatron-core")
    o.add(p, "--all-devices", action="store_true",
          help="every operator split or replicated over all devices (Alpa's setting)")
    o.add(p, "--planner", default=DEFAULT_PLANNER,
          help=f"planner name (default {DEFAULT_PLANNER}); see `solver-plan planners`")
    o.add_solve_arguments(p)
    o.add_memory_limit(p)
    o.add(p, "--max-candidates", type=int, default=DEFAULT_MAX_CANDIDATES,
          help=f"configurations per operator (default {DEFAULT_MAX_CANDIDATES})")
    p.add_argument("--rows", type=int, default=40, help="operators shown in the table (default 40)")
    p.add_argument("--out", default=None, help="write the plan as JSON")
    p.add_argument("--simulate", action="store_true", help="also simulate the plan's task graph (overlap-aware step time)")
    p.add_argument("--host-loader", default=None, metavar="workers=N,cores=N[,images_per_core=X]",
                   help="image models: the CPU loader (workers per GPU, physical cores per node, images per "
                        "core-second; default rate: one EPYC core of the build machine, "
                        "data/measurements/input-pipeline-epyc-zen3.yaml) as a bound on the step "
                        "(cost/input_pipeline.py)")
    o.add_export_arguments(p, ("dtensor",))
    p.set_defaults(func=_cmd_plan)


def _cmd_planners(args) -> int:
    from solver_plan.planners import KINDS, planners
    for kind in KINDS:
        for name, info in planners(kind).items():
            print(f"{kind:<9} {name:<16} {'exact' if info.exact else 'heuristic':<9} {info.description}")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `solver-plan` argument parser: the built-in commands (models, clusters, planners, check, plan) and
    the commands each package in PACKAGE_COMMANDS registers, where installed; given the `command`
    about to run (a built-in or a package's), only that package's (its help and usage errors are
    its own; any other word, or none, lists every command).
    """
    parser = _Parser(prog="solver-plan", description="Plans for training deep networks on accelerator clusters.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    subparsers.add_parser("models", help="list zoo models and their options").set_defaults(func=_cmd_models)
    subparsers.add_parser("clusters", help="list cluster presets").set_defaults(func=_cmd_clusters)
    subparsers.add_parser("planners", help="list registered planners").set_defaults(func=_cmd_planners)
    check = subparsers.add_parser("check", help="validate a cluster YAML file")
    check.add_argument("cluster", help="YAML file or preset name")
    check.set_defaults(func=_cmd_check)
    _add_plan_parser(subparsers)
    if command in BUILT_IN_COMMANDS:
        wanted: tuple[str, ...] = ()
    elif command in PACKAGE_COMMANDS:
        wanted = (PACKAGE_COMMANDS[command],)
    else:
        wanted = tuple(PACKAGE_COMMANDS.values())
    for module_name in wanted:
        if importlib.util.find_spec(module_name) is not None:
            importlib.import_module(module_name).register_command(subparsers)
    return parser


class _Parser(argparse.ArgumentParser):
    """Usage errors on one line (like every other input error), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def _get_value(self, action, arg_string):
        # int() and float() read '４' (full-width) and other scripts' digits: a number option takes
        # ASCII only, as job files and model options do
        if action.type in (int, float) and isinstance(arg_string, str) and not arg_string.isascii():
            raise argparse.ArgumentError(action, f"expected an ASCII number, got {arg_string!r}")
        return super()._get_value(action, arg_string)


_NEGATIVE_VALUE = re.compile(r"-([0-9.]|inf|nan)", re.IGNORECASE)


def normalise_argv(argv: list[str]) -> list[str]:
    """`--memory -16GB` -> `--memory=-16GB`: argparse takes '-16GB' for an option and says only
    'expected one argument'; joined, the value reaches the option's own check, which names it."""
    out: list[str] = []
    for token in argv:
        if (out and _NEGATIVE_VALUE.match(token) and out[-1].startswith("--") and "=" not in out[-1]
                and out[-1] != "--"):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def decline_huge_pages() -> None:
    """Stop numpy advising transparent huge pages for this process and the solver workers it starts.

    numpy (1.20 and later, Linux) calls madvise(MADV_HUGEPAGE) on every array of 4 MiB or more. Where
    the kernel's THP defrag setting is `madvise` (the default of many distributions), each such
    allocation may compact memory synchronously on its first fault: `plan --model gpt3-175B --devices
    1024 --planner milp --time-limit 1` spent 0.37-0.39 s of system time in 2 of 3 runs (1.43-1.46 s
    wall) against 0.12-0.14 s (1.17-1.18 s) with the advice off, over the same answer, and the stalls
    fell in the middle of timed work (docs/time-limits.md, s34). A command's time limit is worth more
    than the few percent huge pages save on these arrays. The workers inherit the environment
    variable (numpy reads it when imported); this process, which has numpy loaded already, is told
    through numpy's own switch where it has one. A user's NUMPY_MADVISE_HUGEPAGE wins."""
    if os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0") != "0":
        return
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):  # numpy 2, numpy 1.x
        try:
            switch = getattr(importlib.import_module(module), "_set_madvise_hugepage", None)
        except ImportError:
            continue
        if switch is not None:
            switch(False)
            return


def main(argv: list[str] | None = None) -> int:
    """Run the command line on `argv` (default: sys.argv[1:]) and return the exit code (2: bad usage or
    input); after a command that did not fail on its input, print one note per deprecated spelling used.
    """
    # commands' deadlines count from here; run as the program, from the process's start (the
    # interpreter's start-up and the imports above are part of what the user waits for)
    started = time.perf_counter() if argv is not None else process_started()
    if argv is None:
        decline_huge_pages()
    tokens = normalise_argv(sys.argv[1:] if argv is None else list(argv))
    # the command is the first word (`solver-plan -h plan` is the top level's help: every command)
    parser = build_parser(tokens[0] if tokens and not tokens[0].startswith("-") else None)
    try:
        args = parser.parse_args(tokens)
    except SystemExit as exc:  # usage errors (2) and --help (0), already printed
        return exc.code if isinstance(exc.code, int) else 2
    args.started = started
    args.export_writer = _write_export  # cli_options.write_export: the exporters, handed down to the commands
    code = _run(args)
    if code != 2:  # deprecated spellings that worked: one note each (a refused command keeps its one line)
        from solver_plan.cli_options import deprecations
        for note in deprecations(args):
            print(f"solver-plan: note: {note}", file=sys.stderr)
    return code


def _write_export(args, plan_dict: dict, graph=None) -> None:
    """export/cli_support.write_export, imported only when a command writes an export."""
    from solver_plan.export.cli_support import write_export
    write_export(args, plan_dict, graph=graph)


def _run(args) -> int:
    try:
        return args.func(args)
    except InputError as exc:
        print(f"solver-plan: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("solver-plan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `solver-plan models | head`
        # Point stdout at /dev/null so the interpreter's final flush stays quiet (the pattern the
        # Python docs give for SIGPIPE), leaving stderr open for in-process callers.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (AttributeError, OSError, ValueError):  # stdout replaced by an object without a descriptor
            pass
        return 0
    except OSError as exc:  # a named path the system refuses (name too long, loop of links): one line
        print(f"solver-plan: error: {exc.filename or ''}{': ' if exc.filename else ''}{exc.strerror or exc}",
              file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
