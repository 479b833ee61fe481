"""`solver-plan calibrate`: kernels from layers and CSV rows, the fit, the YAML it writes."""
from dataclasses import replace

import numpy as np
import pytest

from solver_plan.calibrate.csvfile import read_calibration_csv
from solver_plan.calibrate.fit import (MATRIX_THRESHOLDS, MEMORY_THRESHOLDS, KernelTable, _levels, fit_compute,
                                       fit_links, predict)
from solver_plan.calibrate.measurements import CollectiveMeasurement, Kernel, Measurement
from solver_plan.calibrate.nnls import nnls
from solver_plan.calibrate.output import cluster_yaml
from solver_plan.calibrate.profiles import layer_work, profile_measurements
from solver_plan.cli import main
from solver_plan.cluster import resolve_cluster
from solver_plan.cluster.loader import cluster_from_dict, load_cluster
from solver_plan.cost.collectives import collective_time
from solver_plan.cost.precision import Precision
from solver_plan.data import data_dir
from solver_plan.errors import InputError
from solver_plan.graph.importers.pipedream import ProfileNode

BF16 = Precision.BF16


def _device():
    # the fit's curves absorb the preset's calibrated kernel_time_scale (fit.apply sets it to 1)
    return replace(resolve_cluster("a100x8-80gb").device, kernel_time_scale=1.0)


def _true_device():
    """A device with known parameters (on the fit's thresholds) that the fit must recover."""
    return replace(_device(), matrix_efficiency=tuple(zip(MATRIX_THRESHOLDS, (0.9, 0.85, 0.7, 0.5, 0.3, 0.12, 0.05))),
                   memory_efficiency=tuple(zip(MEMORY_THRESHOLDS, (0.92, 0.8, 0.6, 0.4, 0.2))),
                   launch_overhead=6e-6)


def _synthetic_measurements(device, count=300, seed=0):
    rng = np.random.default_rng(seed)
    measurements = []
    for i in range(count):
        if i % 3:
            m, n, k = (int(2 ** rng.uniform(6, 14)) for _ in range(3))
            kernel = Kernel(2.0 * m * n * k, 2.0 * (m * k + k * n + m * n), "matrix", BF16)
        else:
            elements = int(2 ** rng.uniform(12, 30))
            kernel = Kernel(float(elements), 4.0 * elements, "vector", BF16)
        seconds = predict(device, Measurement("k", "g", "op", (kernel,), 1.0))
        measurements.append(Measurement(f"k{i}", f"g{i % 4}", "op", (kernel,), seconds))
    return measurements


def test_fit_recovers_known_parameters():
    true = _true_device()
    measurements = _synthetic_measurements(true)
    fit = fit_compute(_device(), measurements)
    fitted = fit.apply(_device())
    errors = [abs(predict(fitted, m) / m.seconds - 1) for m in measurements]
    assert max(errors) < 1e-6
    assert fit.launch_overhead == pytest.approx(6e-6, rel=1e-4)
    # every bin with data is recovered exactly
    table_bins = {int(b) for b in KernelTable(_device(), measurements).math_bin[
        ~KernelTable(_device(), measurements).vector]}
    for b in table_bins:
        assert fit.matrix_efficiency[b][1] == pytest.approx(true.matrix_efficiency[b][1], rel=1e-4)


def test_fitted_curves_are_valid_and_monotone():
    fit = fit_compute(_device(), _synthetic_measurements(_true_device(), count=60, seed=1))
    for curve in (fit.matrix_efficiency, fit.memory_efficiency):
        levels = [e for _, e in curve]
        assert all(0 < e <= 1 for e in levels)
        assert levels == sorted(levels, reverse=True)  # never more efficient when smaller


def test_kernel_table_reproduces_compute_time():
    device = _true_device()
    measurements = _synthetic_measurements(device, count=50, seed=2)
    table = KernelTable(device, measurements)
    levels = (_levels(device.matrix_efficiency, MATRIX_THRESHOLDS), _levels(device.vector_efficiency, (16.0, 1.0, 0.1, 0.0)),
              _levels(device.memory_efficiency, MEMORY_THRESHOLDS))
    times = table.times(*levels, device.launch_overhead)
    assert np.allclose(times, [predict(device, m) for m in measurements], rtol=1e-9)


def test_nuisance_overhead_is_separated_from_the_hardware():
    true = _true_device()
    base = _synthetic_measurements(true, count=120, seed=3)
    # half the measurements went through a profiler hook adding 0.2 ms (one kernel each, so the
    # other half is what separates the hook from the launch overhead)
    shifted = [replace(m, seconds=m.seconds + 2e-4, overhead="hook") if i % 2 else m for i, m in enumerate(base)]
    fit = fit_compute(_device(), shifted)
    assert dict(fit.measurement_overheads)["hook"] == pytest.approx(2e-4, rel=1e-3)
    assert fit.launch_overhead == pytest.approx(6e-6, rel=1e-2)


def test_nnls_matches_the_optimality_conditions():
    rng = np.random.default_rng(4)
    A, b = rng.normal(size=(40, 7)), rng.normal(size=40)
    x = nnls(A, b)
    gradient = A.T @ (A @ x - b)
    assert np.all(x >= 0)
    assert np.all(gradient[x > 0] == pytest.approx(0, abs=1e-9))
    assert np.all(gradient[x == 0] >= -1e-9)  # KKT: no descent direction into the feasible set


def test_link_fit_recovers_latency_and_efficiency():
    truth = resolve_cluster("h100-4x8-ib")
    truth = replace(truth, intra_node=replace(truth.intra_node, latency=7e-6, efficiency=0.8),
                    inter_node=replace(truth.inter_node, latency=12e-6, efficiency=0.7))
    rows = []
    for nbytes in (1e5, 1e6, 1e7, 1e8, 1e9):
        for devices, per_node in ((8, 8), (4, 4), (16, 8), (32, 8)):
            seconds = collective_time(truth, "all_reduce", nbytes, devices, per_node)
            rows.append(CollectiveMeasurement("all_reduce", nbytes, devices, per_node, seconds))
    fit = fit_links(resolve_cluster("h100-4x8-ib"), rows)
    assert fit.intra_latency == pytest.approx(7e-6, rel=1e-3)
    assert fit.intra_efficiency == pytest.approx(0.8, rel=1e-3)
    assert fit.inter_efficiency == pytest.approx(0.7, rel=1e-2)


def test_conv_and_linear_kernels_by_hand():
    # resnet50 node76: Conv2d(128, 512, 1x1) with a 205,520,896-byte output (128 x 512 x 28 x 28 fp32)
    node = ProfileNode("node76", "Conv2d(128, 512, kernel_size=(1, 1), stride=(1, 1), bias=False)",
                       1.318, 2.796, (205520896.0,), 262144.0)
    work = layer_work(node, 51380224.0, False, "here")
    elements = 205520896 / 4
    assert work.forward[0].flops == pytest.approx(2 * elements * 128)
    assert work.forward[0].hbm_bytes == pytest.approx(51380224 + 262144 + 205520896)
    assert len(work.backward) == 2  # input gradient and weight gradient
    linear = ProfileNode("n", "Linear(in_features=2048, out_features=1000, bias=True)", 0.1, 0.2, (512000.0,), 0.0)
    assert layer_work(linear, 1.0, True, "x").forward[0].flops == pytest.approx(2 * 128 * 2048 * 1000)
    assert len(layer_work(linear, 1.0, True, "x").backward) == 1  # no input gradient for a model input
    winograd = ProfileNode("n", "Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1))", 1, 1, (4e6,), 0.0)
    assert layer_work(winograd, 4e6, False, "x").forward[0].flops == pytest.approx(2 * 1e6 * 64 * 9 / 2.25)


def test_profile_measurements_cover_the_profile():
    profile = profile_measurements(data_dir() / "pipedream-profiles" / "resnet18")
    assert profile.covered_s > 0.95 * profile.measured_total_s
    kinds = {m.kind.split()[0] for m in profile.measurements}
    assert {"Conv2d", "BatchNorm2d", "ReLU", "Linear"} <= kinds


CSV = """# measured on a test device
op,shape,dtype,time_us,group
matmul,m=4096 n=4096 k=4096,bf16,500,gemm
conv2d,n=32 c=64 h=56 w=56 k=64 r=3 s=3 pad=1,bf16,300,conv
attention,batch=4 heads=16 seq=2048 head_dim=64 causal=1,bf16,400,attn
elementwise,elements=1000000 reads=2,bf16,10,misc
layernorm,rows=8192 cols=1024,bf16,30,misc
all_reduce,bytes=268435456 devices=8,bf16,2900,comm
"""


def test_csv_rows(tmp_path):
    path = tmp_path / "m.csv"
    path.write_text(CSV)
    kernels, collectives = read_calibration_csv(path)
    assert [m.kind for m in kernels] == ["matmul", "conv2d", "attention", "elementwise", "layernorm"]
    assert kernels[0].kernels[0].flops == pytest.approx(2 * 4096 ** 3)
    assert kernels[1].kernels[0].flops == pytest.approx(2 * 32 * 64 * 56 * 56 * 64 * 9)  # padding keeps 56x56
    assert kernels[2].kernels[0].flops == pytest.approx(4 * 4 * 16 * 2048 * 2048 * 64 / 2)
    assert kernels[3].kernels[0].hbm_bytes == pytest.approx(3 * 1e6 * 2)
    assert kernels[0].seconds == pytest.approx(500e-6)
    assert collectives[0].group_size == 8 and collectives[0].devices_per_node == 8


@pytest.mark.parametrize("row, fragment", [
    ("gemm,m=1 n=1 k=1,bf16,5", "unknown op"),
    ("matmul,m=1 n=1,bf16,5", "needs k"),
    ("matmul,m=1 n=1 k=1 q=3,bf16,5", "no shape key 'q'"),
    ("matmul,m=1 n=1 k=1,bf17,5", "unknown precision"),
    ("matmul,m=1 n=1 k=1,bf16,-5", "positive"),
    ("all_reduce,bytes=100 devices=6 devices_per_node=4,bf16,5", "multiple"),
])
def test_bad_csv_rows_name_the_line(tmp_path, row, fragment):
    path = tmp_path / "bad.csv"
    path.write_text("op,shape,dtype,time_us\n" + row + "\n")
    with pytest.raises(InputError) as info:
        read_calibration_csv(path)
    assert fragment in str(info.value) and f"{path}:2" in str(info.value)


def test_yaml_round_trip():
    for preset in ("v100x8-nvlink", "h100-4x8-ib", "p100-4x4"):
        cluster = resolve_cluster(preset)
        import yaml
        assert cluster_from_dict(yaml.safe_load(cluster_yaml(cluster, "header"))) == cluster


def test_cli_writes_a_cluster_every_command_loads(tmp_path, capsys):
    csv = tmp_path / "m.csv"
    csv.write_text(CSV)
    out = tmp_path / "calibrated.yaml"
    assert main(["calibrate", "--cluster", "a100x8-80gb", "--csv", str(csv), "--out", str(out)]) == 0
    cluster = load_cluster(out)
    assert cluster.name == "a100x8-80gb-calibrated"
    assert main(["check", str(out)]) == 0
    assert main(["plan", "--model", "mlp:layers=2,hidden=256,batch=64", "--cluster", str(out), "--devices", "2",
                 "--planner", "data-parallel"]) == 0
    capsys.readouterr()
    bad = tmp_path / "bad.csv"
    bad.write_text("op,shape\n")
    assert main(["calibrate", "--csv", str(bad), "--out", str(tmp_path / "x.yaml")]) == 2
    err = capsys.readouterr().err
    assert "missing dtype" in err and len(err.strip().splitlines()) == 1


def test_link_fit_separates_point_to_point_from_collective_efficiency():
    """p2p rows inform the link's p2p_efficiency, collectives its efficiency; the latency is shared."""
    base = resolve_cluster("h100-4x8-ib")
    truth = replace(base, intra_node=replace(base.intra_node, latency=7e-6, efficiency=0.8, p2p_efficiency=0.92))
    rows = []
    for nbytes in (1e5, 1e6, 1e7, 1e8, 1e9):
        rows.append(CollectiveMeasurement("all_reduce", nbytes, 8, 8, collective_time(truth, "all_reduce", nbytes, 8, 8)))
        rows.append(CollectiveMeasurement("p2p", nbytes, 2, 2, collective_time(truth, "p2p", nbytes, 2, 2)))
    fit = fit_links(base, rows)
    assert fit.intra_latency == pytest.approx(7e-6, rel=1e-3)
    assert fit.intra_efficiency == pytest.approx(0.8, rel=1e-3)
    assert fit.intra_p2p_efficiency == pytest.approx(0.92, rel=1e-3)
    fitted = fit.apply(base)
    assert fitted.intra_node.p2p_efficiency == pytest.approx(0.92, rel=1e-3)
    # collectives alone leave the p2p efficiency as it was (None: it follows `efficiency`)
    only_collectives = fit_links(base, [r for r in rows if r.kind == "all_reduce"])
    assert only_collectives.intra_p2p_efficiency is None
    assert only_collectives.apply(base).intra_node.p2p_efficiency is None


def test_row_in_a_dtype_the_device_lacks_names_the_line(tmp_path):
    from solver_plan.calibrate.api import calibrate
    path = tmp_path / "v100.csv"
    path.write_text("op,shape,dtype,time_us\nmatmul,m=64 n=64 k=64,fp16,5\nmatmul,m=1024 n=1024 k=1024,bf16,40\n")
    with pytest.raises(InputError) as info:
        calibrate(resolve_cluster("v100x8-nvlink"), csv_files=[path])
    assert f"{path}:3" in str(info.value) and "bf16" in str(info.value)


def test_too_few_rows_warn_under_determined_and_bounds():
    """One collective for a latency and an efficiency, and as many kernels as fitted values: both
    fits say they are under-determined; a collective faster than the nominal bandwidth lands on the
    efficiency cap and says so."""
    base = resolve_cluster("a100x8-80gb")
    nominal = collective_time(replace(base, intra_node=replace(base.intra_node, efficiency=1.0, latency=0.0)),
                              "all_reduce", 2 ** 28, 8, 8)
    links = fit_links(base, [CollectiveMeasurement("all_reduce", 2.0 ** 28, 8, 8, 0.5 * nominal)])
    text = " ".join(links.warnings)
    assert "under-determined: 1 collective" in text and "intra-node efficiency 1.000, the cap" in text
    device = _device()
    kernels = _synthetic_measurements(_true_device(), count=3)
    fit = fit_compute(device, kernels)
    assert fit.parameters >= 3 and any(w.startswith("under-determined: 3 kernel") for w in fit.warnings)


def test_enough_rows_on_the_true_model_give_no_warnings():
    truth = _true_device()
    fit = fit_compute(_device(), _synthetic_measurements(truth))
    assert not any(w.startswith("under-determined") for w in fit.warnings)
    assert not any("implausibly" in w for w in fit.warnings)
    base = resolve_cluster("h100-4x8-ib")
    true_links = replace(base, intra_node=replace(base.intra_node, latency=7e-6, efficiency=0.8))
    rows = [CollectiveMeasurement("all_reduce", b, 8, 8, collective_time(true_links, "all_reduce", b, 8, 8))
            for b in (1e5, 1e6, 1e7, 1e8)]
    assert fit_links(base, rows).warnings == ()


def test_documented_example_csv_runs_as_the_readme_says(tmp_path, capsys):
    """docs/calibration-csv.md's example is a CSV for v100x8-nvlink (the README's command)."""
    from pathlib import Path
    text = (Path(__file__).parent.parent / "docs" / "calibration-csv.md").read_text()
    example = text.split("```\n")[1]
    csv = tmp_path / "my-kernels.csv"
    csv.write_text(example)
    out = tmp_path / "my-cluster.yaml"
    assert main(["calibrate", "--cluster", "v100x8-nvlink", "--csv", str(csv), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "intra-node link" in printed and load_cluster(out).devices_per_node == 8
