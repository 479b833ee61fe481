"""Per-stage recomputation: under 1F1B the first stages hold more micro-batches in flight, so under a
binding memory limit they recompute while later stages do not; the mixed cut is exact."""
import itertools

import numpy as np
import pytest

from solver_plan.cluster import resolve_cluster
from functools import partial

from solver_plan.hybrid import plan_hybrid as _plan_hybrid
from solver_plan.hybrid.interop import mixed_cut
from solver_plan.hybrid.validate import validate_plan
from solver_plan.result import Status

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
MODEL = "gpt2:layers=8,hidden=256,heads=8,head_dim=32,ffn=1024,seq=2048,positions=2048,vocab=8000"
# Megatron-LM 2021 (unfused attention): the s^2 scores make activations, and so the in-flight
# micro-batches, dominate stage memory, which is what per-stage recomputation trades
plan_hybrid = partial(_plan_hybrid, runtime="megatron-2021")
FIX = {"tp": 1, "pp": 4, "micro_batch_size": 2, "schedule": "1f1b", "zero_stage": 0}


def test_first_stage_recomputes_where_later_ones_need_not():
    free = plan_hybrid(MODEL, CLUSTER, 64, memory_limit="none", time_limit=None, fix={**FIX, "recompute": "none"})
    mems = [s.memory.total for s in free.plan.stages]
    assert mems == sorted(mems, reverse=True)  # 1F1B: stage i holds min(p - i, m) micro-batches
    limit = (mems[0] + mems[1]) / 2  # stage 0 of the free plan no longer fits
    uniform = {r: plan_hybrid(MODEL, CLUSTER, 64, memory_limit=limit, time_limit=None, fix={**FIX, "recompute": r})
               for r in ("none", "selective", "full")}
    mixed = plan_hybrid(MODEL, CLUSTER, 64, memory_limit=limit, time_limit=None, fix={**FIX, "recompute": "per-stage"})
    assert mixed.status == Status.OPTIMAL and validate_plan(mixed.plan, CLUSTER) == []
    modes = [s.recompute for s in mixed.plan.stages]
    assert modes[0] != "none" and modes[-1] == "none"
    assert mixed.plan.memory_per_device_bytes <= limit
    # never slower than one mode for all stages, and here strictly faster than each
    assert all(mixed.step_time_s < r.step_time_s for r in uniform.values() if r.status.has_solution)
    # the unpinned search has per-stage in its space, so it is at least as fast
    fix = {k: v for k, v in FIX.items()}
    assert plan_hybrid(MODEL, CLUSTER, 64, memory_limit=limit, time_limit=None,
                       fix=fix).step_time_s <= mixed.step_time_s * (1 + 1e-12)


def test_validator_catches_a_heavier_mode_than_needed():
    from dataclasses import replace

    result = plan_hybrid(MODEL, CLUSTER, 64, memory_limit="none", time_limit=None,
                         fix={**FIX, "recompute": "per-stage"})
    assert [s.recompute for s in result.plan.stages] == ["none"] * 4  # no limit: no recomputation
    stages = (replace(result.plan.stages[0], recompute="full"),) + result.plan.stages[1:]
    assert validate_plan(replace(result.plan, stages=stages), CLUSTER) != []


@pytest.mark.parametrize("seed", range(20))
def test_mixed_cut_equals_brute_force_over_compositions(seed):
    """sum T_i + (m - 1) max T_i over every composition of L blocks into p stages, with per-stage
    time tables that jump where a stage switches to more recomputation and inf where nothing fits."""
    rng = np.random.default_rng(seed)
    L, p, m = int(rng.integers(3, 10)), int(rng.integers(1, 5)), int(rng.integers(1, 12))
    p = min(p, L)
    times = np.full((p, L + 1), np.inf)
    for i in range(p):
        per_block = np.cumsum(rng.uniform(0.5, 2.0, size=3))  # none < selective < full
        caps = np.sort(rng.integers(1, L + 1, size=3))
        extra = rng.uniform(0, 2)
        for k in range(1, L + 1):
            mode = int(np.searchsorted(caps, k))  # first mode whose cap holds k blocks
            if mode < 3:
                times[i, k] = k * per_block[mode] + extra
    best = None
    for cuts in itertools.combinations(range(1, L), p - 1):
        bounds = (0,) + cuts + (L,)
        ks = [bounds[j + 1] - bounds[j] for j in range(p)]
        ts = [times[j, k] for j, k in enumerate(ks)]
        if all(np.isfinite(ts)):
            value = sum(ts) + (m - 1) * max(ts)
            best = value if best is None else min(best, value)
    cut = mixed_cut(L, times, m)
    if best is None:
        assert cut is None
    else:
        ts = [times[j, k] for j, k in enumerate(cut)]
        assert sum(cut) == L and sum(ts) + (m - 1) * max(ts) == pytest.approx(best, rel=1e-12)
