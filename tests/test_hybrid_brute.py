"""On small models (up to 8 blocks, 16 devices) the planner's answer is proven optimal and equals a brute
force over the whole space: every dp x tp x pp, micro-batch, schedule, virtual stages, recomputation
(one mode for all stages, and every vector of per-stage modes), ZeRO stage, sequence parallelism and
EVERY cut of the blocks into stages (all compositions), with the memory limit checked on each plan."""
import itertools
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import plan_hybrid
from solver_plan.hybrid.evaluate import Context, price
from solver_plan.hybrid.memory import state_bytes
from solver_plan.runtime import RUNTIMES

from solver_plan.hybrid.model import transformer_spec
from hybrid_stage_options import stage_options
from solver_plan.hybrid.schedule import pipeline_s
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.result import Status

# Megatron-LM 2021 overlaps no data-parallel sync, so a stage's time does not depend on the other
# stages' recomputation modes and the brute force can re-assemble per-stage plans from uniform ones;
# under an overlapping runtime the exposed sync depends on every stage's backward window (the cut is
# still chosen for the pipeline term, as before: see docs/hybrid.md "Not done").
RUNTIME = RUNTIMES["megatron-2021"]


def compositions(n: int, k: int):
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0,) + cuts + (n,)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(k))


MODES = ("none", "selective", "full")


def brute_force(model: str, cluster, batch: int) -> list[tuple[float, float]]:
    """(step time, largest device memory) of every point of the space and every cut; with recompute
    "per-stage", every vector of stage modes (3^p of them), each stage priced as in the uniform plan of
    its mode and the step re-assembled from the pipeline formula (the planner's own per-stage choice
    is not used)."""
    spec = transformer_spec(model)
    ctx = Context(spec, cluster, batch, None, state_bytes(cluster.device), runtime=RUNTIME)
    coster = BlockCoster(spec, cluster, runtime=RUNTIME)
    n, L = cluster.num_devices, spec.layers
    plans = []
    for tp, pp in itertools.product(range(1, cluster.devices_per_node + 1), range(1, L + 1)):
        if n % (tp * pp) or spec.heads % tp or spec.ffn % tp or cluster.devices_per_node % tp:
            continue
        dp = n // (tp * pp)
        for b in range(1, batch + 1):
            if batch % (dp * b):
                continue
            m = batch // (dp * b)
            schedules = [("1f1b", 1), ("gpipe", 1)] + [("interleaved", v) for v in range(2, L + 1)]
            for (schedule, v), recompute, zero, sp in itertools.product(
                    schedules, ("none", "selective", "full", "per-stage"), range(4), (False, True)):
                # the space's rules: GPipe and interleaving need a pipeline; interleaving needs
                # p v <= L (a block a chunk) and p | m; ZeRO-2/3 only without pipelining
                if schedule != "1f1b" and pp == 1:
                    continue
                if schedule == "interleaved" and (pp * v > L or m % pp):
                    continue
                if zero >= 2 and pp > 1:
                    continue
                if RUNTIME.zero_stages is not None and zero not in RUNTIME.zero_stages:
                    continue  # the ZeRO stages the runtime runs (megatron-2021: 0 and 1)
                try:
                    par = Parallelism(dp, tp, pp, b, m, v, recompute, zero, sp, schedule)
                except InputError:
                    continue  # sequence parallel without tp
                profile = coster.profile(tp, b)
                cuts = [c for c in compositions(L, pp) if min(c) >= v]  # unequal stages, interleaved too
                for cut in cuts:
                    if recompute != "per-stage":
                        plan = price(ctx, par, profile, None, layers=cut)
                        plans.append((plan.step_time_s, plan.memory_per_device_bytes))
                        continue
                    none = price(ctx, replace(par, recompute="none"), profile, None, layers=cut)
                    rest = none.step_time_s - none.terms.pipeline_s
                    for stages in itertools.product(*stage_options(ctx, par, profile, cut)):  # partial too
                        pipe = pipeline_s([st.time_per_microbatch_s for st in stages], m, schedule, v)
                        plans.append((pipe + rest, max(st.memory.total for st in stages)))
    return plans


CLUSTER = resolve_cluster("h100-4x8-ib", 16)  # 2 nodes x 8 devices
SMALL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"
EIGHT = "gpt2:layers=8,hidden=256,heads=8,head_dim=32,ffn=1024,seq=256,positions=256,vocab=8000"


# 8 blocks: ~30 s on 2 cores (3^8 stage-mode vectors per 8-stage point), so in the slow set
@pytest.mark.parametrize("model, batch", [(SMALL, 8), pytest.param(EIGHT, 8, marks=pytest.mark.slow)])
def test_planner_equals_brute_force(model, batch):
    plans = brute_force(model, CLUSTER, batch)
    # no memory limit
    free = plan_hybrid(model, CLUSTER, batch, memory_limit="none", time_limit=None, runtime=RUNTIME)
    assert free.status == Status.OPTIMAL
    assert free.step_time_s == pytest.approx(min(t for t, _ in plans), rel=1e-9)
    assert free.lower_bound_s == pytest.approx(free.step_time_s, rel=1e-9)
    # a limit below every plan's memory: INFEASIBLE with exactly the least memory any plan needs
    least = min(m for _, m in plans)
    none_fit = plan_hybrid(model, CLUSTER, batch, memory_limit=least * 0.5, time_limit=None, runtime=RUNTIME)
    assert none_fit.status == Status.INFEASIBLE
    assert none_fit.needed_memory_bytes == pytest.approx(least, rel=1e-6)
    # a binding limit between the two: the fastest plan that fits
    limit = (least + free.plan.memory_per_device_bytes) / 2
    assert limit < free.plan.memory_per_device_bytes
    tight = plan_hybrid(model, CLUSTER, batch, memory_limit=limit, time_limit=None, runtime=RUNTIME)
    assert tight.status == Status.OPTIMAL
    assert tight.step_time_s == pytest.approx(min(t for t, m in plans if m <= limit), rel=1e-9)
    assert tight.plan.memory_per_device_bytes <= limit
