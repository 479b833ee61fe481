"""The Python API: one function per question, taking models and clusters as objects or as the
strings the command line takes. Re-exported lazily by `solver_plan` (importing the package stays
cheap and never loads a solver). Documented with a runnable example in docs/api.md.

    from solver_plan.api import load_model, load_cluster, plan, pipeline, hybrid, export_plan, Status
    graph = load_model("data/hf-configs/gpt2.json", batch=8, seq=512)
    result = plan(graph, "v100x8-nvlink", time_limit=30)
    result.status is Status.OPTIMAL, result.objective_s, result.to_dict()
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solver_plan.errors import InputError

if TYPE_CHECKING:  # for the annotations only: at run time these load on first use (start-up time)
    from solver_plan.cluster import Cluster
    from solver_plan.graph.ir import Graph
    from solver_plan.pipeline.api import PipelineResult
    from solver_plan.plan import Plan

# Plan and Status come from the module __getattr__ below (loaded on first use)
__all__ = ["load_model", "load_cluster", "plan", "pipeline", "hybrid", "export_plan", "Plan", "Status",  # noqa: F822
           "InputError"]


def __getattr__(name: str):
    """`Plan` and `Status` on first use: importing this module must not import the planners."""
    if name == "Plan":
        from solver_plan.plan import Plan
        return Plan
    if name == "Status":
        from solver_plan.result import Status
        return Status
    raise AttributeError(f"module 'solver_plan.api' has no attribute {name!r}")


DEFAULT_CLUSTER = "v100x8-nvlink"


def load_model(spec: Any, **options) -> "Graph":
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


def load_cluster(spec: Any = DEFAULT_CLUSTER, devices: int | None = None) -> "Cluster":
    """A `Cluster` from a preset name or a cluster YAML file (its first `devices` devices)."""
    from solver_plan.cluster import Cluster, resolve_cluster
    if isinstance(spec, Cluster):
        return spec if devices is None else spec.first_devices(devices)
    return resolve_cluster(str(spec), devices)


def plan(model: Any, cluster: Any = DEFAULT_CLUSTER, planner: str = "milp", *, devices: int | None = None,
         time_limit: float | None = None, memory_limit: float | str | None = "device", seed: int = 0,
         **options) -> "Plan":
    """Question 1: the per-operator parallel configuration. Returns a `Plan` (status, objective_s,
    lower_bound_s, gap, runtime_s, operators, edges; `to_dict()` is the CLI's --out JSON)."""
    from solver_plan.planning import plan_configuration
    return plan_configuration(load_model(model), load_cluster(cluster, devices), planner, time_limit=time_limit,
                              memory_limit=memory_limit, seed=seed, **options)


def pipeline(model: Any, cluster: Any = DEFAULT_CLUSTER, processors: int = 4, planner: str = "madpipe",
             schedule: str = "exact", *, time_limit: float | None = 60.0, memory: float | None = None,
             bandwidth: float | None = None, max_layers: int | None = None, precision: str | None = None,
             optimizer: str = "adam") -> "PipelineResult":
    """Pipeline stages and a periodic schedule on `processors` devices. `model` is any MODEL string
    (including a pipeline-blocks JSON) or a `Graph`. `precision` and `optimizer` as the command's
    `--precision` (None: auto) and `--optimizer` (stage memory keeps that optimizer's state). Returns
    a `PipelineResult` (status, period_s, lower_bound_s, `to_dict()`)."""
    from solver_plan.graph.ir import Graph
    from solver_plan.pipeline.api import plan_pipeline
    from solver_plan.pipeline.sources import build_chain_problem
    problem = build_chain_problem(model if isinstance(model, Graph) else str(model), load_cluster(cluster),
                                  processors, memory=memory, bandwidth=bandwidth, planner=planner,
                                  max_layers=max_layers, precision=precision, optimizer=optimizer)
    return plan_pipeline(problem, planner, schedule, time_limit=time_limit)


def hybrid(model: Any, cluster: Any = DEFAULT_CLUSTER, global_batch: int = 8, *, devices: int | None = None,
           time_limit: float | None = 60.0, memory_limit: float | str | None = "device",
           precision: str | None = None, **options) -> Any:
    """Data x tensor x pipeline parallelism with micro-batches, recomputation and ZeRO
    (`solver_plan.hybrid.plan_hybrid`). `model` is a GPT-style zoo spec. `precision`: fp32, tf32,
    bf16, fp16, fp8 or auto/None (the device's default). Returns a `HybridResult` (status,
    step_time_s, lower_bound_s, `to_dict()`, which `export_plan` turns into runtime configs)."""
    try:
        from solver_plan.hybrid import plan_hybrid
    except ImportError as exc:
        raise InputError(f"the hybrid planner is not available in this installation ({exc})", "hybrid") from None
    return plan_hybrid(model, cluster, global_batch, devices=devices, time_limit=time_limit,
                       memory_limit=memory_limit, precision=precision, **options)


def export_plan(plan_dict: dict, target: str, graph=None) -> str:
    """A plan's JSON dict as a runtime's configuration: "megatron", "deepspeed", "torchtitan"
    (hybrid plans) or "dtensor" (per-operator plans; needs the plan's `graph` for tensor axes)."""
    from solver_plan.export import export_plan as _export
    return _export(plan_dict, target, graph=graph)
