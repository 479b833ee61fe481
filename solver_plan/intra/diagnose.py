"""Why a planner has no plan: INFEASIBLE with the least busiest-device memory any plan needs, or a
plan that fits after all, so an INFEASIBLE result always says why."""
from __future__ import annotations

from solver_plan.deadline import Deadline
from solver_plan.intra.answer import Answer
from solver_plan.intra.memory import (DEFAULT_DIAGNOSIS_TIME_S, PeakMemory, can_fit, closed_form_bound,
                                      min_peak_memory)
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import Status


def diagnose(problem: ConfigProblem, deadline: Deadline, answer: Answer, name: str) -> Answer:
    """Without a usable plan: INFEASIBLE with the least peak memory, or a plan that fits memory."""
    if problem.memory_limit is None:
        return answer
    limit = float(problem.memory_limit)
    budget = deadline.remaining()
    if budget is not None and budget < 0.05 and not can_fit(problem):
        # the closed-form bound (a few ms, no solver) proves it: the same answer whatever the clock
        return Answer(Status.INFEASIBLE, None, None, answer.notes + (
            PeakMemory(closed_form_bound(problem), exact=False).describe(limit),))
    if budget is not None and budget < 0.05:  # no time left to diagnose: say so instead of overrunning
        deadline.mark_cut_short()
        if answer.status is Status.INFEASIBLE:
            return Answer(Status.ERROR, None, None, answer.notes + (
                f"{name} reported INFEASIBLE; no time left to confirm it",))
        return Answer(Status.TIME_LIMIT if answer.status is not Status.ERROR else answer.status, None,
                      answer.lower_bound, answer.notes + ("no plan found within the time limit",))
    budget = DEFAULT_DIAGNOSIS_TIME_S if budget is None else min(budget, DEFAULT_DIAGNOSIS_TIME_S)
    peak = min_peak_memory(problem, budget, limit)
    if peak.lower_bound > limit * (1 + 1e-9):
        return Answer(Status.INFEASIBLE, None, None, answer.notes + (peak.describe(limit),))
    if peak.assignment is not None and peak.peak is not None and peak.peak <= limit:
        why = (f"{name} reported INFEASIBLE, wrongly" if answer.status is Status.INFEASIBLE
               else "no plan within the memory limit from the planner")
        return Answer(Status.FEASIBLE, peak.assignment, None, answer.notes + (
            f"{why}; returned the least-peak-memory plan",))
    if answer.status is Status.INFEASIBLE:  # unconfirmed: the diagnosis neither proves nor refutes it
        return Answer(Status.ERROR, None, None, answer.notes + (
            f"{name} reported INFEASIBLE but that is not confirmed; {peak.describe(limit)}",))
    return answer
