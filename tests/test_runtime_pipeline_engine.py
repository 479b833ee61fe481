"""The pipeline engines' own costs, by hand: DeepSpeed's gradient accumulation as a separate kernel
(Megatron-DeepSpeed 2022 has no gradient_accumulation_fusion) and the all-gathers that scatter-gather
of the pipeline tensors costs (DeepSpeed: 1 on the receiving stage, 2 on the sending stage; Megatron-LM
2021: 1 on each side), in the hybrid model and in its validator."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.compute import compute_time
from solver_plan.hybrid import evaluate
from solver_plan.hybrid.comm import collective
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.stage_cost import grad_accumulate_s
from solver_plan.hybrid.validate import validate_plan
from solver_plan.runtime import resolve_runtime

MODEL = "gpt2:layers=8,hidden=1024,heads=16,head_dim=64,ffn=4096,seq=2048,positions=2048,vocab=32000"
CLUSTER = resolve_cluster("a100-80gb-superpod", 64)
PINNED = dict(dp=2, tp=8, pp=4, micro_batch_size=1, zero_stage=0, recompute="full", schedule="1f1b")


def test_grad_accumulation_kernel_by_hand():
    """3 g P / t HBM bytes per block and micro-batch (read both gradients, write one), for DeepSpeed only."""
    spec = transformer_spec(MODEL)
    # 4 h^2 + 2 h f weights; biases 3h (qkv) + h (out) + f (fc1) + h (fc2) = 9h with f = 4h; 2 norms of 2h
    params = 4 * 1024 ** 2 + 2 * 1024 * 4096 + 9 * 1024 + 4 * 1024
    assert spec.block_params == params
    by_hand = compute_time(CLUSTER, 0.0, 3 * 2 * params / 8, unit="vector")
    assert grad_accumulate_s(CLUSTER, spec, 8, 2.0, resolve_runtime("deepspeed")) == pytest.approx(by_hand)
    for fused in ("megatron-core", "megatron-2021", "torchtitan", "nemo"):
        assert grad_accumulate_s(CLUSTER, spec, 8, 2.0, resolve_runtime(fused)) == 0.0


def test_accumulation_is_paid_by_all_micro_batches_but_the_first():
    m = 16  # global batch 32 = dp 2 x m 16 x b 1
    r = evaluate(MODEL, CLUSTER, 32, PINNED, memory_limit="none", runtime="deepspeed")
    stage = r.plan.stages[0]
    spec = transformer_spec(MODEL)
    one = grad_accumulate_s(CLUSTER.first_devices(8), spec, 8, 2.0, resolve_runtime("deepspeed"))
    without = evaluate(MODEL, CLUSTER, 2, PINNED, memory_limit="none", runtime="deepspeed")  # m = 1: none
    per_block = stage.block_s / stage.layers - without.plan.stages[0].block_s / without.plan.stages[0].layers
    assert per_block == pytest.approx(one * (m - 1) / m, rel=1e-9)


@pytest.mark.parametrize("runtime, receiver, sender", [("deepspeed", 1, 2), ("megatron-2021", 1, 1)])
def test_scatter_gather_all_gathers_by_hand(runtime, receiver, sender):
    """The p2p term of each stage: its sends (activation on, gradient back, 1/t of e s b h each) plus
    its all-gathers of the whole e s b h over the stage's t = 8 ranks (one node); the validator
    re-derives the same."""
    r = evaluate(MODEL, CLUSTER, 32, PINNED, memory_limit="none", runtime=runtime)
    whole = 2048 * 1 * 1024 * 2.0
    gather = collective(CLUSTER, "all_gather", whole, 8, 8)
    assert gather > 0
    for s in r.plan.stages:
        sends = 0.0
        for a, z in ((s.index - 1, s.index), (s.index, s.index + 1)):
            if 0 <= a and z < 4:  # stages of 16 devices: every boundary crosses nodes
                sends += collective(CLUSTER, "p2p", whole / 8, 2, 1)
        gathers = (receiver if s.index > 0 else 0) + (sender if s.index < 3 else 0)
        assert s.p2p_s == pytest.approx(sends + gathers * gather, rel=1e-9), s.index
    assert validate_plan(r.plan, CLUSTER) == []


def test_runtimes_without_scatter_gather_gathers_pay_none():
    r = evaluate(MODEL, CLUSTER, 32, PINNED, memory_limit="none", runtime="megatron-core")
    whole = 2048 * 1 * 1024 * 2.0
    first = r.plan.stages[0]
    assert first.p2p_s == pytest.approx(collective(CLUSTER, "p2p", whole / 8, 2, 1), rel=1e-9)


def test_accumulation_in_a_zero_partition_is_divided_by_the_shard_group():
    """ZeRO-2: each micro-batch's gradients are reduced into the rank's 1/dp partition, where they add up."""
    flat = dict(dp=4, tp=8, pp=1, micro_batch_size=1, recompute="full")
    spec = transformer_spec(MODEL)
    one = grad_accumulate_s(CLUSTER.first_devices(8), spec, 8, 2.0, resolve_runtime("deepspeed"))
    blocks = {}
    for zero in (1, 2):
        many = evaluate(MODEL, CLUSTER, 32, {**flat, "zero_stage": zero}, memory_limit="none", runtime="deepspeed")
        single = evaluate(MODEL, CLUSTER, 4, {**flat, "zero_stage": zero}, memory_limit="none", runtime="deepspeed")
        blocks[zero] = (many.plan.stages[0].block_s - single.plan.stages[0].block_s) / 8
    assert blocks[1] == pytest.approx(one * 7 / 8, rel=1e-9)  # m = 8 micro-batches
    assert blocks[2] == pytest.approx(one * 7 / 8 / 4, rel=1e-9)
