"""Host issue time of the expert layers (hybrid/moe_host.py): launch counts per local expert from
Transformer Engine's GroupedLinear, the measured per-launch host seconds, and when the GPU waits."""
from __future__ import annotations

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.hybrid import moe_host
from solver_plan.hybrid.moe_plan import evaluate_moe
from tests.test_moe import tiny


def test_host_seconds_by_hand_per_recipe():
    """64 experts on ep 2: 32 local experts x 2 GroupedLinears = 64 issues of each per-expert step.
    bf16 on x86: forward 64 x 13.528 us, backward 64 x (2 x 13.528 us + one wgrad placeholder
    allocation, 2.734375 us measured on Grace x 13.48 / 37.08 on x86); current scaling adds 3 kernels
    of 5 us per quantize (input forward, grad backward) to the fp8 GEMMs' 29.32 us; MXFP8 adds 1; the
    allocation is the same in every recipe. On Grace every launch x 37.08 / 13.48 (TE issue 2053) and
    the allocation at its Grace figure."""
    model = tiny(experts=64)
    alloc = 350e-6 / 128 * 13.48 / 37.08
    f, b = moe_host.expert_host_s(model, 2, "bf16")
    assert (f, b) == pytest.approx((64 * 13.528e-6, 64 * (2 * 13.528e-6 + alloc)))
    f, b = moe_host.expert_host_s(model, 2, "fp8-cs")
    assert (f, b) == pytest.approx((64 * (29.32e-6 + 15e-6), 64 * (2 * 29.32e-6 + 15e-6 + alloc)))
    f, b = moe_host.expert_host_s(model, 2, "mxfp8")
    assert (f, b) == pytest.approx((64 * (29.32e-6 + 5e-6), 64 * (2 * 29.32e-6 + 5e-6 + alloc)))
    grace = 37.08 / 13.48
    f, b = moe_host.expert_host_s(model, 2, "mxfp8", "grace")
    assert (f, b) == pytest.approx((64 * grace * (29.32e-6 + 5e-6),
                                    64 * (grace * (2 * 29.32e-6 + 5e-6) + 350e-6 / 128)))


def test_host_cpu_factor_is_the_published_ratio():
    """HOST_CPU_FACTOR["grace"] is data/device/published/host-cpu-launch.csv's torch Linear CPU time on
    GB200 over H100 DGX's; the GB200 device entry is a Grace host, the DGX ones x86."""
    import csv
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "data/device/published/host-cpu-launch.csv"
    rows = {(r["system"], r["backend"]): float(r["cpu_us"])
            for r in csv.DictReader(line for line in path.open() if not line.startswith("#"))}
    assert moe_host.HOST_CPU_FACTOR["grace"] == pytest.approx(rows[("GB200", "torch")] / rows[("H100 DGX", "torch")])
    assert moe_host.HOST_CPU_FACTOR["x86"] == 1.0
    assert resolve_cluster("gb200-nvl72").device.host_cpu == "grace"
    assert {resolve_cluster(name).device.host_cpu for name in ("b200-8x8-ib", "h100-80gb-superpod")} == {"x86"}


def test_allocation_cost_is_the_published_section_over_its_op_count():
    """HOST_ALLOC_S is data/device/published/te-grouped-host-ops.csv's per-op figure: TE issue 2897's
    350 us of wgrad allocations over the 128 per-expert allocations of that code (64 experts x FC1, FC2);
    the sections with no per-op count give no figure and price nothing."""
    import csv
    from pathlib import Path
    path = Path(__file__).resolve().parent.parent / "data/device/published/te-grouped-host-ops.csv"
    rows = {r["section"]: r for r in csv.DictReader(line for line in path.open() if not line.startswith("#"))}
    alloc = rows["wgrad tensor allocations"]
    assert float(alloc["measured_us"]) / int(alloc["ops_in_section"]) == pytest.approx(float(alloc["per_op_us"]), abs=1e-3)
    assert moe_host.HOST_ALLOC_S == pytest.approx(float(alloc["per_op_us"]) * 1e-6, rel=1e-3)
    assert [name for name, r in rows.items() if r["per_op_us"]] == ["wgrad tensor allocations"]


def test_recipe_follows_dtype_and_device():
    assert moe_host.expert_recipe("bf16", "block") == "bf16"
    assert moe_host.expert_recipe("fp8", "block") == "mxfp8"
    assert moe_host.expert_recipe("fp8", "tensor") == "fp8-cs"
    # the device tables say which devices scale in blocks: the Blackwell presets, not the Hopper ones
    from solver_plan.cluster import resolve_cluster
    scaling = {name: resolve_cluster(name).device.fp8_scaling
               for name in ("b200-8x8-ib", "gb200-nvl72", "h100-80gb-superpod", "h200-8x8-ib", "mi300x-8x8")}
    assert scaling == {"b200-8x8-ib": "block", "gb200-nvl72": "block", "h100-80gb-superpod": "tensor",
                       "h200-8x8-ib": "tensor", "mi300x-8x8": "tensor"}


def test_stall_dropless_sync_exposes_host_time_padded_hides_it_in_the_layer():
    """Dropless: the forward's sync leaves only the experts' GPU time (1 ms) to cover 3 ms of host
    time: 2 ms stall; padded to capacity: the layer's 4 ms forward covers it. Backward: 5 ms of host
    time behind 4 ms of GPU time: 1 ms either way."""
    assert moe_host.host_stall_s(3e-3, 5e-3, True, 1e-3, 4e-3, 4e-3) == pytest.approx((2e-3, 1e-3))
    assert moe_host.host_stall_s(3e-3, 5e-3, False, 1e-3, 4e-3, 4e-3) == pytest.approx((0.0, 1e-3))


def test_many_small_experts_are_priced_at_the_host_rate_and_skew_never_lowers_it():
    """16 tokens over 64 tiny experts: the GPU runs them in far less than the host needs to issue
    them, so the MoE layer's forward + backward costs at least the host's issue time; a skewed load
    issues the same experts, never cheaper."""
    cluster = resolve_cluster("h100-4x8-ib", 2)
    point = {"dp": 2, "tp": 1, "pp": 1, "ep": 2, "micro_batch_size": 1}
    model = tiny(experts=64)
    plan = evaluate_moe(model, cluster, 2, point, memory_limit=None)
    f, b = moe_host.expert_host_s(model, 2, "bf16")
    assert plan.pipeline_s >= model.layers * (f + b)
    skewed = evaluate_moe(model, cluster, 2, point, routing="zipf:2", memory_limit=None)
    assert skewed.step_time_s >= plan.step_time_s
