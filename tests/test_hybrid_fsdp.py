"""Hybrid sharding (HSDP: shard and replicate degrees) and FSDP with pipelines (hybrid/fsdp.py):
memory and traffic by hand, the runtimes that may run ZeRO-3 with pp > 1, brute force equal to the
search with the shard degree, ZeRO-3 + pp and torchtitan's ZB-H1 schedule in the space."""
import itertools
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.comm import collective
from solver_plan.hybrid.evaluate import Context, memory_of, price
from solver_plan.hybrid.memory import runtime_state, stage_params, stage_pool_bytes, state_bytes
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.schedule import pipeline_s, sync_parts
from solver_plan.hybrid.space import Parallelism, parse_fix
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES

from hybrid_stage_options import stage_options

CLUSTER = resolve_cluster("h100-4x8-ib", 16)  # 2 nodes of 8
SMALL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"
TITAN = RUNTIMES["torchtitan"]


def _ctx(runtime=TITAN, batch=16, cluster=CLUSTER, model=SMALL):
    return Context(transformer_spec(model), cluster, batch, None,
                   runtime_state(state_bytes(cluster.device), runtime), runtime=runtime)


def test_hsdp_shards_the_state_over_the_shard_group_only():
    ctx = _ctx()
    full = Parallelism(16, 1, 1, 1, 1, zero_stage=3)
    hsdp = Parallelism(16, 1, 1, 1, 1, zero_stage=3, dp_shard=8)
    assert (hsdp.shard, hsdp.replicate) == (8, 2)
    a, b = memory_of(ctx, full, 0, 4), memory_of(ctx, hsdp, 0, 4)
    params = stage_params(ctx.spec, 4, True, True, 1, 1)
    assert a.weights == pytest.approx(ctx.state.weights * params / 16)
    assert b.weights == pytest.approx(ctx.state.weights * params / 8)
    assert b.optimizer == pytest.approx(ctx.state.optimizer * params / 8)
    # torchtitan drops the gradients after each step: with one micro-batch they are not there at the
    # start of the backward, only where they outgrow the activations (memory.gradients_at_peak)
    dynamic = b.activations + b.recompute_working
    assert b.gradients == pytest.approx(max(0.0, ctx.state.gradients * params / 8 - dynamic))
    assert b.nccl - a.nccl == pytest.approx(TITAN.memory.nccl_per_communicator)  # the replicate group


def test_hsdp_traffic_by_hand():
    ctx = _ctx()
    params, g, w = 1e8, ctx.state.gradients, ctx.state.weights
    # ZeRO-1 over shard groups of 8 (one node), 2 groups: reduce-scatter and all-gather inside the node,
    # then the shard's 1/8 of the gradients all-reduced between the 2 nodes (one device a node)
    parts = sync_parts(CLUSTER, params, 1, 8, 1, ctx.state, "megatron-2021", 1, replicate=2)
    n = parts.pieces
    assert parts.grad_s == pytest.approx(collective(CLUSTER, "reduce_scatter", g * params, 8, 8, n)
                                         + collective(CLUSTER, "all_reduce", g * params / 8, 2, 1, n))
    assert parts.gather_s == pytest.approx(collective(CLUSTER, "all_gather", w * params, 8, 8, n))
    # ZeRO-3: the same all-reduce joins each micro-batch's reduce-scatter
    three = sync_parts(CLUSTER, params, 1, 8, 3, ctx.state, "megatron-2021", 1, replicate=2)
    assert three.backward_s - three.backward_gather_s == pytest.approx(parts.grad_s)


def test_fsdp_with_a_pipeline_gathers_once_a_step_like_zero_1():
    ctx = _ctx()
    profile = BlockCoster(ctx.spec, CLUSTER, runtime=TITAN).profile(1, 1)
    fsdp = price(ctx, Parallelism(8, 1, 2, 1, 2, zero_stage=3), profile, None, layers=(2, 2))
    zero1 = price(ctx, Parallelism(8, 1, 2, 1, 2, zero_stage=1), profile, None, layers=(2, 2))
    flat = price(ctx, Parallelism(16, 1, 1, 1, 1, zero_stage=3), profile, None, layers=(4,))
    assert fsdp.step_time_s == pytest.approx(zero1.step_time_s)
    for s, t in zip(fsdp.stages, zero1.stages):
        params = stage_params(ctx.spec, 2, s.embedding, s.head, 1, 2)
        # the same tensors; FSDP2's side-stream pools (sharded fp32 gradients, two gathered units) are
        # reserved beside them (memory.stage_pool_bytes)
        assert s.memory.allocated == pytest.approx(t.memory.allocated)
        root = params - 2 * ctx.spec.block_params
        pools = stage_pool_bytes(root, ctx.spec.block_params, params, 8, 1, 0.0, 0.0, True, ctx.state, TITAN)
        assert pools > 0 and s.memory.total == pytest.approx(t.memory.total + pools)
        assert s.memory.weights == pytest.approx(ctx.state.weights * params)
    # without a pipeline ZeRO-3 keeps 1/dp of the weights and gathers every micro-batch
    assert flat.stages[0].memory.weights < fsdp.stages[0].memory.weights


def test_which_runtimes_pipeline_zero_3():
    fix = {"dp": 8, "tp": 1, "pp": 2, "micro_batch_size": 1, "zero_stage": 3}
    titan = evaluate(SMALL, CLUSTER, 16, fix, memory_limit="none", runtime="torchtitan")
    assert titan.status == Status.FEASIBLE
    assert titan.plan.parallelism.zero_stage == 3
    with pytest.raises(InputError, match="zero_stage"):
        evaluate(SMALL, CLUSTER, 16, fix, memory_limit="none", runtime="megatron-core")
    result = plan_hybrid(SMALL, CLUSTER, 16, fix={"zero_stage": 3, "pp": 2}, runtime="deepspeed", time_limit=None)
    assert result.status == Status.INFEASIBLE and "FSDP2" in result.notes[-1]


def test_dp_shard_pins():
    assert parse_fix("dp_shard=8,zero_stage=1") == {"dp_shard": 8, "zero_stage": 1}
    assert parse_fix("dp_shard=0") == {"dp_shard": 0}
    with pytest.raises(InputError, match="dp_shard"):
        Parallelism(16, 1, 1, 1, 1, zero_stage=0, dp_shard=8)
    with pytest.raises(InputError, match="dp_shard"):
        Parallelism(16, 1, 1, 1, 1, zero_stage=1, dp_shard=3)


# torchtitan's kernels (FSDP2: ZeRO-3 may pipeline) without overlap, so a stage's time does not depend
# on the other stages' recomputation modes (per-stage plans re-assemble from uniform ones, as in
# tests/test_hybrid_brute.py). Not a named profile: the planner runs without its validator here.
NO_OVERLAP = replace(TITAN, overlap=replace(TITAN.overlap, grad_reduce=False, param_gather=False,
                                            sharded_prefetch=False, pp_p2p=False))


def _brute(model, cluster, batch, runtime):
    ctx = _ctx(runtime, batch, cluster, model)
    spec, n, L, per_node = ctx.spec, cluster.num_devices, ctx.spec.layers, cluster.devices_per_node
    coster = BlockCoster(spec, cluster, runtime=runtime)
    plans = []
    for tp, pp in itertools.product((1, 2, 4, 8), range(1, L + 1)):
        if n % (tp * pp) or spec.heads % tp:
            continue
        dp = n // (tp * pp)
        for b in (d for d in range(1, batch // dp + 1) if batch % (dp * d) == 0):
            m = batch // (dp * b)
            interleaved = [("interleaved", v) for v in range(2, L // pp + 1) if m % pp == 0]
            zbv = [("zb-v", 2)] if m >= pp else []  # ZB-V: two chunks a rank, m >= p (issue 23)
            zbv += [("zb-exact", 1)] if pp <= 4 else []  # the exact periodic schedule, small pipelines
            schedules = [("1f1b", 1)] + ([("gpipe", 1), ("zb-h1", 1)] + interleaved + zbv if pp > 1 else [])
            sps = (False, True) if tp > 1 else (False,)
            for (schedule, v), zero, sp in itertools.product(schedules, range(4), sps):
                if pp > 1 and zero == 2:  # ZeRO-3 pipelines (FSDP2), ZeRO-2 does not
                    continue
                node = per_node // tp  # HSDP: one node's worth of submeshes a shard group, when dp spans nodes
                shards = [0] + ([node] if zero >= 1 and 1 < node < dp and dp % node == 0 else [])
                for shard in shards:
                    par = Parallelism(dp, tp, pp, b, m, v, "none", zero, sp, schedule, 1, shard)
                    profile = coster.profile(tp, b)
                    compositions = (tuple(c[i + 1] - c[i] for i in range(pp)) for c in
                                    ((0,) + cuts + (L,) for cuts in itertools.combinations(range(1, L), pp - 1)))
                    for cut in (c for c in compositions if min(c) >= v):
                        uniform = {r: price(ctx, replace(par, recompute=r), profile, None, layers=cut)
                                   for r in ("none", "selective", "full")}
                        for r, plan in uniform.items():
                            plans.append((plan.step_time_s, plan.memory_per_device_bytes, plan.parallelism))
                        if schedule.startswith("zb-"):  # one recomputation mode for all stages (zero_bubble.py)
                            continue
                        rest = uniform["none"].step_time_s - uniform["none"].terms.pipeline_s
                        for stages in itertools.product(*stage_options(ctx, par, profile, cut)):  # partial too
                            pipe = pipeline_s([st.time_per_microbatch_s for st in stages], m, schedule, v)
                            plans.append((pipe + rest, max(st.memory.total for st in stages), par))
    return plans


def test_planner_equals_brute_force_with_hsdp_pipelined_fsdp_and_zb_h1():
    plans = _brute(SMALL, CLUSTER, 16, NO_OVERLAP)
    assert any(p.dp_shard for _, _, p in plans) and any(p.zero_stage == 3 and p.pp > 1 for _, _, p in plans)
    assert all(any(p.schedule == s for _, _, p in plans) for s in ("zb-h1", "zb-v", "zb-exact"))
    options = {"time_limit": None, "runtime": NO_OVERLAP, "validate": False}
    free = plan_hybrid(SMALL, CLUSTER, 16, memory_limit="none", **options)
    assert free.status == Status.OPTIMAL
    assert free.step_time_s == pytest.approx(min(t for t, _, _ in plans), rel=1e-9)
    least = min(m for _, m, _ in plans)
    limit = (least + free.plan.memory_per_device_bytes) / 2
    tight = plan_hybrid(SMALL, CLUSTER, 16, memory_limit=limit, **options)
    assert tight.status == Status.OPTIMAL
    assert tight.step_time_s == pytest.approx(min(t for t, m, _ in plans if m <= limit), rel=1e-9)
    none_fit = plan_hybrid(SMALL, CLUSTER, 16, memory_limit=least * 0.5, **options)
    assert none_fit.status == Status.INFEASIBLE
    assert none_fit.needed_memory_bytes == pytest.approx(least, rel=1e-6)
