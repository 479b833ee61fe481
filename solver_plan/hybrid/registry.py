"""The hybrid planners in the registry (kind "hybrid") and the batch runner of `kind: hybrid` jobs.

Registry signature: plan(model, cluster, global_batch, *, devices=None, time_limit=None,
memory_limit="device", fix=None, compute_scale=1.0, precision=None) -> HybridResult. Job files give the
global batch as the option `batch` (and optionally `fix`, a mapping or "k=v,..." string,
`compute_scale`, and `runtime`, a runtime profile name: megatron-core, megatron-2021, deepspeed,
torchtitan, nemo); a job's `precision:` reaches the planner as the option `precision`
(`batch.kinds.hybrid_precision`).
"""
from __future__ import annotations

from typing import Any

from solver_plan.errors import InputError
from solver_plan.hybrid import baselines
from solver_plan.hybrid.search import plan_hybrid
from solver_plan.planners import get_planner, register

OPTIONS = ("batch", "fix", "compute_scale", "runtime")


def _check_values(options: dict) -> None:
    """A job's `runtime` option names a runtime profile (solver_plan/runtime), checked when the jobs load."""
    if "runtime" in options:
        from solver_plan.runtime import resolve_runtime
        resolve_runtime(options["runtime"], "runtime")


register("hybrid", "hybrid", exact=True, options=OPTIONS, check_values=_check_values,
         description="data x tensor x pipeline search with tied per-operator block solves")(plan_hybrid)
register("data-parallel", "hybrid", options=OPTIONS, check_values=_check_values,
         description="baseline: pure data parallel, ZeRO stage as needed")(baselines.data_parallel)
register("megatron-rule", "hybrid", options=OPTIONS, check_values=_check_values,
         description="baseline: tp = GPUs per node, smallest pipeline that fits")(baselines.megatron_rule)


def run_job(job) -> tuple[Any, dict]:
    """(result, outcome fields) of a batch job of kind hybrid."""
    from solver_plan.hybrid.space import parse_fix

    options = dict(job.options)
    batch = options.pop("batch", None)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"hybrid jobs need the option 'batch' (global batch, a positive integer), got {batch!r}",
                         "options.batch")
    fix = options.pop("fix", None)
    if isinstance(fix, str):
        fix = parse_fix(fix)
    info = get_planner(job.planner, "hybrid")
    result = info.func(job.model, job.cluster, batch, devices=job.devices, time_limit=job.time_limit,
                       memory_limit="device" if job.memory_limit is None else job.memory_limit, fix=fix, **options)
    return result, {"status": result.status, "objective_s": result.step_time_s,
                    "lower_bound_s": result.lower_bound_s, "runtime_s": result.runtime_s, "plan": result.to_dict(),
                    "notes": result.notes, "solver_failure": getattr(result, "solver_failure", None)}
