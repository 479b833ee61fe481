"""HiGHS under a deterministic work limit (issue 26): the LP relaxation stops at its simplex
iterations, the MIP at its count of limit checks (backends/highs.py, intra/highs_work.py), so an
answer stopped by work is the same on every run, whatever the wall clock allows, and says that the
work limit, not the clock, stopped it. A planner stopped there gives the same answer idle and loaded."""
from __future__ import annotations

import time

import numpy as np
import pytest

from solver_plan import deadline as deadline_module
from solver_plan.deadline import CUT_SHORT_NOTE, Deadline, time_budget
from solver_plan.intra.backends.highs import solve_with_highs
from solver_plan.intra.highs_work import WORK_LIMIT_NOTE, lp_iteration_limit, mip_check_limit, stopped_by_clock
from solver_plan.intra.linear_model import config_model
from solver_plan.intra.solve import solve
from solver_plan.planners import load_builtin_planners
from solver_plan.result import Status
from solver_plan.suite.generators import resolve_problem

load_builtin_planners()
# a MIP HiGHS needs ~10 s and ~1,000 limit checks to close (one thread): any small limit stops it
HARD = "random-dag:nodes=50,candidates=6-30,seed=3,memory=binding"


@pytest.fixture(scope="module")
def hard_model():
    return config_model(resolve_problem(HARD))


def _stopped(outcome):
    return outcome.status, outcome.objective, None if outcome.x_values is None else tuple(np.round(outcome.x_values, 9))


def test_a_mip_stopped_by_its_check_limit_is_the_same_whatever_the_clock(hard_model):
    first = solve_with_highs(hard_model, time_limit=60.0, check_limit=30)
    again = solve_with_highs(hard_model, time_limit=120.0, check_limit=30)
    assert first.status is Status.TIME_LIMIT and first.x_values is not None
    assert any(WORK_LIMIT_NOTE in note for note in first.notes), first.notes
    assert not stopped_by_clock(first.status, first.notes)
    assert _stopped(again) == _stopped(first)
    assert first.bound is not None and first.bound <= first.objective + 1e-9


def test_an_lp_relaxation_out_of_iterations_starts_no_mip(hard_model):
    outcome = solve_with_highs(hard_model, time_limit=60.0, iteration_limit=5, check_limit=10)
    assert outcome.status is Status.TIME_LIMIT and outcome.x_values is None
    assert any(WORK_LIMIT_NOTE in note and "LP relaxation" in note for note in outcome.notes), outcome.notes


def test_a_stop_by_the_clock_is_told_apart():
    assert stopped_by_clock(Status.TIME_LIMIT, ("time out after the LP relaxation",))
    assert not stopped_by_clock(Status.TIME_LIMIT, (f"{WORK_LIMIT_NOTE}: 3 limit checks, 0 nodes",))
    assert not stopped_by_clock(Status.OPTIMAL, ())


def test_work_limits_grow_with_the_budget_and_shrink_with_the_model(hard_model):
    small = config_model(resolve_problem("random-dag:nodes=10,candidates=2-4,seed=1,memory=binding"))
    assert mip_check_limit(hard_model, None) is None and lp_iteration_limit(hard_model, None) is None
    assert mip_check_limit(hard_model, 0.0) == 1 and lp_iteration_limit(hard_model, 0.0) == 1
    assert mip_check_limit(hard_model, 2.0) > mip_check_limit(hard_model, 1.0) > 1
    assert mip_check_limit(small, 1.0) > mip_check_limit(hard_model, 1.0)
    assert lp_iteration_limit(small, 1.0) > lp_iteration_limit(hard_model, 1.0)


class _LoadedClock:
    """This process's CPU time, 16x fast: a machine 16x slower, whatever else this one runs."""

    def __init__(self, rate: float = 16.0):
        self.base, self.rate = time.process_time(), rate

    def __call__(self) -> float:
        return self.base + (time.process_time() - self.base) * self.rate


def test_milp_stopped_by_its_mip_work_limit_gives_the_same_answer_loaded(monkeypatch):
    """The whole model's MIP (no relaxation route) under a nominal budget far below what it needs and
    a wall clock far above it: stopped by its checks, the same plan idle and on a machine 16x
    slower with 40% of the limit gone (before, HiGHS' time limit stopped it wherever the clock was)."""
    problem = resolve_problem(HARD)
    limit = 600.0

    def answer(budget):
        result = solve(problem, "milp", Deadline(None, parent=budget, nominal_s=0.3), seed=2, lagrangian=False)
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        assert any(WORK_LIMIT_NOTE in note and "limit checks" in note for note in result.notes), result.notes
        return result.status, result.assignment, result.objective, result.lower_bound

    idle = answer(time_budget(limit))
    monkeypatch.setattr(deadline_module, "clock", _LoadedClock())
    loaded = answer(time_budget(limit, start=deadline_module.clock() - 0.4 * limit))
    assert idle[0] is Status.TIME_LIMIT and idle[1] is not None and loaded == idle
