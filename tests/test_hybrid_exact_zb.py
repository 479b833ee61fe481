"""The exact periodic zero-bubble schedule in hybrid plans (schedule "zb-exact", hybrid/exact_zb.py,
issue 23): the replay of a pattern by hand, plans priced through the pipeline package's exact-zb front
door and re-derived by the validator, the memory limit deciding the pattern, pins and refusals.
Brute force with zb-exact in the space: tests/test_hybrid_fsdp.py."""
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.exact_zb import replay_s
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.validate import validate_plan
from solver_plan.result import Status

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
SMALL = "gpt2:layers=8,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"

# two stages, F = B = W = 1, period 3 (the load bound): (name, kind, stage, start, duration, shift)
PATTERN = (("F0", "F", 0, 0.0, 1.0, 0), ("B0", "B", 0, 1.0, 1.0, 1), ("W0", "W", 0, 2.0, 1.0, 1),
           ("F1", "F", 1, 1.0, 1.0, 0), ("B1", "B", 1, 2.0, 1.0, 0), ("W1", "W", 1, 0.0, 1.0, 1))


def test_replay_by_hand():
    # periodic times of micro-batch 0: F0 0, F1 1, B1 2, W1 3, B0 4, W0 5 (span 6); replayed alone,
    # B0 starts when B1 ends (3) and W0 follows it: 5 = F0 + F1 + B1 + B0 + W0
    assert replay_s(PATTERN, 3.0, 2, 1) == pytest.approx(5.0)
    # two micro-batches, in each stage's periodic order (stage 0: F0/0, F0/1, B0/0, W0/0, B0/1, W0/1;
    # stage 1: F1/0, B1/0, W1/0, F1/1, B1/1, W1/1): F0/0 0-1, F0/1 1-2, F1/0 1-2, B1/0 2-3, W1/0 3-4,
    # B0/0 3-4, F1/1 4-5, W0/0 4-5, B1/1 5-6, W1/1 6-7, B0/1 6-7, W0/1 7-8: 8, below (m - 1) T + span = 9
    assert replay_s(PATTERN, 3.0, 2, 2) == pytest.approx(8.0)
    for m in (3, 8, 16):
        assert 3.0 * m <= replay_s(PATTERN, 3.0, 2, m) <= 3.0 * (m - 1) + 6.0


def _plan(schedule="zb-exact", runtime="torchtitan", limit="none", **extra):
    fix = {"dp": 2, "tp": 2, "pp": 4, "micro_batch_size": 1, "schedule": schedule, "recompute": "none", **extra}
    return evaluate(SMALL, CLUSTER, 16, fix, memory_limit=limit, runtime=runtime)


def test_plan_priced_by_the_exact_scheduler_and_validated():
    exact, one = _plan(), _plan("1f1b")
    assert exact.status == Status.FEASIBLE and "agree" in exact.notes[-1]  # the validator re-derived it
    x, m = exact.plan.exact_schedule, exact.plan.parallelism.micro_batches
    times = [s.time_per_microbatch_s for s in exact.plan.stages]
    # the period is at least every stage's work; the step is at least m periods of the slowest stage
    assert x.period_s >= max(times) * (1 - 1e-9)
    assert m * max(times) <= exact.plan.terms.pipeline_s <= (m - 1) * x.period_s + 3 * sum(times)
    assert exact.plan.terms.pipeline_s < one.plan.terms.pipeline_s  # the split backward fills 1F1B's bubble
    # memory follows the pattern's in-flight micro-batches (F start to W end), at most m
    for s, g in zip(exact.plan.stages, x.in_flight):
        per_batch = s.memory.activations
        assert 1 <= g <= m and per_batch > 0
    d = exact.to_dict()
    assert d["exact_schedule"]["period_s"] == x.period_s and len(d["exact_schedule"]["operations"]) == 12
    assert "torchtitan" in d["schedule_runtimes"] and d["parallelism"]["schedule"] == "zb-exact"


def test_memory_limit_decides_the_pattern():
    # longer sequences, a small vocabulary: the first stage's in-flight activations make the peak (the
    # last stage keeps every micro-batch's logits under torchtitan, memory.pipeline_buffer_bytes)
    model = "gpt2:layers=8,hidden=512,heads=8,head_dim=64,ffn=2048,seq=2048,positions=2048,vocab=512"
    fix = {"dp": 2, "tp": 2, "pp": 4, "micro_batch_size": 1, "schedule": "zb-exact", "recompute": "none"}
    free = evaluate(model, CLUSTER, 16, fix, memory_limit="none", runtime="torchtitan")
    peak = free.plan.memory_per_device_bytes
    # a limit below what the free pattern holds: the scheduler keeps fewer micro-batches in flight
    low = evaluate(model, CLUSTER, 16, fix, memory_limit=peak * 0.95, runtime="torchtitan")
    assert low.status == Status.FEASIBLE and low.plan.memory_per_device_bytes <= peak * 0.95
    assert sum(low.plan.exact_schedule.in_flight) < sum(free.plan.exact_schedule.in_flight)
    assert low.plan.terms.pipeline_s >= free.plan.terms.pipeline_s * (1 - 1e-9)


def test_validator_catches_a_tampered_pattern():
    plan = _plan().plan
    x = plan.exact_schedule
    fewer = replace(plan, exact_schedule=replace(x, in_flight=(1,) * len(x.in_flight)))
    assert any("micro-batches" in p for p in validate_plan(fewer, CLUSTER.first_devices(16), False))
    shorter = replace(plan, exact_schedule=replace(x, period_s=x.period_s / 2))
    assert validate_plan(shorter, CLUSTER.first_devices(16), False)


def test_pins_and_refusals():
    with pytest.raises(InputError, match="zb-exact"):
        Parallelism(1, 1, 8, 1, 16, schedule="zb-exact")  # more stages than the exact scheduler takes
    with pytest.raises(InputError, match="cannot run zb-exact"):
        _plan(runtime="megatron-core")
    searched = plan_hybrid(SMALL, CLUSTER, 16, fix={"schedule": "zb-exact", "tp": 2, "micro_batch_size": 1},
                           memory_limit="none", time_limit=None, runtime="torchtitan")
    assert searched.status == Status.OPTIMAL and searched.plan.parallelism.schedule == "zb-exact"
    assert searched.plan.parallelism.pp <= 4


def test_the_free_pattern_answers_where_proven_and_fitting():
    """A pattern solved without a memory row (exact_zb.free_pattern) answers a query whose bytes and
    limit it fits, with the period a solve under that limit proves; where it does not fit, the query is
    solved under its limit (a longer or equal period, never the free pattern)."""
    from solver_plan.hybrid import exact_zb

    passes = ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0))
    free = exact_zb.free_pattern(passes)
    assert free is not None and free.status == "OPTIMAL"
    static, per_batch = (10.0, 10.0, 10.0), (1.0, 1.0, 1.0)
    roomy = 10.0 + max(free.in_flight)
    answer = exact_zb.schedule(passes, static, per_batch, roomy)
    assert answer is free  # reused, no solve
    solved = exact_zb._schedule(passes, static, per_batch, roomy)  # what a solve under that limit proves
    assert solved is not None and solved.period_s == pytest.approx(free.period_s)
    tight = 10.0 + 1.0  # one micro-batch in flight a stage: the free pattern holds more
    assert max(free.in_flight) > 1
    limited = exact_zb.schedule(passes, static, per_batch, tight)
    assert limited is not free and limited is not None
    assert max(limited.in_flight) == 1 and limited.period_s >= free.period_s - 1e-12


def test_in_flight_caps_by_hand():
    """The scheduler's memory row as caps on the micro-batches in flight: floor((M - static) / A) in
    its memory units (one byte below 1e7 of limit), at most ROOM_FACTOR x pp, ROOM_FACTOR x pp without
    a limit or without per-batch bytes, below 1 where a stage cannot hold one micro-batch."""
    from solver_plan.hybrid.exact_zb import in_flight_caps

    assert in_flight_caps((10.0, 30.0), (7.0, 4.0), 40.0) == (4, 2)
    assert in_flight_caps((10.0, 20.0), (5.0, 0.0), 40.0) == (4, 4)  # 6 capped at 2 x 2; no batch bytes
    assert in_flight_caps((10.0, 20.0), (5.0, 5.0), None) == (4, 4)
    assert in_flight_caps((38.0, 10.0), (5.0, 5.0), 40.0)[0] < 1
    # 80 GB: 8,000-byte units; 60 GB static, 4.5 GB a micro-batch: 20e9 / 4.5e9 -> 4 of at most 2 x 3
    assert in_flight_caps((60e9, 70e9, 79e9), (4.5e9, 4.5e9, 4.5e9), 80e9) == (4, 2, 0)


def test_queries_with_the_same_caps_share_one_solve():
    """Byte profiles that allow the same micro-batches in flight on every stage are one scheduling
    problem: the second is answered from the first's solve, the same schedule, which fits its own bytes;
    and the canonical solve agrees with a solve of the raw bytes on the period (both proven)."""
    from solver_plan.hybrid import exact_zb

    passes = ((1.0, 1.2, 0.8), (1.1, 1.0, 1.0), (0.9, 1.1, 0.9))
    first = exact_zb.schedule(passes, (10.0, 10.0, 10.0), (2.0, 2.0, 2.0), 14.5)  # caps (2, 2, 2)
    solves = exact_zb.solves()
    second = exact_zb.schedule(passes, (100.0, 40.0, 70.0), (10.0, 30.0, 15.0), 125.0)  # caps (2, 2, 3) -> no
    assert exact_zb.in_flight_caps((100.0, 40.0, 70.0), (10.0, 30.0, 15.0), 125.0) == (2, 2, 3)
    third = exact_zb.schedule(passes, (100.0, 40.0, 70.0), (10.0, 30.0, 25.0), 120.0)  # caps (2, 2, 2)
    assert third is first and exact_zb.solves() == solves + (second is not first)
    for fixed, batch, limit, answer in [((10.0,) * 3, (2.0,) * 3, 14.5, first),
                                        ((100.0, 40.0, 70.0), (10.0, 30.0, 25.0), 120.0, third)]:
        assert all(s + k * a <= limit for s, k, a in zip(fixed, answer.in_flight, batch))
    raw = exact_zb._schedule(passes, (10.0, 10.0, 10.0), (2.0, 2.0, 2.0), 14.5)
    assert raw is not None and first is not None
    if raw.status == first.status == "OPTIMAL":
        assert raw.period_s == pytest.approx(first.period_s)
