"""Compute time of one kernel: achieved FLOP/s (a roofline with size-dependent efficiencies).

    compute_time = max(flops / (peak(dtype, unit) x efficiency(flops) x narrow_efficiency(narrow)),
                       hbm_bytes / (hbm_bandwidth x memory_efficiency(hbm_bytes))) + launch_overhead

Efficiency curves are step functions as in calculon (Isaev et al., "Calculon: a methodology and
tool for high-level co-design of systems and large language models", SC'23; its hardware files
are data/hardware/a100_80g.json and h100_80g_nvl8.json): a list of (threshold, efficiency) with
thresholds decreasing to 0; the efficiency of a size is that of the first threshold it reaches.
Matrix and vector curves are indexed by GFLOP per kernel, the memory curve by MB (10^6 bytes)
moved per kernel. Small kernels are launch- and memory-bound; large GEMMs reach 90-95% of peak.
`narrow_efficiency` is indexed by a matrix kernel's smallest GEMM dimension in elements (`narrow`:
the channels per group of a convolution, the features of a small linear layer; 0 when unknown or
wide): a GEMM whose output tile or reduction is narrower than the kernel's tiles wastes lanes and
reuses each loaded operand less, so it runs below the efficiency its FLOPs alone suggest (the
PipeDream V100 profiles: SqueezeNet's 16-channel convolutions' backward 4-5x, 3-channel first
layers about 3x their FLOP-indexed prediction). It is relative to a wide GEMM (1 at the largest
dimensions) and has no default: `solver-plan calibrate` fits it where the measurements carry
shapes. A device with no curve runs at 100% (the first cost model's assumption); one with no HBM
bandwidth has no memory roofline.

Devices whose hardware files have no curves (V100, P100, K80 presets) use calculon's A100 curves
(`CALCULON_*` below): the shape of GEMM efficiency against size is similar across NVIDIA
generations, and `solver-plan calibrate` refits them from measurements.
"""
from __future__ import annotations

from solver_plan.cluster.model import Curve, DeviceSpec
from solver_plan.cost.precision import Precision, default_for

UNITS = ("matrix", "vector")

# data/hardware/a100_80g.json (calculon): matrix.float16.gflops_efficiency, vector.float16
# .gflops_efficiency and mem1.MB_efficiency.
CALCULON_MATRIX_EFFICIENCY: Curve = ((128.0, 0.95), (16.0, 0.9), (1.0, 0.6), (0.0, 0.1))
CALCULON_VECTOR_EFFICIENCY: Curve = ((16.0, 0.95), (1.0, 0.5), (0.0, 0.1))
CALCULON_MEMORY_EFFICIENCY: Curve = ((100.0, 0.9), (10.0, 0.75), (1.0, 0.6), (0.0, 0.3))


def device_of(cluster_or_device) -> DeviceSpec:
    """The `DeviceSpec` of a cluster, or the argument itself when it already is one."""
    return cluster_or_device if isinstance(cluster_or_device, DeviceSpec) else cluster_or_device.device


def step_efficiency(curve: Curve, size: float) -> float:
    """Efficiency of the first (threshold, efficiency) with size >= threshold; 1.0 for no curve."""
    for threshold, efficiency in curve:
        if size >= threshold:
            return efficiency
    return 1.0


def flops_efficiency(device: DeviceSpec, flops: float, unit: str = "matrix") -> float:
    """Achieved fraction of peak for a kernel of `flops` FLOPs: the unit's curve at flops / 1e9."""
    curve = device.matrix_efficiency if unit == "matrix" else device.vector_efficiency
    return step_efficiency(curve, flops / 1e9)


def memory_efficiency(device: DeviceSpec, hbm_bytes: float) -> float:
    """Achieved fraction of HBM bandwidth for a kernel moving `hbm_bytes`: the curve at bytes / 1e6."""
    return step_efficiency(device.memory_efficiency, hbm_bytes / 1e6)


def narrow_efficiency(device: DeviceSpec, narrow: float) -> float:
    """Achieved fraction relative to a wide GEMM for a matrix kernel whose smallest GEMM dimension
    is `narrow` elements: the device's narrow curve at `narrow`; 1.0 for narrow <= 0 (unknown or
    wide) or no curve."""
    return step_efficiency(device.narrow_efficiency, narrow) if narrow > 0 else 1.0


def math_time(device: DeviceSpec, flops: float, unit: str, dtype, narrow: float = 0.0) -> float:
    """flops / (peak(dtype, unit) x flops_efficiency(flops) x narrow_efficiency(narrow) x
    dtype_efficiency(dtype)); the narrow and dtype factors apply to matrix kernels only."""
    if flops <= 0:
        return 0.0
    efficiency = flops_efficiency(device, flops, unit)
    if unit == "matrix":
        efficiency *= narrow_efficiency(device, narrow) * dict(device.dtype_efficiency).get(
            str(getattr(dtype, "value", dtype)), 1.0)
    return flops / (device.peak(dtype, unit) * efficiency)


def memory_time(device: DeviceSpec, hbm_bytes: float) -> float:
    """hbm_bytes / (hbm_bandwidth x memory_efficiency(hbm_bytes)); 0 without an HBM bandwidth."""
    if hbm_bytes <= 0 or device.hbm_bandwidth is None:
        return 0.0
    return hbm_bytes / (device.hbm_bandwidth * memory_efficiency(device, hbm_bytes))


def compute_time(cluster_or_device, flops: float, hbm_bytes: float = 0.0, *, unit: str = "matrix",
                 dtype: "Precision | str | None" = None, narrow: float = 0.0) -> float:
    """Seconds of one kernel: (max(math_time, memory_time) + launch_overhead) x kernel_time_scale
    (roofline: the slower of arithmetic and memory traffic bounds the kernel; the scale is the
    device's calibrated factor, 1 unless a measurement set it). `narrow`: the smallest GEMM dimension
    of a matrix kernel (0: unknown or wide; `narrow_efficiency`). `dtype` None: the device's default compute
    dtype (`default_for`). A kernel with neither FLOPs nor bytes costs nothing (no launch)."""
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    device = device_of(cluster_or_device)
    if flops <= 0 and hbm_bytes <= 0:
        return 0.0
    dtype = default_for(device).compute if dtype is None else Precision.parse(dtype)
    kernel = max(math_time(device, flops, unit, dtype, narrow), memory_time(device, hbm_bytes)) + device.launch_overhead
    return kernel * device.kernel_time_scale


def matmul_flops(m: int, n: int, k: int, batch: int = 1) -> float:
    """2 m n k per product (a multiply-add is 2 FLOPs)."""
    return 2.0 * batch * m * n * k


def matmul_bytes(m: int, n: int, k: int, dtype, batch: int = 1) -> float:
    """HBM traffic of C[m,n] = A[m,k] B[k,n]: read A and B, write C once, in `dtype`."""
    return float(batch * (m * k + k * n + m * n) * Precision.parse(dtype).bytes)


def matmul_time(cluster_or_device, m: int, n: int, k: int, dtype="bf16", batch: int = 1) -> float:
    """compute_time of a (batched) GEMM on the matrix units."""
    return compute_time(cluster_or_device, matmul_flops(m, n, k, batch), matmul_bytes(m, n, k, dtype, batch),
                        unit="matrix", dtype=dtype)


def attention_time(cluster_or_device, flops: float, hbm_bytes: float, backend: str, dtype="bf16",
                   query_length: float | None = None) -> float | None:
    """Seconds of a fused attention kernel of `flops` at the device's measured efficiency for its
    kernel family and query length (`DeviceSpec.attention_efficiency`, e.g. FlashAttention-2 at 50-73%
    of an A100's peak, Dao 2023; on an H100 cuDNN's fused kernel at 0.26 of the bf16 peak at 1K
    tokens rising to 0.54 at 16K, FlashAttention-2 at 0.21-0.30, data/device/h100-2026-11-26):
    max(flops / (peak(dtype) x efficiency(query_length)), memory_time) + launch overhead, times
    kernel_time_scale; query_length None: the curve's top entry (long sequences). None when the
    device has no figure for `backend` (callers fall back to the matrix curve)."""
    device = device_of(cluster_or_device)
    curve = dict(device.attention_efficiency).get(backend)
    if curve is None or flops <= 0:
        return None
    efficiency = curve[0][1] if query_length is None else step_efficiency(curve, query_length)
    seconds = max(flops / (device.peak(dtype, "matrix") * efficiency), memory_time(device, hbm_bytes))
    return (seconds + device.launch_overhead) * device.kernel_time_scale
