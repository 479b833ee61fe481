"""Numeric formats (dtypes) and which one a device runs by default.

Below `cluster/` (a device's per-dtype peak tables are keyed by these names) and `cost/` (whose
`precision.TrainingPrecision` says which dtype each kind of training data uses): both read this
module, neither is read by it.
"""
from __future__ import annotations

import enum

from solver_plan.errors import InputError


class Precision(str, enum.Enum):
    """One storage/compute format."""
    FP32 = "fp32"
    TF32 = "tf32"  # fp32 storage, tensor-core compute with a 10-bit mantissa (A100 and later)
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    @property
    def bytes(self) -> int:
        """Bytes per element of this dtype."""
        return _BYTES[self]

    @classmethod
    def parse(cls, value: "str | Precision", where: str = "precision") -> "Precision":
        """A `Precision` from its name in any case, or the value itself; InputError at `where` for an unknown
        name.
        """
        if isinstance(value, Precision):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise InputError(f"unknown precision {value!r}; expected one of "
                             f"{', '.join(p.value for p in cls)}", where) from None


_BYTES = {Precision.FP32: 4, Precision.TF32: 4, Precision.BF16: 2, Precision.FP16: 2, Precision.FP8: 1}


def default_dtype(device) -> Precision:
    """The compute dtype users run on `device` (a `DeviceSpec`, or a `Cluster` via its device): bf16
    where the matrix units run bf16 (A100, H100), fp16 where they run fp16 only (V100 tensor cores),
    fp32 otherwise (K80, P100: no half-precision matrix units) and for devices described by one
    peak number (no per-dtype table). `cost.precision.default_for` makes it a training precision."""
    device = getattr(device, "device", device)
    matrix = dict(getattr(device, "matrix_flops", ()) or ())  # keys are dtype names ("bf16")
    for dtype in (Precision.BF16, Precision.FP16):
        if dtype.value in matrix:
            return dtype
    return Precision.FP32


def precision_name(compute: Precision, mixed: bool) -> str:
    """How a training precision is named: `mixed-<dtype>` with an fp32 master copy, else the dtype."""
    return f"mixed-{compute.value}" if mixed else compute.value


def default_precision_name(device) -> str:
    """The name of the training precision `device` runs by default (`cost.precision.default_for`:
    mixed precision in a half dtype, plain fp32 otherwise)."""
    dtype = default_dtype(device)
    return precision_name(dtype, mixed=dtype != Precision.FP32)
