"""What a worker runs for each kind of job: the job as a request (`job_request`), answered by the
same front door the command line and the Python API use; the answer is a plain, JSON-ready
outcome dict.

Outcome keys: status (a `Status` value), objective_s, lower_bound_s, gap, runtime_s (the planner's
own), plan (the plan's JSON, or None), error (None, or one line saying why the job failed), killed
(the runner stopped it), detail (a traceback, for failures).
Planner packages are imported lazily, in the worker: a batch of config jobs never imports the
pipeline package.
"""
from __future__ import annotations

import math
from typing import Any, Callable

from solver_plan.batch.job import Job
from solver_plan.errors import InputError
from solver_plan.result import Status, relative_gap


def run_job(job: Job) -> dict[str, Any]:
    """The outcome of `job`, by its kind's runner."""
    return RUNNERS[job.kind](job)


def job_request(job: Job):
    """The request a job asks: `PlanRequest` (config), `PipelineRequest` or `HybridRequest`. Job
    fields left unset (None) take the requests' defaults."""
    from solver_plan.requests import DEFAULT_OPTIMIZER, DEFAULT_PRECISION, DEFAULT_SCHEDULE
    precision = job.precision or DEFAULT_PRECISION
    if job.kind == "config":
        from solver_plan.requests import DEFAULT_MAX_CANDIDATES, PlanRequest
        return PlanRequest(job.model, job.cluster, job.planner, devices=job.devices, time_limit=job.time_limit,
                           memory_limit=job.memory_limit, precision=precision,
                           max_candidates=job.max_candidates or DEFAULT_MAX_CANDIDATES,
                           all_devices=job.all_devices, seed=job.seed, options=job.options)
    if job.kind == "pipeline":
        from solver_plan.cluster import resolve_cluster
        from solver_plan.requests import PipelineRequest
        return PipelineRequest(job.model, resolve_cluster(job.cluster, job.processors), job.processors,
                               job.planner, job.schedule or DEFAULT_SCHEDULE, time_limit=job.time_limit,
                               memory_limit=job.memory_limit, precision=precision,
                               optimizer=job.optimizer or DEFAULT_OPTIMIZER, seed=job.seed, options=job.options)
    from solver_plan.hybrid.request import HybridRequest
    from solver_plan.requests import DEFAULT_A2A_OVERLAP, DEFAULT_RUNTIME
    options = dict(job.options)
    batch = options.get("batch")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"hybrid jobs need the option 'batch' (global batch, a positive integer), got {batch!r}",
                         "options.batch")
    return HybridRequest(job.model, job.cluster, batch, job.planner, devices=job.devices, time_limit=job.time_limit,
                         memory_limit=job.memory_limit, precision=precision, fix=options.get("fix"),
                         runtime=options.get("runtime") or DEFAULT_RUNTIME,
                         compute_scale=options.get("compute_scale", 1.0), seed=job.seed,
                         routing=options.get("routing"),  # mixtures of experts (expert-parallel planner)
                         a2a_overlap=options.get("a2a_overlap") or DEFAULT_A2A_OVERLAP)


def run_config_job(job: Job) -> dict[str, Any]:
    """The outcome of a per-operator job: `answer_plan` on the job's request, or a generated problem of
    `solver_plan.suite` answered directly."""
    from solver_plan.suite import is_problem_spec
    if is_problem_spec(job.model):  # a generated problem (solver_plan.suite): no graph, no cluster
        from solver_plan.suite.run import answer_problem
        a = answer_problem(job.model, job.planner, seed=job.seed, time_limit=job.time_limit,
                           options=dict(job.options))
        return outcome(a.status, a.objective, a.lower_bound, a.runtime_s, a.plan,
                       error=planner_error(a.status, a.notes), solver_failure=a.solver_failure)
    from solver_plan.planning import answer_plan
    plan = answer_plan(job_request(job)).plan
    return outcome(plan.status, plan.objective_s, plan.lower_bound_s, plan.runtime_s, plan.to_dict(),
                   error=planner_error(plan.status, plan.notes), solver_failure=plan.solver_failure)


def run_pipeline_job(job: Job) -> dict[str, Any]:
    """The outcome of a pipeline job: `answer_pipeline` on the job's request."""
    from solver_plan.pipeline.answer import answer_pipeline
    result = answer_pipeline(job_request(job)).result
    plan = result.to_dict()
    return outcome(result.status, result.period_s, result.lower_bound_s, result.runtime_s, plan,
                   error=planner_error(result.status, plan.get("notes", ())))


def planner_error(status: Status, notes) -> str | None:
    """A planner that reports ERROR explains itself in its notes: they become the record's error."""
    if status != Status.ERROR:
        return None
    return "; ".join(notes) or "the planner reported an error without notes"


def hybrid_job(job: Job):
    """(result, outcome fields) of a batch job of kind hybrid."""
    from solver_plan.hybrid.answer import answer_hybrid
    result = answer_hybrid(job_request(job)).result
    return result, {"status": result.status, "objective_s": result.step_time_s,
                    "lower_bound_s": result.lower_bound_s, "runtime_s": result.runtime_s, "plan": result.to_dict(),
                    "notes": result.notes, "solver_failure": getattr(result, "solver_failure", None)}


def run_hybrid_job(job: Job) -> dict[str, Any]:
    """The outcome of a hybrid job: `answer_hybrid` on the job's request."""
    _, o = hybrid_job(job)
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
