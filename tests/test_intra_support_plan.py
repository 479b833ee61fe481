"""The MILP on a relaxation's support and on its LP's neighbourhood, the Lagrangian route for models
too big for the MILP (forced here on tiny instances by lowering LARGE_MODEL_ENTRIES), and forest
search at a binding limit: against brute force, bounds never above a feasible plan."""
from __future__ import annotations

import time

import numpy as np
import pytest

from intra_cases import tiny_cases
from solver_plan.deadline import Deadline, time_budget
from solver_plan.intra import lagrangian_fixing, milp
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.forest_search import improve_by_forests
from solver_plan.intra.lagrangian import lagrangian_dual
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra import support_plan as support_plan_module
from solver_plan.intra.lp_fixing import lp_values
from solver_plan.intra.support_plan import neighbourhood_plan, support_plan
from solver_plan.result import Status


def _binding_cases():
    return [(case_id, problem) for case_id, problem in tiny_cases(seeds=6, max_nodes=6)
            if problem.memory_limit is not None and plan_brute(problem).status is Status.OPTIMAL]


def _brute_solve(sub, start, deadline, gap=None):
    return plan_brute(sub)


def test_support_plan_uses_the_support_and_the_incumbent_only_and_is_their_optimum():
    checked = 0
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        relaxation = lagrangian_dual(problem)
        if relaxation is None:
            continue
        support = relaxation.support(1)
        plan = support_plan(problem, support, oracle.assignment, Deadline(None), _brute_solve)
        assert plan is not None and problem.memory_ok(plan), case_id
        allowed = [set(map(int, s)) | {c} for s, c in zip(support, oracle.assignment)]
        assert all(choice in allowed[node] for node, choice in enumerate(plan)), case_id
        # the oracle's plan is in the support: the support's optimum is the problem's
        assert problem.objective(plan) == pytest.approx(oracle.objective), case_id
        everything = tuple(np.arange(len(c)) for c in problem.node_costs)
        whole = support_plan(problem, everything, None, Deadline(None), _brute_solve)
        assert problem.objective(whole) == pytest.approx(oracle.objective), case_id
        checked += 1
    assert checked >= 5


def test_a_support_solver_killed_at_the_wall_clock_gives_no_plan():
    def killed(sub, start, deadline, gap=None):
        raise TimeoutError("the solver process did not answer in time")

    problem = random_problem(5, seed=1, shape="dag", memory_tightness=0.6)
    support = tuple(np.arange(len(c)) for c in problem.node_costs)
    assert support_plan(problem, support, None, time_budget(5), killed) is None


@pytest.fixture
def everything_too_big(monkeypatch):
    """Every model counts as too big for the MILP, and the budget leaves the support its time."""
    monkeypatch.setattr(lagrangian_fixing, "LARGE_MODEL_ENTRIES", 0)
    monkeypatch.setattr(milp, "LARGE_MODEL_ENTRIES", 0)
    monkeypatch.setattr(lagrangian_fixing, "SUPPORT_MIN_S", 0.0)


@pytest.mark.parametrize("route", ["support", "neighbourhood"])
def test_milp_on_a_model_too_big_answers_from_the_support_with_a_valid_bound(everything_too_big, monkeypatch, route):
    """The MILP on the Lagrangian's support, or, where the budget leaves that too little
    (SUPPORT_MIN_S), the MILP on the neighbourhood of the support's LP instead: bounds and plans
    stay valid against brute force."""
    ran, skipped = "MILP on its support (", "MILP on its support LP's neighbourhood"
    if route == "neighbourhood":
        monkeypatch.setattr(lagrangian_fixing, "SUPPORT_MIN_S", 1e9)
        monkeypatch.setattr(lagrangian_fixing, "NEIGHBOURHOOD_MIN_S", 0.0)
        ran, skipped = skipped, ran
    cases = _binding_cases()[::2]
    for case_id, problem in cases:
        oracle = plan_brute(problem)
        result = milp.plan_milp(problem, deadline=time_budget(20), root_lp=False)
        assert result.assignment is not None and problem.memory_ok(result.assignment), (case_id, result.notes)
        assert result.objective >= oracle.objective - 1e-9, case_id
        assert result.lower_bound <= oracle.objective + 1e-9, case_id
        assert any(ran in note for note in result.notes), (case_id, result.notes)
        assert not any(skipped in note for note in result.notes), (case_id, result.notes)
        if result.status is Status.OPTIMAL:  # proven by the relaxation alone
            assert result.objective == pytest.approx(oracle.objective), case_id
        else:
            assert any(note.startswith("MILP not built") for note in result.notes), (case_id, result.notes)
    assert len(cases) >= 5


def test_forest_search_at_a_binding_limit_stops_early_and_keeps_memory():
    """A plan at its memory limit whose cheaper neighbours all need more memory: every round is
    rejected, the search stops after MEMORY_STALL_ROUNDS instead of running a million rounds."""
    problem = random_problem(40, seed=4, shape="dag", max_candidates=6)
    most = tuple(int(np.argmax(m)) for m in problem.node_memory)
    least = tuple(int(np.argmin(m)) for m in problem.node_memory)
    tight = problem.with_memory_limit(float(problem.device_memory(least).max()))
    started = time.perf_counter()
    plan = improve_by_forests(tight, least, rounds=1_000_000)
    assert time.perf_counter() - started < 60
    assert tight.memory_ok(plan)
    assert tight.objective(plan) <= tight.objective(least) + 1e-12
    assert most != least  # the instance has memory to trade


def _one_hot(problem, plan):
    """LP values of an integral LP solution: `plan`'s one-hot vectors."""
    return tuple(np.eye(len(costs))[choice] for costs, choice in zip(problem.node_costs, plan))


def test_neighbourhood_plan_moves_only_where_the_lp_doubts_the_incumbent():
    """With LP values at the optimum (whose candidates are in the support), the neighbourhood holds
    the optimum and the MILP (brute force) finds it; the nodes where the LP agrees with the
    incumbent keep its choice; with the LP at the incumbent itself there is nothing to do."""
    checked = 0
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        least = tuple(int(np.argmin(m)) for m in problem.node_memory)  # each node's least (cases it breaks are skipped)
        if not problem.memory_ok(least) or problem.objective(least) <= oracle.objective + 1e-9:
            continue
        support = tuple(np.array([c]) for c in oracle.assignment)
        seen = []

        def relax_at_optimum(sub, deadline):
            seen.append(sub)
            return _one_hot(sub, [int(np.searchsorted(sorted({o, w}), o)) for o, w in zip(oracle.assignment, least)])

        plan = neighbourhood_plan(problem, support, least, Deadline(None), relax_at_optimum, _brute_solve)
        assert plan is not None and problem.memory_ok(plan), case_id
        assert problem.objective(plan) == pytest.approx(oracle.objective), case_id
        for node, choice in enumerate(plan):  # nodes where the optimum and the incumbent agree stay
            if oracle.assignment[node] == least[node]:
                assert choice == least[node], case_id
        at_incumbent = neighbourhood_plan(problem, support, oracle.assignment, Deadline(None),
                                          lambda sub, deadline: _one_hot(sub, [0] * sub.num_nodes), _brute_solve)
        assert at_incumbent is None, case_id  # the support's LP optimum is the incumbent: nothing better
        checked += 1
    assert checked >= 5


def test_neighbourhood_plan_with_the_real_lp_never_beats_the_optimum(monkeypatch):
    """The support's LP by HiGHS (lp_fixing.lp_values), both neighbourhoods (the incumbent's, and the
    LP's integral part fixed where too many nodes move): every plan fits memory, uses the support or
    the incumbent's candidates, and costs at least the brute-force optimum."""
    checked = 0
    for max_nodes in (1_000, 0):
        monkeypatch.setattr(support_plan_module, "NEIGHBOURHOOD_MAX_NODES", max_nodes)
        for case_id, problem in _binding_cases()[::2]:
            oracle = plan_brute(problem)
            relaxation = lagrangian_dual(problem)
            least = tuple(int(np.argmin(m)) for m in problem.node_memory)
            if relaxation is None or not problem.memory_ok(least):
                continue
            support = relaxation.support(2)
            plan = neighbourhood_plan(problem, support, least, time_budget(20),
                                      lambda sub, deadline: lp_values(sub, deadline), _brute_solve)
            if plan is None:
                continue
            allowed = [set(map(int, s)) | {c} for s, c in zip(support, least)]
            assert all(choice in allowed[node] for node, choice in enumerate(plan)), case_id
            assert problem.memory_ok(plan), case_id
            assert problem.objective(plan) >= oracle.objective - 1e-9, case_id
            checked += 1
    assert checked >= 5


def test_best_plan_repairs_to_the_end_where_told_even_without_budget():
    """`repair_all`: the best-bound minimiser's repair runs where its work budget is spent and a plan
    that fits is known (the neighbourhood that follows starts from it); the plan still fits memory
    and is never dearer than the incumbent."""
    cheaper = 0
    for case_id, problem in _binding_cases():
        cheapest = tuple(int(np.argmin(c)) for c in problem.node_costs)
        least = tuple(int(np.argmin(m)) for m in problem.node_memory)
        if problem.memory_ok(cheapest) or not problem.memory_ok(least):
            continue
        spent = Deadline(None, nominal_s=1e-9)
        assert lagrangian_fixing.best_plan(problem, [cheapest], least, spent, 0) == least, case_id
        plan = lagrangian_fixing.best_plan(problem, [cheapest], least, Deadline(None, nominal_s=1e-9), 0,
                                           repair_all=True)
        assert problem.memory_ok(plan), case_id
        assert problem.objective(plan) <= problem.objective(least) + 1e-12, case_id
        assert problem.objective(plan) >= plan_brute(problem).objective - 1e-9, case_id
        cheaper += problem.objective(plan) < problem.objective(least) - 1e-12
    assert cheaper >= 3
