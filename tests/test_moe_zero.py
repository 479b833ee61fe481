"""ZeRO-2 in expert-parallel plans (hybrid/moe_space.py ZERO_STAGES): gradients sharded over the
data-parallel replicas (dense) and the expert-data-parallel group (experts), by hand on a tiny MoE;
the same traffic as the distributed optimizer (ZeRO-1), so never slower and never more memory; only
with pp = 1; ZeRO-3 / FSDP: weights sharded too, two gathered layers and FSDP2's root by hand,
per-micro-batch gathers (with pp > 1 only for FSDP2 runtimes)."""
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


def test_zero2_only_without_a_pipeline_zero3_with_a_pipeline_for_fsdp2_only():
    model, cluster = tiny(), resolve_cluster("h100-4x8-ib", 8)
    points = list(enumerate_points(model, 8, cluster.devices_per_node, 16, {}))
    assert {p.zero_stage for p in points if p.pp == 1} == {0, 1, 2, 3}
    assert {p.zero_stage for p in points if p.pp > 1} == {0, 1, 3}
    with pytest.raises(InputError, match="ZeRO-2 with a pipeline"):
        evaluate_moe(model, cluster, 16, {"dp": 4, "tp": 1, "pp": 2, "ep": 2, "micro_batch_size": 1,
                                          "zero_stage": 2})
    pipelined = {"dp": 4, "tp": 1, "pp": 2, "ep": 2, "micro_batch_size": 1, "zero_stage": 3}
    with pytest.raises(InputError, match="ZeRO-3 with a pipeline"):
        evaluate_moe(model, cluster, 16, pipelined)  # Megatron-core (the default runtime)
    assert plan_moe(model, cluster, 16, fix="zero_stage=2,pp=2", time_limit=None).plan is None
    assert plan_moe(model, cluster, 16, fix="zero_stage=3,pp=2", time_limit=None).plan is None
    # FSDP2 (torchtitan) with a pipeline gathers once a step: ZeRO-1's memory and traffic, plus its root
    titan = evaluate_moe(model, cluster, 16, pipelined, runtime="torchtitan", memory_limit=None)
    one = evaluate_moe(model, cluster, 16, {**pipelined, "zero_stage": 1}, runtime="torchtitan", memory_limit=None)
    assert titan.step_time_s == pytest.approx(one.step_time_s, rel=1e-12)
    assert titan.stages[0].memory.weights == pytest.approx(one.stages[0].memory.weights)


def test_zero3_memory_by_hand():
    """dp 4, tp 1, pp 1, ep 2 (edp 2), mixed precision: ZeRO-3 shards the 16-bit weights too, dense over
    dp = 4 and experts over edp = 2; it holds two gathered layers (the one computing, the prefetched
    next) of the largest layer's weights: a MoE layer's dense part 4 x 64^2 + 2 x 64 norms + 64 x 4
    router = 16,768 and its 2 local experts 2 x 3 x 64 x 128 = 49,152 parameters, 2 x 2 bytes each;
    FSDP2 (torchtitan) also keeps its root (embedding 100 x 64, final norm 64, head 100 x 64 = 12,864
    parameters) unsharded, Megatron-core does not."""
    cluster = resolve_cluster("h100-4x8-ib", 4)
    point = dict(dp=4, tp=1, pp=1, ep=2, etp=1, micro_batch_size=1, micro_batches=2)
    layer, root = 16768 + 49152, 100 * 64 + 64 + 100 * 64
    assert DENSE - 4 * 16768 == root
    for runtime, root_bytes in ((None, 0.0), ("torchtitan", 2.0 * root)):
        ctx = make_context(tiny(), cluster, 8, None, runtime=runtime)
        m3 = stage_memory(ctx, MoEPoint(**point, zero_stage=3), 0, 4, 0)
        m2 = stage_memory(ctx, MoEPoint(**point, zero_stage=2), 0, 4, 0)
        assert m3.weights == pytest.approx(2 * (DENSE / 4 + EXPERTS / 2))
        assert m3.gradients == pytest.approx(m2.gradients) and m3.optimizer == pytest.approx(m2.optimizer)
        assert m3.buffers - m2.buffers == pytest.approx(2 * 2 * layer + root_bytes)


@pytest.mark.parametrize("runtime", [None, "torchtitan"])
def test_zero3_gathers_every_micro_batch_never_faster_than_zero1(runtime):
    """pp 1: ZeRO-3 all-gathers the weights in every micro-batch's forward and backward, on top of
    the gradient reduce-scatter: never faster than the distributed optimizer, and more so with more
    micro-batches (each gathers again)."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    ctx = make_context(tiny(), cluster, 32, None, runtime=runtime)
    for m, b in ((2, 2), (4, 1)):
        one, three = (price(ctx, MoEPoint(8, 1, 1, 4, 1, b, m, zero_stage=z)) for z in (1, 3))
        assert three.dp_sync_s > one.dp_sync_s and three.step_time_s >= one.step_time_s
        assert three.memory_per_device_bytes < one.memory_per_device_bytes


@pytest.mark.parametrize("stage", [2, 3])
def test_search_takes_the_sharding_that_fits_and_agrees_with_brute_force(stage):
    """pp 1, ep 4 pinned, a memory limit between the ZeRO-(stage - 1) and ZeRO-stage plans' memory: the
    search returns ZeRO-stage (gradients sharded; for 3 the weights too) and agrees with a brute force
    over its points."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    pins = {"pp": 1, "ep": 4, "micro_batch_size": 1, "recompute": "none"}
    model = tiny()
    loose = make_context(model, cluster, 16, None)
    above, below = (price(loose, MoEPoint(8, 1, 1, 4, 1, 1, 2, zero_stage=z)).memory_per_device_bytes
                    for z in (stage - 1, stage))
    limit = (above + below) / 2
    result = plan_moe(model, cluster, 16, fix=pins, memory_limit=limit, time_limit=None)
    assert result.plan.point.zero_stage == stage and result.plan.memory_per_device_bytes <= limit
    ctx = make_context(model, cluster, 16, limit)
    best = brute_force(ctx, list(enumerate_points(model, 8, cluster.devices_per_node, 16, pins)))
    assert result.step_time_s == pytest.approx(best.step_time_s, rel=1e-12)
