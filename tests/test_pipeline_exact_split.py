"""Exact periodic schedules with the backward split into B and W (exact-zb): never longer than the
unsplit exact period, the hand-computed optimum on two stages, memory held until W ends."""
import random

import pytest

from solver_plan.errors import InputError
from solver_plan.pipeline.chain import LayerChain
from solver_plan.pipeline import exact_schedule, exact_schedule_split
from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.split_backward import split_operations
from solver_plan.pipeline.validate import validate
from solver_plan.result import Status


def two_stages(memory: float) -> tuple[ChainProblem, Allocation]:
    """F = 1, backward = 2 (B = W = 1) per layer, 1 byte stored per batch and stage, buffers of 2
    bytes per processor: M = 3 holds one batch per stage."""
    chain = LayerChain.simple("two", [1, 1], [2, 2], [0, 0], [1, 1], 1)
    return ChainProblem(chain, 2, memory, float("inf")), Allocation.from_processors([0, 1])


def test_two_stages_one_batch_in_flight_hand_optimum():
    # One batch at a time on P0: it is held from F0's start until the end of its backward.
    # Unsplit: F0 + F1 + B1 + B0 = 1 + 1 + 2 + 2 = 6. Split: W1 leaves the path, W0 stays on it:
    # F0 + F1 + B1 + B0 + W0 = 1 + 1 + 1 + 1 + 1 = 5 (and P1's F1 + B1 + W1 = 3 fits in it).
    problem, allocation = two_stages(3.0)
    unsplit = exact_schedule.schedule(problem, allocation, tick=0.5)
    split = exact_schedule_split.schedule(problem, allocation, tick=0.5)
    assert unsplit.period_s == pytest.approx(6.0)
    assert split.valid and split.status == Status.OPTIMAL
    assert split.period_s == pytest.approx(5.0)
    assert max(split.validation.peak_memory.values()) <= problem.memory


def test_two_stages_with_memory_to_spare_reach_the_load_bound():
    problem, allocation = two_stages(10.0)
    split = exact_schedule_split.schedule(problem, allocation, tick=0.5)
    assert split.valid and split.status == Status.OPTIMAL
    assert split.period_s == pytest.approx(allocation.load_bound(problem))  # 3: F + B + W on P1


def test_validator_holds_a_batch_until_its_weight_gradient():
    problem, allocation = two_stages(3.0)
    pattern = exact_schedule_split.schedule(problem, allocation, tick=0.5).pattern
    w1 = pattern.ops.index("W1")
    late = list(pattern.shift)
    late[w1] += 1  # W1 one period later: P1 holds two batches, 4 bytes > M = 3
    check = validate(pattern.replace(shift=tuple(late)))
    assert not check.valid
    assert check.peak_memory[1] == pytest.approx(4.0)


def instance(seed: int):
    rng = random.Random(seed)
    L = rng.randint(3, 5)
    chain = LayerChain.simple("r", [rng.randint(1, 3) for _ in range(L)], [2 * rng.randint(1, 3) for _ in range(L)],
                              [rng.randint(0, 2) for _ in range(L)], [rng.randint(1, 3) for _ in range(L)], 2)
    per_layer = [rng.randrange(2) for _ in range(L)]
    per_layer[0] = 0
    return ChainProblem(chain, 2, float(rng.randint(14, 40)), 1.0), Allocation.from_processors(per_layer)


@pytest.mark.parametrize("seed", range(6))
def test_split_period_never_longer_than_unsplit_and_within_memory(seed):
    problem, allocation = instance(seed)
    if max(allocation.least_memory(problem).values()) > problem.memory:
        pytest.skip("memory too small for this random allocation")
    unsplit = exact_schedule.schedule(problem, allocation, tick=1.0, time_limit=20, use_proposition1=False)
    split = exact_schedule_split.schedule(problem, allocation, tick=1.0, time_limit=20)
    assert unsplit.valid and split.valid
    assert split.period_s <= unsplit.period_s + 1e-9
    assert split.period_s >= allocation.load_bound(problem) - 1e-9
    assert max(split.validation.peak_memory.values()) <= problem.memory * (1 + 1e-9)
    assert len(split.pattern.ops.operations) == len(unsplit.pattern.ops.operations) + len(allocation.stages)


def test_zero_weight_share_is_the_unsplit_schedule():
    problem, allocation = two_stages(3.0)
    split = exact_schedule_split.schedule(problem, allocation, tick=0.5, weight_share=0.0)
    assert split.period_s == pytest.approx(exact_schedule.schedule(problem, allocation, tick=0.5).period_s)


def test_weight_share_outside_unit_interval_is_an_input_error():
    problem, allocation = two_stages(3.0)
    with pytest.raises(InputError):
        split_operations(problem, allocation, 1.0)



def brute_force_period(problem, allocation, horizon: int, max_shift: int = 4):
    """The shortest integer period with a pattern the validator accepts, by enumeration: F0 at 0,
    every other compute operation at any tick of [0, T) and any shift up to `max_shift`, each
    zero-duration transfer right when its producer ends (it occupies nothing). Branches are cut on
    necessary conditions only (same-batch order, two operations overlapping on a processor modulo
    T, and, M holding one batch per stage, a batch living longer than T on a stage); every
    complete candidate is judged by the validator."""
    from solver_plan.pipeline.pattern import PeriodicPattern

    ops = split_operations(problem, allocation)
    names = [op.name for op in ops.operations]
    duration = {op.name: int(op.duration) for op in ops.operations}
    order = ["F1", "B1", "W1", "B0", "W0"]
    after = {"F1": "F0", "B1": "F1", "W1": "B1", "B0": "B1", "W0": "B0"}
    first_of_stage = {"W0": "F0", "W1": "F1"}

    def overlaps(a, da, b, db, T):
        return (b - a) % T < da or (a - b) % T < db

    def extend(T, placed):
        if len(placed) == len(order) + 1:
            yield dict(placed)
            return
        name = order[len(placed) - 1]
        for h in range(max_shift + 1):
            for t in range(T):
                begin = h * T + t
                before = placed[after[name]]
                if begin < before[1] * T + before[0] + duration[after[name]]:
                    continue
                if any(ops.operations[names.index(o)].resource == ops.operations[names.index(name)].resource
                       and overlaps(t, duration[name], placed[o][0], duration[o], T) for o in placed):
                    continue
                if name in first_of_stage:
                    born = placed[first_of_stage[name]]
                    if begin + duration[name] - (born[1] * T + born[0]) > T:
                        continue
                placed[name] = (t, h)
                yield from extend(T, placed)
                del placed[name]

    for T in range(1, horizon + 1):
        for at in extend(T, {"F0": (0, 0)}):
            for link, producer in (("CF0", "F0"), ("CB0", "B1")):
                end = at[producer][1] * T + at[producer][0] + duration[producer]
                at[link] = (end % T, end // T)
            pattern = PeriodicPattern(allocation, ops, float(T), tuple(float(at[n][0]) for n in names),
                                      tuple(at[n][1] for n in names))
            if validate(pattern).valid:
                return T
    return None


def test_two_stage_optimum_equals_brute_force():
    problem, allocation = two_stages(3.0)
    split = exact_schedule_split.schedule(problem, allocation, tick=1.0)
    assert split.period_s == brute_force_period(problem, allocation, horizon=6) == 5
