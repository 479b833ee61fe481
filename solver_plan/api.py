"""The Python API: one function per question, taking models and clusters as objects or as the
strings the command line takes. Re-exported lazily by `solver_plan` (importing the package stays
cheap and never loads a solver). Documented with a runnable example in docs/api.md.

    from solver_plan.api import load_model, load_cluster, plan, pipeline, hybrid, export_plan, Status
    graph = load_model("data/hf-configs/gpt2.json", batch=8, seq=512)
    result = plan(graph, "v100x8-nvlink", time_limit=30)
    result.status is Status.OPTIMAL, result.objective_s, result.to_dict()
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Union, overload

from solver_plan.errors import InputError
from solver_plan.requests import (DEFAULT_CLUSTER, DEFAULT_GLOBAL_BATCH,
                                  DEFAULT_MAX_CANDIDATES, DEFAULT_PIPELINE_DEVICES, DEFAULT_PIPELINE_PLANNER,
                                  DEFAULT_PLANNER, DEFAULT_PRECISION, DEFAULT_SCHEDULE, DEFAULT_TIME_LIMIT_S,
                                  UNLIMITED, PipelineRequest, PlanRequest)
from solver_plan.hybrid.request import HybridRequest

if TYPE_CHECKING:
    from solver_plan.cluster import Cluster
    from solver_plan.deadline import Deadline
    from solver_plan.graph.ir import Graph
    from solver_plan.hybrid.answer import HybridReport
    from solver_plan.hybrid.moe_plan import MoEResult
    from solver_plan.hybrid.search import HybridResult
    from solver_plan.pipeline.answer import PipelineReport
    from solver_plan.pipeline.api import PipelineResult
    from solver_plan.plan import Plan
    from solver_plan.planning import PlanReport

# Status comes from the module __getattr__ below (loaded on first use)
__all__ = ["load_model", "load_cluster", "plan", "pipeline", "hybrid", "answer", "export_plan", "Plan", "Status",  # noqa: F822
           "InputError", "Graph", "Cluster", "PipelineResult", "HybridResult", "MoEResult", "PlanRequest",
           "PipelineRequest", "HybridRequest", "PlanReport", "PipelineReport", "HybridReport", "UNLIMITED"]

# Types loaded on first use (PEP 562): importing this module must not import the planners.
_LAZY_TYPES = {"Plan": "solver_plan.plan", "Status": "solver_plan.result", "Graph": "solver_plan.graph.ir",
               "Cluster": "solver_plan.cluster", "PipelineResult": "solver_plan.pipeline.api",
               "HybridResult": "solver_plan.hybrid.search", "MoEResult": "solver_plan.hybrid.moe_plan",
               "PlanReport": "solver_plan.planning", "PipelineReport": "solver_plan.pipeline.answer",
               "HybridReport": "solver_plan.hybrid.answer"}


def __getattr__(name: str):
    if name in _LAZY_TYPES:
        import importlib
        return getattr(importlib.import_module(_LAZY_TYPES[name]), name)
    raise AttributeError(f"module 'solver_plan.api' has no attribute {name!r}")


def _renamed(options: dict, old: str, new: str, value: Any, default: Any, function: str) -> Any:
    """An old keyword name (`processors`, `memory`, ...) still works, with a DeprecationWarning."""
    if old not in options:
        return value
    given = options.pop(old)
    warnings.warn(f"{function}(): '{old}' is deprecated; use '{new}'", DeprecationWarning, stacklevel=3)
    if value is not default and value != given:
        raise InputError(f"give '{new}' only (not also its old name '{old}')", new)
    return given


def load_model(spec: Any, **options) -> Graph:
    """A `Graph` from a zoo spec ("gpt2", "resnet50:batch=8"), a PipeDream graph.txt, an ONNX file,
    a Hugging Face config.json ("hf:" prefix optional), or a graph file; keyword `options` are
    appended as `:key=value,...` (zoo options, or batch/seq/... of a model file). A `Graph` is
    returned as it is."""
    from solver_plan.graph.ir import Graph
    from solver_plan.graph.resolve import resolve_model
    if isinstance(spec, Graph):
        if options:
            raise InputError("options apply to specs and files, not to a built Graph", "load_model")
        return spec
    spec = str(spec)
    if options:
        tail = ",".join(f"{k}={v}" for k, v in options.items())
        spec = f"{spec},{tail}" if ":" in spec and "=" in spec.rsplit(":", 1)[1] else f"{spec}:{tail}"
    return resolve_model(spec)


def load_cluster(spec: Any = DEFAULT_CLUSTER, devices: int | None = None) -> Cluster:
    """A `Cluster` from a preset name or a cluster YAML file (its first `devices` devices)."""
    from solver_plan.cluster import Cluster, resolve_cluster
    if isinstance(spec, Cluster):
        return spec if devices is None else spec.first_devices(devices)
    return resolve_cluster(str(spec), devices)


def plan(model: Any, cluster: Any = DEFAULT_CLUSTER, planner: str = DEFAULT_PLANNER, *, devices: int | None = None,
         time_limit: float | None = DEFAULT_TIME_LIMIT_S, memory_limit: float | str | None = None, seed: int = 0,
         precision: str = DEFAULT_PRECISION, max_candidates: int = DEFAULT_MAX_CANDIDATES, all_devices: bool = False,
         deadline: Deadline | None = None, **options) -> Plan:
    """Question 1: the per-operator parallel configuration. Returns a `Plan` (status, objective_s,
    lower_bound_s, gap, runtime_s, operators, edges; `to_dict()` is the CLI's --out JSON).
    `memory_limit`: None (the device's memory), `UNLIMITED`, bytes or "16GB"; `time_limit` (s,
    None for none) counts from the call, within `deadline` when one is given; other keywords are
    the planner's options. Baselines and the simulation: `answer(PlanRequest(..., baselines=True))`."""
    request = PlanRequest(load_model(model), cluster if _is_cluster(cluster) else str(cluster), planner,
                          devices=devices, time_limit=time_limit, memory_limit=memory_limit, precision=precision,
                          max_candidates=max_candidates, all_devices=all_devices, seed=seed, options=options)
    return answer(request, deadline).plan


def pipeline(model: Any, cluster: Any = DEFAULT_CLUSTER, devices: int = DEFAULT_PIPELINE_DEVICES,
             planner: str = DEFAULT_PIPELINE_PLANNER, schedule: str = DEFAULT_SCHEDULE, *,
             time_limit: float | None = DEFAULT_TIME_LIMIT_S, memory_limit: float | str | None = None,
             bandwidth: float | None = None, max_layers: int | None = None, precision: str | None = DEFAULT_PRECISION,
             optimizer: str = "adam", seed: int = 0, deadline: Deadline | None = None, **options) -> PipelineResult:
    """Pipeline stages and a periodic schedule on the first `devices` devices. `model` is any MODEL
    string (including a pipeline-blocks JSON) or a `Graph`. `precision` and `optimizer` as the
    command's `--precision` and `--optimizer` (stage memory keeps that optimizer's state);
    `memory_limit` per device (None: the device's memory). Other keywords are the allocation
    planner's options. Returns a `PipelineResult` (status, period_s, lower_bound_s, `to_dict()`).
    Old names: `processors` (devices), `memory` (memory_limit)."""
    devices = _renamed(options, "processors", "devices", devices, DEFAULT_PIPELINE_DEVICES, "pipeline")
    memory_limit = _renamed(options, "memory", "memory_limit", memory_limit, None, "pipeline")
    from solver_plan.graph.ir import Graph
    request = PipelineRequest(model if isinstance(model, Graph) else str(model), load_cluster(cluster), devices,
                              planner, schedule, time_limit=time_limit, memory_limit=memory_limit,
                              bandwidth=bandwidth, max_layers=max_layers, precision=precision or DEFAULT_PRECISION,
                              optimizer=optimizer, seed=seed, options=options)
    return answer(request, deadline).result


def hybrid(model: Any, cluster: Any = DEFAULT_CLUSTER, global_batch: int = DEFAULT_GLOBAL_BATCH, *,
           devices: int | None = None, time_limit: float | None = DEFAULT_TIME_LIMIT_S,
           memory_limit: float | str | None = None, precision: str | None = DEFAULT_PRECISION,
           deadline: Deadline | None = None, **options) -> Union[HybridResult, MoEResult]:
    """Data x tensor x pipeline parallelism with micro-batches, recomputation and ZeRO (and expert
    parallelism for a mixture-of-experts config.json). `model` is a GPT-style zoo spec or a decoder
    config.json. `precision`: fp32, tf32, bf16, fp16, fp8 or auto (the device's default). Other
    keywords are `HybridRequest` fields: block_solver, fix, runtime, compute_scale, routing,
    a2a_overlap, planner (hybrid, data-parallel, megatron-rule, what-if). Returns a `HybridResult` (status,
    step_time_s, lower_bound_s, `to_dict()`, which `export_plan` turns into runtime configs), or a
    `MoEResult` for a mixture of experts. Old name: `planner` for the block solver when it names
    a per-operator planner."""
    from solver_plan.planners import planners
    if "planner" in options and options["planner"] not in planners("hybrid"):  # else the old block-solver name
        options["block_solver"] = _renamed(options, "planner", "block_solver", options.get("block_solver"),
                                           None, "hybrid")
    try:
        request = HybridRequest(model, cluster if _is_cluster(cluster) else str(cluster), global_batch,
                                devices=devices, time_limit=time_limit, memory_limit=memory_limit,
                                precision=precision or DEFAULT_PRECISION, **options)
    except TypeError as exc:  # an unknown keyword: name it as bad input does
        raise InputError(str(exc).split("() ")[-1], "hybrid") from None
    return answer(request, deadline).result


@overload
def answer(request: PlanRequest, deadline: Deadline | None = None) -> PlanReport: ...
@overload
def answer(request: PipelineRequest, deadline: Deadline | None = None) -> PipelineReport: ...
@overload
def answer(request: HybridRequest, deadline: Deadline | None = None) -> HybridReport: ...


def answer(request: PlanRequest | PipelineRequest | HybridRequest, deadline: Deadline | None = None
           ) -> PlanReport | PipelineReport | HybridReport:
    """Any question as a request, answered by the front door the command line uses: the report
    (for a `PlanRequest`, with the baselines and the simulation when the request asks for them).
    `deadline`: a caller's clock; the request's time limit counts from now within it."""
    if isinstance(request, PlanRequest):
        from solver_plan.planning import answer_plan
        return answer_plan(request, deadline)
    if isinstance(request, PipelineRequest):
        from solver_plan.pipeline.answer import answer_pipeline
        return answer_pipeline(request, deadline)
    if isinstance(request, HybridRequest):
        try:
            from solver_plan.hybrid.answer import answer_hybrid
        except ImportError as exc:
            raise InputError(f"the hybrid planner is not available in this installation ({exc})", "hybrid") from None
        return answer_hybrid(request, deadline)
    raise InputError(f"expected a PlanRequest, PipelineRequest or HybridRequest, got {type(request).__name__}",
                     "answer")


def _is_cluster(value: Any) -> bool:
    from solver_plan.cluster import Cluster
    return isinstance(value, Cluster)


def export_plan(plan_dict: dict, target: str, graph=None) -> str:
    """A plan's JSON dict as a runtime's configuration: "megatron", "deepspeed", "torchtitan"
    (hybrid plans) or "dtensor" (per-operator plans; needs the plan's `graph` for tensor axes)."""
    from solver_plan.export import export_plan as _export
    return _export(plan_dict, target, graph=graph)
