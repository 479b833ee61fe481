"""What a worker runs for each kind of job; the answer is a plain, JSON-ready outcome dict.

Outcome keys: status (a `Status` value), objective_s, lower_bound_s, gap, runtime_s (the planner's
own), plan (the plan's JSON, or None), error (None, or one line saying why the job failed), killed
(the runner stopped it), detail (a traceback, for failures).
Planner packages are imported lazily, in the worker: a batch of config jobs never imports the
pipeline package, and the job file says plainly when a kind's front door is missing.
"""
from __future__ import annotations

import importlib
import math
from typing import Any, Callable

from solver_plan.batch.job import Job
from solver_plan.errors import InputError
from solver_plan.result import Status, relative_gap

# Where the pipeline front door lives (the package itself may re-export it later).
PIPELINE_FRONT_DOORS = ("solver_plan.pipeline", "solver_plan.pipeline.api")
PIPELINE_FUNCTION = "plan_pipeline"


def pipeline_front_door() -> Callable | None:
    for module_name in PIPELINE_FRONT_DOORS:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        function = getattr(module, PIPELINE_FUNCTION, None)
        if callable(function):
            return function
    return None


def check_kind_available(kind: str, where: str) -> None:
    if kind == "pipeline" and pipeline_front_door() is None:
        raise InputError(f"pipeline jobs need {PIPELINE_FUNCTION}() from the pipeline package "
                         f"({' or '.join(PIPELINE_FRONT_DOORS)}), which this installation lacks", where)


def run_job(job: Job) -> dict[str, Any]:
    return RUNNERS[job.kind](job)


def run_config_job(job: Job) -> dict[str, Any]:
    from solver_plan.suite import is_problem_spec
    if is_problem_spec(job.model):  # a generated problem (solver_plan.suite): no graph, no cluster
        from solver_plan.suite.run import run_problem_job
        return run_problem_job(job)
    from solver_plan.cluster import resolve_cluster
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.deadline import time_budget
    from solver_plan.planning import DEVICE_MEMORY, plan_configuration

    graph = resolve_model(job.model)
    cluster = resolve_cluster(job.cluster, job.devices)
    extra = {} if job.max_candidates is None else {"max_candidates": job.max_candidates}
    memory_limit = DEVICE_MEMORY if job.memory_limit is None else job.memory_limit  # as the CLI does
    plan = plan_configuration(graph, cluster, job.planner, deadline=time_budget(job.time_limit), memory_limit=memory_limit,
                              seed=job.seed, precision=job.precision, all_devices=job.all_devices, **extra,
                              **dict(job.options))
    return outcome(plan.status, plan.objective_s, plan.lower_bound_s, plan.runtime_s, plan.to_dict(),
                   error=planner_error(plan.status, plan.notes), solver_failure=plan.solver_failure)


def run_pipeline_job(job: Job) -> dict[str, Any]:
    front_door = pipeline_front_door()
    if front_door is None:
        raise InputError("the pipeline front door is missing", "kind")
    from solver_plan.deadline import time_budget
    deadline = time_budget(job.time_limit)  # building the chain counts against the limit too
    result = front_door(chain_problem(job, deadline), planner=job.planner, schedule=job.schedule or "exact",
                        deadline=deadline,
                        planner_options={"seed": job.seed, **dict(job.options)})
    plan = result.to_dict()
    return outcome(result.status, result.period_s, result.lower_bound_s, result.runtime_s, plan,
                   error=planner_error(result.status, plan.get("notes", ())))


def planner_error(status: Status, notes) -> str | None:
    """A planner that reports ERROR explains itself in its notes: they become the record's error."""
    if status != Status.ERROR:
        return None
    return "; ".join(notes) or "the planner reported an error without notes"


def chain_problem(job: Job, deadline=None):
    """The chain of `job.model` on the first `job.processors` devices of its cluster (see
    `build_chain_problem` for the defaults of memory and bandwidth)."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.pipeline.sources import build_chain_problem

    cluster = resolve_cluster(job.cluster, job.processors)
    return build_chain_problem(job.model, cluster, job.processors, memory=job.memory_limit, planner=job.planner,
                               precision=job.precision, deadline=deadline, optimizer=job.optimizer or "adam")


def hybrid_precision(job: Job, where: str = "precision") -> Job:
    """`job` as the hybrid planner takes it, with its precision (None: auto, nothing to do).

    A planner function with a `precision` parameter gets it as an option. The others price the
    device's default precision (`cost.precision.default_for`: mixed bf16 on A100/H100, mixed fp16 on
    V100, fp32 on K80/P100): a precision that resolves to the same is accepted, any other is refused
    with one line naming the key (the planner would silently plan something else)."""
    if job.precision is None:
        return job
    import inspect
    from dataclasses import replace

    from solver_plan.cluster import resolve_cluster
    from solver_plan.cost.precision import TrainingPrecision, default_for
    from solver_plan.planners import get_planner
    function = get_planner(job.planner, "hybrid").func
    device = resolve_cluster(job.cluster, job.devices).device
    asked, runs = TrainingPrecision.parse(job.precision, device, where), default_for(device)
    if "precision" in inspect.signature(function).parameters:
        if not device.supports(asked.compute):  # refused when the jobs load, not when one runs
            raise InputError(f"{device.name} has no {asked.compute.value} units; use precision: auto or "
                             f"{runs.compute.value}", where)
        return replace(job, options=tuple(sorted({**dict(job.options), "precision": job.precision}.items())))
    if asked != runs:
        raise InputError(f"the hybrid planner {job.planner!r} prices {device.name}'s default precision {runs.name} "
                         f"only, not {asked.name}; use precision: auto or {runs.compute.value}", where)
    return job


def run_hybrid_job(job: Job) -> dict[str, Any]:
    from solver_plan.hybrid.registry import run_job
    _, o = run_job(hybrid_precision(job))
    return outcome(o["status"], o["objective_s"], o["lower_bound_s"], o["runtime_s"], o["plan"],
                   error=planner_error(o["status"], o["notes"]), solver_failure=o.get("solver_failure"))


RUNNERS: dict[str, Callable[[Job], dict[str, Any]]] = {"config": run_config_job, "pipeline": run_pipeline_job,
                                                      "hybrid": run_hybrid_job}


def outcome(status: Status, objective: float | None, lower_bound: float | None, runtime_s: float | None,
            plan: dict | None, error: str | None = None, *, killed: bool = False,
            detail: str | None = None, solver_failure: str | None = None) -> dict[str, Any]:
    """`killed`: the runner stopped the job; `detail`: a traceback or other long explanation.
    `solver_failure`: the planner's solver failed and the plan is the fallback it was replaced
    with; the run counts as failed (status ERROR, no objective or bound credited to the planner),
    the fallback plan is kept in the record for inspection."""
    if solver_failure:
        status, objective, lower_bound = Status.ERROR, None, None
        error = f"solver failed: {solver_failure}"
    objective, lower_bound = finite_or_none(objective), finite_or_none(lower_bound)
    return {"status": Status(status).value, "objective_s": objective, "lower_bound_s": lower_bound,
            "gap": relative_gap(objective, lower_bound), "runtime_s": finite_or_none(runtime_s),
            "plan": plan, "error": error, "killed": killed, "detail": detail}


def finite_or_none(value: Any) -> float | None:
    """JSON has no infinities: an unknown or infinite number is stored as null."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
