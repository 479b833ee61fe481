"""The B200 / GB200 device entries (data/hardware/devices.yaml) are the ones scripts/published_device_tables.py
derives from the published kernel measurements in data/device/published/, and the derivation counts what
the cost model counts."""
import sys
from pathlib import Path

import pytest

from solver_plan.cluster.devices import known_device
from solver_plan.units import parse_flops

ROOT = Path(__file__).resolve().parents[1]


def _script():
    sys.path.insert(0, str(ROOT / "scripts"))  # a script, not a module of the package
    import published_device_tables
    return published_device_tables


def _table(name):
    return known_device(name)["table"]


@pytest.mark.parametrize("name", ["B200", "GB200"])
def test_matrix_curve_is_the_derived_one(name):
    script = _script()
    fractions = script.xla_fractions(script._rows(script.FOLDER / "xla-matmul-sm100-sm90.csv"))
    derived = [[t, value] for t, value, _, _ in script.matrix_curve(fractions)]
    assert _table(name)["matrix_efficiency"] == derived


@pytest.mark.parametrize("name", ["B200", "GB200"])
def test_attention_curves_are_the_measured_cudnn_9_17_ones(name):
    script = _script()
    curves = script.attention_curves(script._rows(script.FOLDER / "cudnn-sdpa-training.csv"), "GB200")
    table = _table(name)["attention_efficiency"]
    for backend in ("cudnn", "flash2"):
        measured = dict(curves[backend])
        for seq, fraction in table[backend]:
            if seq:  # the 0 entry is the 512-token figure (shorter sequences: no measurement)
                assert fraction == pytest.approx(measured[seq], abs=0.006), (backend, seq)
        assert table[backend][-1][1] == pytest.approx(measured[512], abs=0.006)


@pytest.mark.parametrize("name", ["B200", "GB200"])
def test_fp8_factor_is_te_mxfp8_kernels_only(name):
    """(13.102 ms bf16 / 7.161 ms MXFP8) / 2 = 0.915, 0.91 in the table: the layer's 12 GEMMs with pre-quantized inputs."""
    script = _script()
    factor = script.te_fp8_factor(script._rows(script.FOLDER / "te-gemm-blackwell.csv"))
    assert factor == pytest.approx(13.102 / 7.161 / 2, rel=1e-9)
    assert _table(name)["dtype_efficiency"]["fp8"] == pytest.approx(factor, abs=0.005)


def test_attention_fraction_by_hand():
    """GB200 cuDNN at 4K tokens: causal forward 0.5 x 4 x 128 heads x 4096^2 x 128 = 5.50e11 FLOP, counted
    3.5x for forward + backward, over 0.397 + 1.304 ms and the 2.5 PFLOPS peak: 0.4525."""
    script = _script()
    row = {"device": "GB200", "backend": "cudnn", "seq": "4096", "heads": "128", "head_dim": "128",
           "forward_ms": "0.397", "backward_ms": "1.304"}
    (_, fraction), = script.attention_curves([row], "GB200")["cudnn"]
    assert fraction == pytest.approx(3.5 * 0.5 * 4 * 128 * 4096 ** 2 * 128 / 1.701e-3 / 2.5e15, rel=1e-9)
    assert fraction == pytest.approx(0.4525, abs=5e-4)


def test_peaks_used_by_the_derivation_are_the_tables():
    script = _script()
    assert parse_flops(_table("B200")["matrix_flops"]["bf16"]) == script.PEAK_BF16["sm_100"]
    assert parse_flops(_table("H100")["matrix_flops"]["bf16"]) == script.PEAK_BF16["sm_90"]
    assert parse_flops(_table("GB200")["matrix_flops"]["fp8"]) == script.PEAK["GB200"][1]


@pytest.mark.parametrize("name", ["A100-SXM-80GB", "H100-SXM-80GB", "H200"])
def test_triton_attention_curves_are_the_derived_ones(name):
    """triton2022 (the 2022 Triton FlashAttention, LLM Foundry's attn_impl: triton): FlashAttention-2's release
    chart; on the A100 its own bars, on Hopper the chart's H100 FlashAttention-2 x its A100 ratio Triton /
    FlashAttention-2."""
    script = _script()
    chart = script._rows(script.FOLDER / "flashattention2-fwd-bwd.csv")
    derived = script.triton_curve_a100(chart) if name.startswith("A100") else \
        [(s, f) for s, f, _ in script.triton_curve_hopper(chart)]
    assert _table(name)["attention_efficiency"]["triton2022"] == [[s, f] for s, f in derived]


def test_triton_ratio_by_hand():
    """At 8K tokens the A100 chart reads Triton 78 TFLOPS against FlashAttention-2's 182 (ratio 0.4286), and the
    H100 chart FlashAttention-2 at 308: 0.4286 x 308 / 989 = 0.133."""
    script = _script()
    curve = dict((s, (f, r)) for s, f, r in script.triton_curve_hopper(
        script._rows(script.FOLDER / "flashattention2-fwd-bwd.csv")))
    fraction, ratio = curve[8192]
    assert ratio == pytest.approx(78 / 182, rel=1e-9) and fraction == round(308 * 78 / 182 / 989, 3) == 0.133
