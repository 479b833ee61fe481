"""Zero-bubble schedules in hybrid plans (hybrid/zero_bubble.py): the bubbles of Qi et al. 2024 by
hand, the in-flight micro-batches, pins and the runtimes that run them. Brute force with ZB-H1 in
the space: tests/test_hybrid_fsdp.py (torchtitan's kernels)."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.memory import in_flight_microbatches
from solver_plan.hybrid.schedule import pipeline_s
from solver_plan.hybrid.space import Parallelism, parse_fix
from solver_plan.hybrid.zero_bubble import weight_grad_s
from solver_plan.result import Status

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
SMALL = "gpt2:layers=8,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"


def test_bubbles_by_hand():
    # 4 equal stages, F = B = W = 1 (T = 3), 8 micro-batches: 1F1B (p - 1) T, ZB-H1 (p - 1)(F + B - W),
    # ZB-H2 (p - 1)(F + B - 2W) = 0
    times, weights = [3.0] * 4, [1.0] * 4
    assert pipeline_s(times, 8, "1f1b") == pytest.approx(8 * 3 + 3 * 3)
    assert pipeline_s(times, 8, "zb-h1", weight_times=weights) == pytest.approx(8 * 3 + 3 * 1)
    assert pipeline_s(times, 8, "zb-h2", weight_times=weights) == pytest.approx(8 * 3)
    # W small: ZB-H2 keeps (p - 1)(F + B - 2W) = 3 x (2.5 - 1) with F = 1, B = 1.5, W = 0.5
    assert pipeline_s([3.0] * 4, 8, "zb-h2", weight_times=[0.5] * 4) == pytest.approx(24 + 3 * 1.5)


def test_in_flight_micro_batches():
    assert [in_flight_microbatches(i, 4, 16, "zb-h1") for i in range(4)] == [4, 4, 4, 4]
    assert [in_flight_microbatches(i, 4, 16, "zb-h2") for i in range(4)] == [7, 7, 7, 7]
    assert in_flight_microbatches(0, 4, 5, "zb-h2") == 5


def _plan(schedule, runtime="torchtitan"):
    fix = {"dp": 2, "tp": 2, "pp": 4, "micro_batch_size": 1, "schedule": schedule, "recompute": "none"}
    return evaluate(SMALL, CLUSTER, 16, fix, memory_limit="none", runtime=runtime)


def test_zero_bubble_plans_priced_and_memory_checked():
    one, h1, h2 = (_plan(s) for s in ("1f1b", "zb-h1", "zb-h2"))
    assert all(r.status == Status.FEASIBLE for r in (one, h1, h2))  # the validator re-derived them
    assert h2.plan.terms.pipeline_s < h1.plan.terms.pipeline_s < one.plan.terms.pipeline_s
    # ZB-H1 keeps 1F1B's peak (stage 0, p micro-batches in flight); ZB-H2 holds 2p - 1 = 7 of 8
    peak = one.plan.stages[0].memory.activations
    assert h1.plan.stages[0].memory.activations == pytest.approx(peak)
    assert h2.plan.stages[0].memory.activations == pytest.approx(peak * 7 / 4)
    # W of a stage: its blocks' weight-gradient GEMMs and a third of its end layers
    stage = h1.plan.stages[1]
    assert 0 < stage.weight_grad_s < stage.block_s / 2
    assert h1.to_dict()["stages"][1]["time_terms_s"]["weight_grad"] == stage.weight_grad_s


def test_pins_and_runtimes():
    assert parse_fix("schedule=zb-h1") == {"schedule": "zb-h1"}
    with pytest.raises(InputError, match="recompute"):
        Parallelism(2, 2, 4, 1, 8, recompute="per-stage", schedule="zb-h1")
    plan = _plan("zb-h1").to_dict()
    assert "torchtitan" in plan["schedule_runtimes"] and plan["parallelism"]["schedule"] == "zb-h1"
    assert _plan("1f1b").to_dict()["schedule_runtimes"] is None
    # the search offers a zero-bubble schedule only where the runtime runs it; a pin prices it anyway
    core = plan_hybrid(SMALL, CLUSTER, 16, memory_limit="none", time_limit=None, runtime="megatron-core")
    assert not core.plan.parallelism.schedule.startswith("zb-")
    pinned = plan_hybrid(SMALL, CLUSTER, 16, fix={"schedule": "zb-h2", "pp": 4}, memory_limit="none",
                         time_limit=None, runtime="megatron-core")
    assert pinned.status == Status.OPTIMAL and pinned.plan.parallelism.schedule == "zb-h2"
    assert "torchtitan" not in pinned.to_dict()["schedule_runtimes"]


def test_weight_gradients_of_a_block():
    from solver_plan.hybrid.model import transformer_spec
    from solver_plan.hybrid.stage_cost import BlockCoster

    profile = BlockCoster(transformer_spec(SMALL), CLUSTER, runtime="torchtitan").profile(2, 1)
    w = weight_grad_s(profile)
    assert w == pytest.approx(profile.block_forward_s - profile.attention_forward_s - profile.tp_comm_s / 2)
    assert 0 < w < profile.block_s - profile.block_forward_s  # inside the backward
