"""Model state: the bytes a training run keeps per parameter, by optimizer, precision and sharding.

The one rule behind every question's memory: per-operator plans (`CostModel.parameter_bytes`
through `TrainingPrecision.bytes_per_parameter`), pipelines (`pipeline/memory.py`'s `ModelState`,
the same bytes per byte of a chain's weights) and hybrid plans (`hybrid/memory.py`'s `StateBytes`
and its ZeRO terms, which the MoE terms and the hybrid validator also use).

Per parameter, unsharded (`state_per_parameter(precision, optimizer)`), with w, g, m, o the bytes
of the precision's parameter, gradient, master (0 without one) and moment dtypes:
    adam:          w + g + m + 2 o   (mixed bf16/fp16/fp8: 2 + 2 + 4 + 4 + 4 = 16; fp32: 4 + 4 + 0 + 8 = 16)
    sgd-momentum:  w + g + m + o     (mixed: 2 + 2 + 4 + 4 = 12; fp32: 4 + 4 + 4 = 12)
    sgd:           w + g + m         (mixed: 2 + 2 + 4 = 8;      fp32: 4 + 4 = 8)
    pipedream:     3 w               (two weight versions and a gradient)
Sources: Rajbhandari et al., "ZeRO", SC'20, section 3.1 (mixed-precision Adam keeps "2 Psi + 2 Psi
+ K Psi" bytes, K = 12 for the fp32 master weights, momentum and variance); Megatron-LM keeps the
same 16 B; AdamW's decoupled weight decay keeps no state of its own, so AdamW is `adam` here; SGD
with momentum keeps one moment, plain SGD none; MadPipe (Beaumont et al., IPDPS'22, section 3)
after PipeDream-2BW: "two versions of each parameter, plus one gradient", 3 W whatever the
precision (kept for comparisons with PipeDream and the MadPipe paper).

Runtime rules (`ParameterState.for_runtime`), in mixed precision only (a master copy exists):
gradients kept and reduced in the master's dtype (Megatron's fp32 main_grad: 2 + 4 + 12 = 18 B,
its distrib_optimizer.md table; FSDP2's fp32 reduce), and FSDP2's fp32 sharded parameter doubling
as the master copy: of its bytes, the working weights' are counted as weights (what the all-gather
moves) and the rest as master (2 + 4 + (2 + 8) = 16).

Sharding (`ParameterState.sharded_bytes`; Rajbhandari et al. 2020, figure 1): over a shard group of
s ranks (ZeRO's data-parallel group; FSDP / HSDP's shard group, hybrid/fsdp.py), stage 1 divides
the optimizer state (master + moments) by s, stage 2 the gradients too, stage 3 the weights too.

Defaults differ by question because each planner starts from different data (docs/architecture.md,
"Model state"): per-operator plans price the precision in force (auto: the device's, `default_for`)
with Adam, unsharded; pipeline chains built without a precision give W in fp32 (profiles were
measured in fp32), so they default to fp32 Adam; hybrid terms called without a state use mixed
bf16 Adam, the 16-bit training their activation counts (Korthikanti et al. 2022) describe.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from solver_plan.errors import InputError

OPTIMIZERS = ("adam", "sgd-momentum", "sgd", "pipedream")
DEFAULT_OPTIMIZER = "adam"
MOMENTS = {"adam": 2, "sgd-momentum": 1, "sgd": 0}  # optimizer moments kept per parameter
ZERO_STAGES = (0, 1, 2, 3)
# the lowest ZeRO stage that shards each term (Rajbhandari et al. 2020: P_os, P_os+g, P_os+g+p)
ZERO_SHARDS = {"optimizer": 1, "gradients": 2, "weights": 3}
# Adam's step: moment updates, bias correction, update: a dozen element-wise FLOPs per parameter
ADAM_FLOPS_PER_PARAM = 12.0


def check_optimizer(optimizer: str, where: str = "--optimizer") -> str:
    """The optimizer's name, normalised; an `InputError` naming the known ones otherwise."""
    if not isinstance(optimizer, str) or optimizer.strip().lower() not in OPTIMIZERS:
        raise InputError(f"unknown optimizer {optimizer!r}; expected one of {', '.join(OPTIMIZERS)}", where)
    return optimizer.strip().lower()


@dataclass(frozen=True)
class ParameterState:
    """Bytes kept per parameter, by term, on one device before sharding (module text)."""
    weights: float
    gradients: float
    master: float = 0.0
    moments: float = 0.0  # all optimizer moments together
    weight_version: float = 0.0  # PipeDream-2BW's second weight version
    # the optimizer state ZeRO-1 shards, master copy + moments: a field, as the hybrid search reads it
    # in its inner loop
    optimizer: float = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name) if f.init else 0.0
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise InputError(f"bytes per parameter must be a non-negative number, got {value!r}",
                                 f"model state.{f.name}")
        object.__setattr__(self, "optimizer", self.master + self.moments)

    @property
    def total(self) -> float:
        """Bytes per parameter at rest: weights + gradients + master copy + optimizer moments + extra weight
        versions.
        """
        return self.weights + self.gradients + self.master + self.moments + self.weight_version

    @property
    def optimizer_step_bytes(self) -> float:
        """HBM bytes per parameter of one optimizer step: read and write the weights and the
        optimizer state, read the gradients, 2 (w + m + moments) + g."""
        return 2 * (self.weights + self.optimizer) + self.gradients

    def terms(self) -> tuple[tuple[str, float], ...]:
        """(term, bytes) of the terms kept: weights and gradients always, the others when non-zero."""
        named = (("weights", self.weights), ("gradients", self.gradients), ("master", self.master),
                 ("moments", self.moments), ("weight version", self.weight_version))
        return tuple((name, float(value)) for name, value in named
                     if name in ("weights", "gradients") or value)

    def sharded_bytes(self, term: str, params: float, zero_stage: int, shard: float) -> float:
        """Bytes of `term` (weights, gradients or optimizer) for `params` parameters on one rank
        of a shard group of `shard` ranks under ZeRO stage `zero_stage` (module text)."""
        return getattr(self, term) * params / (shard if zero_stage >= ZERO_SHARDS[term] else 1)

    def for_runtime(self, *, fp32_gradients: bool, sharded_fp32_params: bool) -> "ParameterState":
        """The bytes as a runtime keeps them in mixed precision (module text): gradients in the
        master's dtype (`fp32_gradients`), and with `sharded_fp32_params` (FSDP2) the master
        copy less the working weights' bytes. Unchanged without a master copy (fp32 training)."""
        if not self.master or not fp32_gradients:
            return self
        return replace(self, gradients=self.master,
                       master=self.master - (self.weights if sharded_fp32_params else 0.0))


def state_with_moments(precision, moments: int) -> ParameterState:
    """w + g + m + `moments` x o for `precision` (a `cost.precision.TrainingPrecision`)."""
    return ParameterState(float(precision.parameters.bytes), float(precision.gradients.bytes),
                          0.0 if precision.master is None else float(precision.master.bytes),
                          float(moments * precision.moments.bytes))


def state_per_parameter(precision, optimizer: str = DEFAULT_OPTIMIZER) -> ParameterState:
    """The model state of `precision` (a `cost.precision.TrainingPrecision`) trained with
    `optimizer` (module text: adam, sgd-momentum, sgd, pipedream)."""
    optimizer = check_optimizer(optimizer)
    if optimizer == "pipedream":
        w = float(precision.parameters.bytes)
        return ParameterState(w, w, weight_version=w)
    return state_with_moments(precision, MOMENTS[optimizer])
