"""Smallest feasible period in integer ticks by bisection, with a shared time budget.

`try_period(T, time_limit)` answers (True, solution), (False, None) when proven infeasible, or
(None, None) when it ran out of time. Feasibility is monotone in T (stretching a valid unrolled
schedule keeps it valid), so the bound is the largest proven-infeasible period plus one tick. A
period left undecided is skipped upwards without being counted as proven.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable



@dataclass
class SearchOutcome:
    """The bisection's result: the best feasible period, its solution and the proven bound (ticks)."""
    period: int | None  # best feasible period found (ticks)
    solution: Any
    bound: int  # every period below is infeasible (proven)
    proven: bool  # period == bound


def search_period(lower: int, upper: int, upper_solution: Any, try_period: Callable, budget) -> SearchOutcome:
    """Bisection on [lower, upper]; `upper` is known feasible with `upper_solution`. `budget` is a
    `solver_plan.work.WorkBudget`: each try gets a share of its deterministic work."""
    best, solution = upper, upper_solution
    bound = low = lower
    candidate = lower  # try the load bound first: memory is often not binding
    while low < best:
        if budget.exhausted():
            break
        ok, found = try_period(candidate, budget.share())
        if ok:
            best, solution = candidate, found
        elif ok is False:
            low = candidate + 1
            bound = max(bound, candidate + 1)  # monotone: every shorter period is infeasible too
        else:
            low = candidate + 1  # undecided: look higher, but prove nothing
        candidate = (low + best) // 2
    return SearchOutcome(best, solution, bound, bound >= best)
