"""Context parallelism (hybrid/context_parallel.py): memory and time by hand on tiny cases, the
key/value exchange of each runtime, brute force equal to the search with cp in the space, pins and
their messages, and Llama 3 405B at 128K tokens on 16,384 GPUs (Dubey et al. 2024, Table 4)."""
import itertools
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.comm import collective
from solver_plan.hybrid.context_parallel import (exchange_s, kv_buffer_bytes, local_spec, ring_overhead_s,
                                                   scaled_profile)
from solver_plan.hybrid.evaluate import Context, memory_of, price
from solver_plan.hybrid.memory import runtime_state, state_bytes
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.schedule import pipeline_s
from solver_plan.hybrid.space import Parallelism, parse_fix
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES

from hybrid_stage_options import stage_options

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
LONG = "gpt2:layers=4,hidden=256,heads=8,head_dim=32,ffn=1024,seq=8192,positions=8192,vocab=8000"
CORE = RUNTIMES["megatron-core"]


def _ctx(model=LONG, cluster=CLUSTER, batch=8, runtime=CORE):
    spec = transformer_spec(model)
    return Context(spec, cluster, batch, None, runtime_state(state_bytes(cluster.device), runtime), runtime=runtime)


def test_cp_splits_every_activation_and_shards_over_dp_times_cp():
    ctx = _ctx()
    e = ctx.state.activations
    one = Parallelism(2, 2, 2, 1, 4, zero_stage=1)
    four = Parallelism(2, 2, 2, 1, 4, zero_stage=1, cp=2)
    short = Context(local_spec(ctx.spec, 2), CLUSTER, 8, None, ctx.state, runtime=CORE)
    for stage in (0, 1):
        split, base = memory_of(ctx, four, stage, 2), memory_of(short, one, stage, 2)
        # the activations of s / cp tokens; the optimizer state sharded over dp x cp = 4 ranks, not 2
        assert split.activations == pytest.approx(base.activations)
        assert split.recompute_working == pytest.approx(base.recompute_working)
        assert split.optimizer == pytest.approx(memory_of(ctx, one, stage, 2).optimizer / 2)
        assert split.weights == pytest.approx(memory_of(ctx, one, stage, 2).weights)
        # K and V pieces of the ring, 2 e (s / cp) b (kv d) / t each, four of them (in use, arriving, gradients)
        piece = 2 * e * 4096 * 1 * 256 / 2
        assert split.buffers - base.buffers == pytest.approx(4 * piece)
        # one more communicator (the cp group)
        assert split.nccl - base.nccl == pytest.approx(CORE.memory.nccl_per_communicator)


def test_kv_buffers_of_the_all_gather_are_the_whole_sequence_twice():
    spec = transformer_spec(LONG)
    piece = 2 * 2.0 * 8192 / 4 * 2 * 256 / 1
    assert kv_buffer_bytes(spec, 2, 1, 4, 2.0, "torchtitan") == pytest.approx(2 * 4 * piece)
    assert kv_buffer_bytes(spec, 2, 1, 4, 2.0, "megatron-core") == pytest.approx(4 * piece)
    assert kv_buffer_bytes(spec, 2, 1, 1, 2.0, "megatron-core") == 0.0


def test_exchange_by_hand():
    spec = transformer_spec(LONG)
    cluster = CLUSTER
    piece = 2 * 2.0 * 8192 / 4 * 1 * 256
    # all-gather: the whole K and V gathered under the rank's own piece (1/16 of the attention's
    # forward here, 2.5x that in backward), their gradients reduce-scattered after the backward
    gather = collective(cluster, "all_gather", 4 * piece, 4, 4)
    scatter = collective(cluster, "reduce_scatter", 4 * piece, 4, 4)
    forward, backward = exchange_s(cluster, spec, 1, 1, 4, 2.0, 0.0, "torchtitan")
    assert forward == pytest.approx(gather)
    assert backward == pytest.approx(gather + scatter)
    forward, backward = exchange_s(cluster, spec, 1, 1, 4, 2.0, 16 * gather / 2, "torchtitan")
    assert forward == pytest.approx(gather / 2)
    assert backward == pytest.approx(scatter)  # 2.5 x half the gather covers it
    # ring: 3 steps, each hiding its piece under 1/16 of the attention's forward
    send = collective(cluster, "p2p", piece, 2, 2)
    forward, backward = exchange_s(cluster, spec, 1, 1, 4, 2.0, 0.0, "megatron-core")
    assert forward == pytest.approx(3 * send)
    forward, backward = exchange_s(cluster, spec, 1, 1, 4, 2.0, 16 * send, "megatron-core")
    assert forward == 0.0 and backward == 0.0  # a step's attention covers its transfer
    # a ring across nodes (tp 8 x cp 4 > a node of 8) pays the inter-node link
    across = exchange_s(cluster, spec, 1, 8, 4, 2.0, 0.0, "megatron-core")[0]
    assert across == pytest.approx(3 * collective(cluster, "p2p", piece / 8, 2, 1))


def test_torchtitan_exchanges_keys_and_values_repeated_to_the_query_heads():
    # grouped-query attention, 8 heads and 2 key/value heads of 32: torchtitan repeats K and V to the
    # 8 heads before the SDPA call that context parallelism replaces, Megatron-core exchanges 2
    spec = replace(transformer_spec(LONG), kv_heads=2)
    assert spec.kv_width == 64 and spec.attn_width == 256
    assert kv_buffer_bytes(spec, 1, 1, 4, 2.0, "torchtitan") == pytest.approx(2 * 4 * 2 * 2.0 * 2048 * 256)
    assert kv_buffer_bytes(spec, 1, 1, 4, 2.0, "megatron-core") == pytest.approx(4 * 2 * 2.0 * 2048 * 64)
    # Meta's stack all-gathers the grouped-query K and V (Dubey et al. 2024, section 3.3.2)
    assert kv_buffer_bytes(spec, 1, 1, 4, 2.0, "llama3-meta") == pytest.approx(2 * 4 * 2 * 2.0 * 2048 * 64)


def test_ring_bookkeeping_by_hand():
    # torch's context_parallel, measured: forward 1.07 and backward 1.04 of the rank's kernels alone
    attention = 0.8  # the whole sequence's attention forward; a rank's share is 0.2
    forward, backward = ring_overhead_s(attention, 4, "torchtitan")
    assert forward == pytest.approx(0.07 * 0.2)
    assert backward == pytest.approx(0.04 * 2.5 * 0.2)
    assert ring_overhead_s(attention, 1, "torchtitan") == (0.0, 0.0)
    assert ring_overhead_s(attention, 4, "megatron-core") == (0.0, 0.0)  # not measured there


def test_a_rank_computes_one_cp_th_of_the_block():
    ctx = _ctx()
    profile = BlockCoster(ctx.spec, CLUSTER, runtime=CORE).profile(1, 1)
    rank = scaled_profile(profile, CLUSTER, ctx.spec, 4, 2.0, CORE)
    forward, backward = exchange_s(CLUSTER, ctx.spec, 1, 1, 4, 2.0, profile.attention_forward_s, CORE)
    assert rank.block_s == pytest.approx(profile.block_s / 4 + forward + backward)
    assert rank.block_forward_s == pytest.approx(profile.block_forward_s / 4 + forward)
    assert rank.head_s == pytest.approx(profile.head_s / 4)
    # and the plan's stages carry it
    plan = price(ctx, Parallelism(2, 1, 2, 1, 4, cp=4, recompute="full"), profile, None, layers=(2, 2))
    assert plan.stages[0].block_s == pytest.approx(2 * rank.block_s)
    assert plan.stages[0].recompute_s == pytest.approx(2 * rank.block_forward_s)
    assert plan.stages[1].devices == (8, 15)  # dp 2 x cp 4 replicas of one device a stage


# Megatron-core's kernels without any overlap of the gradient sync (which the cp ranks of a replica
# run even with dp = 1): a stage's time then does not depend on the other stages' modes, so per-stage
# plans re-assemble from uniform ones (as tests/test_hybrid_brute.py does with megatron-2021, which
# has no fused attention and so no cp). Not a named profile: the planner runs without its validator.
NO_OVERLAP = replace(CORE, overlap=replace(CORE.overlap, grad_reduce=False, param_gather=False, pp_p2p=False))


def _brute(model, cluster, batch, runtime):
    """(step, memory) of every point with dp = 1 over tp, cp, pp, micro-batch, schedule, v, recomputation (and
    every vector of stage modes), sequence parallelism and every cut (at least v blocks a stage)."""
    ctx = _ctx(model, cluster, batch, runtime)
    spec, n, L = ctx.spec, cluster.num_devices, ctx.spec.layers
    coster = BlockCoster(spec, cluster, runtime=runtime)
    plans = []
    for tp, cp in itertools.product((1, 2, 4, 8), (1, 2, 4, 8, 16)):
        if n % (tp * cp) or spec.seq % (2 * cp) or (cp > 1 and spec.seq // cp < 2048):
            continue
        pp = n // (tp * cp)
        if pp > L:
            continue
        for b in (d for d in range(1, batch + 1) if batch % d == 0):
            m = batch // b
            schedules = [("1f1b", 1)] + ([("gpipe", 1)] + [("interleaved", v) for v in range(2, L // pp + 1)
                                                          if m % pp == 0] if pp > 1 else [])
            for (schedule, v), sp in itertools.product(schedules, (False, True) if tp > 1 else (False,)):
                par = Parallelism(1, tp, pp, b, m, v, "none", 0, sp, schedule, cp)
                profile = coster.profile(tp, b)
                compositions = (tuple(c[i + 1] - c[i] for i in range(pp)) for c in
                                ((0,) + cuts + (L,) for cuts in itertools.combinations(range(1, L), pp - 1)))
                for cut in (c for c in compositions if min(c) >= v):
                    none = price(ctx, par, profile, None, layers=cut)
                    rest = none.step_time_s - none.terms.pipeline_s
                    for stages in itertools.product(*stage_options(ctx, par, profile, cut)):  # partial too
                        pipe = pipeline_s([st.time_per_microbatch_s for st in stages], m, schedule, v)
                        plans.append((pipe + rest, max(st.memory.total for st in stages)))
    return plans


def test_planner_equals_brute_force_with_cp_in_the_space():
    cluster = resolve_cluster("h100-4x8-ib", 8)
    fix, options = {"dp": 1, "zero_stage": 0}, {"time_limit": None, "runtime": NO_OVERLAP, "validate": False}
    plans = _brute(LONG, cluster, 4, NO_OVERLAP)
    free = plan_hybrid(LONG, cluster, 4, fix=fix, memory_limit="none", **options)
    assert free.status == Status.OPTIMAL
    assert free.step_time_s == pytest.approx(min(t for t, _ in plans), rel=1e-9)
    least = min(m for _, m in plans)
    limit = (least + free.plan.memory_per_device_bytes) / 2
    tight = plan_hybrid(LONG, cluster, 4, fix=fix, memory_limit=limit, **options)
    assert tight.status == Status.OPTIMAL
    assert tight.step_time_s == pytest.approx(min(t for t, m in plans if m <= limit), rel=1e-9)
    none_fit = plan_hybrid(LONG, cluster, 4, fix=fix, memory_limit=least * 0.5, **options)
    assert none_fit.status == Status.INFEASIBLE
    assert none_fit.needed_memory_bytes == pytest.approx(least, rel=1e-6)
    assert any(p.cp > 1 for p in (free.plan.parallelism, tight.plan.parallelism, none_fit.plan.parallelism))


def test_cp_pins():
    assert parse_fix("cp=4,tp=2") == {"cp": 4, "tp": 2}
    with pytest.raises(InputError, match="cp"):
        parse_fix("cp=0")
    # a runtime without fused attention cannot run cp
    with pytest.raises(InputError, match="fused attention"):
        plan_hybrid(LONG, CLUSTER, 8, fix={"cp": 2}, runtime="megatron-2021", time_limit=None)
    # 2 cp pieces must divide the sequence
    with pytest.raises(InputError, match="2 x cp = 24"):
        plan_hybrid(LONG, CLUSTER, 8, fix={"cp": 12}, time_limit=None)
    # what-if evaluation with cp: dp x cp x tp x pp devices
    result = evaluate(LONG, CLUSTER, 8, {"dp": 2, "cp": 4, "tp": 2, "pp": 1, "micro_batch_size": 1},
                      memory_limit="none", runtime=CORE)
    assert result.status == Status.FEASIBLE and result.plan.devices == 16
    assert result.to_dict()["context_parallel"] == {"degree": 4, "kv_exchange": "ring", "load_balance": "2cp-pieces"}


LLAMA_128K = "data/published/models/llama-3.1-405b.json:seq=131072"
META = "data/published/clusters/meta-h100-roce-16k.yaml"


def test_llama3_405b_at_128k_tokens_on_16384_gpus_needs_cp():
    """Dubey et al. 2024, Table 4: TP 8, CP 16, PP 16, DP 8, 128 sequences of 131,072 tokens: fits the
    80 GB with cp 16, which splits every activation 16 ways (and the all-gather's K and V are small:
    8 kv heads)."""
    fix = {"dp": 8, "tp": 8, "pp": 16, "cp": 16, "zero_stage": 1, "sequence_parallel": True, "micro_batch_size": 1,
           "recompute": "full"}
    with_cp = evaluate(LLAMA_128K, META, 128, fix, runtime="llama3-meta")
    assert with_cp.status == Status.FEASIBLE
    assert with_cp.plan.memory_per_device_bytes < 80e9
    without = evaluate(LLAMA_128K, META, 128, {**fix, "cp": 1, "dp": 1, "pp": 16}, runtime="llama3-meta",
                       memory_limit="none")
    assert without.plan.stages[1].memory.activations == pytest.approx(
        16 * with_cp.plan.stages[1].memory.activations, rel=1e-9)
