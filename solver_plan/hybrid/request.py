"""What a user asks of the hybrid question: `HybridRequest`, frozen and validated at construction
(errors name the field), with its defaults from `solver_plan/requests.py` (the one home of every
default). It lives in hybrid/ because checking it takes hybrid/'s own model readers and pins, and
requests.py sits below every planner package."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from solver_plan.deadline import DEFAULT_TIME_LIMIT_S
from solver_plan.errors import InputError
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.hybrid.moe_model import is_moe_model
from solver_plan.hybrid.moe_space import check_fix as check_moe_fix
from solver_plan.hybrid.search import check_global_batch
from solver_plan.hybrid.space import check_fix, parse_fix
from solver_plan.requests import (A2A_OVERLAPS, DEFAULT_A2A_OVERLAP, DEFAULT_BLOCK_SOLVER, DEFAULT_CLUSTER,
                                  DEFAULT_GLOBAL_BATCH, DEFAULT_HYBRID_PLANNER, DEFAULT_PRECISION,
                                  DEFAULT_RUNTIME, Options, RequestFields, _choice, _count, _name, _runtime)

__all__ = ["HybridRequest"]


@dataclass(frozen=True)
class HybridRequest(RequestFields):
    """Data x tensor x pipeline (x expert, for a mixture of experts) parallelism of a transformer
    for a global batch (`solver-plan hybrid`)."""
    model: Any = "gpt2"
    cluster: Any = DEFAULT_CLUSTER
    global_batch: int = DEFAULT_GLOBAL_BATCH
    planner: str = DEFAULT_HYBRID_PLANNER  # hybrid, data-parallel, megatron-rule, what-if (kind "hybrid")
    block_solver: str = DEFAULT_BLOCK_SOLVER  # per-operator planner of the block solves
    devices: int | None = None
    time_limit: float | None = DEFAULT_TIME_LIMIT_S
    memory_limit: float | str | None = None  # None: the device's memory less the runtime's margin
    precision: str = DEFAULT_PRECISION
    runtime: str = DEFAULT_RUNTIME
    fix: tuple[tuple[str, Any], ...] = ()  # pinned choices (a mapping or 'tp=8,pp=4' text is accepted)
    compute_scale: float = 1.0
    routing: str | None = None  # mixture of experts: expert load priced (None: uniform)
    a2a_overlap: str = DEFAULT_A2A_OVERLAP  # mixture of experts: what hides the all-to-all
    seed: int = 0
    options: Options = ()

    def _model_types(self) -> tuple[type, ...]:
        return (TransformerSpec,)

    def __post_init__(self):
        self._check_common()
        check_global_batch(self.global_batch, "global_batch")
        _name(self.planner, "planner")
        _name(self.block_solver, "block_solver")
        _runtime(self.runtime)
        _count(self.devices, "devices")
        if (isinstance(self.compute_scale, bool) or not isinstance(self.compute_scale, (int, float))
                or not math.isfinite(self.compute_scale) or self.compute_scale <= 0):
            raise InputError(f"must be positive, got {self.compute_scale}", "compute_scale")
        object.__setattr__(self, "a2a_overlap", _choice(self.a2a_overlap, A2A_OVERLAPS, "a2a_overlap"))
        object.__setattr__(self, "fix", tuple(sorted(_checked_pins(self.model, self.fix).items())))

    @property
    def is_moe(self) -> bool:
        """Whether the model is a mixture of experts (planned by the expert-parallel planner)."""
        return isinstance(self.model, str) and is_moe_model(self.model)

    def fix_dict(self) -> dict[str, Any]:
        """The pinned choices as a {name: value} dict."""
        return dict(self.fix)


def _checked_pins(model: Any, fix: Any) -> dict[str, Any]:
    """`fix` (text 'tp=8,pp=4', a mapping or pairs) checked against the pins of `model`'s planner
    (a mixture of experts has its own: ep, etp, capacity); errors name `fix` and the key."""
    if fix is not None and not isinstance(fix, (str, Mapping)):
        try:
            fix = dict(fix)
        except (TypeError, ValueError):
            raise InputError(f"expected pins such as 'tp=8,pp=4' or a mapping, got {fix!r}", "fix") from None
    try:
        if isinstance(model, str) and is_moe_model(model):
            return check_moe_fix(fix)
        return parse_fix(fix) if fix is None or isinstance(fix, str) else check_fix(fix)
    except InputError as exc:  # the checks name the command line's --fix
        where = exc.where or ""
        raise InputError(str(exc)[len(f"{where}: "):] if where else str(exc),
                         "fix" + where.removeprefix("--fix")) from None
