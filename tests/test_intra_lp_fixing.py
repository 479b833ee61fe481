"""Root LP relaxation and reduced-cost fixing under a binding memory limit (lp_fixing), and the
one-hot model with closed pairs, against brute force on tiny instances."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from intra_cases import tiny_cases
from solver_plan.deadline import Deadline, time_budget
from solver_plan.intra import isolated
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.linear_model import config_model, encode, outcome_answer
from solver_plan.intra.answer import Answer
from solver_plan.intra.lp_fixing import SUPPORT_GAP, lp_relaxation, lp_restriction, safe_bound
from solver_plan.intra.milp import plan_milp
from solver_plan.intra.random_instances import random_problem
from solver_plan.result import Status


def _plans(problem):
    return itertools.product(*(range(len(c)) for c in problem.node_costs))


def _binding_cases():
    return [(case_id, problem) for case_id, problem in tiny_cases(seeds=6, max_nodes=6)
            if problem.memory_limit is not None]


def _lp(problem):
    model = config_model(problem)
    solution = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_lp_relaxation", model=model)
    return model, solution


def _uses_closed(problem, plan, closed) -> bool:
    return any(matrix is not None and matrix[plan[u], plan[v]]
               for (u, v), matrix in zip(problem.edges, closed))


def _solve_model(sub, start, deadline, gap=None):
    model = config_model(sub)
    outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs", model=model,
                            start_values=None if start is None else encode(model, sub, start),
                            **({} if gap is None else {"mip_rel_gap": gap}))
    return outcome_answer(model, outcome)


def assert_bounds_below_plans(problem, relaxation, plans, case_id) -> None:
    """`relaxation`'s bound, and its bound for each candidate and pair a plan of `plans` uses, are at
    or below that plan's cost: fixing by them never closes any of those plans."""
    for plan in plans:
        cost = problem.objective(plan)
        assert relaxation.bound <= cost + 1e-9, case_id
        for node, choice in enumerate(plan):
            assert relaxation.candidate_bounds[node][choice] <= cost + 1e-9, (case_id, plan)
        for (u, v), bounds in zip(problem.edges, relaxation.pair_bounds):
            if bounds is not None:
                assert bounds[plan[u], plan[v]] <= cost + 1e-9, (case_id, plan)


def test_lp_bounds_never_above_a_plan_using_the_candidate_or_pair():
    checked = 0
    for case_id, problem in _binding_cases():
        model, solution = _lp(problem)
        if solution.status is not Status.OPTIMAL:  # no plan fits even fractionally
            continue
        relaxation = lp_relaxation(problem, model, solution)
        assert relaxation.bound <= solution.objective + 1e-9, case_id  # the safe bound is never above the LP's
        feasible = [plan for plan in _plans(problem) if problem.memory_ok(plan)]
        assert_bounds_below_plans(problem, relaxation, feasible, case_id)
        checked += bool(feasible)
    assert checked >= 10


@pytest.mark.parametrize("seed", range(3))
def test_safe_bound_holds_for_any_row_duals(seed):
    """The bound is computed from the model's arrays: any duals give a valid (weaker) bound."""
    rng = np.random.default_rng(seed)
    for case_id, problem in _binding_cases()[seed::3]:
        feasible = [problem.objective(plan) for plan in _plans(problem) if problem.memory_ok(plan)]
        if not feasible:
            continue
        model = config_model(problem)
        for scale in (0.1, 1.0, 10.0):
            bound, _ = safe_bound(model, scale * rng.normal(size=model.num_rows))
            assert bound <= min(feasible) + 1e-9, case_id


@pytest.mark.parametrize("seed", range(3))
def test_fixing_bounds_hold_for_approximate_duals(seed):
    """An approximate dual (an interior-point iterate without crossover, PDLP, a perturbed optimum)
    never fixes a candidate or pair of a plan: lp_relaxation's per-candidate and per-pair bounds,
    from the LP's duals perturbed at several scales, stay at or below every fitting plan's cost that
    uses them (brute force), and the whole bound below the optimum."""
    rng = np.random.default_rng(seed)
    checked = 0
    for case_id, problem in _binding_cases()[seed::3]:
        model, solution = _lp(problem)
        if solution.status is not Status.OPTIMAL:
            continue
        feasible = [plan for plan in _plans(problem) if problem.memory_ok(plan)]
        for scale in (1e-3, 0.1, 1.0):
            noise = scale * (1.0 + np.abs(solution.row_duals)) * rng.normal(size=model.num_rows)
            approximate = type(solution)(Status.OPTIMAL, solution.column_values, solution.row_duals + noise,
                                         solution.objective)
            relaxation = lp_relaxation(problem, model, approximate)
            assert_bounds_below_plans(problem, relaxation, feasible, (case_id, scale))
        checked += bool(feasible)
    assert checked >= 3


def test_model_with_closed_pairs_is_the_problem_without_them():
    rng = np.random.default_rng(7)
    checked = 0
    for case_id, problem in _binding_cases()[::2]:
        closed = tuple(rng.random(m.shape) < 0.3 for m in problem.edge_costs)
        allowed = [plan for plan in _plans(problem) if problem.memory_ok(plan) and not _uses_closed(problem, plan, closed)]
        model = config_model(problem, closed_pairs=closed)
        outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs", model=model)
        if not allowed:
            assert outcome.status is Status.INFEASIBLE, case_id
            continue
        best = min(allowed, key=problem.objective)
        answer = outcome_answer(model, outcome)
        assert answer.status is Status.OPTIMAL, case_id
        assert not _uses_closed(problem, answer.assignment, closed), case_id
        assert problem.objective(answer.assignment) == pytest.approx(problem.objective(best)), case_id
        start = encode(model, problem, best, closed)
        assert model.cost @ start + model.offset == pytest.approx(problem.objective(best)), case_id
        checked += 1
    assert checked >= 5
    with pytest.raises(ValueError):
        problem = _binding_cases()[0][1]
        closed = tuple(np.ones(m.shape, dtype=bool) for m in problem.edge_costs)
        encode(config_model(problem, closed_pairs=closed), problem, (0,) * problem.num_nodes, closed)


def _restrictions_keep_the_optimum(solve) -> int:
    """Cases where lp_restriction (support MILP by `solve`) kept brute force's optimum open with
    valid bounds; asserts on every case it checks."""
    checked = 0
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        restriction = lp_restriction(problem, Deadline(None), None, 0, solve)
        if restriction is None or oracle.status is not Status.OPTIMAL:
            continue
        assert restriction.bound <= oracle.objective + 1e-9, case_id
        assert restriction.incumbent is None or problem.memory_ok(restriction.incumbent), case_id
        inner = restriction.problem
        closed = restriction.closed_pairs
        plans = [plan for plan in _plans(inner) if inner.memory_ok(plan) and not _uses_closed(inner, plan, closed)]
        best = min(problem.objective(restriction.decode(plan)) for plan in plans)
        assert best == pytest.approx(oracle.objective), case_id
        assert restriction.problem_bound(best) <= oracle.objective + 1e-9, case_id
        checked += 1
    return checked


def test_lp_restriction_keeps_an_optimal_plan_and_a_valid_bound():
    assert _restrictions_keep_the_optimum(_solve_model) >= 10


def test_a_support_plan_stopped_short_of_its_optimum_still_leaves_the_optimum_open():
    """The MILP on the LP's support is asked to stop within SUPPORT_GAP of its bound: whatever plan
    it then returns (here the dearest plan that fits on the support), the restriction built from it
    still holds the brute-force optimum and a valid bound (a worse incumbent only fixes less)."""
    gaps = []

    def dearest(sub, start, deadline, gap=None):
        gaps.append(gap)
        fitting = [plan for plan in _plans(sub) if sub.memory_ok(plan)]
        return Answer(Status.FEASIBLE, max(fitting, key=sub.objective)) if fitting else Answer(Status.INFEASIBLE)

    assert _restrictions_keep_the_optimum(dearest) >= 10
    assert gaps and set(gaps) == {SUPPORT_GAP}


def test_milp_gives_the_support_gap_to_the_support_milp_only(monkeypatch):
    """In milp's LP route the MILP on the LP's support gets HiGHS' mip_rel_gap = SUPPORT_GAP; the
    model the fixing leaves is solved to proven optimality (HiGHS' default gap): the optimum stays
    brute force's."""
    calls = []
    call = isolated.call

    def recorded(library, module, function, **kwargs):
        calls.append((function, kwargs.get("mip_rel_gap"), kwargs.get("presolve", True)))
        return call(library, module, function, **kwargs)

    monkeypatch.setattr(isolated, "call", recorded)
    checked = 0
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        if oracle.status is not Status.OPTIMAL:
            continue
        calls.clear()
        result = plan_milp(problem, deadline=time_budget(30))
        if not any(function in ("solve_lp_relaxation", "solve_lp_by_columns") for function, _, _ in calls):
            continue  # no LP route here (the limit cannot bind)
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(oracle.objective), case_id
        milps = [(gap, presolve) for function, gap, presolve in calls if function == "solve_with_highs"]
        assert milps and milps[0] == (SUPPORT_GAP, True), case_id  # the support's MILP comes first
        assert all(gap is None for gap, presolve in milps if not presolve), case_id  # the fixed model's
        checked += 1
    assert checked >= 10


def test_no_lp_route_where_memory_cannot_bind():
    problem = random_problem(6, seed=2, shape="dag")
    assert lp_restriction(problem, Deadline(None), None, 0, _solve_model) is None
    loose = problem.with_memory_limit(float(problem.worst_memory_per_device().max()))
    assert lp_restriction(loose, Deadline(None), None, 0, _solve_model) is None


def test_milp_plans_unchanged_by_the_lp_route_where_memory_does_not_bind():
    for case_id, problem in tiny_cases(seeds=4, max_nodes=6):
        if problem.memory_limit is not None:
            continue
        with_route = plan_milp(problem, deadline=time_budget(30))
        without = plan_milp(problem, deadline=time_budget(30), root_lp=False)
        assert with_route.assignment == without.assignment, case_id
        assert not any(note.startswith("root LP") for note in with_route.notes), case_id


def test_fixed_model_without_presolve_keeps_the_optimum():
    """milp solves the model the LP's reduced costs leave with HiGHS' presolve off: the same optimum
    as brute force on the problem."""
    checked = 0
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        restriction = lp_restriction(problem, Deadline(None), None, 0, _solve_model)
        if restriction is None or restriction.incumbent is None or oracle.status is not Status.OPTIMAL:
            continue
        inner, closed = restriction.problem, restriction.closed_pairs
        model = config_model(inner, closed_pairs=closed)
        start = encode(model, inner, restriction.encode(restriction.incumbent), closed)
        outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs", model=model,
                                start_values=start, relax_first=False, presolve=False)
        answer = outcome_answer(model, outcome)
        assert answer.status is Status.OPTIMAL, case_id
        found = min(problem.objective(restriction.decode(answer.assignment)), problem.objective(restriction.incumbent))
        assert found == pytest.approx(oracle.objective, rel=1e-7, abs=1e-9), case_id
        checked += 1
    assert checked >= 10


def test_no_edge_dropping_relaxation_where_the_root_lp_route_is_planned(monkeypatch):
    """Where memory can bind and the root LP fits, milp's warm start skips the edge-dropping
    relaxation (its bound ignores memory; the LP's plan replaces its plan) and still proves the
    brute-force optimum; with root_lp=false the relaxation runs as before."""
    from solver_plan.intra import warm_start
    calls = []
    relax = warm_start.edge_dropping_relaxation

    def counted(problem, deadline):
        calls.append(problem.num_nodes)
        return relax(problem, deadline)

    monkeypatch.setattr(warm_start, "edge_dropping_relaxation", counted)
    checked = 0
    for case_id, problem in _binding_cases():
        oracle = plan_brute(problem)
        if oracle.status is not Status.OPTIMAL or lp_restriction(problem, Deadline(None), None, 0, _solve_model) is None:
            continue  # the limit cannot bind here (or nothing fits)
        result = plan_milp(problem, deadline=time_budget(30))
        assert not calls, case_id
        assert result.status is Status.OPTIMAL and result.objective == pytest.approx(oracle.objective), case_id
        plan_milp(problem, deadline=time_budget(30), root_lp=False)
        assert calls, case_id
        calls.clear()
        checked += 1
    assert checked >= 10


def test_the_root_lp_stops_at_its_iteration_limit_not_the_clock(monkeypatch):
    """Issue 26: the root LP's work limit is HiGHS' simplex iteration limit, sized from the nominal
    budget (lp_iteration_limit). An LP stopped there is not optimal (no route), and not cut short:
    work decided; with a budget that pays for it the same LP is solved."""
    from solver_plan.intra import lp_fixing
    from solver_plan.intra.backends.highs import solve_lp_relaxation
    problem = random_problem(200, seed=1, shape="dag", memory_tightness=0.5)
    model = config_model(problem)
    stopped = solve_lp_relaxation(model, iteration_limit=5)
    assert stopped.status is Status.TIME_LIMIT and stopped.work_limit
    solved = solve_lp_relaxation(model, iteration_limit=lp_fixing.lp_iteration_limit(problem, model, 30.0))
    assert solved.status is Status.OPTIMAL and not solved.work_limit
    assert lp_fixing.lp_iteration_limit(problem, model, None) is None
    monkeypatch.setattr(lp_fixing, "lp_iteration_limit", lambda *args: 5)
    deadline = Deadline(60.0, nominal_s=30.0)
    assert lp_restriction(problem, deadline, None, 0, _solve_model) is None and not deadline.cut_short
