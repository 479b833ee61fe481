"""Min-sum diffusion reparametrises exactly and its bounds never exceed the optimum."""
from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from solver_plan.deadline import Deadline
from solver_plan.intra.brute import plan_brute
from solver_plan.intra.dual_ascent import reparametrise
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.relaxation import edge_dropping_relaxation


def _tiny_dags(count: int):
    for seed in range(count):
        yield random_problem(3 + seed % 5, seed=seed, shape="dag", min_candidates=2, max_candidates=5,
                             extra_edge_ratio=1.0)


def test_every_plan_keeps_its_objective():
    problem = random_problem(60, seed=3, shape="dag", min_candidates=3, max_candidates=9)
    reparametrised, _ = reparametrise(problem)
    rng = np.random.default_rng(0)
    for _ in range(20):
        plan = [int(rng.integers(len(c))) for c in problem.node_costs]
        assert reparametrised.objective(plan) == pytest.approx(problem.objective(plan), rel=1e-12, abs=1e-9)


def test_bounds_never_exceed_the_brute_force_optimum():
    for problem in _tiny_dags(50):
        optimum = plan_brute(problem).objective
        _, diffusion_bound = reparametrise(problem)
        assert diffusion_bound <= optimum + 1e-9, problem.name
        relaxation = edge_dropping_relaxation(problem)
        assert relaxation.lower_bound <= optimum + 1e-9, problem.name
        assert problem.objective(relaxation.assignment) >= optimum - 1e-9, problem.name


def test_diffusion_tightens_the_edge_dropping_bound():
    problem = random_problem(300, seed=5, shape="dag", min_candidates=5, max_candidates=12, extra_edge_ratio=0.5)
    plain = edge_dropping_relaxation(problem, diffuse=False)
    diffused = edge_dropping_relaxation(problem)
    assert diffused.lower_bound >= plain.lower_bound - 1e-9


def test_no_time_means_no_change():
    problem = random_problem(30, seed=1, shape="dag")
    unchanged, bound = reparametrise(problem, Deadline(1.0, start=time.perf_counter() - 2.0))
    assert unchanged is problem and bound == -np.inf


def test_float32_sweeps_keep_the_reparametrisation_and_its_bound_exact():
    # costs of very different sizes, so float32 rounding of the sweeps is far from float64's: the
    # messages it chose are applied in float64, and the bound is that of the returned costs
    problem = random_problem(40, seed=7, shape="dag", min_candidates=3, max_candidates=8)
    scaled = replace(problem, node_costs=tuple(c * 1e4 + 1e-3 for c in problem.node_costs))
    reparametrised, bound = reparametrise(scaled)
    least = sum(float(c.min()) for c in reparametrised.node_costs) + sum(float(m.min()) for m in reparametrised.edge_costs)
    assert bound == least
    rng = np.random.default_rng(1)
    for _ in range(20):
        plan = [int(rng.integers(len(c))) for c in scaled.node_costs]
        assert reparametrised.objective(plan) == pytest.approx(scaled.objective(plan), rel=1e-12, abs=1e-9)
        assert bound <= scaled.objective(plan) + 1e-9
