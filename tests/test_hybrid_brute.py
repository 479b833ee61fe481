"""On small models (up to 8 blocks, 16 devices) the planner's answer is proven optimal and equals a brute
force over the whole space: every dp x tp x pp, micro-batch, schedule, virtual stages, recomputation,
ZeRO stage, sequence parallelism and EVERY cut of the blocks into stages (all compositions), with the
memory limit checked on each plan."""
import itertools
import math

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import plan_hybrid
from solver_plan.hybrid.evaluate import Context, price
from solver_plan.hybrid.memory import state_bytes
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.result import Status


def compositions(n: int, k: int):
    for cuts in itertools.combinations(range(1, n), k - 1):
        bounds = (0,) + cuts + (n,)
        yield tuple(bounds[i + 1] - bounds[i] for i in range(k))


def brute_force(model: str, cluster, batch: int, limit: float | None) -> float:
    spec = transformer_spec(model)
    ctx = Context(spec, cluster, batch, limit, state_bytes(cluster.device))
    coster = BlockCoster(spec, cluster)
    n, L = cluster.num_devices, spec.layers
    best = math.inf
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
                    schedules, ("none", "selective", "full"), range(4), (False, True)):
                # the space's rules: GPipe and interleaving need a pipeline; interleaving needs
                # p v | L and p | m; ZeRO-2/3 only without pipelining
                if schedule != "1f1b" and pp == 1:
                    continue
                if schedule == "interleaved" and (L % (pp * v) or m % pp):
                    continue
                if zero >= 2 and pp > 1:
                    continue
                try:
                    par = Parallelism(dp, tp, pp, b, m, v, recompute, zero, sp, schedule)
                except InputError:
                    continue  # sequence parallel without tp
                profile = coster.profile(tp, b)
                cuts = [tuple([L // pp] * pp)] if schedule == "interleaved" else compositions(L, pp)
                for cut in cuts:
                    plan = price(ctx, par, profile, None, layers=cut)
                    if limit is None or plan.memory_per_device_bytes <= limit:
                        best = min(best, plan.step_time_s)
    return best


CLUSTER = resolve_cluster("h100-4x8-ib", 16)  # 2 nodes x 8 devices
SMALL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"
EIGHT = "gpt2:layers=8,hidden=256,heads=8,head_dim=32,ffn=1024,seq=256,positions=256,vocab=8000"


@pytest.mark.parametrize("model, batch, binding", [(SMALL, 8, False), (SMALL, 8, True), (EIGHT, 16, True)])
def test_planner_equals_brute_force(model, batch, binding):
    free = plan_hybrid(model, CLUSTER, batch, memory_limit="none", time_limit=None)
    # a binding limit: just below what the unconstrained optimum needs
    limit = 0.98 * free.plan.memory_per_device_bytes if binding else None
    result = plan_hybrid(model, CLUSTER, batch, memory_limit=limit or "none", time_limit=None) if binding else free
    expected = brute_force(model, CLUSTER, batch, limit)
    assert math.isfinite(expected)
    assert result.status == Status.OPTIMAL
    assert result.step_time_s == pytest.approx(expected, rel=1e-9)
    assert result.lower_bound_s == pytest.approx(expected, rel=1e-9)
    if binding:
        assert result.plan.memory_per_device_bytes <= limit
        assert result.step_time_s >= free.step_time_s
