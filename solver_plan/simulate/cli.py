"""`solver-plan simulate plan.json`: simulate a saved plan, print the summary, optionally write
a Chrome trace. Model and cluster default to those the plan names ("model", "cluster" keys)."""
from __future__ import annotations

import argparse
import re

from solver_plan.errors import InputError

_FIRST_DEVICES = re.compile(r"^(?P<name>.+?)(?:\[:(?P<a>\d+)\]|:(?P<b>\d+))$")


def resolve_plan_cluster(spec: str, devices: int | None):
    """A cluster spec as plans name it: "preset", "preset[:N]" or "preset:N" (the first N devices)."""
    from solver_plan.cluster import resolve_cluster
    match = _FIRST_DEVICES.match(spec)
    if match:
        return resolve_cluster(match["name"], devices or int(match["a"] or match["b"]))
    return resolve_cluster(spec, devices)


def run(args) -> int:
    """Run `solver-plan simulate PLAN` on parsed `args`: simulate the plan on its model and cluster,
    print the summary and write the Chrome trace if asked; the exit status."""
    from solver_plan.files import check_output_path
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.cost.model import CostModel
    from solver_plan.simulate.plan_file import load_plan_json, plan_precision, plan_runtime, read_plan_json
    from solver_plan.simulate.simulator import simulate_strategy
    from solver_plan.simulate.timeline import format_simulation
    from solver_plan.simulate.trace import write_chrome_trace

    args.plan = plan_path(args)
    if args.devices is not None and args.devices < 1:
        raise InputError(f"must be at least 1, got {args.devices}", "--devices")
    check_output_path(args.trace, "--trace")
    data = read_plan_json(args.plan)
    model = args.model or data.get("model")
    cluster_spec = args.cluster or data.get("cluster")
    if not isinstance(model, str) or not model:
        raise InputError("the plan names no model: give --model", args.plan)
    if not isinstance(cluster_spec, str) or not cluster_spec:
        raise InputError("the plan names no cluster: give --cluster", args.plan)
    graph = resolve_model(model)
    cluster = resolve_plan_cluster(cluster_spec, args.devices)
    strategy = load_plan_json(args.plan, graph, cluster)
    # priced as the plan was: its precision and runtime (older plans: the defaults `plan` used)
    cost_model = CostModel(cluster, precision=plan_precision(data, graph, cluster, args.plan),
                           runtime=plan_runtime(data, args.plan))
    sim = simulate_strategy(graph, cluster, strategy, cost_model)
    print(f"{graph.name} on {cluster.describe()}; precision {cost_model.precision.name}")
    print(format_simulation(sim, max_rows=args.rows))
    if args.trace:
        write_chrome_trace(sim, args.trace, f"{graph.name} on {cluster.name}")
        print(f"Chrome trace written to {args.trace} (open in chrome://tracing or ui.perfetto.dev)")
    return 0


def register_command(subparsers) -> None:
    """Add the `simulate` subcommand and its options to the command line's `subparsers`."""
    from solver_plan import cli_options as o
    p = subparsers.add_parser("simulate", help="simulate a saved plan (execution simulator, Chrome trace)")
    p.add_argument("plan", nargs="?", default=None, metavar="PLAN", help="plan JSON written by `solver-plan plan --out`")
    p.add_argument("--plan", dest="plan_option", action=o._Recorded, preferred="PLAN (positional)",
                   default=None, help=argparse.SUPPRESS)
    o.add_model(p, help="model spec (default: the plan's model)")
    o.add_cluster(p, default=None, help="preset[:N] or YAML file (default: the plan's cluster)")
    o.add_devices(p)
    p.add_argument("--trace", default=None, help="write a Chrome trace JSON here")
    p.add_argument("--rows", type=int, default=12, help="critical-path rows shown (default 12)")
    p.set_defaults(func=run)


def plan_path(args) -> str:
    """PLAN, given as the positional argument (or the deprecated --plan PLAN), once."""
    if args.plan is not None and args.plan_option is not None:
        raise InputError("give the plan once: as PLAN (--plan is its old spelling)", "--plan")
    path = args.plan if args.plan is not None else args.plan_option
    if path is None:
        raise InputError("required: the plan JSON to simulate", "PLAN")
    return path
