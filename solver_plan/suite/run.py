"""A generated problem (a suite spec such as `random-dag:nodes=100,seed=3`) planned as any
`ConfigProblem`: no graph, no cluster; the problem goes straight to the `solve` front door. The batch
runner (batch/kinds.py) turns the answer into a job's outcome; this package does not know about jobs."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from solver_plan.result import Status


@dataclass(frozen=True)
class ProblemAnswer:
    """A planner's answer on a generated problem; `plan` is what a batch record keeps of it."""
    status: Status
    objective: float | None
    lower_bound: float | None
    runtime_s: float | None
    plan: dict[str, Any]
    notes: tuple[str, ...]
    solver_failure: str | None = None


def answer_problem(spec: str, planner: str, *, seed: int = 0, time_limit: float | None = None,
                   options: dict | None = None) -> ProblemAnswer:
    """Generate the problem `spec` names and solve it with `planner`; generating counts against
    `time_limit` (seconds): on the wall clock, and on the nominal budget by its fixed estimate
    (`generation_seconds`); running out while generating is a TIME_LIMIT answer."""
    from solver_plan.deadline import CUT_SHORT_NOTE, time_budget
    from solver_plan.intra.solve import solve
    from solver_plan.suite.generators import GenerationExpired, generation_seconds, resolve_problem

    deadline = time_budget(time_limit)  # generating the problem counts against the limit, as building a model does
    from solver_plan.result import ConfigResult

    try:
        problem = resolve_problem(spec, deadline)
    except GenerationExpired:
        # the wall clock stopped the generation: say so, as a plan command stopped while building does
        notes = (f"time limit reached while generating the problem ({deadline.elapsed():.2f} s)", CUT_SHORT_NOTE)
        result = ConfigResult(planner, Status.TIME_LIMIT, runtime_s=deadline.elapsed(), notes=notes)
        return ProblemAnswer(Status.TIME_LIMIT, None, None, deadline.elapsed(), problem_plan(spec, result), notes)
    deadline.spend(generation_seconds(problem))  # the planner plans with what generating left, idle or loaded
    result = solve(problem, planner, seed=seed, deadline=deadline, **(options or {}))
    return ProblemAnswer(result.status, result.objective, result.lower_bound, result.runtime_s,
                         problem_plan(problem.name, result), tuple(result.notes), result.solver_failure)


def problem_plan(problem: str, result) -> dict[str, Any]:
    """A generated problem's answer as JSON (no operators to name): the result envelope, then the
    problem, planner, status, candidate index per node, notes and solver failure."""
    from solver_plan.result import with_envelope
    return with_envelope(result.envelope, {
        "problem": problem, "planner": result.planner, "status": result.status.value,
        "assignment": None if result.assignment is None else list(result.assignment),
        "notes": list(result.notes), "solver_failure": result.solver_failure})
