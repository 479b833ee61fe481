"""Partial recomputation inside per-stage recomputation (hybrid/evaluate.py stage_choices,
partial_blocks): r of a stage's k blocks under full recomputation, the rest keeping everything, by
hand; the fewest r that fits; the plan's JSON and the validator."""
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.hybrid import plan_hybrid
from solver_plan.hybrid.evaluate import Context, memory_of, partial_blocks, price
from solver_plan.hybrid.memory import layer_activation_bytes, runtime_state, state_bytes
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.hybrid.validate import validate_plan
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
MODEL = "gpt2:layers=8,hidden=512,heads=8,head_dim=64,ffn=2048,seq=1024,positions=1024,vocab=32000"
CORE = RUNTIMES["megatron-core"]
PAR = Parallelism(4, 2, 2, 1, 4, recompute="per-stage", zero_stage=1)


def _ctx():
    spec = transformer_spec(MODEL)
    return Context(spec, CLUSTER, 16, None, runtime_state(state_bytes(CLUSTER.device), CORE), runtime=CORE)


def test_partial_memory_and_time_by_hand():
    ctx = _ctx()
    none, full = memory_of(ctx, PAR, 0, 4, "none"), memory_of(ctx, PAR, 0, 4, "full")
    part = memory_of(ctx, PAR, 0, 4, "full", 1)
    a_none = layer_activation_bytes(ctx.spec, 1, 2, "none", False, ctx.state, CORE)
    a_full = layer_activation_bytes(ctx.spec, 1, 2, "full", False, ctx.state, CORE)
    flight = 2  # stage 0 of 2 under 1F1B, 4 micro-batches
    assert part.activations - full.activations == pytest.approx(3 * flight * (a_none - a_full))
    assert part.recompute_working == pytest.approx(full.recompute_working)  # one block rematerialised
    assert none.total > part.total > full.total
    profile = BlockCoster(ctx.spec, CLUSTER, runtime=CORE).profile(2, 1)
    plan = price(ctx, PAR, profile, None, layers=(4, 4), modes=("full", "none"), recompute_blocks=(1, None))
    assert plan.stages[0].recompute_s == pytest.approx(profile.block_forward_s)  # one block's forward again
    assert plan.to_dict()["stages"][0]["recompute_blocks"] == 1
    assert plan.to_dict()["stages"][1]["recompute_blocks"] == 0


def test_the_fewest_blocks_that_fit_are_chosen():
    ctx = _ctx()
    full = memory_of(ctx, PAR, 0, 4, "full").total
    step = memory_of(ctx, PAR, 0, 4, "full", 3).total - full
    limit = full + 2.5 * step  # partial(r) = full + (4 - r) step: r = 2 fits, r = 1 does not
    assert partial_blocks(ctx, PAR, 0, 4, limit) == 2
    assert memory_of(ctx, PAR, 0, 4, "full", 2).total <= limit < memory_of(ctx, PAR, 0, 4, "full", 1).total
    assert partial_blocks(ctx, replace(PAR, schedule="interleaved", virtual_stages=2), 0, 4, limit) is None


def test_chosen_under_a_binding_limit_and_validated():
    ctx = _ctx()
    # stage 1 (with the output layer) fits fully recomputed, stage 0 not without recomputation
    limit = (memory_of(ctx, PAR, 1, 4, "full").total + memory_of(ctx, PAR, 0, 4, "none").total) / 2
    profile = BlockCoster(ctx.spec, CLUSTER, runtime=CORE).profile(2, 1)
    plan = price(ctx, PAR, profile, limit, layers=(4, 4))  # each stage's fastest fitting option
    r = partial_blocks(ctx, PAR, 0, 4, limit)
    assert 1 <= r < 4 and (plan.stages[0].recompute, plan.stages[0].recompute_blocks) == ("full", r)
    assert plan.stages[0].recompute_s == pytest.approx(r * profile.block_forward_s)
    assert validate_plan(plan, CLUSTER) == []
    # the validator notices a stage recomputing more blocks than it needs
    more = price(ctx, PAR, profile, limit, layers=(4, 4), modes=("full", plan.stages[1].recompute),
                 recompute_blocks=(r + 1, plan.stages[1].recompute_blocks))
    assert any(f"where {r} fit" in p for p in validate_plan(more, CLUSTER))
    # planned: as fast as the best cut with these choices, and valid
    fix = {"dp": 4, "tp": 2, "pp": 2, "micro_batch_size": 1, "recompute": "per-stage", "zero_stage": 1,
           "sequence_parallel": False, "schedule": "1f1b"}
    result = plan_hybrid(MODEL, CLUSTER, 16, fix=fix, memory_limit=limit, time_limit=None, runtime=CORE)
    assert result.status == Status.OPTIMAL and result.step_time_s <= plan.step_time_s * (1 + 1e-9)
