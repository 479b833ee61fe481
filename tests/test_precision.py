import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.precision import Precision, TrainingPrecision, default_for
from solver_plan.errors import InputError


def test_precision_bytes():
    assert [p.bytes for p in Precision] == [4, 4, 2, 2, 1]
    assert Precision.parse("BF16") is Precision.BF16
    with pytest.raises(InputError, match="unknown precision"):
        Precision.parse("fp64")


def test_mixed_bf16_is_megatron_zero_accounting():
    # ZeRO (SC'20) section 3.1: 2 (bf16 weights) + 2 (grads) + 4 (fp32 master) + 4 + 4 (Adam moments)
    b = TrainingPrecision.mixed("bf16").bytes_per_parameter()
    assert (b.weights, b.gradients, b.master, b.moments, b.total) == (2, 2, 4, 8, 16)
    mixed = TrainingPrecision.mixed("fp16")
    assert mixed.activations == Precision.FP16 and mixed.compute == Precision.FP16


def test_fp32_has_no_master_copy():
    b = TrainingPrecision.fp32().bytes_per_parameter()
    assert (b.weights, b.gradients, b.master, b.moments, b.total) == (4, 4, 0, 8, 16)
    assert TrainingPrecision.fp32("tf32").compute == Precision.TF32


def test_fp8_computes_in_fp8_and_stores_bf16():
    p = TrainingPrecision.mixed("fp8")
    assert p.compute == Precision.FP8 and p.activations == Precision.BF16
    assert p.bytes_per_parameter().total == 16


def test_bad_combinations_rejected():
    with pytest.raises(InputError):
        TrainingPrecision.mixed("fp32")
    with pytest.raises(InputError):
        TrainingPrecision.fp32("bf16")
    with pytest.raises(InputError):
        TrainingPrecision(Precision.BF16, "bf16", Precision.BF16, Precision.BF16, None, Precision.FP32)


@pytest.mark.parametrize("preset, expected", [
    ("a100x8-80gb", "mixed-bf16"), ("h100-4x8-ib", "mixed-bf16"), ("v100x8-nvlink", "mixed-fp16"),
    ("p100-4x4", "fp32"), ("k80-16x4", "fp32")])
def test_default_for_presets(preset, expected):
    cluster = resolve_cluster(preset)
    assert default_for(cluster).name == expected
    assert default_for(cluster.device) == default_for(cluster)


def test_parse_auto_and_names():
    v100 = resolve_cluster("v100x8-nvlink")
    assert TrainingPrecision.parse("auto", v100).name == "mixed-fp16"
    assert TrainingPrecision.parse("bf16").name == "mixed-bf16"
    assert TrainingPrecision.parse("fp32").master is None


def test_auto_keeps_fp32_for_measured_profiles():
    from solver_plan.cost.precision import resolve_precision
    from solver_plan.data import data_dir
    from solver_plan.graph.resolve import resolve_model
    v100 = resolve_cluster("v100x8-nvlink").device
    profile = resolve_model(str(data_dir() / "pipedream-profiles" / "vgg16" / "graph.txt"))
    assert resolve_precision("auto", v100, profile).name == "fp32"
    assert resolve_precision(None, v100).name == "mixed-fp16"
    assert resolve_precision("bf16", v100, profile).name == "mixed-bf16"
