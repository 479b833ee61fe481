"""Matrix efficiency by a kernel's smallest GEMM dimension (`narrow_efficiency`), Winograd for 5x5
filters, and the calibration fitting the narrow curve."""
from dataclasses import replace

import numpy as np
import pytest

from solver_plan.calibrate.fit import MATRIX_THRESHOLDS, fit_compute, predict
from solver_plan.calibrate.measurements import Kernel, Measurement
from solver_plan.calibrate.output import cluster_yaml
from solver_plan.calibrate.profiles import layer_work
from solver_plan.cluster import resolve_cluster
from solver_plan.cluster.loader import cluster_from_dict
from solver_plan.cost.compute import compute_time, narrow_efficiency
from solver_plan.cost.kernels import channels_narrow, conv_kernel, winograd_saving
from solver_plan.cost.precision import Precision
from solver_plan.errors import InputError
from solver_plan.graph.importers.pipedream import ProfileNode

BF16 = Precision.BF16
NARROW = ((256.0, 1.0), (128.0, 0.9), (64.0, 0.6), (32.0, 0.45), (16.0, 0.35), (8.0, 0.3), (4.0, 0.25), (0.0, 0.2))


def _device(**changes):
    base = replace(resolve_cluster("a100x8-80gb").device, kernel_time_scale=1.0)
    return replace(base, **changes)


def test_narrow_factor_divides_matrix_time_by_hand():
    # 4 GFLOP bf16 GEMM on the preset: matrix curve 0.6 at >= 1 GFLOP, no memory bound (0 bytes)
    device = _device(narrow_efficiency=NARROW, launch_overhead=0.0)
    wide = compute_time(device, 4e9, unit="matrix", dtype=BF16)
    assert wide == pytest.approx(4e9 / (312e12 * 0.6))
    assert compute_time(device, 4e9, unit="matrix", dtype=BF16, narrow=512) == pytest.approx(wide)
    assert compute_time(device, 4e9, unit="matrix", dtype=BF16, narrow=48) == pytest.approx(4e9 / (312e12 * 0.6 * 0.45))
    assert compute_time(device, 4e9, unit="matrix", dtype=BF16, narrow=3) == pytest.approx(wide / 0.2)
    # vector kernels and unknown dimensions are unaffected; no curve means no penalty
    assert compute_time(device, 4e9, unit="vector", dtype=BF16, narrow=3) == compute_time(device, 4e9, unit="vector", dtype=BF16)
    assert narrow_efficiency(device, 0) == 1.0
    assert narrow_efficiency(_device(), 3) == 1.0


def test_memory_bound_kernels_keep_their_memory_time():
    device = _device(narrow_efficiency=NARROW, launch_overhead=0.0)
    # 1 MFLOP moving 1 GB: the memory roofline binds whatever the narrow factor
    t = compute_time(device, 1e6, 1e9, unit="matrix", dtype=BF16, narrow=16)
    assert t == pytest.approx(1e9 / (2039e9 * 0.9))


def test_conv_narrow_is_channels_per_group_and_5x5_winograd():
    assert channels_narrow(3, 64) == 3
    assert channels_narrow(128, 16) == 16
    assert channels_narrow(256, 256, groups=32) == 8
    assert winograd_saving(3) == pytest.approx(2.25)
    assert winograd_saving(5) == pytest.approx(100 / 36)
    # 5x5 stride 1 in fp32 on SIMT units: 2 E cin 25 / 2.78; on tensor cores counted directly
    fp32 = conv_kernel(100.0, 48, 5, 5, 1, 1, 1, 0.0, 0.0, 0.0, simt_fp32=True, cout=64)
    assert fp32.flops == pytest.approx(2 * 100 * 48 * 25 * 36 / 100)
    assert fp32.narrow == 48
    half = conv_kernel(100.0, 48, 5, 5, 1, 1, 1, 0.0, 0.0, 0.0, simt_fp32=False, cout=64)
    assert half.flops == pytest.approx(2 * 100 * 48 * 25)
    strided = conv_kernel(100.0, 48, 5, 5, 2, 2, 1, 0.0, 0.0, 0.0, simt_fp32=True, cout=64)
    assert strided.flops == pytest.approx(2 * 100 * 48 * 25)


def test_profile_conv_layers_carry_their_narrow_dimension():
    node = ProfileNode("n", "Conv2d(16, 64, kernel_size=(1, 1), stride=(1, 1))", 1.0, 2.0, (4.0 * 64 * 100,), 0.0, 1)
    work = layer_work(node, 4.0 * 16 * 100, False, "x")
    assert {k.narrow for k in work.forward + work.backward} == {16.0}


def _synthetic(device, count=400, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        m, n, k = (int(2 ** rng.uniform(2, 13)) for _ in range(3))
        m = max(m, 2048)  # rows (batch x pixels) are never the narrow side here
        kernel = Kernel(2.0 * m * n * k, 0.0 if i % 5 else 2.0 * (m * k + k * n + m * n), "matrix", BF16,
                        narrow=float(min(n, k)))
        out.append(Measurement(f"k{i}", f"g{i % 3}", "op", (kernel,), predict(device, Measurement("k", "g", "op", (kernel,), 1.0))))
    return out


def test_fit_recovers_a_known_narrow_curve():
    true = _device(narrow_efficiency=NARROW,
                   matrix_efficiency=tuple(zip(MATRIX_THRESHOLDS, (0.9, 0.85, 0.7, 0.5, 0.3, 0.12, 0.05))),
                   launch_overhead=5e-6)
    measurements = _synthetic(true)
    fit = fit_compute(_device(), measurements)
    fitted = fit.apply(_device())
    errors = [abs(predict(fitted, m) / m.seconds - 1) for m in measurements]
    assert np.median(errors) < 0.01 and max(errors) < 0.05
    levels = dict(fit.narrow_efficiency)
    assert levels[256.0] == 1.0
    for threshold, efficiency in NARROW[1:-1]:
        assert levels[threshold] == pytest.approx(efficiency, rel=0.05)
    values = [e for _, e in fit.narrow_efficiency]
    assert values == sorted(values, reverse=True) and all(0 < e <= 1 for e in values)


def test_fit_without_narrow_dimensions_keeps_no_narrow_curve():
    kernel = Kernel(2e9, 0.0, "matrix", BF16)
    measurements = [Measurement(f"k{i}", "g", "op", (replace(kernel, flops=2e9 * (i + 1)),), 1e-4 * (i + 1))
                    for i in range(5)]
    assert fit_compute(_device(), measurements).narrow_efficiency == ()


def test_narrow_curve_round_trips_through_cluster_yaml():
    import yaml
    cluster = resolve_cluster("v100x8-nvlink")
    cluster = replace(cluster, device=replace(cluster.device, narrow_efficiency=NARROW))
    back = cluster_from_dict(yaml.safe_load(cluster_yaml(cluster, "header")))
    assert back.device.narrow_efficiency == NARROW


@pytest.mark.parametrize("value", [[[16, 1.5]], [[-1, 0.5]], "fast", [[16]]])
def test_bad_narrow_curve_names_the_key(value):
    import yaml
    data = yaml.safe_load(cluster_yaml(resolve_cluster("v100x8-nvlink"), "header"))
    data["device"]["narrow_efficiency"] = value
    with pytest.raises(InputError) as info:
        cluster_from_dict(data)
    assert "narrow_efficiency" in str(info.value) or "narrow_efficiency" in getattr(info.value, "where", "")


def test_csv_conv_rows_carry_channels_as_narrow(tmp_path):
    from solver_plan.calibrate.csvfile import read_calibration_csv
    path = tmp_path / "m.csv"
    path.write_text("op,shape,dtype,time_us\nconv2d,n=32 c=16 h=56 w=56 k=64 r=3 s=3 pad=1,fp16,301.0\n"
                    "matmul,m=4096 n=4096 k=4096,bf16,812.5\n")
    kernels, _ = read_calibration_csv(path)
    assert [k.kernels[0].narrow for k in kernels] == [16.0, 0.0]
