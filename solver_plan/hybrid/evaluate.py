"""Price one point of the space: stages (cut by interop.py), their times and memory, the step time.

`price(ctx, par, profile)` is what the search, `evaluate()` (what-if, calibration) and the baselines
share; the validator re-derives its numbers independently (validate.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.hybrid import contention, interop, schedule
from solver_plan.hybrid.comm import crosses_nodes
from solver_plan.hybrid.memory import UNIFORM_RECOMPUTE, StateBytes, stage_memory, stage_params
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.hybrid.plan import HybridPlan, StagePlan
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.stage_cost import BlockProfile
from solver_plan.hybrid.context_parallel import local_spec, scaled_profile
from solver_plan.hybrid.stages import chunk_layers, least_layers
from solver_plan.hybrid.zero_bubble import (ZERO_BUBBLE, head_stage, pipeline_s as zero_bubble_pipeline_s,
                                            weight_grad_s)
from solver_plan.runtime import DEFAULT_RUNTIME, RuntimeProfile


@dataclass(frozen=True)
class Context:
    """What every priced point of one hybrid search shares: the model, the planned devices, global batch,
    memory limit, the training precision's bytes per parameter and the runtime profile, with a cache of
    stage-boundary transfer times.
    """
    spec: TransformerSpec
    cluster: Cluster  # exactly the devices planned for
    global_batch: int
    memory_limit: float | None
    state: StateBytes  # bytes of the training precision (memory.precision_state)
    precision: str | None = None  # its name (`TrainingPrecision.name`: mixed-bf16, fp32, ...), carried by plans
    runtime: RuntimeProfile = DEFAULT_RUNTIME  # kernels, overlap and memory reserve of the software stack
    # p2p seconds of one stage boundary by (micro-batch, tp, replicas, cp, crosses nodes): the search
    # prices the same few transfers for thousands of points
    p2p_cache: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)  # not copied
    # `time_bound`'s terms outside the pipeline (sync, embedding sync, optimizer) and `host_floor_fits`
    # ("host" keys), by the few fields they read: ~30,000 points of a search share a few hundred of them
    bound_cache: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)
    # `rank_profile` by (the profile's identity, cp): (profile, the rank's profile); the profile is kept so
    # that its identity cannot be reused while the entry lives
    rank_cache: dict = field(default_factory=dict, init=False, compare=False, hash=False, repr=False)


def rank_profile(ctx: Context, par: Parallelism, profile: BlockProfile) -> BlockProfile:
    """The block profile of one rank: the whole sequence's, or with context parallelism 1/cp of it plus
    the exposed key/value exchange (context_parallel.scaled_profile). Memoised per context: the search
    asks for the same few (profile, cp) tens of thousands of times."""
    key = (id(profile), par.cp)
    hit = ctx.rank_cache.get(key)
    if hit is not None and hit[0] is profile:
        return hit[1]
    local = scaled_profile(profile, ctx.cluster, ctx.spec, par.cp, ctx.state.activations, ctx.runtime)
    ctx.rank_cache[key] = (profile, local)
    return local


def layer_s(par: Parallelism, profile: BlockProfile, mode: str | None = None) -> tuple[float, float]:
    """(forward + backward, recomputation) seconds of one block per micro-batch, in recomputation
    `mode` (default the point's; "per-stage" without a mode: none, the least, for lower bounds).
    The forward + backward includes the gradient accumulation the runtime runs as its own kernel
    (`BlockProfile.grad_accumulate_s`), paid by m - 1 of the m micro-batches: (m - 1) / m of it each;
    with ZeRO-2/3 the gradients are reduced each micro-batch and accumulated in the rank's 1/shard
    partition (DeepSpeed stage 2's and 3's reduce of each micro-batch's gradients): / shard. With more
    than one data-parallel replica it also includes the runtime's preparation of the block's gradient
    for its reduction (`BlockProfile.grad_reduce_prep_s`, declared by runtimes that reduce every
    micro-batch: FSDP1 under Composer)."""
    mode = mode or par.recompute
    extra = 0.0 if mode == "per-stage" else profile.repeated_forward_s(mode)
    m = par.micro_batches
    partition = par.shard if par.state_zero >= 2 else 1
    prep = profile.grad_reduce_prep_s if par.replicas > 1 else 0.0
    return profile.block_s + profile.grad_accumulate_s * (m - 1) / m / partition + prep, extra


def p2p_overlapped(runtime: RuntimeProfile, par: Parallelism) -> bool:
    """Whether the pipeline's sends and receives run under compute: Megatron-core's interleaved
    schedule posts them asynchronously and waits only before the chunk that needs them
    (overlap_p2p_comm); 1F1B and GPipe wait for each transfer."""
    return runtime.overlap.pp_p2p and par.schedule == "interleaved"


def stage_p2p_s(ctx: Context, par: Parallelism, stage: int) -> float:
    """Transfers stage `stage` sends per micro-batch: the activation forward (all but the last) and
    the gradient backward (all but the first), plus the all-gathers scatter-gather costs it
    (`schedule.p2p_gather_s`; `Overlap.p2p_gathers_receiver` on all but the first stage,
    `p2p_gathers_sender` on all but the last), v times each with v chunks; none on the critical
    path where the runtime overlaps them (`p2p_overlapped`)."""
    if p2p_overlapped(ctx.runtime, par):
        return 0.0
    total = 0.0
    overlap = ctx.runtime.overlap
    gathers = (overlap.p2p_gathers_receiver if stage > 0 else 0) + (overlap.p2p_gathers_sender if stage < par.pp - 1 else 0)
    if gathers and par.tp > 1 and overlap.p2p_scatter_gather:
        key = ("gather", par.micro_batch_size, par.tp, par.cp)
        if key not in ctx.p2p_cache:
            ctx.p2p_cache[key] = schedule.p2p_gather_s(ctx.cluster, local_spec(ctx.spec, par.cp), par.micro_batch_size,
                                                       par.tp, ctx.state)
        total += gathers * ctx.p2p_cache[key]
    for boundary in (stage - 1, stage):  # gradient back to stage - 1, activation on to stage + 1
        if 0 <= boundary < par.pp - 1:
            width = par.tp * par.replicas  # devices of a stage
            key = (par.micro_batch_size, par.tp, par.replicas, par.cp,
                   crosses_nodes(ctx.cluster, boundary * width, (boundary + 1) * width))
            if key not in ctx.p2p_cache:
                ctx.p2p_cache[key] = schedule.p2p_send_s(ctx.cluster, local_spec(ctx.spec, par.cp),
                                                         par.micro_batch_size, par.tp, par.replicas, boundary,
                                                         ctx.state, ctx.runtime)
            total += ctx.p2p_cache[key]
    return total * par.virtual_stages


def memory_of(ctx: Context, par: Parallelism, stage: int, layers: int, mode: str | None = None,
              recompute_layers: int | None = None, in_flight: float | None = None,
              offload_layers: int | None = None):
    """Stage memory in recomputation `mode` (default the point's; "per-stage" without a mode: full,
    the least memory any stage can get down to, for floors and the least-memory search), holding
    `in_flight` micro-batches when given (zb-exact's pattern; memory.stage_memory), and with
    activation offload `offload_layers` of its blocks' activations on the host (default: the most)."""
    mode = mode or par.recompute
    if mode == "per-stage":
        mode = "full"
    return stage_memory(local_spec(ctx.spec, par.cp), layers=layers, stage=stage, pp=par.pp, tp=par.tp,
                        dp=par.shard, cp=par.cp, replicate=par.replicate,
                        micro_batch=par.micro_batch_size, micro_batches=par.micro_batches, recompute=mode,
                        sequence_parallel=par.sequence_parallel, zero_stage=par.state_zero, schedule=par.schedule,
                        virtual_stages=par.virtual_stages, state=ctx.state, runtime=ctx.runtime,
                        recompute_layers=recompute_layers, in_flight=in_flight, offload=par.offload,
                        offload_layers=offload_layers,
                        pipelined_fsdp=par.state_zero != par.zero_stage)  # fsdp.state_zero's FSDP-under-PP rule


def _extras(par: Parallelism, profile: BlockProfile) -> list[float]:
    head = head_stage(par.pp, par.schedule)
    return [(profile.embed_s if i == 0 else 0.0) + (profile.head_s if i == head else 0.0) for i in range(par.pp)]


def stage_modes(ctx: Context, par: Parallelism, layers: tuple[int, ...], memory_limit: float | None,
                profile: BlockProfile | None = None) -> tuple[str, ...]:
    """Recomputation of each stage (`stage_choices` without the partial blocks)."""
    return stage_choices(ctx, par, layers, memory_limit, profile)[0]


def stage_choices(ctx: Context, par: Parallelism, layers: tuple[int, ...], memory_limit: float | None,
                  profile: BlockProfile | None = None) -> tuple[tuple[str, ...], tuple[int | None, ...]]:
    """(modes, blocks recomputed) of each stage: the point's mode, or for "per-stage" the option with
    the least recomputation time with which the stage's blocks fit `memory_limit`: none, selective,
    partial (`partial_blocks`: the fewest of its blocks under full recomputation, the others under
    none; mode "full" with r < k blocks, 1F1B and GPipe) or full (full where nothing fits: the least
    memory). A stage's choice changes only its own time and memory, so its fastest fitting option is
    optimal for the whole plan given the cut. Without `profile` (times) partial is not considered."""
    if par.recompute != "per-stage":
        return (par.recompute,) * len(layers), (None,) * len(layers)
    modes, blocks = [], []
    for i, k in enumerate(layers):
        options = [(0.0 if r == "none" else 1.0, r, None) for r in UNIFORM_RECOMPUTE
                   if memory_limit is None or memory_of(ctx, par, i, k, r).total <= memory_limit]
        if profile is not None:
            options = [(k * profile.repeated_forward_s(r), r, n) for _, r, n in options]
            if options and options[0][1] != "none":
                r = partial_blocks(ctx, par, i, k, memory_limit)
                if r is not None:
                    options.append((r * profile.full_recompute_s, "full", r))
        extra, mode, n = min(options, key=lambda o: o[0]) if options else (0.0, "full", None)
        modes.append(mode)
        blocks.append(n)
    return tuple(modes), tuple(blocks)


def partial_blocks(ctx: Context, par: Parallelism, stage: int, k: int, memory_limit: float | None) -> int | None:
    """The fewest of a stage's k blocks whose full recomputation fits it in `memory_limit` (the others
    keeping all their activations), when 1 <= r < k; None otherwise or under a schedule whose blocks
    hold different micro-batches (interleaved) or that takes one mode (zero-bubble). Memory falls by
    the same d per block moved to full recomputation: partial(r) = full(k) + (k - r) d."""
    if memory_limit is None or k < 2 or par.schedule not in ("1f1b", "gpipe"):
        return None
    full = memory_of(ctx, par, stage, k, "full").total
    if full > memory_limit:
        return None
    d = memory_of(ctx, par, stage, k, "full", k - 1).total - full
    if d <= 0:
        return None
    r = max(1, k - int((memory_limit - full) // d))
    while r < k and memory_of(ctx, par, stage, k, "full", r).total > memory_limit:  # rounding
        r += 1
    return r if r < k else None


def stage_caps(ctx: Context, par: Parallelism, memory_limit: float | None, mode: str | None = None) -> list[int]:
    """Per stage, the most blocks that fit `memory_limit` in recomputation `mode`: memory is affine
    in the blocks (interop.memory_caps), except under the interleaved schedule, where it is only
    non-decreasing (stages.held_layers; interop.monotone_caps)."""
    caps = interop.monotone_caps if par.schedule == "interleaved" else interop.memory_caps
    return caps(ctx.spec.layers, par.pp, lambda i, k: memory_of(ctx, par, i, k, mode).total, memory_limit)


def _mixed_times(ctx: Context, par: Parallelism, profile: BlockProfile, memory_limit: float | None) -> np.ndarray:
    """times[i, k]: stage i's time per micro-batch with k blocks in its fastest fitting recomputation
    option (`stage_choices`; inf where none fits); memory is affine in k per mode, so fitting is a
    per-mode cap, and partial recomputation's fewest blocks follow in closed form (`partial_blocks`)."""
    L, pp = ctx.spec.layers, par.pp
    extras = _extras(par, profile)
    p2p = [stage_p2p_s(ctx, par, i) if pp > 1 else 0.0 for i in range(pp)]
    times = np.full((pp, L + 1), np.inf)
    k = np.arange(L + 1)
    for mode in UNIFORM_RECOMPUTE:
        caps = stage_caps(ctx, par, memory_limit, mode)
        block, recompute = layer_s(par, profile, mode)
        for i in range(pp):
            fit = (k <= caps[i]) & (k >= 1)
            times[i, fit] = np.minimum(times[i, fit], k[fit] * (block + recompute) + extras[i] + p2p[i])
    if memory_limit is not None and par.schedule in ("1f1b", "gpipe") and L >= 2:
        for i in range(pp):  # partial(k, r) = full(k) + (k - r) d, full(k) = f1 + (k - 1) (f2 - f1)
            one, two = memory_of(ctx, par, i, 1, "full").total, memory_of(ctx, par, i, 2, "full").total
            d = memory_of(ctx, par, i, 2, "full", 1).total - two
            if d <= 0:
                continue
            full = one + (k - 1) * (two - one)
            with np.errstate(invalid="ignore"):
                r = np.maximum(1, k - np.floor((memory_limit - full) / d))
            ok = (k >= 2) & (full <= memory_limit) & (r < k)
            times[i, ok] = np.minimum(times[i, ok], k[ok] * layer_s(par, profile, "none")[0] + r[ok] * profile.full_recompute_s
                                      + extras[i] + p2p[i])
    return times


def cut(ctx: Context, par: Parallelism, profile: BlockProfile, memory_limit: float | None) -> tuple[int, ...] | None:
    """The fastest cut of the blocks into stages that fits `memory_limit` (module interop.py), at
    least one block per interleaved chunk (stages.least_layers); None when none fits."""
    L, pp, least = ctx.spec.layers, par.pp, least_layers(par.schedule, par.virtual_stages)
    if par.recompute == "per-stage":  # the interleaved pipeline is 1F1B's objective with m v micro-batches, / v
        # Without recomputation every stage is fastest and the sum of stage times is the same for every
        # cut: the cut minimising the slowest stage is optimal when all its stages fit (the common
        # case, without the per-mode memory caps and the parametric DP).
        p2p = [stage_p2p_s(ctx, par, i) if pp > 1 else 0.0 for i in range(pp)]
        fastest = interop.balanced_cut(L, layer_s(par, profile, "none")[0], [e + q for e, q in zip(_extras(par, profile), p2p)],
                                       [L] * pp, least)
        if fastest is not None and _fits(ctx, par, fastest, memory_limit, "none"):
            return fastest
        return interop.mixed_cut(L, _mixed_times(ctx, par, profile, memory_limit),
                                 par.micro_batches * par.virtual_stages, least)
    block, recompute = layer_s(par, profile)
    free = interop.balanced_cut(L, block + recompute, _extras(par, profile), [L] * pp, least)
    if free is not None and _fits(ctx, par, free, memory_limit):  # the fastest cut fits: the caps cannot bind
        return free
    return interop.balanced_cut(L, block + recompute, _extras(par, profile), stage_caps(ctx, par, memory_limit), least)


def _fits(ctx: Context, par: Parallelism, layers: tuple[int, ...], memory_limit: float | None,
          mode: str | None = None) -> bool:
    return memory_limit is None or all(memory_of(ctx, par, i, k, mode).total <= memory_limit
                                       for i, k in enumerate(layers))


# Cuts priced one by one when there are at most this many (see `price`)
CUT_ENUMERATION_LIMIT = 64


def _few_cuts(layers: int, pp: int, least: int) -> list[tuple[int, ...]] | None:
    """Every cut of `layers` blocks into `pp` stages of at least `least` blocks, or None when there
    are more than CUT_ENUMERATION_LIMIT of them."""
    from itertools import combinations
    from math import comb

    free = layers - pp * least
    if free < 0 or comb(free + pp - 1, pp - 1) > CUT_ENUMERATION_LIMIT:
        return None
    cuts = []
    for bars in combinations(range(free + pp - 1), pp - 1):
        bounds = (-1,) + bars + (free + pp - 1,)
        cuts.append(tuple(least + bounds[i + 1] - bounds[i] - 1 for i in range(pp)))
    return cuts


def price(ctx: Context, par: Parallelism, profile: BlockProfile, memory_limit: float | None = None,
          layers: tuple[int, ...] | None = None, modes: tuple[str, ...] | None = None,
          recompute_blocks: tuple[int | None, ...] | None = None,
          offloaded: tuple[int, ...] | None = None) -> HybridPlan | None:
    """The plan of `par` (with the given cut, or the best cut that fits `memory_limit`); None when no
    cut fits. With recompute "per-stage", `modes` (and for partial recomputation `recompute_blocks`,
    None for all of a stage's blocks) gives each stage's choice (brute force), by default the
    fastest that fits `memory_limit` (`stage_choices`). With activation offload, `offloaded` gives
    each stage's offloaded blocks (brute force), by default the fewest that fit (`offload_layers`).

    `cut` minimises the pipeline term; the step's other terms (data-parallel synchronisation, the
    optimizer step of the stage with the most parameters) also depend on the cut, and decide alone
    when the pipeline term ties (one micro-batch: its pipeline time is the sum of the stages' for every
    cut). So with a uniform recomputation mode and at most CUT_ENUMERATION_LIMIT cuts, every fitting cut
    is priced and the fastest step kept (exact); above that, `cut`'s (the secondary terms are small
    beside the pipeline's: 0.08% on the 5-block case of tests/test_hybrid_stages.py)."""
    if layers is None and par.recompute != "per-stage" and par.pp > 1:
        few = _few_cuts(ctx.spec.layers, par.pp, least_layers(par.schedule, par.virtual_stages))
        if few is not None and par.schedule == "zb-exact":
            return _fastest_exact_cut(ctx, par, profile, memory_limit, few)
        if few is not None:
            plans = [price(ctx, par, profile, memory_limit, layers=c) for c in few
                     if _fits(ctx, par, c, memory_limit)]  # None: the node's host memory is short
            return min((p for p in plans if p is not None), key=lambda plan: plan.step_time_s, default=None)
    profile = rank_profile(ctx, par, profile)
    layers = layers or cut(ctx, par, profile, memory_limit)
    if layers is None:
        return None
    if modes is None:
        modes, recompute_blocks = stage_choices(ctx, par, layers, memory_limit, profile)
    recompute_blocks = recompute_blocks or (None,) * len(layers)
    if offloaded is None and par.offload in ("activations", "both"):
        found = [offload_layers(ctx, par, i, k, memory_limit) for i, k in enumerate(layers)]
        if any(r is None for r in found):
            return None  # nothing to offload (the plain point is this plan), or nothing fits
        offloaded = tuple(r for r in found if r is not None)
    offloaded = offloaded or (0,) * len(layers)
    spec, cluster, pp = ctx.spec, ctx.cluster, par.pp
    head, extras = head_stage(pp, par.schedule), _extras(par, profile)
    chunked = par.schedule == "interleaved" or par.schedule == "zb-v"
    stages, first = [], 0
    for i, k in enumerate(layers):
        block, recompute = layer_s(par, profile, modes[i])
        partial = recompute_blocks[i] is not None and recompute_blocks[i] < k
        recomputed = recompute_blocks[i] if partial else k
        extra = extras[i]
        configs = (tuple(("embedding", op, c) for op, c in profile.embed_configs) if i == 0 else ()) + \
            tuple(("block", op, c) for op, c in profile.configs) + \
            (tuple(("head", op, c) for op, c in profile.head_configs) if i == head else ())
        stages.append(StagePlan(i, first, k, i == 0, i == head, i * par.tp * par.replicas, par.tp, par.replicas,
                                k * block, recomputed * recompute, extra, stage_p2p_s(ctx, par, i),
                                memory_of(ctx, par, i, k, modes[i], recompute_blocks[i] if partial else None,
                                          offload_layers=offloaded[i]),
                                configs, modes[i], k * profile.block_forward_s + extra / 3.0,
                                chunk_layers(k, par.virtual_stages) if chunked else (),
                                k * weight_grad_s(profile) + extra / 3.0,
                                recompute_blocks[i] if partial else None, offloaded[i]))
        if offloaded[i]:  # the activations' copies down and up, beyond what the passes hide
            from solver_plan.hybrid.offload import activation_copy_s

            st = stages[-1]
            copied = st.memory.host - memory_of(ctx, par, i, k, modes[i], offload_layers=0).host  # r blocks'
            stages[-1] = replace(st, offload_s=activation_copy_s(ctx.cluster.host, copied, st.forward_s,
                                                                 st.block_s + st.recompute_s + st.extra_s
                                                                 - st.forward_s))
        first += k
    times = [s.time_per_microbatch_s for s in stages]
    exact = None
    if par.schedule == "zb-exact":
        exact = exact_schedule(ctx, par, stages, memory_limit)
        if exact is None:
            return None
        stages = [replace(s, memory=memory_of(ctx, par, s.index, s.layers, s.recompute,
                                              in_flight=min(g, par.micro_batches)))
                  for s, g in zip(stages, exact.in_flight)]
        pipeline = exact.pipeline_s(par.micro_batches)
    else:
        pipeline = schedule.pipeline_s(times, par.micro_batches, par.schedule, par.virtual_stages,
                                       [s.weight_grad_s for s in stages])
    params = [stage_params(spec, s.layers, s.embedding, s.head, par.tp, pp) for s in stages]
    exposed, raw = dp_sync_terms(ctx, par, stages, params)
    terms = schedule.StepTerms(
        pipeline, exposed,
        schedule.embedding_sync_s(cluster, spec, par.tp, pp, ctx.state, par.schedule),
        max(stage_optimizer_s(ctx, par, p, s.layers) for p, s in zip(params, stages)), raw - exposed,
        contention.slowdown_s(raw - exposed, contention.collective_share(cluster.device)))
    if par.offload != "none" and not _host_fits(ctx, max(s.memory.host for s in stages)):
        return None
    return HybridPlan(spec.name, cluster.name, cluster.num_devices, ctx.global_batch, par, tuple(stages), terms,
                      profile.configs, spec.model_flops_per_step(ctx.global_batch), memory_limit, ctx.precision,
                      ctx.runtime.name, exact)


def exact_schedule(ctx: Context, par: Parallelism, stages, memory_limit: float | None):
    """The exact periodic zero-bubble schedule of the stages (hybrid/exact_zb.py): their F, B, W and,
    per stage, the bytes with one micro-batch in flight less what one micro-batch adds (the static
    part) and that per-micro-batch amount, under `memory_limit`; None when none fits. A stage whose
    finished micro-batches keep more than its in-flight ones (torch pipelining's receive buffers and
    their .grad, 2 x each, against a block's input under full recomputation: `pipeline_buffer_bytes`)
    would have a negative amount: it is priced at 0 and the static part at the one-micro-batch bytes,
    the most it holds at any count (an upper bound)."""
    from solver_plan.hybrid.exact_zb import schedule as exact, stage_passes

    one = [memory_of(ctx, par, s.index, s.layers, s.recompute, in_flight=1).total for s in stages]
    two = [memory_of(ctx, par, s.index, s.layers, s.recompute, in_flight=2).total for s in stages]
    per_batch = tuple(max(0.0, b - a) for a, b in zip(one, two))
    return exact(tuple(stage_passes(s) for s in stages), tuple(a - d for a, d in zip(one, per_batch)), per_batch,
                 memory_limit)


def offload_layers(ctx: Context, par: Parallelism, stage: int, k: int, memory_limit: float | None) -> int | None:
    """The fewest of a stage's k blocks whose activations go to the host for it to fit `memory_limit`
    (time grows with them, memory falls: offload.py), 1 <= r < k; None when it fits with none (the
    plain point) or fits with none of them."""
    if memory_limit is None or memory_of(ctx, par, stage, k, offload_layers=0).total <= memory_limit:
        return None
    for r in range(1, k):
        if memory_of(ctx, par, stage, k, offload_layers=r).total <= memory_limit:
            return r
    return None


def stage_optimizer_s(ctx: Context, par: Parallelism, params: float, layers: int) -> float:
    """The optimizer step of a stage of `params` parameters per device: Adam on the device
    (schedule.optimizer_s), or with optimizer offload the host's step with its copies down and up,
    pipelined over the gradient buckets (offload.step_s)."""
    if par.offload in ("none", "activations"):
        return schedule.optimizer_s(ctx.cluster, params, par.shard, par.state_zero, ctx.state, ctx.runtime)
    from solver_plan.hybrid.offload import step_s

    pieces = schedule.buckets(params, par.shard, ctx.state, ctx.runtime, layers)
    return step_s(ctx.cluster.host, params / par.shard, ctx.state, pieces)


def _host_fits(ctx: Context, host_bytes: float) -> bool:
    """Whether each node's host memory holds its devices' offloaded state, `host_bytes` a device at
    most (offload.fits_host)."""
    from solver_plan.hybrid.offload import fits_host

    return fits_host(ctx.cluster.host, host_bytes, ctx.cluster.devices_per_node)


def host_floor_fits(ctx: Context, par: Parallelism) -> bool:
    """Whether the nodes' host memory can hold what a point offloads for some cut: the stage with the
    most blocks holds at least ceil(L / p) of them (a necessary condition; `price` checks the cut)."""
    if par.offload == "none":
        return True
    # the host bytes with no block's activations offloaded: the optimizer state's, by the fields the
    # stage's parameters (the head's stage: the schedule) and their sharding read, in `bound_cache`
    key = ("host", par.pp, par.tp, par.shard, par.state_zero, par.offload, par.schedule)  # head_stage reads it
    if key not in ctx.bound_cache:
        k = -(-ctx.spec.layers // par.pp)
        ctx.bound_cache[key] = _host_fits(ctx, memory_of(ctx, par, 1 if par.pp > 1 else 0, k, offload_layers=0).host)
    return ctx.bound_cache[key]


def _fastest_exact_cut(ctx: Context, par: Parallelism, profile: BlockProfile, memory_limit: float | None,
                       cuts) -> HybridPlan | None:
    """`price`'s every-cut search for zb-exact, each cut's exact schedule solved only while a lower
    bound on its pipeline is below the best step found, the cuts in order of that bound: stage i
    starts after the forwards of the stages before it and then runs all its work m times,
    max_i (sum_{j<i} F_j + m T_i)."""
    local = rank_profile(ctx, par, profile)
    block, recompute = layer_s(par, local)
    extras = _extras(par, local)
    p2p = [stage_p2p_s(ctx, par, i) for i in range(par.pp)]

    def bound(c) -> float:
        times = [k * (block + recompute) + e + q for k, e, q in zip(c, extras, p2p)]
        forwards = [k * local.block_forward_s + e / 3.0 + q / 2.0 for k, e, q in zip(c, extras, p2p)]
        return max(sum(forwards[:i]) + par.micro_batches * t for i, t in enumerate(times))

    bounds = sorted((bound(c), c) for c in cuts)
    best = None
    for bound, c in bounds:
        if best is not None and bound >= best.step_time_s:
            break
        if _fits(ctx, par, c, memory_limit):
            plan = price(ctx, par, profile, memory_limit, layers=c)
            if plan is not None and (best is None or plan.step_time_s < best.step_time_s):
                best = plan
    return best


def dp_sync_terms(ctx: Context, par: Parallelism, stages, params) -> tuple[float, float]:
    """(exposed, unoverlapped) data-parallel sync of the plan: the largest over stages, each stage's
    `schedule.exposed_sync_s` with its own forward and backward per micro-batch as windows and, as
    slack, the forwards (backwards) of the stages before it (their last backwards end after its)."""
    exposed = raw = 0.0
    slack_forward = slack_backward = 0.0
    for s, p in zip(stages, params):
        parts = schedule.sync_parts(ctx.cluster, p, par.tp, par.shard, par.state_zero, ctx.state, ctx.runtime,
                                    s.layers, par.replicate)
        backward = s.block_s + s.recompute_s + s.extra_s - s.forward_s
        exposed = max(exposed, schedule.exposed_sync_s(parts, par.micro_batches, s.forward_s, backward, ctx.runtime,
                                                       slack_forward, slack_backward))
        raw = max(raw, parts.grad_s + parts.gather_s + par.micro_batches * (parts.forward_s + parts.backward_s))
        slack_forward += s.forward_s
        slack_backward += backward
    return exposed, raw


def time_bound(ctx: Context, par: Parallelism, profile: BlockProfile) -> float:
    """A lower bound on `price(...)`'s step time for every cut: the slowest stage is at least the
    average (sum of stage times is the same for every cut) and at least one block plus the larger
    end layer; gradient sync and optimizer of a stage holding floor(L / p) blocks. Per-stage
    recomputation is bounded with no recomputation (the least time of any stage's mode)."""
    spec, pp, m = ctx.spec, par.pp, par.micro_batches
    profile = rank_profile(ctx, par, profile)
    block, recompute = layer_s(par, profile)
    c = block + recompute
    p2p = [stage_p2p_s(ctx, par, i) for i in range(pp)] if pp > 1 else [0.0]
    extras = _extras(par, profile)
    total = spec.layers * c + sum(extras) + sum(p2p)
    slowest = max(total / pp, c + max(e + q for e, q in zip(extras, p2p)))
    if par.schedule == "interleaved":  # m max T + (sum T - max T) / v, increasing in max T
        pipe = (m - 1 / par.virtual_stages) * slowest + total / par.virtual_stages
    elif par.schedule in ZERO_BUBBLE:  # m max T + max(0, sum T - max T - c (p - 1)/p sum W), non-decreasing in max T
        weights = spec.layers * weight_grad_s(profile) + sum(extras) / 3.0
        pipe = zero_bubble_pipeline_s([slowest] + [(total - slowest) / max(1, pp - 1)] * (pp - 1),
                                      [0.0] + [weights / (pp - 1)] * (pp - 1), m, par.schedule)  # W_0 = 0: the
        # least critical path (its other terms take only the sum of W, the same for every cut)
    elif par.schedule == "zb-exact":  # every stage runs all its work once a period: T >= max T_i; and one
        # micro-batch's F and B pass every stage in turn (the sum of W is the same for every cut)
        pipe = max(m * slowest, total - spec.layers * weight_grad_s(profile) - sum(extras) / 3.0)
    else:
        pipe = total + (m - 1) * slowest
    return pipe + _bound_terms(ctx, par)


def _bound_terms(ctx: Context, par: Parallelism) -> float:
    """`time_bound`'s sync, embedding sync and optimizer terms, for a stage holding floor(L / p)
    blocks (memoised in `ctx.bound_cache` by every field of the point they read)."""
    key = (par.tp, par.pp, par.shard, par.state_zero, par.replicate, par.micro_batches, par.offload, par.schedule)
    if key not in ctx.bound_cache:
        spec = ctx.spec
        params = stage_params(spec, spec.layers // par.pp, False, False, par.tp, par.pp)
        ctx.bound_cache[key] = (sync_bound(ctx, par, params)
                                + schedule.embedding_sync_s(ctx.cluster, spec, par.tp, par.pp, ctx.state, par.schedule)
                                + optimizer_floor(ctx, par, params))
    return ctx.bound_cache[key]


def optimizer_floor(ctx: Context, par: Parallelism, params: float) -> float:
    """A lower bound on the optimizer term for a stage of at least `params` parameters per device:
    the device's Adam, or offloaded, the longest of its copy down, host step and copy up
    (offload.step_s is at least that, and each grows with the parameters)."""
    if par.offload in ("none", "activations"):
        return schedule.optimizer_s(ctx.cluster, params, par.shard, par.state_zero, ctx.state, ctx.runtime)
    from solver_plan.hybrid.offload import parts_s

    return max(parts_s(ctx.cluster.host, params / par.shard, ctx.state))


def sync_bound(ctx: Context, par: Parallelism, params: float) -> float:
    """A lower bound on the exposed data-parallel sync plus its contention of every cut: for a stage of
    `params` parameters (the fewest any stage has), the parts the runtime does not overlap, e (overlapped
    parts may hide entirely, so they count 0), and its unoverlapped sync r: the step pays exposed E >= e
    and contention s (R - E) with R >= r (`contention.slowdown_s`, share s <= 1), so
    E + s (R - E) = (1 - s) E + s R >= e + s (r - e)."""
    overlap = ctx.runtime.overlap
    parts = schedule.sync_parts(ctx.cluster, params, par.tp, par.shard, par.state_zero, ctx.state, ctx.runtime,
                                ctx.spec.layers // par.pp, par.replicate)
    per_microbatch = parts.forward_s + parts.backward_s
    raw = parts.grad_s + parts.gather_s + par.micro_batches * per_microbatch
    if overlap.sharded_prefetch:
        per_microbatch = parts.backward_s - parts.backward_gather_s if not overlap.grad_reduce else 0.0
    exposed = ((0.0 if overlap.grad_reduce else parts.grad_s) + (0.0 if overlap.param_gather else parts.gather_s)
               + par.micro_batches * per_microbatch)
    return exposed + contention.slowdown_s(raw - exposed, contention.collective_share(ctx.cluster.device))


def memory_floor(ctx: Context, par: Parallelism) -> float:
    """A lower bound on the largest stage's memory for every cut: some stage holds at least
    ceil(L / p) blocks, and every stage holds at least the in-flight micro-batches of the last."""
    k = -(-ctx.spec.layers // par.pp)
    # the middle stages differ only in what they hold in flight, which falls with the stage index
    # (memory.in_flight_microbatches, stages.held_layers): their least is the last of them
    stages = {0, max(0, par.pp - 2), par.pp - 1}
    return min(memory_of(ctx, par, i, k).total for i in stages)
