"""Baselines a hybrid plan is compared with, as users plan by hand:
- data parallel: every device holds the whole model (tp = pp = 1); the search picks the ZeRO stage
  (ZeRO-3 where nothing less fits), recomputation and micro-batch;
- Megatron's rule of thumb (Narayanan et al. 2021, takeaways 1-2): tensor parallel = GPUs per node
  (the largest valid degree up to it), then the smallest pipeline depth that fits; the rest searched.
"""
from __future__ import annotations

import time

from solver_plan.deadline import DEFAULT_TIME_LIMIT_S, Deadline, time_budget
from solver_plan.hybrid.plan import HybridResult
from solver_plan.hybrid.search import _cluster, _spec, plan_hybrid, resolve_hybrid_precision
from solver_plan.hybrid.space import tp_degrees
from solver_plan.result import Status


def as_baseline(result: HybridResult, note: str) -> HybridResult:
    """A baseline's plan is optimal only in its own corner of the space: FEASIBLE, no bound (the
    corner's optimum bounds nothing for the whole problem, and reports would read it as a proof)."""
    from dataclasses import replace

    if result.status == Status.OPTIMAL:
        result = replace(result, status=Status.FEASIBLE, lower_bound_s=None)
    return replace(result, notes=result.notes + (note,))


def data_parallel(model, cluster, global_batch: int, *, devices: int | None = None,
                  time_limit: float | None = DEFAULT_TIME_LIMIT_S, memory_limit="device", fix=None,
                  deadline: Deadline | None = None, precision=None, **options) -> HybridResult:
    """Data-parallel baseline: the hybrid search with tp = pp = 1 pinned (micro-batches, recomputation and
    ZeRO still searched), marked as a baseline.
    """
    pins = {**(fix or {}), "tp": 1, "pp": 1}
    result = plan_hybrid(model, cluster, global_batch, devices=devices, time_limit=time_limit,
                         memory_limit=memory_limit, fix=pins, deadline=deadline, precision=precision, **options)
    return as_baseline(result, "data-parallel baseline: tp = pp = 1")


def megatron_rule(model, cluster, global_batch: int, *, devices: int | None = None,
                  time_limit: float | None = DEFAULT_TIME_LIMIT_S, memory_limit="device", fix=None,
                  deadline: Deadline | None = None, precision=None, **options) -> HybridResult:
    """Megatron's rule of thumb as a baseline: tp = the largest tensor-parallel degree within a node, then the
    smallest pipeline depth that divides the devices and fits; INFEASIBLE when no depth divides them.
    """
    start = time.perf_counter()
    deadline = deadline or time_budget(time_limit)
    spec, c = _spec(model), _cluster(cluster, devices)
    precision = resolve_hybrid_precision(precision, c)  # a bad one is refused before any solve
    tps = tp_degrees(spec, c.devices_per_node, c.num_devices)
    tp = max(tps) if tps else 1
    last = None
    for pp in range(1, min(spec.layers, c.num_devices // tp) + 1):
        if (c.num_devices // tp) % pp:
            continue
        pins = {**(fix or {}), "tp": tp, "pp": pp}
        last = plan_hybrid(spec, c, global_batch, memory_limit=memory_limit, fix=pins, deadline=deadline,
                           precision=precision, **options)
        if last.status.has_solution or deadline.expired():
            break
    if last is None:
        return HybridResult(Status.INFEASIBLE, None, None, time.perf_counter() - start,
                            notes=(f"no pipeline depth divides {c.num_devices // tp} stages of tp={tp}",))
    from dataclasses import replace
    return as_baseline(replace(last, runtime_s=time.perf_counter() - start),
                       f"Megatron rule: tp={tp} (devices per node), smallest pp that fits")
