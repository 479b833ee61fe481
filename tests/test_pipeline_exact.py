"""Exact schedulers on non-contiguous allocations: CP-SAT (ticks) and MILP (real time) agree, both
patterns pass the validator, and no pattern is shorter than the load bound."""
import random

import pytest

from solver_plan.pipeline.chain import LayerChain
from solver_plan.pipeline import exact_schedule, milp_schedule
from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status


def instance(seed: int):
    rng = random.Random(seed)
    L = rng.randint(4, 6)
    chain = LayerChain.simple("r", [rng.randint(1, 3) for _ in range(L)], [rng.randint(1, 4) for _ in range(L)],
                              [rng.randint(0, 2) for _ in range(L)], [rng.randint(1, 3) for _ in range(L)], 2)
    per_layer = [rng.randrange(3) for _ in range(L)]
    per_layer[0] = 0
    problem = ChainProblem(chain, 3, float(rng.randint(25, 60)), 1.0)
    return problem, Allocation.from_processors(per_layer)


@pytest.mark.parametrize("seed", range(5))
def test_cpsat_and_milp_agree_on_non_contiguous_allocations(seed):
    problem, allocation = instance(seed)
    if max(allocation.least_memory(problem).values()) > problem.memory:
        pytest.skip("memory too small for this random allocation")
    cpsat = exact_schedule.schedule(problem, allocation, tick=1.0, time_limit=30, use_proposition1=False)
    milp = milp_schedule.schedule(problem, allocation, time_limit=30, tolerance=1e-4)
    assert cpsat.valid and milp.valid
    assert cpsat.status == Status.OPTIMAL
    assert cpsat.period_s >= allocation.load_bound(problem) - 1e-9
    # integer data: the real-time optimum is reached in ticks too; MILP bisection stops within tolerance
    assert milp.period_s == pytest.approx(cpsat.period_s, rel=2e-4)


def test_infeasible_allocation_reports_needed_memory():
    problem, allocation = instance(0)
    tight = problem.with_(memory=1.0)
    result = exact_schedule.schedule(tight, allocation)
    assert result.status == Status.INFEASIBLE
    assert result.min_memory == pytest.approx(max(allocation.least_memory(problem).values()))


def test_fixed_period_below_the_bound_is_infeasible():
    problem, allocation = instance(1)
    loose = problem.with_(memory=1e6)
    bound = allocation.load_bound(loose)
    assert exact_schedule.schedule(loose, allocation, period=bound, tick=1.0, use_proposition1=False).valid
    assert exact_schedule.schedule(loose, allocation, period=bound - 1, tick=1.0,
                                   use_proposition1=False).status == Status.INFEASIBLE


@pytest.mark.parametrize("seed", range(8))
def test_greedy_modulo_pattern_is_valid_whenever_memory_allows(seed):
    from solver_plan.pipeline import modulo_greedy
    from solver_plan.pipeline.validate import validate
    problem, allocation = instance(seed)
    pattern = modulo_greedy.scan(problem, allocation)
    fits = max(allocation.least_memory(problem).values()) <= problem.memory
    assert (pattern is not None) == fits
    if pattern is not None:
        assert validate(pattern).valid and pattern.period >= allocation.load_bound(problem) - 1e-9


def test_milp_schedule_stops_at_the_callers_deadline():
    """The caller's Deadline (a command's clock) is exact-milp's safety net, as for the other
    schedulers: once it has run out, the bisection stops after its first pattern, says the clock
    cut it short and marks the caller's deadline."""
    import time

    from solver_plan.deadline import time_budget
    problem, allocation = instance(1)
    if max(allocation.least_memory(problem).values()) > problem.memory:
        pytest.skip("memory too small for this random allocation")
    full = milp_schedule.schedule(problem, allocation, time_limit=30, tolerance=1e-4)
    spent = time_budget(1e-6)
    time.sleep(1e-3)
    cut = milp_schedule.schedule(problem, allocation, time_limit=30, tolerance=1e-4, deadline=spent)
    assert full.valid and cut.valid
    assert not any("safety net" in note for note in full.notes)
    assert any("safety net cut the search short" in note for note in cut.notes)
    assert cut.period_s >= full.period_s - 1e-9  # its first pattern: optimal here only if the bound proves it
    assert spent.cut_short
