"""Shared random cases for the per-operator configuration tests."""
from __future__ import annotations

import math

from solver_plan.intra.brute import plan_brute
from solver_plan.intra.random_instances import random_problem

SHAPES = ("chain", "series_parallel", "dag")
# memory limit as a fraction of the busiest device's memory in the unconstrained optimum:
# None = no limit; below 1 the limit binds (and is sometimes infeasible)
MEMORY_FRACTIONS = (None, 0.85, 0.6)


def with_binding_memory(problem, fraction):
    if fraction is None:
        return problem
    free = plan_brute(problem.with_memory_limit(None))
    peak = float(problem.device_memory(free.assignment).max())
    return problem.with_memory_limit(float(math.floor(fraction * peak)))


def tiny_cases(seeds: int = 12, max_nodes: int = 7):
    """(case id, problem): 3 shapes x 3 memory settings x `seeds`, 3..max_nodes nodes."""
    cases = []
    for shape in SHAPES:
        for fraction in MEMORY_FRACTIONS:
            for seed in range(seeds):
                nodes = 3 + seed % (max_nodes - 2)
                problem = with_binding_memory(random_problem(nodes, seed=seed, shape=shape), fraction)
                cases.append((f"{shape}-n{nodes}-mem{fraction}-s{seed}", problem))
    return cases


def medium_cases():
    """A few instances of 40-120 nodes with up to 8 candidates."""
    return [(f"{shape}-n{n}-m{t}", random_problem(n, seed=n, shape=shape, memory_tightness=t, max_candidates=8))
            for shape, n, t in (("series_parallel", 120, None), ("dag", 80, None), ("dag", 60, 0.5),
                                ("series_parallel", 40, 0.45))]
