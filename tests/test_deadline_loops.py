"""Loops that grow with the input look at the clock (issue 26): hybrid enumeration and INFEASIBLE
diagnosis, divisors of huge batches, the exact-joint model build, generated problems of batch jobs,
the load model's per-device sums; and limits past what waits can hold are refused."""
from __future__ import annotations

import math

import pytest

from solver_plan.deadline import Deadline
from solver_plan.errors import InputError
from solver_plan.result import Status


def _expired() -> Deadline:
    deadline = Deadline(1e-6)
    while not deadline.expired():
        pass
    return deadline


def test_divisors_in_order_and_for_huge_numbers():
    from solver_plan.hybrid.space import _divisors
    for n in (1, 2, 12, 36, 97, 720720, 2**24):
        assert _divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    huge = _divisors(10**12)  # 13 x 13 divisors; O(n) took hours
    assert len(huge) == 169 and huge[0] == 1 and huge[-1] == 10**12 and huge == sorted(huge)


def test_a_global_batch_beyond_the_cap_is_one_line():
    from solver_plan.hybrid.search import MAX_GLOBAL_BATCH, plan_hybrid
    with pytest.raises(InputError, match="--batch: must be at most"):
        plan_hybrid("gpt2:layers=2", "v100x8-nvlink", MAX_GLOBAL_BATCH + 1, time_limit=5)


def test_hybrid_out_of_time_before_the_space_is_enumerated_keeps_a_valid_bound():
    from solver_plan.hybrid.search import plan_hybrid
    full = plan_hybrid("gpt2:layers=2,seq=128", "v100x8-nvlink", 16, time_limit=None)
    cut = plan_hybrid("gpt2:layers=2,seq=128", "v100x8-nvlink", 16, deadline=_expired())
    assert cut.status == Status.TIME_LIMIT and cut.plan is None
    assert cut.lower_bound_s is not None and cut.lower_bound_s <= full.step_time_s * (1 + 1e-12)


def _infeasible_context():
    """gpt2 blocks on 8 V100s under a 1 GB limit: no point fits; (ctx, points, floors, coster)."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid import search
    from solver_plan.hybrid.model import transformer_spec
    from solver_plan.hybrid.stage_cost import BlockCoster
    spec = transformer_spec("gpt2:layers=4,seq=256")
    cluster = resolve_cluster("v100x8-nvlink")
    prec = search.resolve_hybrid_precision(None, cluster)
    ctx = search._context(spec, cluster, 16, 1e9, prec, None)
    points = search._points(spec, cluster, 16, {}, Deadline(None))
    floors = search._floors(ctx, points, Deadline(None))
    assert min(floors) > 1e9  # nothing fits: the diagnosis runs
    return ctx, points, floors, BlockCoster(spec, cluster, "greedy", 1.0, prec, ctx.runtime)


def test_the_infeasible_diagnosis_stops_at_the_deadline_and_says_so():
    from solver_plan.hybrid import search
    ctx, points, floors, coster = _infeasible_context()
    full = search._infeasible(ctx, points, floors, coster, 0.0, False)
    assert full.status == Status.INFEASIBLE and "the least any needs" in full.notes[0]
    cut = search._infeasible(ctx, points, floors, coster, 0.0, False, deadline=_expired())
    assert cut.status == Status.TIME_LIMIT and cut.plan is None and "time limit" in cut.notes[0]


def test_least_memory_is_the_smallest_limit_that_fits():
    from solver_plan.hybrid import interop, search
    from solver_plan.hybrid.evaluate import memory_of
    ctx, points, floors, _ = _infeasible_context()
    par, floor = points[0], floors[0]
    need = search._least_memory(ctx, par, floor)
    assert math.isfinite(need) and need >= floor

    def fits(limit):
        caps = interop.memory_caps(ctx.spec.layers, par.pp, lambda i, k: memory_of(ctx, par, i, k).total, limit)
        if par.schedule == "interleaved":
            return interop.equal_cut(ctx.spec.layers, par.pp, caps) is not None
        return min(caps) >= 1 and sum(caps) >= ctx.spec.layers

    assert fits(need) and not fits(need * (1 - 1e-6))


def test_exact_joint_skips_a_model_too_large_for_its_limit_the_same_way_every_time():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.pipeline import exact_joint
    from solver_plan.pipeline.sources import build_chain_problem
    problem = build_chain_problem("gpt2:layers=24,seq=128,batch=4", resolve_cluster("a100-80gb-superpod", 16), 16,
                                  max_layers=24)
    assert exact_joint.build_seconds(problem) > exact_joint.BUILD_SHARE * 1.0
    first = exact_joint.plan(problem, time_limit=1.0)
    second = exact_joint.plan(problem, time_limit=1.0, deadline=Deadline(60.0))
    # the size and the nominal limit decide, not the clock (the heuristic pattern returned is the
    # schedulers' own: work-limited, their wall-clock safety net may differ on a loaded machine)
    assert "joint model not built" in first.notes[0] and first.notes[0] == second.notes[0]
    for result in (first, second):
        assert result.status in (Status.FEASIBLE, Status.TIME_LIMIT)
        assert result.lower_bound_s is not None and (result.period_s is None or result.period_s >= result.lower_bound_s)


def test_the_joint_model_build_stops_at_the_safety_net():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.pipeline import exact_joint
    from solver_plan.pipeline.sources import build_chain_problem
    from solver_plan.pipeline.ticks import tick_for
    problem = build_chain_problem("gpt2:layers=4,seq=128,batch=4", resolve_cluster("v100x8-nvlink", 4), 4)
    tick = tick_for(problem.total_load / 4, 200)
    exact_joint.JointModel(problem, tick, 400)  # builds without a deadline
    with pytest.raises(exact_joint.BuildExpired):
        exact_joint.JointModel(problem, tick, 400, _expired())


def test_generated_problems_stop_at_the_deadline():
    from solver_plan.suite.generators import GenerationExpired, resolve_problem
    spec = "random-dag:nodes=3000,candidates=4-8,seed=1"
    assert resolve_problem(spec, Deadline(None)).num_nodes == 3000
    with pytest.raises(GenerationExpired):
        resolve_problem(spec, _expired())


def test_generated_candidates_are_shared_and_equal_to_fresh_ones():
    from solver_plan.cost.config import ParallelConfig
    from solver_plan.suite.generators import candidate_pairs, resolve_problem
    problem = resolve_problem("skip-chain:nodes=50,candidates=4-8,seed=2,devices=8")
    pairs = candidate_pairs(8)
    fresh = {ParallelConfig(((split, len(block)),), block) for block, split in pairs}
    assert {cfg for configs in problem.candidates for cfg in configs} <= fresh


@pytest.mark.parametrize("limit", [1e30, 1e8, float("inf")])
def test_time_limits_past_what_waits_hold_are_refused(limit):
    with pytest.raises(InputError, match="time limit"):
        Deadline(limit)


def test_the_load_model_build_stops_at_the_deadline():
    from solver_plan.intra.load_objective import LoadModelExpired, load_model
    from solver_plan.suite.generators import resolve_problem
    problem = resolve_problem("random-dag:nodes=200,candidates=4-8,seed=1")
    assert load_model(problem, Deadline(None)).model.num_columns > 0
    with pytest.raises(LoadModelExpired):
        load_model(problem, _expired())


@pytest.mark.parametrize("runtime, cluster_name", [(None, "v100x8-nvlink"), ("torchtitan", "v100x8-nvlink"),
                                                   ("deepspeed", "v100x8-nvlink"), (None, "a100-80gb-superpod")])
def test_the_state_bound_never_exceeds_a_points_memory_floor(runtime, cluster_name):
    """The cheap bound that drops a point without its floor is a lower bound of that floor, at every
    point of a space with ZeRO stages, hybrid sharding, cp, the runtimes' gradient rules and (on a
    cluster with host memory) optimizer and activation offload."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid import search
    from solver_plan.hybrid.evaluate import memory_floor
    from solver_plan.hybrid.model import transformer_spec
    from solver_plan.hybrid.offload import offered
    spec = transformer_spec("gpt3-175B:layers=4,seq=16")  # model state far above activations: the bound binds
    cluster = resolve_cluster(cluster_name, 8)
    precision = search.resolve_hybrid_precision(None, cluster)
    ctx = search._context(spec, cluster, 16, None, precision, runtime)
    offloads = offered(cluster, ctx.runtime, {})
    points = search._points(spec, cluster, 16, {}, Deadline(None), offloads)
    assert any(p.offload == "optimizer" for p in points) == ("optimizer" in offloads)
    if cluster_name == "a100-80gb-superpod":
        assert "optimizer" in offloads
    assert len({p.state_zero for p in points}) > 1 and any(p.micro_batches == 1 for p in points)
    bounds = [search.state_bound(ctx, par) for par in points]
    exact = [memory_floor(ctx, par) for par in points]
    assert all(b <= e * (1 + 1e-12) for b, e in zip(bounds, exact))
    limit = sorted(bounds)[len(bounds) // 2]  # half the points dropped by their bound alone
    limited = search._context(spec, cluster, 16, limit, precision, runtime)
    floors = search._floors(limited, points, Deadline(None))
    # above the limit a point keeps its bound, below it its exact floor: the same points fit
    assert [f <= limit for f in floors] == [e <= limit for e in exact]
    assert all(f <= e * (1 + 1e-12) for f, e in zip(floors, exact)) and floors != exact
