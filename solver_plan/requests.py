"""What a user asks: one frozen, validated request type per question, and every default they carry.

The command line, the Python API (`solver_plan.api`) and batch jobs all build these and hand them
to the same front doors (`planning.answer_plan`, `pipeline.api.answer_pipeline`,
`hybrid.answer.answer_hybrid`), so a default or a check changes here and nowhere else.

Memory limits have one meaning everywhere: `memory_limit=None` is the device's memory (as the
planner of the question counts it: the hybrid planner keeps its runtime margin); `UNLIMITED`
(math.inf) asks for no limit at all. Strings as the command line writes them ("device", "none",
"unlimited", "16GB") are read by `memory_limit_value`.

Errors name the request's field (`memory_limit`, `devices`, ...); the command line renames them to
the option the user typed (`cli_requests.build`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from solver_plan.cost.enumerate import DEFAULT_MAX_CANDIDATES  # configurations per operator: owned by the enumeration
from solver_plan.deadline import DEFAULT_TIME_LIMIT_S, check_time_limit  # the budget's, defined with it
from solver_plan.errors import InputError

# Defaults of every question (the command line's help texts and the API's signatures read these).
DEFAULT_MODEL = "resnet50"
DEFAULT_CLUSTER = "v100x8-nvlink"
DEFAULT_PLANNER = "milp"  # per-operator planner of `plan`, and the block solver of `hybrid`
DEFAULT_BLOCK_SOLVER = DEFAULT_PLANNER
DEFAULT_PIPELINE_PLANNER = "madpipe"
DEFAULT_SCHEDULE = "exact"
DEFAULT_HYBRID_PLANNER = "hybrid"
DEFAULT_PRECISION = "auto"
PRECISIONS = ("auto", "fp32", "tf32", "bf16", "fp16", "fp8")
DEFAULT_OPTIMIZER = "adam"
OPTIMIZERS = ("adam", "sgd-momentum", "sgd", "pipedream")
DEFAULT_RUNTIME = "megatron-core"
DEFAULT_A2A_OVERLAP = "none"
A2A_OVERLAPS = ("none", "shared-expert", "full")
DEFAULT_PIPELINE_DEVICES = 4  # the API's `pipeline()` only; the command line asks for --devices
DEFAULT_GLOBAL_BATCH = 8  # the API's `hybrid()` only; the command line asks for --batch
BASELINES = ("data-parallel", "single-device")  # what a per-operator plan is compared with
UNLIMITED = math.inf  # memory_limit: no limit (None is the device's memory)
# Fields are typed as what a request accepts; __post_init__ stores one spelling: memory_limit bytes
# (float) or None, options a sorted tuple of (name, value) pairs.
Options = Mapping[str, Any] | tuple[tuple[str, Any], ...]

__all__ = ["DEFAULT_MODEL", "DEFAULT_CLUSTER", "DEFAULT_PLANNER", "DEFAULT_BLOCK_SOLVER", "DEFAULT_PIPELINE_PLANNER",
           "DEFAULT_SCHEDULE", "DEFAULT_HYBRID_PLANNER", "DEFAULT_PRECISION", "PRECISIONS", "DEFAULT_OPTIMIZER",
           "OPTIMIZERS", "DEFAULT_RUNTIME", "DEFAULT_TIME_LIMIT_S", "DEFAULT_MAX_CANDIDATES", "UNLIMITED",
           "PlanRequest", "PipelineRequest", "RequestFields", "memory_limit_value"]


def memory_limit_value(value: Any, where: str = "memory_limit") -> float | None:
    """A memory limit as requests hold it: None (the device's memory), UNLIMITED, or positive bytes.
    Accepts the command line's words ("device", "none", "unlimited") and sizes ("16GB")."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "device":
            return None
        if text in ("none", "unlimited"):
            return UNLIMITED
        from solver_plan.units import parse_bytes
        return parse_bytes(value, where)
    if value is None or value == UNLIMITED:
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"must be positive bytes, 'device' (None) or 'unlimited', got {value!r}", where)
    return float(value)


def _count(value: Any, where: str, *, optional: bool = True, least: int = 1) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        kind = {0: "a non-negative integer", 1: "a positive integer"}.get(least, f"an integer of at least {least}")
        raise InputError(f"must be {kind}, got {value!r}", where)


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in choices:
        raise InputError(f"expected one of {', '.join(choices)}, got {value!r}", where)
    return text


def _name(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"expected a name, got {value!r}", where)


def _runtime(value: Any, where: str = "runtime") -> None:
    """A runtime's name that `runtime.resolve_runtime` knows (InputError naming the known ones)."""
    from solver_plan.runtime import resolve_runtime

    _name(value, where)
    resolve_runtime(value, where)


def _spec(value: Any, where: str, types: tuple[type, ...] = ()) -> None:
    """A model or cluster: the command line's text (its resolver names what is wrong with it), or an
    object built already."""
    if isinstance(value, types):
        return
    if not isinstance(value, str):
        raise InputError(f"expected a name or a file path, got {value!r}", where)


def _options(request, where: str = "options") -> None:
    """Planner options as a sorted tuple of pairs (hashable, one spelling), from a mapping or pairs."""
    value = request.options
    try:
        pairs = dict(value.items() if isinstance(value, Mapping) else value)
    except (TypeError, ValueError):
        raise InputError(f"expected a mapping of option names to values, got {value!r}", where) from None
    if not all(isinstance(k, str) for k in pairs):
        raise InputError("option names must be strings", where)
    object.__setattr__(request, "options", tuple(sorted(pairs.items())))


def _graph_and_cluster_types() -> tuple[tuple[type, ...], tuple[type, ...]]:
    from solver_plan.cluster import Cluster
    from solver_plan.graph.ir import Graph
    return (Graph,), (Cluster,)


@dataclass(frozen=True)
class RequestFields:
    """Fields every question has; validated by `_check_common` (the base of every request type)."""

    def _model_types(self) -> tuple[type, ...]:
        return _graph_and_cluster_types()[0]

    def _check_common(self) -> None:
        _, cluster_types = _graph_and_cluster_types()
        _spec(self.model, "model", self._model_types())
        _spec(self.cluster, "cluster", cluster_types)
        check_time_limit(self.time_limit)
        object.__setattr__(self, "memory_limit", memory_limit_value(self.memory_limit))
        object.__setattr__(self, "precision", _choice(self.precision, PRECISIONS, "precision"))
        _count(self.seed, "seed", optional=False, least=0)
        _options(self)

    def option_dict(self) -> dict[str, Any]:
        """The planner options as a {name: value} dict."""
        return dict(self.options)


@dataclass(frozen=True)
class PlanRequest(RequestFields):
    """Question 1: a per-operator parallel configuration of `model` on `cluster` (`solver-plan plan`)."""
    model: Any = DEFAULT_MODEL  # MODEL spec or Graph
    cluster: Any = DEFAULT_CLUSTER  # preset, YAML path or Cluster
    planner: str = DEFAULT_PLANNER
    devices: int | None = None  # the cluster's first N devices (None: all)
    time_limit: float | None = DEFAULT_TIME_LIMIT_S  # seconds for the whole answer, building included
    memory_limit: float | str | None = None  # bytes per device or "16GB"; None: the device's memory; UNLIMITED: none
    precision: str = DEFAULT_PRECISION
    runtime: str = DEFAULT_RUNTIME  # whose kernels price attention (fused or not, kernel family, causal skip)
    max_candidates: int = DEFAULT_MAX_CANDIDATES
    all_devices: bool = False  # every operator on all devices (Alpa's setting)
    seed: int = 0
    options: Options = ()  # planner options (a mapping is accepted)
    baselines: bool = False  # also solve BASELINES and report them beside the plan
    simulate: bool = False  # also simulate the plan's task graph

    def __post_init__(self):
        self._check_common()
        _name(self.planner, "planner")
        _runtime(self.runtime)
        _count(self.devices, "devices")
        _count(self.max_candidates, "max_candidates", optional=False, least=2)
        for key in ("all_devices", "baselines", "simulate"):
            if not isinstance(getattr(self, key), bool):
                raise InputError(f"must be true or false, got {getattr(self, key)!r}", key)


@dataclass(frozen=True)
class PipelineRequest(RequestFields):
    """Pipeline stages and a periodic schedule of `model` on the first `devices` devices
    (`solver-plan pipeline`)."""
    model: Any = DEFAULT_MODEL  # MODEL spec (including a pipeline-blocks JSON) or Graph
    cluster: Any = DEFAULT_CLUSTER
    devices: int = DEFAULT_PIPELINE_DEVICES  # pipeline processors: the cluster's first N devices
    planner: str = DEFAULT_PIPELINE_PLANNER
    schedule: str = DEFAULT_SCHEDULE
    time_limit: float | None = DEFAULT_TIME_LIMIT_S
    memory_limit: float | str | None = None  # per processor; None: the device's memory (a finite limit only)
    bandwidth: float | None = None  # bytes/s; None: the slowest link between consecutive processors
    no_comm: bool = False
    precision: str = DEFAULT_PRECISION
    optimizer: str = DEFAULT_OPTIMIZER
    max_layers: int | None = None
    cut_inside_blocks: bool = False
    blocks: int | None = None  # pipeline-blocks JSON only
    seed: int = 0
    options: Options = ()  # allocation planner options

    def __post_init__(self):
        self._check_common()
        if self.memory_limit == UNLIMITED:
            raise InputError("a pipeline needs a finite memory per device: give bytes or 'device', "
                             "not unlimited ('none')", "memory_limit")
        _name(self.planner, "planner")
        _name(self.schedule, "schedule")
        _count(self.devices, "devices", optional=False)
        _count(self.max_layers, "max_layers")
        object.__setattr__(self, "optimizer", _choice(self.optimizer, OPTIMIZERS, "optimizer"))
        if self.bandwidth is not None and (isinstance(self.bandwidth, bool)
                                           or not isinstance(self.bandwidth, (int, float))
                                           or not math.isfinite(self.bandwidth) or self.bandwidth <= 0):
            raise InputError(f"must be positive bytes per second, got {self.bandwidth!r}", "bandwidth")
