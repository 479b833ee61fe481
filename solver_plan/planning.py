"""Front door of question 1 (per-operator configuration): a `PlanRequest` -> `PlanReport` (the plan,
its baselines and, when asked, its simulation), for the command line, the Python API and batch alike."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from solver_plan.cluster import Cluster
from solver_plan.cost.model import CostModel
from solver_plan.cost.precision import resolve_precision
from solver_plan.deadline import CUT_SHORT_NOTE, Deadline, time_budget
from solver_plan.errors import InputError, check_positive
from solver_plan.graph.ir import Graph
from solver_plan.intra.build import DEFAULT_MAX_CANDIDATES, BuildStopped, build_config_problem
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.solve import checked, solve
from solver_plan.keyvalues import parse_option_pairs, parse_option_value  # noqa: F401 (parse_option_value: re-exported)
from solver_plan.plan import Plan, decode_plan
from solver_plan.requests import BASELINES, UNLIMITED, PlanRequest
from solver_plan.result import ConfigResult, Status

DEVICE_MEMORY = "device"  # prepare_problem's memory limit = the cluster's device memory (the default)


@dataclass(frozen=True)
class Baseline:
    """A baseline planner's answer on the plan's problem, in the plan's own measure."""
    planner: str
    objective_s: float | None
    status: str  # the baseline's Status value (what to show when it has no objective)


@dataclass(frozen=True)
class PlanReport:
    """Everything `solver-plan plan` shows: the plan and the inputs it was priced with, the
    baselines (`baselines_note` says why there are none when they were asked for but skipped),
    and the simulation of its task graph when the request asked for one."""
    request: PlanRequest
    plan: Plan
    graph: Graph
    cluster: Cluster
    problem: ConfigProblem
    cost_model: CostModel
    result: ConfigResult
    baselines: tuple[Baseline, ...] = ()
    baselines_note: str | None = None
    simulation: object | None = None  # simulate.timeline's Simulation


def answer_plan(request: PlanRequest, deadline: Deadline | None = None, *, progress: bool = False,
                on_problem: Callable[[Graph, Cluster, ConfigProblem, CostModel, float], None] | None = None
                ) -> PlanReport:
    """Answer question 1. `deadline`: a caller's clock (a command's, started when it began); the
    request's time limit counts from now within it. `progress`: a line every ~2 s on stderr while
    the planner runs; `on_problem(graph, cluster, problem, cost_model, build_s)` is called once the
    problem is built (the command line describes it there)."""
    import time

    from solver_plan.intra.progress import Progress
    info = request_planner(request)
    deadline = time_budget(request.time_limit, within=deadline)
    started = time.perf_counter()
    graph, cluster = resolve_inputs(request)
    memory_limit = {None: DEVICE_MEMORY, UNLIMITED: None}.get(request.memory_limit, request.memory_limit)
    try:
        problem, cost_model = prepare_problem(graph, cluster, memory_limit, request.max_candidates, deadline,
                                              precision=request.precision, all_devices=request.all_devices,
                                              runtime=request.runtime)
    except BuildStopped as stopped:  # the wall clock passed during the build: its one plan, or none
        return _one_plan_report(request, graph, cluster, stopped.problem, time.perf_counter() - started)
    if on_problem is not None:
        on_problem(graph, cluster, problem, cost_model, time.perf_counter() - started)
    with Progress(request.planner, enabled=progress):
        result = solve(problem, request.planner, seed=request.seed, deadline=solve_deadline(deadline, problem),
                       **request.option_dict())
    plan = decode_plan(graph, cluster, problem, result, cost_model)
    report = PlanReport(request, plan, graph, cluster, problem, cost_model, result)
    if request.simulate and result.assignment is not None:
        from solver_plan.simulate import simulate_strategy
        strategy = {problem.names[i]: problem.candidates[i][c] for i, c in enumerate(result.assignment)}
        report = replace(report, simulation=simulate_strategy(graph, cluster, strategy, cost_model))
    if request.baselines:
        report = _with_baselines(report, info, deadline)
    return report


def _one_plan_report(request: PlanRequest, graph: Graph, cluster: Cluster, problem: ConfigProblem,
                     runtime_s: float) -> PlanReport:
    """The answer when the deadline passed during the build (`build.one_candidate_problem`): its only
    plan, TIME_LIMIT and cut short, objective the sum of its costs, validated as every plan is; without
    a plan where it does not fit the memory limit, saying by how much."""
    plan = (0,) * problem.num_nodes
    cost_model = problem.context[2]
    if problem.memory_ok(plan):
        result = ConfigResult(request.planner, Status.TIME_LIMIT, objective=problem.objective(plan),
                              runtime_s=runtime_s, assignment=plan, notes=(*problem.notes, CUT_SHORT_NOTE))
    else:
        need = float(problem.device_memory(plan).max())
        result = ConfigResult(request.planner, Status.TIME_LIMIT, runtime_s=runtime_s, notes=(
            *problem.notes, f"no plan: that one needs {need / 1e9:.2f} GB on its busiest device, over the limit",
            CUT_SHORT_NOTE))
    result = checked(problem, result)
    return PlanReport(request, decode_plan(graph, cluster, problem, result, cost_model), graph, cluster, problem,
                      cost_model, result)


def request_planner(request: PlanRequest):
    """The request's planner (kind "config") with its options checked: an unknown name or option
    fails before any work."""
    from solver_plan.planners import get_planner
    info = get_planner(request.planner, "config", "planner")
    info.check_options(request.option_dict(), "options")
    return info


def resolve_inputs(request) -> tuple[Graph, Cluster]:
    """The request's model and cluster as objects (specs are resolved, objects taken as they are)."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.graph.resolve import resolve_model
    cluster = request.cluster
    if isinstance(cluster, Cluster):
        cluster = cluster if request.devices is None else cluster.first_devices(request.devices)
    else:
        cluster = resolve_cluster(cluster, request.devices)
    graph = request.model if isinstance(request.model, Graph) else resolve_model(request.model)
    return graph, cluster


def _with_baselines(report: PlanReport, info, deadline: Deadline | None) -> PlanReport:
    """The BASELINES other than the plan's own planner (no single-device plan exists with
    all_devices), solved on the plan's problem and measured as the plan is."""
    names = [name for name in BASELINES if name != report.request.planner
             and not (name == "single-device" and report.request.all_devices)]
    if not names or not report.plan.objective_s:  # no ratio against a zero or missing objective
        return report
    if deadline is not None and deadline.expired():
        return replace(report, baselines_note="skipped (time limit reached)")
    found = []
    for name in names:
        other = solve(report.problem, name, deadline=deadline)
        value = other.objective
        if value is not None and info.objective == "load":
            from solver_plan.intra.load_objective import load_objective
            value = load_objective(report.problem, other.assignment)  # the plan's own measure
        found.append(Baseline(name, value, other.status.value))
    return replace(report, baselines=tuple(found))


def plan_configuration(graph: Graph, cluster: Cluster, planner: str = "milp", *,
                       time_limit: float | None = None, memory_limit: float | str | None = DEVICE_MEMORY,
                       seed: int = 0, max_candidates: int = DEFAULT_MAX_CANDIDATES,
                       deadline: Deadline | None = None, precision: str | None = None,
                       all_devices: bool = False, **options) -> Plan:
    """`answer_plan` for built objects, as the lower layers call it: memory_limit in bytes per
    device, DEVICE_MEMORY, or None (unlimited: the prepare_problem convention). `time_limit`
    (seconds from now) or a caller's `deadline` covers building the problem too."""
    check_positive(time_limit, "--time-limit")
    memory = {DEVICE_MEMORY: None, None: UNLIMITED}.get(memory_limit, memory_limit) \
        if memory_limit is None or isinstance(memory_limit, str) else memory_limit
    request = PlanRequest(graph, cluster, planner, time_limit=time_limit, memory_limit=memory,
                          precision=precision or "auto", max_candidates=max_candidates,
                          all_devices=all_devices, seed=seed, options=options)
    return answer_plan(request, deadline).plan


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
                    all_devices: bool = False, memory_format: str = "nhwc",
                    runtime: str | None = None) -> tuple[ConfigProblem, CostModel]:
    """`precision`: fp32, tf32, bf16, fp16, fp8 or auto/None (the device's default, `default_for`;
    fp32 for profiles with measured times: `resolve_precision`); `memory_format`: nhwc (channels
    last, default) or nchw (`CostModel`); `runtime`: whose kernels price attention (None: the
    default, megatron-core);
    `all_devices`: every operator on all devices (Alpa's setting)."""
    memory_limit = _memory_bytes(memory_limit, cluster)
    check_positive(memory_limit, "--memory-limit")
    if isinstance(max_candidates, bool) or not isinstance(max_candidates, int) or max_candidates < 2:
        raise InputError(f"must be an integer of at least 2, got {max_candidates}", "--max-candidates")
    cost_model = problem_cost_model(graph, cluster, precision, memory_format, runtime)
    return build_config_problem(graph, cluster, memory_limit, max_candidates, cost_model, deadline,
                                all_devices=all_devices), cost_model


def _memory_bytes(memory_limit, cluster: Cluster):
    """`prepare_problem`'s memory limit in bytes per device (DEVICE_MEMORY: the cluster's device's)."""
    return cluster.device.memory if memory_limit == DEVICE_MEMORY else memory_limit


def problem_cost_model(graph: Graph, cluster: Cluster, precision: str | None = None, memory_format: str = "nhwc",
                       runtime: str | None = None) -> CostModel:
    """The cost model a problem on `graph` and `cluster` is priced with (`prepare_problem`'s arguments)."""
    return CostModel(cluster, precision=resolve_precision(precision, cluster.device, graph),
                     memory_format=memory_format, runtime=runtime)


def parse_planner_options(pairs, info, where: str = "--option") -> dict:
    """`--option KEY=VALUE` (repeatable) -> options, checked against the planner's declared options
    exactly as job files are (a misspelt key is refused, naming the planner's options)."""
    options = parse_option_pairs(pairs, where)
    info.check_options(options, where)
    return options
