"""Chain problem, PipeDream DP, 1F1B*, validator (with mutations), and Proposition 1 of MadPipe."""
import itertools
import math
import random

import pytest

from solver_plan.errors import InputError
from solver_plan.pipeline.chain import LayerChain, coarsen
from solver_plan.pipeline import exact_schedule, onef1b, pipedream_dp
from solver_plan.pipeline.allocation import Allocation, Stage
from solver_plan.pipeline.memory import pipedream_rule
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.validate import validate
from solver_plan.result import Status


def chain(fwd, bwd, weights=None, acts=None, input_bytes=0.0):
    n = len(fwd)
    return LayerChain.simple("t", fwd, bwd, weights or [0] * n, acts or [0] * n, input_bytes)


def contiguous(sizes):
    stages, first = [], 0
    for p, size in enumerate(sizes):
        stages.append(Stage(first, first + size - 1, p))
        first += size
    return Allocation(tuple(stages))


# --- 1F1B*: hand-worked group counts (MadPipe 4.1) ---------------------------------------------
def test_groups_from_the_end():
    # stage loads 4, 3, 5, 2 without transfers; T = 7: {s3, s4} fit, s2 opens group 2, s1 joins it
    problem = ChainProblem(chain([2, 1, 2, 1], [2, 2, 3, 1]), 4, 1e9, math.inf)
    alloc = contiguous([1, 1, 1, 1])
    assert onef1b.in_flight(problem, alloc, 7) == [2, 2, 1, 1]
    assert onef1b.in_flight(problem, alloc, 5) == [4, 3, 2, 1]
    assert onef1b.in_flight(problem, alloc, 14) == [1, 1, 1, 1]
    assert onef1b.in_flight(problem, alloc, 4.9) is None  # stage 3 alone is longer than T


def test_transfers_count_as_stages_so_first_stage_keeps_2p_minus_1():
    # unit stages and unit transfers at T = 2 (each stage F 1 + B 1; each transfer 2 a / beta = 2)
    P = 4
    problem = ChainProblem(chain([1] * P, [1] * P, acts=[1] * P), P, 1e9, 1.0)
    counts = onef1b.in_flight(problem, contiguous([1] * P), 2)
    assert counts == [2 * P - 1, 2 * P - 3, 2 * P - 5, 1]


@pytest.mark.parametrize("state, copies", [(None, 4), (pipedream_rule(), 3)])
def test_activation_memory_matches_group_counts(state, copies):
    # weights in fp32: Adam keeps 4 + 4 + 8 = 16 B per parameter = 4 x W (the default); PipeDream's rule 3 x W
    problem = ChainProblem(chain([1, 1, 1], [1, 1, 1], weights=[1, 2, 3], acts=[10, 20, 30], input_bytes=5),
                           3, 1e9, math.inf, **({"state": state} if state else {}))
    alloc = contiguous([1, 1, 1])
    memory = onef1b.peak_memory(problem, alloc, 2)  # each stage its own group: 3, 2, 1 in flight
    c = copies
    assert memory == {0: c * 1 + 3 * 5 + 2 * 10, 1: c * 2 + 2 * 10 + 2 * (10 + 20), 2: c * 3 + 1 * 20 + 2 * 20}
    pattern = onef1b.pattern(problem, alloc, 2)
    check = validate(pattern)
    assert check.valid and check.peak_memory == memory


# --- validator mutations -----------------------------------------------------------------------
@pytest.fixture
def valid_pattern():
    problem = ChainProblem(chain([1, 2, 1, 3], [2, 3, 2, 4], weights=[1] * 4, acts=[5, 4, 3, 2], input_bytes=6),
                           3, 1000.0, 1.0)
    pattern = onef1b.pattern(problem, contiguous([2, 1, 1]), 12)
    assert validate(pattern).valid
    return pattern


def test_validator_rejects_broken_dependency(valid_pattern):
    i = valid_pattern.ops.index("B2")
    shifts = list(valid_pattern.shift)
    shifts[i] -= 1  # backward on a batch one period earlier than its forward allows
    check = validate(valid_pattern.replace(shift=tuple(max(0, h) for h in shifts)))
    assert not check.valid and any("before" in v for v in check.violations)


def test_validator_rejects_overlap(valid_pattern):
    starts = list(valid_pattern.start)
    f, b = valid_pattern.ops.index("F0"), valid_pattern.ops.index("B0")
    starts[b] = starts[f]
    check = validate(valid_pattern.replace(start=tuple(starts)))
    assert not check.valid and any("overlap" in v for v in check.violations)


def test_validator_rejects_memory_excess(valid_pattern):
    peak = max(validate(valid_pattern).peak_memory.values())
    ops = valid_pattern.ops
    from dataclasses import replace
    check = validate(valid_pattern.replace(ops=replace(ops, memory_limit=peak - 1)))
    assert not check.valid and any("peak memory" in v for v in check.violations)


def test_validator_rejects_period_shorter_than_an_operation(valid_pattern):
    check = validate(valid_pattern.replace(period=2.0, start=tuple(min(t, 1.0) for t in valid_pattern.start)))
    assert not check.valid


# --- Proposition 1: 1F1B* uses the least memory of any pattern of period T -------------------
def random_instance(rng: random.Random, layers: int, processors: int):
    fwd = [rng.randint(1, 4) for _ in range(layers)]
    bwd = [rng.randint(1, 6) for _ in range(layers)]
    acts = [rng.randint(1, 3) for _ in range(layers)]
    problem = ChainProblem(chain(fwd, bwd, [rng.randint(0, 3) for _ in range(layers)], acts, 2),
                           processors, 10_000.0, 1.0)
    cuts = sorted(rng.sample(range(1, layers), processors - 1))
    sizes = [b - a for a, b in zip([0] + cuts, cuts + [layers])]
    return problem, contiguous(sizes)


@pytest.mark.parametrize("seed", range(6))
def test_exact_least_memory_equals_1f1b_star(seed):
    rng = random.Random(seed)
    problem, alloc = random_instance(rng, rng.randint(3, 6), rng.randint(2, 3))
    bound = alloc.load_bound(problem)
    period = rng.choice([bound, bound + 2, math.ceil(1.5 * bound)])
    star = onef1b.pattern(problem, alloc, period)
    star_memory = validate(star).peak_memory
    assert validate(star).valid
    exact = exact_schedule.least_memory_pattern(problem, alloc, period, tick=1.0)
    check = validate(exact)
    assert check.valid
    assert sum(check.peak_memory.values()) == pytest.approx(sum(star_memory.values()))
    for p in star_memory:  # 1F1B* is least on every processor at once
        assert star_memory[p] <= check.peak_memory[p] + 1e-9


def test_exact_schedule_matches_1f1b_star_min_period_on_contiguous():
    rng = random.Random(7)
    for _ in range(3):
        problem, alloc = random_instance(rng, 5, 3)
        tight = problem.with_(memory=max(onef1b.peak_memory(problem, alloc, 2 * alloc.load_bound(problem)).values()))
        star = onef1b.schedule(tight, alloc)
        exact = exact_schedule.schedule(tight, alloc, tick=1.0, time_limit=30, use_proposition1=False)
        assert star.valid and exact.valid and exact.status == Status.OPTIMAL
        assert exact.period_s == pytest.approx(star.period_s)  # Prop. 1: min period is 1F1B*'s
        shortcut = exact_schedule.schedule(tight, alloc)
        assert shortcut.status == Status.OPTIMAL and shortcut.period_s == pytest.approx(star.period_s)


# --- PipeDream DP --------------------------------------------------------------------------------
def brute_force_contiguous(problem):
    best = math.inf
    L = problem.layers
    for count in range(1, problem.processors + 1):
        for cuts in itertools.combinations(range(1, L), count - 1):
            bounds = [0, *cuts, L]
            alloc = Allocation(tuple(Stage(a, b - 1, i) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))))
            best = min(best, alloc.load_bound(problem))
    return best


@pytest.mark.parametrize("seed", range(5))
def test_pipedream_dp_is_optimal_without_memory_filter(seed):
    rng = random.Random(100 + seed)
    problem, _ = random_instance(rng, 7, 3)
    result = pipedream_dp.plan(problem, memory_filter=False)
    assert result.status == Status.FEASIBLE
    assert result.period_s == pytest.approx(brute_force_contiguous(problem))
    assert result.allocation.load_bound(problem) == pytest.approx(result.period_s)


# --- bad input -------------------------------------------------------------------------------
def test_bad_inputs_have_clear_messages():
    c = chain([1, 1], [1, 1])
    with pytest.raises(InputError, match="positive integer"):
        ChainProblem(c, 0, 1e9, 1e9)
    with pytest.raises(InputError, match="only 2 layers; use at most 2"):
        ChainProblem(c, 3, 1e9, 1e9)
    with pytest.raises(InputError, match=r"layer 'L1'.*|forward_s must be a non-negative"):
        chain([1, -1], [1, 1])
    with pytest.raises(InputError, match="non-negative"):
        chain([1, 1], [1, 1], acts=[1, -5])
    with pytest.raises(InputError, match="memory must be a positive number of bytes"):
        ChainProblem(c, 1, -1.0, 1e9)


def test_memory_too_small_is_infeasible_with_the_memory_that_would_work():
    problem = ChainProblem(chain([1] * 4, [1] * 4, weights=[10] * 4, acts=[5] * 4, input_bytes=5), 2, 30.0, 1.0)
    result = pipedream_dp.plan(problem)
    assert result.status == Status.INFEASIBLE and result.allocation is None
    # The figure every planner and schedule reports: one batch in flight per stage, split 2 + 2
    # needs 4*20 (fp32 Adam: 16 B per 4-B parameter) + 1*(5 + 5) + 2*5 = 100 bytes on each
    # processor; one stage of 4 layers 4*40 + 20 = 180
    assert result.min_memory == pytest.approx(100.0)
    assert "100 B" in result.notes[0] and "processor 0 (layers 0..1)" in result.notes[0] and "70 B" in result.notes[0]
    # the figure is exact: with it every schedule finds a plan, a byte less and all are infeasible
    from solver_plan.pipeline.api import plan_pipeline
    for schedule in ("exact", "1f1b*", "exact-milp"):
        enough = plan_pipeline(problem.with_(memory=result.min_memory), "madpipe", schedule, time_limit=20)
        short = plan_pipeline(problem.with_(memory=result.min_memory - 1), "madpipe", schedule, time_limit=20)
        assert enough.valid and short.status == Status.INFEASIBLE
        assert short.allocation.min_memory == pytest.approx(100.0)


def test_coarsen_keeps_totals():
    c = chain([1, 2, 3, 4, 5, 6], [1, 1, 1, 1, 1, 1], weights=[1] * 6, acts=[6, 5, 4, 3, 2, 1], input_bytes=7)
    small = coarsen(c, 3)
    assert len(small) == 3 and sum(small.forward_s) == sum(c.forward_s)
    big = ChainProblem(c, 1, 1e9, 1.0)
    merged = ChainProblem(small, 1, 1e9, 1.0)
    # one stage over everything stores the same activations either way
    assert merged.stored(0, 2) == big.stored(0, 5)
