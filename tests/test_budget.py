"""One budget type (`Deadline`), one conversion from seconds (`time_budget`), one minimum limit,
and one determinism policy: the nominal budget decides the work, the wall clock is only the
safety net (issue 21)."""
from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

from solver_plan import deadline as deadline_module
from solver_plan.deadline import CUT_SHORT_NOTE, MAX_TIME_LIMIT_S, MIN_LIMIT_S, Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.intra.clock import start_clock, time_for_passes
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.planners import load_builtin_planners
from solver_plan.result import Status

PACKAGE = Path(__file__).resolve().parents[1] / "solver_plan"
load_builtin_planners()  # importing every planner package is not the solves' time


class SlowClock:
    """A wall clock running `rate` times faster than the real one, `offset_s` ahead: the machine
    looks `rate` times slower, and `offset_s` already spent (a slow build before the solve)."""

    def __init__(self, rate: float = 1.0, offset_s: float = 0.0):
        self.base = time.perf_counter()
        self.rate, self.offset_s = rate, offset_s

    def __call__(self) -> float:
        return self.base + self.offset_s + (time.perf_counter() - self.base) * self.rate


# --- the conversion at the boundary ---------------------------------------------------------------

def test_time_budget_turns_seconds_into_a_deadline_with_that_nominal_budget():
    budget = time_budget(12.5)
    assert isinstance(budget, Deadline)
    assert budget.nominal_s == 12.5 and budget.time_limit == 12.5
    assert 12.0 < budget.remaining() <= 12.5
    unlimited = time_budget(None)
    assert unlimited.nominal_s is None and unlimited.remaining() is None and not unlimited.expired()


def test_time_budget_counts_time_already_spent_from_start():
    budget = time_budget(10.0, start=deadline_module.clock() - 4.0)
    assert budget.remaining() == pytest.approx(6.0, abs=0.5)
    assert budget.nominal_s == 10.0  # the budget decides the work, whatever was spent


@pytest.mark.parametrize("seconds", [0, -1, 0.0, math.nan, math.inf, True, "10", MAX_TIME_LIMIT_S * 2])
def test_time_budget_refuses_what_is_not_a_positive_finite_limit(seconds):
    with pytest.raises(InputError) as error:
        time_budget(seconds)
    assert error.value.where == "time_limit"


def test_requests_check_the_time_limit_with_the_budget_s_one_check():
    from solver_plan.requests import PlanRequest
    for seconds in (0, -1.0, math.nan, MAX_TIME_LIMIT_S * 2):
        with pytest.raises(InputError) as by_request:
            PlanRequest("mlp", time_limit=seconds)
        with pytest.raises(InputError) as by_budget:
            time_budget(seconds)
        assert str(by_request.value) == str(by_budget.value)


def test_planners_and_solve_refuse_seconds():
    """Seconds are converted once, where a request enters: inside, only the budget type."""
    problem = random_problem(5, seed=0, shape="chain")
    with pytest.raises(TypeError, match="time_budget"):
        solve(problem, "greedy", 30.0)
    with pytest.raises(TypeError, match="time_budget"):
        start_clock(30.0)


# --- one minimum limit ----------------------------------------------------------------------------

def test_the_minimum_limit_is_defined_once():
    definitions = [path for path in PACKAGE.rglob("*.py")
                   if re.search(r"^\s*MIN_LIMIT_S\s*=", path.read_text(encoding="utf-8"), re.MULTILINE)]
    assert definitions == [PACKAGE / "deadline.py"]
    from solver_plan.pipeline import api
    assert api.MIN_LIMIT_S is MIN_LIMIT_S


def test_an_expired_budget_still_ends_early_with_the_minimum_limit():
    spent = Deadline(1.0, start=deadline_module.clock() - 5.0)
    early = spent.ending_early(10.0)  # a valid limit, not a refused 0 s
    assert spent.remaining() == 0.0 and early.remaining() == 0.0 and early.expired()
    assert Deadline(1e-4).ending_early(1.0).nominal_s == MIN_LIMIT_S
    assert time_budget(10.0).ending_early(1.0).nominal_s == 9.0


# --- the nominal budget -------------------------------------------------------------------------

def test_shares_hand_out_the_nominal_budget_whatever_the_clock(monkeypatch):
    def shares():
        budget = time_budget(100.0)
        first = budget.share(0.3)
        second = budget.share(0.5)
        rest = budget.child()
        return first.nominal_s, second.nominal_s, rest.nominal_s, rest.ending_early(10.0).nominal_s

    idle = shares()
    monkeypatch.setattr(deadline_module, "clock", SlowClock(rate=5.0, offset_s=60.0))
    assert shares() == idle == pytest.approx((30.0, 35.0, 35.0, 26.25))


def test_what_a_share_spends_beyond_its_budget_is_spent_from_its_parent():
    """Work that must run (a greedy pass making the only plan) can cost more than its share: the
    excess comes out of the parent's budget, so what follows plans with what is left (s36). Only
    for children whose budget was handed out of the parent's (share, work_share, work_part); a
    budget of its own (a planner's clock not charging its caller, a Deadline made with nominal_s)
    leaves the parent alone, and a child charging its parent charges it once."""
    budget = time_budget(10.0)
    heuristics = budget.share(0.2)  # 2 s handed out
    heuristics.spend(3.5)  # 1.5 s beyond it
    assert heuristics.nominal_left() == 0.0 and budget.nominal_left() == pytest.approx(6.5)
    part = budget.work_part(0.5)  # 3.25 s handed out
    inner = part.work_share(0.5)  # 1.625 s handed out of the part
    inner.spend(2.625)  # 1 s beyond it: out of the part, which has 1.625 left
    assert part.nominal_left() == pytest.approx(0.625) and budget.nominal_left() == pytest.approx(3.25)
    part.spend(1.625)  # 1 s beyond what the part has left: out of the budget
    assert budget.nominal_left() == pytest.approx(2.25)
    for own in (budget.child(), Deadline(None, parent=budget, nominal_s=0.5)):
        own.spend(5.0)
        assert budget.nominal_left() == pytest.approx(2.25)
    charging = budget.child(charges_parent=True)
    charging.spend(1.0)
    assert budget.nominal_left() == pytest.approx(1.25)


def test_overrun_means_past_the_earliest_end_by_more_than_the_grace():
    outer = time_budget(10.0, start=deadline_module.clock() - 11.0)  # ended 1 s ago
    inner = Deadline(100.0, parent=outer)  # ends with its parent
    assert inner.end() == pytest.approx(outer.end()) and inner.expired()
    assert not inner.overrun(2.0) and inner.overrun(0.5) and outer.cut_short
    assert time_budget(None).end() is None and not time_budget(None).overrun(0.0)


def test_building_the_problem_spends_its_estimate_of_the_budget_whatever_the_clock(monkeypatch):
    """The solver plans with what the build's deterministic estimate leaves, not what its safety net
    (a wall-clock cap) or the clock would say."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.graph.zoo import build_model
    from solver_plan.intra.build import build_config_problem

    def left_after_build():
        budget = time_budget(30.0)
        build_config_problem(build_model("mlp:layers=3,hidden=256,batch=64"), resolve_cluster("v100x8-nvlink"),
                             deadline=budget)
        return budget.nominal_left()

    idle = left_after_build()
    assert 20.0 < idle < 30.0
    monkeypatch.setattr(deadline_module, "clock", SlowClock(rate=2.0))
    assert left_after_build() == idle


def test_a_child_takes_the_tightest_nominal_budget():
    outer = time_budget(10.0)
    assert Deadline(3.0, parent=outer).nominal_s == 3.0
    assert Deadline(30.0, parent=outer).nominal_s == 10.0
    assert Deadline(None, parent=outer).nominal_s == 10.0


def test_work_decisions_ignore_the_clock(monkeypatch):
    problem = random_problem(200, seed=1, shape="dag")
    budget = time_budget(1.0)  # 0.2 s of passes (2 x 5e-4 x 200) fit its nominal budget
    monkeypatch.setattr(deadline_module, "clock", SlowClock(offset_s=0.9))  # 0.1 s left on the clock
    assert budget.remaining() < 0.2
    assert time_for_passes(budget, problem, 2)
    assert not time_for_passes(budget, problem, 20)


def test_the_wall_clock_marks_what_it_stops(monkeypatch):
    budget = time_budget(10.0)
    share = budget.share(0.5)
    assert not budget.cut_short
    monkeypatch.setattr(deadline_module, "clock", SlowClock(offset_s=20.0))
    assert share.expired()
    assert share.cut_short and budget.cut_short


# --- same answer for the same input and budget on a slow or loaded machine -------------------------

DAG = random_problem(150, seed=4, shape="dag", memory_tightness=0.5)
# elimination's remainder goes to HiGHS, which has no deterministic work limit: a graph that folds
SERIES_PARALLEL = random_problem(150, seed=4, shape="series_parallel")
PLANNERS = [("greedy", DAG, {}), ("edge-drop", DAG, {}), ("elimination", SERIES_PARALLEL, {}),
            ("cpsat", DAG, {}), ("mcmc", DAG, {"objective": "sum", "iterations": 1500})]
BUDGET_S = 20.0


@pytest.mark.parametrize("planner, problem, options", PLANNERS, ids=[p for p, _, _ in PLANNERS])
def test_same_answer_under_a_slow_clock(monkeypatch, planner, problem, options):
    """The slow clock runs twice as fast and starts with 30% of the budget gone (as after a slow
    build): decisions taken from the time left would differ; the nominal budget's do not."""
    idle = solve(problem, planner, time_budget(BUDGET_S), seed=3, **options)
    monkeypatch.setattr(deadline_module, "clock", SlowClock(rate=2.0, offset_s=0.3 * BUDGET_S))
    loaded = solve(problem, planner, time_budget(BUDGET_S, start=deadline_module.clock() - 0.3 * BUDGET_S),
                   seed=3, **options)
    assert idle.status is loaded.status and idle.status.has_solution, (idle.notes, loaded.notes)
    assert CUT_SHORT_NOTE not in idle.notes and CUT_SHORT_NOTE not in loaded.notes, loaded.notes
    assert loaded.assignment == idle.assignment
    assert loaded.objective == idle.objective and loaded.lower_bound == idle.lower_bound


def test_when_the_clock_stops_a_heuristic_the_result_says_so(monkeypatch):
    """A machine far too slow: the safety net ends greedy in time, with a plan and a note."""
    problem = random_problem(300, seed=2, shape="dag")
    clock = SlowClock(rate=1e4)  # 0.1 ms of work looks like a second
    monkeypatch.setattr(deadline_module, "clock", clock)
    started = time.perf_counter()
    result = solve(problem, "greedy", time_budget(5.0))
    assert time.perf_counter() - started < 5.0
    assert result.status.has_solution or result.status is Status.TIME_LIMIT
    assert CUT_SHORT_NOTE in result.notes


# issue 26: milp-load and the hybrid search (block solver cpsat) on small instances, idle vs a slow clock
LOAD_DAG = random_problem(30, seed=4, shape="dag", memory_tightness=0.5)


def test_milp_load_gives_the_same_answer_under_a_slow_clock(monkeypatch):
    idle = solve(LOAD_DAG, "milp-load", time_budget(BUDGET_S), seed=3)
    monkeypatch.setattr(deadline_module, "clock", SlowClock(rate=2.0, offset_s=0.3 * BUDGET_S))
    loaded = solve(LOAD_DAG, "milp-load", time_budget(BUDGET_S, start=deadline_module.clock() - 0.3 * BUDGET_S),
                   seed=3)
    assert idle.status is loaded.status and idle.status.has_solution, (idle.notes, loaded.notes)
    assert CUT_SHORT_NOTE not in loaded.notes, loaded.notes
    assert (loaded.assignment, loaded.objective, loaded.lower_bound) == (idle.assignment, idle.objective,
                                                                         idle.lower_bound)


def _hybrid_answer(budget):
    from solver_plan.hybrid import plan_hybrid
    result = plan_hybrid("gpt2:layers=2,seq=128", "v100x8-nvlink", 16, planner="cpsat", deadline=budget)
    return result.status, result.step_time_s, None if result.plan is None else result.plan.parallelism


def test_hybrid_search_gives_the_same_answer_under_a_slow_clock(monkeypatch):
    """The whole space is searched either way: the nominal budget, not the clock, decides."""
    idle = _hybrid_answer(time_budget(BUDGET_S))
    monkeypatch.setattr(deadline_module, "clock", SlowClock(rate=2.0, offset_s=0.3 * BUDGET_S))
    loaded = _hybrid_answer(time_budget(BUDGET_S, start=deadline_module.clock() - 0.3 * BUDGET_S))
    assert idle[0].has_solution and loaded == idle


def _nominal(seconds: float) -> Deadline:
    """A budget of `seconds` whose wall clock (a minute) does not bind in a test."""
    return Deadline(60.0, nominal_s=seconds)


def test_the_hybrid_search_stops_by_its_nominal_budget_whatever_the_clock(monkeypatch):
    """A budget that affords the first block solve and a few points, not the whole space: the
    search stops there (TIME_LIMIT with a plan) on an idle machine and under a slow clock alike."""
    from solver_plan.hybrid import search
    monkeypatch.setattr(search, "PRICE_S", 0.1)
    everything = _hybrid_answer(time_budget(BUDGET_S))
    idle = _hybrid_answer(_nominal(1.0))
    assert idle[0] is Status.TIME_LIMIT and idle[1] is not None and idle[1] >= everything[1]
    monkeypatch.setattr(deadline_module, "clock", SlowClock(rate=3.0, offset_s=10.0))
    assert _hybrid_answer(_nominal(1.0)) == idle
