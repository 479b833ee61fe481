"""Numeric precisions: bytes per element, and the dtypes a training run keeps per kind of data.

`Precision` (one storage/compute format) lives below `cluster/` in `solver_plan/dtypes.py`. `TrainingPrecision` says which format each kind of
data uses in training:
- compute: the format the matrix (and vector) units run in, which selects the peak FLOP/s;
- activations: tensors between operators (bytes moved by redistribution and kept for backward);
- parameters, gradients: the working copy of the weights and their gradients (gradient sync);
- master: a higher-precision copy of the weights the optimizer updates (None: none);
- moments: each of the optimizer's per-parameter moments (Adam: two).

Accounting follows Megatron-LM / ZeRO (Rajbhandari et al., SC'20, section 3.1: "mixed precision
training ... 2Psi + 2Psi + 12Psi" bytes for fp16 weights, fp16 gradients, fp32 master weights,
momentum and variance): 2 + 2 + 4 + 4 + 4 = 16 bytes per parameter. Plain fp32 keeps weights,
gradients and two moments in fp32 with no master copy: 4 + 4 + 4 + 4 = 16 bytes. The bytes per
parameter by optimizer and sharding are the model-state module's (cost/model_state.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.cost.model_state import ParameterState, state_with_moments
from solver_plan.dtypes import Precision, default_dtype, precision_name
from solver_plan.errors import InputError

__all__ = ["ParameterBytes", "Precision", "TrainingPrecision", "default_for", "resolve_precision"]


# Bytes kept per parameter, by term: the model-state module's type (cost/model_state.py).
ParameterBytes = ParameterState


@dataclass(frozen=True)
class TrainingPrecision:
    """The dtype of each thing training keeps: compute, activations, parameters, gradients, optional fp32
    master copy (mixed precision) and `num_moments` optimizer moments (Adam: 2).
    """
    compute: Precision
    activations: Precision
    parameters: Precision
    gradients: Precision
    master: Precision | None
    moments: Precision
    num_moments: int = 2  # Adam keeps first and second moments

    def __post_init__(self):
        for name in ("compute", "activations", "parameters", "gradients", "moments"):
            if not isinstance(getattr(self, name), Precision):
                raise InputError(f"expected a Precision, got {getattr(self, name)!r}", f"precision.{name}")
        if self.master is not None and not isinstance(self.master, Precision):
            raise InputError(f"expected a Precision or None, got {self.master!r}", "precision.master")
        if isinstance(self.num_moments, bool) or not isinstance(self.num_moments, int) or self.num_moments < 0:
            raise InputError(f"expected a non-negative integer, got {self.num_moments!r}", "precision.num_moments")

    @classmethod
    def mixed(cls, dtype: "str | Precision" = "bf16") -> "TrainingPrecision":
        """Mixed precision (Micikevicius et al., ICLR'18; Megatron-LM, ZeRO): half-precision weights,
        activations and gradients, fp32 master weights and two fp32 Adam moments (16 bytes/param).

        `fp8` follows NVIDIA Transformer Engine: GEMMs run in fp8 (the fp8 peak), while weights,
        activations and gradients are kept in bf16 and cast per GEMM."""
        dtype = Precision.parse(dtype)
        if dtype == Precision.FP8:
            half = Precision.BF16
        elif dtype in (Precision.BF16, Precision.FP16):
            half = dtype
        else:
            raise InputError(f"mixed precision needs a half-precision dtype (bf16, fp16, fp8), got {dtype.value}",
                             "precision")
        return cls(dtype, half, half, half, Precision.FP32, Precision.FP32)

    @classmethod
    def fp32(cls, compute: "str | Precision" = "fp32") -> "TrainingPrecision":
        """Everything in fp32, no master copy (weights, gradients, two moments: 16 bytes/param).
        `compute="tf32"` runs the matrix units in TF32 with the same storage."""
        compute = Precision.parse(compute)
        if compute not in (Precision.FP32, Precision.TF32):
            raise InputError(f"fp32 training computes in fp32 or tf32, got {compute.value}", "precision")
        f = Precision.FP32
        return cls(compute, f, f, f, None, f)

    @classmethod
    def parse(cls, value: "str | Precision | TrainingPrecision", device=None,
              where: str = "--precision") -> "TrainingPrecision":
        """`auto` (the device's default), fp32, tf32, or a half dtype for mixed precision."""
        if isinstance(value, TrainingPrecision):
            return value
        if str(value).strip().lower() == "auto":
            if device is None:
                raise InputError("precision 'auto' needs a device", where)
            return default_for(device)
        dtype = Precision.parse(value, where)
        return cls.fp32(dtype) if dtype in (Precision.FP32, Precision.TF32) else cls.mixed(dtype)

    def bytes_per_parameter(self) -> ParameterState:
        """weights + gradients + master copy + num_moments x moment bytes (cost/model_state.py)."""
        return state_with_moments(self, self.num_moments)

    @property
    def name(self) -> str:
        """Name of the precision, e.g. "fp32" or "mixed-bf16" (mixed when a master copy is kept)."""
        return precision_name(self.compute, mixed=self.master is not None)


def default_for(device) -> TrainingPrecision:
    """What users run on `device` (a `DeviceSpec`, or a `Cluster` via its device): mixed precision in
    `dtypes.default_dtype(device)` where that is a half dtype (bf16 on A100/H100, fp16 on V100),
    fp32 otherwise (K80, P100, devices described by one peak number)."""
    dtype = default_dtype(device)
    return TrainingPrecision.fp32() if dtype == Precision.FP32 else TrainingPrecision.mixed(dtype)


def resolve_precision(requested: "str | Precision | TrainingPrecision | None", device,
                      graph=None) -> TrainingPrecision:
    """The precision a command runs: `requested`, or for auto/None the device's default
    (`default_for`), except for graphs with measured times (PipeDream profiles were measured in
    fp32: their times and sizes are fp32's, so `auto` keeps fp32 for them)."""
    if requested is None or str(requested).strip().lower() == "auto":
        if graph is not None and getattr(graph, "has_measured_times", False):
            return TrainingPrecision.fp32()
        return default_for(device)
    return TrainingPrecision.parse(requested, device)
