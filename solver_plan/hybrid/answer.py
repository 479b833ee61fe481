"""Front door of the hybrid question: a `HybridRequest` -> `HybridReport`, for the command line, the
Python API and batch jobs alike. A mixture of experts goes to the expert-parallel planner
(moe_plan.py), with the plan's step time under routing loads it was not priced for; any other
transformer to the request's planner of kind "hybrid" (hybrid, data-parallel, megatron-rule, what-if), whose
block solves use the request's block solver."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Union

from solver_plan.deadline import CUT_SHORT_NOTE, Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.hybrid.request import HybridRequest
from solver_plan.requests import DEFAULT_HYBRID_PLANNER, UNLIMITED
from solver_plan.result import Status

if TYPE_CHECKING:
    from solver_plan.hybrid.moe_plan import MoEResult
    from solver_plan.hybrid.search import HybridResult

ROBUSTNESS_LOADS = ("uniform", "zipf:0.2", "zipf:0.5")  # zipf:0.2: hottest of 256 experts 2.4x the mean


@dataclass(frozen=True)
class HybridReport:
    """`robustness`: mixtures of experts only, (routing load, step time s) of the plan under loads
    other than the one it was priced for."""
    request: HybridRequest
    result: Union["HybridResult", "MoEResult"]
    robustness: tuple[tuple[str, float], ...] = ()


def hybrid_memory_limit(request: HybridRequest):
    """The request's memory limit as the hybrid planners take it ("device", None = unlimited, bytes)."""
    limit = request.memory_limit  # bytes or None once the request is validated
    if limit is None:
        return "device"
    return None if limit == UNLIMITED else limit


def answer_hybrid(request: HybridRequest, deadline: Deadline | None = None) -> HybridReport:
    """Plan `request`; its time limit counts from now within a caller's `deadline` (a command's)."""
    from solver_plan.runtime import resolve_runtime
    deadline = time_budget(request.time_limit, within=deadline)
    runtime = resolve_runtime(request.runtime, "runtime")
    report = _answer_moe(request, deadline, runtime) if request.is_moe else _answer_dense(request, deadline, runtime)
    if deadline.cut_short and report.result.status is not Status.OPTIMAL:  # the wall clock, not the work
        # budget, ended part of the search: say so (a proof stands whatever the clock; a plan so found is
        # the best at the limit, never FEASIBLE)
        result = report.result
        status = Status.TIME_LIMIT if result.status is Status.FEASIBLE else result.status
        report = replace(report, result=replace(result, status=status, notes=tuple(result.notes) + (CUT_SHORT_NOTE,)))
    return report


def _answer_dense(request: HybridRequest, deadline: Deadline, runtime) -> HybridReport:
    from solver_plan.planners import get_planner
    info = get_planner(request.planner, "hybrid", "planner")
    get_planner(request.block_solver, "config", "block_solver")
    result = info.func(request.model, request.cluster, request.global_batch, devices=request.devices,
                       time_limit=request.time_limit, memory_limit=hybrid_memory_limit(request),
                       fix=request.fix_dict() or None, deadline=deadline, precision=request.precision,
                       planner=request.block_solver, compute_scale=request.compute_scale, runtime=runtime)
    return HybridReport(request, result)


def _answer_moe(request: HybridRequest, deadline: Deadline | None, runtime) -> HybridReport:
    from solver_plan.hybrid.moe_plan import plan_moe, skew_robustness
    if request.planner == "what-if":
        raise InputError("a mixture of experts is planned by the expert-parallel planner only: pin every dimension "
                         "with --fix (dp, tp, pp, ep, micro_batch_size, ...) and it prices that configuration",
                         "--what-if")
    if request.planner != DEFAULT_HYBRID_PLANNER:
        raise InputError(f"a mixture of experts is planned by the expert-parallel planner only, not "
                         f"{request.planner!r}", "planner")
    # the request's budget itself: its nominal seconds decide the search (the same under load), its
    # clock (a command's counts from the process's start) only stops it
    result = plan_moe(request.model, request.cluster, request.global_batch, devices=request.devices,
                      fix=request.fix_dict(), routing=request.routing, a2a_overlap=request.a2a_overlap,
                      memory_limit=hybrid_memory_limit(request), precision=request.precision, runtime=runtime,
                      deadline=deadline)
    robustness: tuple[tuple[str, float], ...] = ()
    if result.plan is not None:
        loads = [load for load in ROBUSTNESS_LOADS if load != result.plan.routing]
        robustness = tuple(skew_robustness(request.model, request.cluster, request.global_batch, result.plan, loads,
                                           precision=request.precision, runtime=runtime))
    return HybridReport(request, result, robustness)
