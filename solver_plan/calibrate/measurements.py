"""What calibration fits: kernels (work the cost model prices) and the time measured for them.

A `Measurement` is one timed piece of work (a layer's forward pass, a GEMM from a profiler run)
made of one or more `Kernel`s; the cost model's prediction for it is the sum of
`compute_time(device, flops, hbm_bytes, unit, dtype)` over its kernels (cost/compute.py). A
`CollectiveMeasurement` is one timed collective (all-reduce of `nbytes` over `group_size`
devices) for the link parameters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from solver_plan.cost.collectives import KINDS as COLLECTIVE_KINDS
from solver_plan.cost.compute import UNITS
from solver_plan.cost.precision import Precision
from solver_plan.errors import InputError


def _check(value: float, name: str, where: str, positive: bool = False) -> None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or value < 0 or (positive and value == 0):
        raise InputError(f"{name} must be a finite {'positive' if positive else 'non-negative'} number, "
                         f"got {value!r}", where)


@dataclass(frozen=True)
class Kernel:
    """One kernel of a measurement as the roofline sees it: FLOPs, HBM bytes, the unit that runs it (matrix or
    vector), its dtype, and the smallest GEMM dimension for narrow-GEMM efficiency.
    """
    flops: float
    hbm_bytes: float
    unit: str  # "matrix" (GEMM, convolution, attention) or "vector" (element-wise, reductions)
    dtype: Precision
    where: str = "kernel"
    narrow: float = 0.0  # smallest GEMM dimension of a matrix kernel (0: unknown or wide)

    def __post_init__(self):
        _check(self.flops, "flops", self.where)
        _check(self.hbm_bytes, "hbm_bytes", self.where)
        _check(self.narrow, "narrow dimension", self.where)
        if self.unit not in UNITS:
            raise InputError(f"unit must be one of {', '.join(UNITS)}, got {self.unit!r}", self.where)
        if not isinstance(self.dtype, Precision):
            raise InputError(f"dtype must be a Precision, got {self.dtype!r}", self.where)
        if self.flops == 0 and self.hbm_bytes == 0:
            raise InputError("a kernel needs FLOPs or bytes", self.where)


@dataclass(frozen=True)
class Measurement:
    """One measured time and the kernels it covers: the measurement's name, the model or file it came from
    (cross-validation leaves whole groups out), its kind, and the measuring overhead group it pays.
    """
    name: str
    group: str  # the model (or file) it came from: cross-validation leaves whole groups out
    kind: str  # layer type or CSV op, for per-kind error tables
    kernels: tuple[Kernel, ...]
    seconds: float
    where: str = ""
    # A fixed time the *measuring* adds to every measurement of this name (e.g. PipeDream's
    # per-layer forward hook), fitted as a nuisance parameter and never written to a cluster.
    overhead: str = ""

    def __post_init__(self):
        _check(self.seconds, "measured time", self.where or self.name, positive=True)
        if not self.kernels:
            raise InputError("a measurement needs at least one kernel", self.where or self.name)


@dataclass(frozen=True)
class CollectiveMeasurement:
    """One measured collective: kind, bytes, group size and devices per node, seconds; fits link latency and
    efficiency.
    """
    kind: str
    nbytes: float
    group_size: int
    devices_per_node: int  # devices of the group on each node (group_size: one node)
    seconds: float
    where: str = ""

    def __post_init__(self):
        if self.kind not in COLLECTIVE_KINDS:
            raise InputError(f"collective must be one of {', '.join(COLLECTIVE_KINDS)}, got {self.kind!r}",
                             self.where)
        _check(self.nbytes, "bytes", self.where, positive=True)
        _check(self.seconds, "measured time", self.where, positive=True)
        for name, value in (("devices", self.group_size), ("devices_per_node", self.devices_per_node)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be a positive integer, got {value!r}", self.where)
        if self.group_size < 2 or self.group_size % self.devices_per_node:
            raise InputError(f"devices ({self.group_size}) must be at least 2 and a multiple of "
                             f"devices_per_node ({self.devices_per_node})", self.where)

    @property
    def nodes(self) -> int:
        """Nodes the group spans, group size / devices per node."""
        return self.group_size // self.devices_per_node
