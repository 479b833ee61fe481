"""A plan from a relaxation's support: the MILP on the few candidates per node that a relaxation
favours (with the incumbent's), a model small enough to solve where the whole one is not.

The root LP's support is the candidates its solution uses (~1.6 per node: lp_fixing); the Lagrangian's
is the SUPPORT_WIDTH candidates of each node with the least Lagrangian bound (lagrangian_fixing,
where the model is too big for the MILP: at 10,000 operators ~2.6 candidates per node, 0.12 M
columns instead of 5.5 M). A heuristic: the support may miss the optimum; the plan fits memory.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from solver_plan.intra.answer import Answer
from solver_plan.intra.lagrangian import restricted
from solver_plan.intra.problem import ConfigProblem

# solve(sub, start, deadline, gap): the sub-problem's MILP from a start plan within a deadline, stopped
# once its plan is within the relative `gap` of its bound (None: to proven optimality)
SolveModel = Callable[[ConfigProblem, "tuple[int, ...] | None", object, "float | None"], Answer]


def support_plan(problem: ConfigProblem, support, incumbent, deadline, solve: SolveModel,
                 gap: float | None = None) -> tuple[int, ...] | None:
    """The MILP's plan on `support` (per node, candidate indices) with the incumbent's choices, in
    original indices, or None (also when the solver was killed at the wall clock). `solve` solves a
    (sub)problem's MILP from a start plan within a deadline, stopping within the relative `gap` of
    its bound (None: proven optimal on the support)."""
    choices = [set(map(int, s)) for s in support]
    if incumbent is not None:
        for node, choice in enumerate(incumbent):
            choices[node].add(int(choice))
    if any(not c for c in choices):
        return None
    picked = tuple(np.array(sorted(c)) for c in choices)
    sub = restricted(problem, picked)
    start = None if incumbent is None else tuple(int(np.searchsorted(picked[i], c)) for i, c in enumerate(incumbent))
    try:
        answer = solve(sub, start, deadline, gap)
    except TimeoutError:  # the solver's worker killed at the wall clock (a loaded machine): no plan from it
        deadline.mark_cut_short()
        return None
    if answer.assignment is None:
        return None
    return tuple(int(picked[node][choice]) for node, choice in enumerate(answer.assignment))
