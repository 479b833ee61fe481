"""Work that cannot pay for itself within the nominal budget is skipped by the budget, never started
and killed by the wall clock (issue 26): the CP-SAT call (its worker's start-up), a milp-load plan on
a large problem (its seed, scoring and validation), and a generated problem's generation charged to
its job's budget. Each decision reads the nominal budget only, so a loaded machine decides alike."""
from __future__ import annotations

import time

import pytest

from solver_plan import deadline as deadline_module
from solver_plan.deadline import Deadline, time_budget
from solver_plan.intra.cpsat import CPSAT_START_S
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.planners import load_builtin_planners
from solver_plan.result import Status
from solver_plan.simulate.milp_load import least_plan_seconds
from solver_plan.suite.generators import generation_seconds, resolve_problem

load_builtin_planners()


class _LoadedClock:
    """The wall clock three times faster than the real one: the machine looks three times slower."""

    def __init__(self):
        self.base = time.perf_counter()

    def __call__(self) -> float:
        return self.base + (time.perf_counter() - self.base) * 3.0


def _nominal(seconds: float) -> Deadline:
    """A budget of `seconds` for every work decision and no wall clock: only the budget decides."""
    return Deadline(None, nominal_s=seconds)


def _idle_and_loaded(monkeypatch, answer):
    idle = answer()
    monkeypatch.setattr(deadline_module, "clock", _LoadedClock())
    return idle, answer()


def test_cpsat_not_started_when_the_budget_cannot_pay_its_start_up(monkeypatch):
    problem = random_problem(12, seed=3)

    def answer():
        return solve(problem, "cpsat", deadline=_nominal(0.5 * CPSAT_START_S))
    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    for result in (idle, loaded):
        assert result.assignment is not None, result.notes  # the heuristics' plan stands
        assert result.status is Status.TIME_LIMIT
        assert any(note.startswith("CP-SAT not run") for note in result.notes), result.notes
        assert validate_config_result(problem, result) == []
    assert idle.assignment == loaded.assignment and idle.objective == loaded.objective


def test_cpsat_runs_when_the_budget_pays_its_start_up():
    problem = random_problem(12, seed=3)
    result = solve(problem, "cpsat", deadline=time_budget(30))
    assert result.status is Status.OPTIMAL, result.notes
    assert not any(note.startswith("CP-SAT not run") for note in result.notes)


def test_milp_load_answers_without_a_plan_when_the_budget_cannot_pay_for_one(monkeypatch):
    problem = resolve_problem("random-dag:nodes=10000,candidates=3,seed=1,devices=4")
    least = least_plan_seconds(problem)
    assert least > 0.3  # the budget below plus the grace stays under it

    def answer():
        return solve(problem, "milp-load", deadline=_nominal(0.05))
    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    for result in (idle, loaded):
        assert result.status is Status.TIME_LIMIT and result.assignment is None
        assert any(note.startswith("no plan: the least work for one") for note in result.notes), result.notes
    assert idle.notes == loaded.notes


def test_milp_load_plans_from_data_parallelism_when_the_budget_pays_for_no_greedy_pass(monkeypatch):
    """Issue 26: above its least work (the seed, its load breakdown, validation) but below a greedy
    pass, milp-load returns the data-parallel seed scored by the load objective, decided by the
    budget: the same plan idle and loaded, validated, and never worse than data parallelism."""
    from solver_plan.intra.greedy_plans import greedy_pass_seconds
    from solver_plan.intra.load_objective import load_objective
    problem = resolve_problem("random-dag:nodes=10000,candidates=10-30,seed=1,memory=binding,devices=16")
    budget = least_plan_seconds(problem) + 0.05
    assert budget < greedy_pass_seconds(problem)

    def answer():
        return solve(problem, "milp-load", deadline=_nominal(budget))
    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    data_parallel = solve(problem, "data-parallel")
    for result in (idle, loaded):
        assert result.assignment is not None and result.status in (Status.FEASIBLE, Status.TIME_LIMIT), result.notes
        assert any(note.startswith("greedy plans not sought") for note in result.notes), result.notes
        assert validate_config_result(problem, result) == []
        assert result.objective <= load_objective(problem, data_parallel.assignment)
    assert (idle.assignment, idle.objective, idle.notes) == (loaded.assignment, loaded.objective, loaded.notes)


def test_milp_load_plans_a_small_problem_even_on_an_empty_budget():
    problem = resolve_problem("random-dag:nodes=40,candidates=4,seed=2,devices=4")
    result = solve(problem, "milp-load", deadline=_nominal(1e-6))
    assert result.assignment is not None, result.notes
    assert validate_config_result(problem, result) == []


def test_a_generated_problem_is_charged_to_its_jobs_budget(monkeypatch):
    import solver_plan.intra.solve as solve_module
    from solver_plan.suite.run import answer_problem
    spec = "random-dag:nodes=200,candidates=4,seed=1,devices=4"
    seen = []

    def recording(problem, planner, *, deadline, **kwargs):
        seen.append((deadline.nominal_left(), generation_seconds(problem)))
        return solve(problem, planner, deadline=deadline, **kwargs)
    monkeypatch.setattr(solve_module, "solve", recording)
    answer = answer_problem(spec, "greedy", time_limit=30)
    assert answer.status in (Status.FEASIBLE, Status.OPTIMAL)
    (left, generated), = seen
    assert generated > 0 and left == pytest.approx(30 - generated)
