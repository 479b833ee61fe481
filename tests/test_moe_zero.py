"""ZeRO-2 in expert-parallel plans (hybrid/moe_space.py ZERO_STAGES): gradients sharded over the
data-parallel replicas (dense) and the expert-data-parallel group (experts), by hand on a tiny MoE;
the same traffic as the distributed optimizer (ZeRO-1), so never slower and never more memory; only
with pp = 1; ZeRO-3 / FSDP refused as not priced."""
from __future__ import annotations

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid.moe_plan import brute_force, evaluate_moe, plan_moe
from solver_plan.hybrid.moe_price import make_context, price, stage_memory
from solver_plan.hybrid.moe_space import MoEPoint, enumerate_points
from test_moe import tiny

EXPERTS = 4 * 2 * 3 * 64 * 128  # 4 MoE layers x E/ep = 2 local experts x 3 h f_e
DENSE = 4 * (4 * 64 * 64 + 2 * 64 + 64 * 4) + 100 * 64 + 64 + 100 * 64  # attention, norms, router; embedding, head


def test_zero2_memory_by_hand():
    """dp 4, tp 1, pp 1, ep 2 (edp 2), mixed precision (2 + 2 + 12 bytes per parameter): ZeRO-2 keeps
    the 16-bit weights whole, and shards gradients and optimizer state, the dense ones over dp = 4 and
    the experts' over edp = 4 / 2 = 2."""
    ctx = make_context(tiny(), resolve_cluster("h100-4x8-ib", 4), 8, None)
    m2 = stage_memory(ctx, MoEPoint(dp=4, tp=1, pp=1, ep=2, etp=1, micro_batch_size=1, micro_batches=2,
                                    zero_stage=2), 0, 4, 0)
    assert m2.weights == pytest.approx(2 * (DENSE + EXPERTS))
    assert m2.gradients == pytest.approx(2 * (DENSE / 4 + EXPERTS / 2))
    assert m2.optimizer == pytest.approx(12 * (DENSE / 4 + EXPERTS / 2))
    m1 = stage_memory(ctx, MoEPoint(4, 1, 1, 2, 1, 1, 2, zero_stage=1), 0, 4, 0)
    assert m1.gradients == pytest.approx(2 * (DENSE + EXPERTS)) and m1.optimizer == pytest.approx(m2.optimizer)
    assert m1.total - m2.total == pytest.approx(2 * (DENSE * 3 / 4 + EXPERTS / 2))


@pytest.mark.parametrize("routing", ["uniform", "zipf:0.7"])
def test_zero2_has_zero1_traffic(routing):
    """Reduce-scatter of the gradients and all-gather of the weights either way: the same step time."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    ctx = make_context(tiny(), cluster, 16, None, routing=routing)
    one, two = (price(ctx, MoEPoint(8, 1, 1, 4, 1, 1, 2, zero_stage=z)) for z in (1, 2))
    assert two.step_time_s == pytest.approx(one.step_time_s, rel=1e-12)
    assert two.memory_per_device_bytes < one.memory_per_device_bytes


def test_search_takes_zero2_when_memory_binds():
    """pp 1, ep 4 pinned, a memory limit between the ZeRO-2 and ZeRO-1 plans' memory: the search returns
    ZeRO-2 (and agrees with a brute force over its points)."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    pins = {"pp": 1, "ep": 4, "micro_batch_size": 1, "recompute": "none"}
    model = tiny()
    loose = make_context(model, cluster, 16, None)
    m1, m2 = (price(loose, MoEPoint(8, 1, 1, 4, 1, 1, 2, zero_stage=z)).memory_per_device_bytes for z in (1, 2))
    limit = (m1 + m2) / 2
    result = plan_moe(model, cluster, 16, fix=pins, memory_limit=limit, time_limit=None)
    assert result.plan.point.zero_stage == 2 and result.plan.memory_per_device_bytes <= limit
    ctx = make_context(model, cluster, 16, limit)
    best = brute_force(ctx, list(enumerate_points(model, 8, cluster.devices_per_node, 16, pins)))
    assert result.step_time_s == pytest.approx(best.step_time_s, rel=1e-12)


def test_zero2_only_without_a_pipeline_and_zero3_refused():
    model, cluster = tiny(), resolve_cluster("h100-4x8-ib", 8)
    points = list(enumerate_points(model, 8, cluster.devices_per_node, 16, {}))
    assert {p.zero_stage for p in points if p.pp == 1} == {0, 1, 2}
    assert {p.zero_stage for p in points if p.pp > 1} == {0, 1}
    with pytest.raises(InputError, match="ZeRO-3 / FSDP is not priced"):
        plan_moe(model, cluster, 16, fix="zero_stage=3", time_limit=None)
    with pytest.raises(InputError, match="ZeRO-2 with a pipeline"):
        evaluate_moe(model, cluster, 16, {"dp": 4, "tp": 1, "pp": 2, "ep": 2, "micro_batch_size": 1,
                                          "zero_stage": 2})
    assert plan_moe(model, cluster, 16, fix="zero_stage=2,pp=2", time_limit=None).plan is None
