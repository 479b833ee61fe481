"""Front door of question 1 (per-operator configuration): graph + cluster + planner -> `Plan`."""
from __future__ import annotations

from solver_plan.cluster import Cluster
from solver_plan.cost.model import CostModel
from solver_plan.cost.precision import resolve_precision
from solver_plan.deadline import Deadline
from solver_plan.errors import InputError, check_positive
from solver_plan.graph.ir import Graph
from solver_plan.intra.build import DEFAULT_MAX_CANDIDATES, build_config_problem
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.solve import solve
from solver_plan.plan import Plan, decode_plan

DEVICE_MEMORY = "device"  # memory limit = the cluster's device memory (the default)


def plan_configuration(graph: Graph, cluster: Cluster, planner: str = "milp", *,
                       deadline: Deadline | None = None, memory_limit: float | str | None = DEVICE_MEMORY,
                       seed: int = 0, max_candidates: int = DEFAULT_MAX_CANDIDATES,
                       precision: str | None = None, all_devices: bool = False, **options) -> Plan:
    """Plan with `planner`; memory_limit in bytes per device, DEVICE_MEMORY, or None (unlimited).
    The caller's `deadline` (`time_budget(seconds)`; None: no limit) covers building the problem too."""
    problem, cost_model = prepare_problem(graph, cluster, memory_limit, max_candidates, deadline,
                                          precision=precision, all_devices=all_devices)
    result = solve(problem, planner, seed=seed, deadline=solve_deadline(deadline, problem), **options)
    return decode_plan(graph, cluster, problem, result, cost_model)


FINISH_S_PER_NODE = 3e-4  # decoding, validating and printing a plan, measured ~0.25 s for 1,160 operators


def solve_deadline(deadline: Deadline | None, problem: ConfigProblem) -> Deadline | None:
    """The solver's part of a command's deadline: what is left minus the time the plan needs
    afterwards (decoding, validation, output), so the command, not just the solver, ends in time."""
    if deadline is None or deadline.remaining() is None:
        return deadline
    return deadline.ending_early(FINISH_S_PER_NODE * problem.num_nodes)


def prepare_problem(graph: Graph, cluster: Cluster, memory_limit: float | str | None = DEVICE_MEMORY,
                    max_candidates: int = DEFAULT_MAX_CANDIDATES,
                    deadline: Deadline | None = None, *, precision: str | None = None,
                    all_devices: bool = False, memory_format: str = "nhwc") -> tuple[ConfigProblem, CostModel]:
    """`precision`: fp32, tf32, bf16, fp16, fp8 or auto/None (the device's default, `default_for`;
    fp32 for profiles with measured times: `resolve_precision`); `memory_format`: nhwc (channels
    last, default) or nchw (`CostModel`);
    `all_devices`: every operator on all devices (Alpa's setting)."""
    if memory_limit == DEVICE_MEMORY:
        memory_limit = cluster.device.memory
    check_positive(memory_limit, "--memory-limit")
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, int) or max_candidates < 2:
        raise InputError(f"must be an integer of at least 2, got {max_candidates}", "--max-candidates")
    cost_model = CostModel(cluster, precision=resolve_precision(precision, cluster.device, graph),
                           memory_format=memory_format)
    return build_config_problem(graph, cluster, memory_limit, max_candidates, cost_model, deadline,
                                all_devices=all_devices), cost_model


def parse_option_value(text: str):
    """A command-line option value: int, float, bool (true/false/yes/no/on/off), None (none/null)
    or the string itself."""
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    if lowered in ("none", "null"):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def parse_planner_options(pairs, info, where: str = "--option") -> dict:
    """`--option KEY=VALUE` (repeatable) -> options, checked against the planner's declared options
    exactly as job files are (a misspelt key is refused, naming the planner's options)."""
    options: dict = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(f"expected KEY=VALUE, got {pair!r}", where)
        if key in options:
            raise InputError(f"option {key!r} given twice", where)
        options[key] = parse_option_value(value)
    info.check_options(options, where)
    return options
