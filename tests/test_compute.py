import pytest

from solver_plan.cluster import DeviceSpec, cluster_from_dict, resolve_cluster
from solver_plan.cost.compute import (CALCULON_MATRIX_EFFICIENCY, compute_time, flops_efficiency, matmul_time,
                                      memory_efficiency, step_efficiency)
from solver_plan.errors import ClusterError

A100 = resolve_cluster("a100x8-80gb")


def test_step_efficiency_follows_calculon_thresholds():
    curve = CALCULON_MATRIX_EFFICIENCY
    assert step_efficiency(curve, 200) == 0.95
    assert step_efficiency(curve, 128) == 0.95
    assert step_efficiency(curve, 20) == 0.9
    assert step_efficiency(curve, 0.5) == 0.1
    assert step_efficiency((), 3.0) == 1.0


def test_large_gemm_is_compute_bound_at_95_percent():
    # 8192^3 GEMM: 2 x 8192^3 = 1.1e12 FLOP (>= 128 GFLOP: 0.95); bf16 peak 312 TFLOP/s
    m = 8192
    flops = 2.0 * m ** 3
    expected = (flops / (312e12 * 0.95) + 4e-6) * 1.105  # the preset's calibrated kernel_time_scale
    assert matmul_time(A100, m, m, m, "bf16") == pytest.approx(expected)
    # memory: 3 x 8192^2 x 2 bytes = 403 MB at 2039 GB/s x 0.9 = 0.22 ms < 3.7 ms of math


def test_elementwise_is_memory_bound():
    # ReLU on 64 Mi elements of bf16: 64 Mi FLOP (vector curve at 0.067 GFLOP: 0.1 of 78 TFLOP/s)
    # and 2 x 128 MiB moved (>= 100 MB: 0.9 of 2039 GB/s)
    n = 64 * 2 ** 20
    flops, nbytes = float(n), 2.0 * n * 2
    math_s = flops / (78e12 * 0.1)
    memory_s = nbytes / (2039e9 * 0.9)
    assert memory_s > math_s
    assert compute_time(A100, flops, nbytes, unit="vector", dtype="bf16") == pytest.approx((memory_s + 4e-6) * 1.105)


def test_kernel_time_scale_multiplies_every_kernel():
    from dataclasses import replace
    plain = replace(A100.device, kernel_time_scale=1.0)
    for args in ((1e12, 4e8, "matrix"), (1e6, 5e8, "vector"), (1e3, 10.0, "vector")):
        flops, nbytes, unit = args
        assert compute_time(A100, flops, nbytes, unit=unit, dtype="bf16") == pytest.approx(
            1.105 * compute_time(plain, flops, nbytes, unit=unit, dtype="bf16"))
    with pytest.raises(Exception, match="kernel_time_scale"):
        replace(A100.device, kernel_time_scale=0.0)


def test_fp32_uses_the_vector_peak_without_tensor_cores():
    # V100 has fp16 tensor cores only: an fp32 GEMM runs at the 15.7 TFLOP/s CUDA-core peak
    v100 = resolve_cluster("v100x8-nvlink").device
    assert v100.peak("fp32", "matrix") == 15.7e12
    assert v100.peak("fp16", "matrix") == 125e12
    assert v100.peak("fp16", "vector") == 31.4e12
    with pytest.raises(ClusterError, match="no bf16"):
        v100.peak("bf16")


def test_legacy_device_runs_every_dtype_at_its_peak_with_full_efficiency():
    legacy = DeviceSpec("gpu", 100e12, 16e9)
    assert compute_time(legacy, 1e12, 1e9) == pytest.approx(0.01)  # 1e12 / 1e14, no roofline, no launch
    assert flops_efficiency(legacy, 1.0) == 1.0 and memory_efficiency(legacy, 1.0) == 1.0
    assert compute_time(legacy, 0.0, 0.0) == 0.0


def test_yaml_device_keys_and_validation():
    base = {"devices_per_node": 1, "links": {"intra_node": {"bandwidth": "10GB/s"}}}
    cluster = cluster_from_dict({**base, "device": {
        "memory": "16GB", "vector_flops": {"fp32": "10TFLOPS"}, "hbm_bandwidth": "1TB/s",
        "memory_efficiency": [[1, 0.5], [0, 0.25]], "launch_overhead": "2us"}})
    assert cluster.device.peak_flops == 10e12  # derived: fp32 is the default compute dtype
    # 1e9 FLOP at 10 TFLOP/s = 0.1 ms; 4 MB at 1 TB/s x 0.5 = 8 us -> compute-bound
    assert compute_time(cluster, 1e9, 4e6) == pytest.approx(1e-4 + 2e-6)
    from solver_plan.errors import InputError
    with pytest.raises(InputError, match="matrix_efficiency"):
        cluster_from_dict({**base, "device": {"memory": "1GB", "peak_flops": 1e12,
                                              "matrix_efficiency": [[1, 2.0], [0, 0.5]]}})
    with pytest.raises(InputError):
        cluster_from_dict({**base, "device": {"memory": "1GB", "peak_flops": 1e12,
                                              "matrix_efficiency": [[0, 0.5], [1, 0.9]]}})
    with pytest.raises(InputError, match="unknown precision"):
        cluster_from_dict({**base, "device": {"memory": "1GB", "matrix_flops": {"fp64": "1TFLOPS"}}})
