"""A plan from a relaxation's support: the MILP on the few candidates per node that a relaxation
favours (with the incumbent's), a model small enough to solve where the whole one is not.

The root LP's support is the candidates its solution uses (~1.6 per node: lp_fixing); the Lagrangian's
is the SUPPORT_WIDTH candidates of each node with the least Lagrangian bound (lagrangian_fixing,
where the model is too big for the MILP: at 10,000 operators ~2.6 candidates per node, 0.12 M
columns instead of 5.5 M). A heuristic: the support may miss the optimum; the plan fits memory.

Where even the support's MILP is too slow (the Lagrangian's at 10,000 operators: 20 s to find
anything, s39), `neighbourhood_plan` solves the support's LP instead and the MILP only on the nodes
it leaves in doubt: those where the LP is fractional or picks another candidate than the incumbent
(RENS-like, Berthold 2014: the LP's integral part fixed, here where the incumbent agrees).
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


# relax(sub, deadline): per node of `sub`, the LP relaxation's value of each candidate (None: no
# optimal LP within the deadline)
SolveLp = Callable[[ConfigProblem, object], "tuple[np.ndarray, ...] | None"]
NEIGHBOURHOOD_LP_SHARE = 0.3  # of neighbourhood_plan's time, for the support's LP; the rest: the MILP
INTEGRAL = 1e-6  # an LP value within this of 1 is the node's choice
# Nodes the LP may leave in doubt for the neighbourhood's MILP; more (an incumbent far from the LP's
# solution, e.g. the greedy plan where the Lagrangian's repair did not finish: 3,973 of 10,000 nodes,
# 51 s of CPU) and the nodes where the LP is integral are fixed to the LP's choice instead (RENS
# proper: from the repaired plan's LP 39 nodes left, 44,012.7 in 0.9 s; from the greedy plan's 10,
# and no plan fits: the caller keeps its own).
NEIGHBOURHOOD_MAX_NODES = 1_000


def _with_incumbent(support, incumbent) -> tuple[np.ndarray, ...] | None:
    """Per node, the `support`'s candidates and the incumbent's choice, sorted (None where a node has
    none)."""
    choices = [set(map(int, s)) for s in support]
    if incumbent is not None:
        for node, choice in enumerate(incumbent):
            choices[node].add(int(choice))
    if any(not c for c in choices):
        return None
    return tuple(np.array(sorted(c)) for c in choices)


def support_plan(problem: ConfigProblem, support, incumbent, deadline, solve: SolveModel,
                 gap: float | None = None) -> tuple[int, ...] | None:
    """The MILP's plan on `support` (per node, candidate indices) with the incumbent's choices, in
    original indices, or None (also when the solver was killed at the wall clock). `solve` solves a
    (sub)problem's MILP from a start plan within a deadline, stopping within the relative `gap` of
    its bound (None: proven optimal on the support)."""
    picked = _with_incumbent(support, incumbent)
    if picked is None:
        return None
    return _milp_plan(problem, picked, incumbent, deadline, solve, gap)


def neighbourhood_plan(problem: ConfigProblem, support, incumbent, deadline, relax: SolveLp, solve: SolveModel,
                       gap: float | None = None) -> tuple[int, ...] | None:
    """A plan from the LP of `support` with the incumbent's choices (`relax`, NEIGHBOURHOOD_LP_SHARE of
    the time) and the MILP (`solve`, the rest) on its neighbourhood: every node where that LP is
    integral and picks the incumbent's choice is fixed to it, the others keep their support
    candidates, so the incumbent is a plan of it and the MILP's start. Where over
    NEIGHBOURHOOD_MAX_NODES are left open, the LP's integral choices are fixed instead (the
    incumbent is then no plan of it). In original indices (the caller compares it with the
    incumbent), or None: the LP not solved, its optimum the incumbent itself, or no MILP plan."""
    picked = _with_incumbent(support, incumbent)
    if picked is None or incumbent is None:
        return None
    # its wall clock at least its nominal share (a loaded machine stops it no sooner than its work)
    values = relax(restricted(problem, picked), deadline.work_share(NEIGHBOURHOOD_LP_SHARE))
    if values is None:
        return None
    lp_choice = [int(np.argmax(x)) for x in values]
    doubt = [x[k] < 1.0 - INTEGRAL for x, k in zip(values, lp_choice)]
    moving = [d or int(picked[node][k]) != int(incumbent[node])
              for node, (d, k) in enumerate(zip(doubt, lp_choice))]
    if not any(moving):  # the support's LP optimum is the incumbent: nothing better on the support
        return None
    if sum(moving) <= NEIGHBOURHOOD_MAX_NODES:
        fixed = [np.array([int(c)]) for c in incumbent]
        open_ = moving
        start = incumbent
    else:
        fixed = [choices[[k]] for choices, k in zip(picked, lp_choice)]
        open_, start = doubt, None
    choices = tuple(picked[node] if open_[node] else fixed[node] for node in range(problem.num_nodes))
    return _milp_plan(problem, choices, start, deadline, solve, gap)


def _milp_plan(problem: ConfigProblem, picked, incumbent, deadline, solve: SolveModel,
               gap: float | None) -> tuple[int, ...] | None:
    """The MILP's plan on the candidates `picked` per node (sorted, holding the incumbent's choices
    where one is given, its start), in original indices, or None."""
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
