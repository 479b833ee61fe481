"""Price one point of the space: stages (cut by interop.py), their times and memory, the step time.

`price(ctx, par, profile)` is what the search, `evaluate()` (what-if, calibration) and the baselines
share; the validator re-derives its numbers independently (validate.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.cluster import Cluster
from solver_plan.hybrid import interop, schedule
from solver_plan.hybrid.memory import StateBytes, stage_memory, stage_params
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.hybrid.plan import HybridPlan, StagePlan
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.stage_cost import BlockProfile


@dataclass(frozen=True)
class Context:
    spec: TransformerSpec
    cluster: Cluster  # exactly the devices planned for
    global_batch: int
    memory_limit: float | None
    state: StateBytes


def layer_s(par: Parallelism, profile: BlockProfile) -> tuple[float, float]:
    """(forward + backward, recomputation) seconds of one block per micro-batch."""
    extra = {"none": 0.0, "selective": profile.attention_forward_s, "full": profile.block_forward_s}[par.recompute]
    return profile.block_s, extra


def stage_p2p_s(ctx: Context, par: Parallelism, stage: int) -> float:
    """Transfers stage `stage` sends per micro-batch: the activation forward (all but the last) and
    the gradient backward (all but the first), v times each with v chunks."""
    total = 0.0
    for boundary in (stage - 1, stage):  # gradient back to stage - 1, activation on to stage + 1
        if 0 <= boundary < par.pp - 1:
            total += schedule.p2p_send_s(ctx.cluster, ctx.spec, par.micro_batch_size, par.tp, par.dp, boundary)
    return total * par.virtual_stages


def memory_of(ctx: Context, par: Parallelism, stage: int, layers: int):
    return stage_memory(ctx.spec, layers=layers, stage=stage, pp=par.pp, tp=par.tp, dp=par.dp,
                        micro_batch=par.micro_batch_size, micro_batches=par.micro_batches, recompute=par.recompute,
                        sequence_parallel=par.sequence_parallel, zero_stage=par.zero_stage, schedule=par.schedule,
                        virtual_stages=par.virtual_stages, state=ctx.state)


def cut(ctx: Context, par: Parallelism, profile: BlockProfile, memory_limit: float | None) -> tuple[int, ...] | None:
    L, pp = ctx.spec.layers, par.pp
    caps = interop.memory_caps(L, pp, lambda i, k: memory_of(ctx, par, i, k).total, memory_limit)
    if par.schedule == "interleaved":
        return interop.equal_cut(L, pp, caps)
    block, recompute = layer_s(par, profile)
    extras = [(profile.embed_s if i == 0 else 0.0) + (profile.head_s if i == pp - 1 else 0.0) for i in range(pp)]
    return interop.balanced_cut(L, block + recompute, extras, caps)


def price(ctx: Context, par: Parallelism, profile: BlockProfile, memory_limit: float | None = None,
          layers: tuple[int, ...] | None = None) -> HybridPlan | None:
    """The plan of `par` (with the given cut, or the best cut that fits `memory_limit`); None when no
    cut fits."""
    layers = layers or cut(ctx, par, profile, memory_limit)
    if layers is None:
        return None
    spec, cluster, pp = ctx.spec, ctx.cluster, par.pp
    block, recompute = layer_s(par, profile)
    stages, first = [], 0
    for i, k in enumerate(layers):
        extra = (profile.embed_s if i == 0 else 0.0) + (profile.head_s if i == pp - 1 else 0.0)
        configs = (tuple(("embedding", op, c) for op, c in profile.embed_configs) if i == 0 else ()) + \
            tuple(("block", op, c) for op, c in profile.configs) + \
            (tuple(("head", op, c) for op, c in profile.head_configs) if i == pp - 1 else ())
        stages.append(StagePlan(i, first, k, i == 0, i == pp - 1, i * par.tp * par.dp, par.tp, par.dp,
                                k * block, k * recompute, extra, stage_p2p_s(ctx, par, i), memory_of(ctx, par, i, k),
                                configs))
        first += k
    times = [s.time_per_microbatch_s for s in stages]
    params = [stage_params(spec, s.layers, s.embedding, s.head, par.tp, pp) for s in stages]
    terms = schedule.StepTerms(
        schedule.pipeline_s(times, par.micro_batches, par.schedule, par.virtual_stages),
        max(schedule.dp_sync_s(cluster, p, par.tp, par.dp, par.zero_stage, par.micro_batches, ctx.state)
            for p in params),
        schedule.embedding_sync_s(cluster, spec, par.tp, pp, ctx.state),
        max(schedule.optimizer_s(cluster, p, par.dp, par.zero_stage, ctx.state) for p in params))
    return HybridPlan(spec.name, cluster.name, cluster.num_devices, ctx.global_batch, par, tuple(stages), terms,
                      profile.configs, spec.model_flops_per_step(ctx.global_batch), memory_limit)


def time_bound(ctx: Context, par: Parallelism, profile: BlockProfile) -> float:
    """A lower bound on `price(...)`'s step time for every cut: the slowest stage is at least the
    average (sum of stage times is the same for every cut) and at least one block plus the larger
    end layer; gradient sync and optimizer of a stage holding floor(L / p) blocks."""
    spec, pp, m = ctx.spec, par.pp, par.micro_batches
    block, recompute = layer_s(par, profile)
    c = block + recompute
    p2p = [stage_p2p_s(ctx, par, i) for i in range(pp)] if pp > 1 else [0.0]
    extras = [(profile.embed_s if i == 0 else 0.0) + (profile.head_s if i == pp - 1 else 0.0) for i in range(pp)]
    total = spec.layers * c + sum(extras) + sum(p2p)
    slowest = max(total / pp, c + max(e + q for e, q in zip(extras, p2p)))
    if par.schedule == "interleaved":
        pipe = (m + (pp - 1) / par.virtual_stages) * slowest
    else:
        pipe = total + (m - 1) * slowest
    params = stage_params(spec, spec.layers // pp, False, False, par.tp, pp)
    return (pipe + schedule.dp_sync_s(ctx.cluster, params, par.tp, par.dp, par.zero_stage, m, ctx.state)
            + schedule.embedding_sync_s(ctx.cluster, spec, par.tp, pp, ctx.state)
            + schedule.optimizer_s(ctx.cluster, params, par.dp, par.zero_stage, ctx.state))


def memory_floor(ctx: Context, par: Parallelism) -> float:
    """A lower bound on the largest stage's memory for every cut: some stage holds at least
    ceil(L / p) blocks, and every stage holds at least the in-flight micro-batches of the last."""
    k = -(-ctx.spec.layers // par.pp)
    return min(memory_of(ctx, par, i, k).total for i in range(par.pp))
