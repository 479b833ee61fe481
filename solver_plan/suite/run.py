"""What a batch worker runs for a config job whose model is a generated problem: no graph, no
cluster; the problem goes straight to the `solve` front door, like any `ConfigProblem`."""
from __future__ import annotations

from typing import Any

from solver_plan.batch.job import Job


def run_problem_job(job: Job) -> dict[str, Any]:
    from solver_plan.batch.kinds import outcome, planner_error
    from solver_plan.deadline import Deadline
    from solver_plan.intra.solve import solve
    from solver_plan.result import ConfigResult, Status
    from solver_plan.suite.generators import GenerationExpired, resolve_problem

    deadline = Deadline(job.time_limit)  # generating the problem counts against the job's limit, as building a model does
    try:
        problem = resolve_problem(job.model, deadline)
    except GenerationExpired:
        note = f"time limit reached while generating the problem ({deadline.elapsed():.2f} s)"
        result = ConfigResult(job.planner, Status.TIME_LIMIT, runtime_s=deadline.elapsed(), notes=(note,))
        return outcome(Status.TIME_LIMIT, None, None, deadline.elapsed(), problem_plan(job.model, result))
    result = solve(problem, job.planner, seed=job.seed, deadline=deadline, **dict(job.options))
    plan = problem_plan(problem.name, result)
    return outcome(result.status, result.objective, result.lower_bound, result.runtime_s, plan,
                   error=planner_error(result.status, result.notes), solver_failure=result.solver_failure)


def problem_plan(problem: str, result) -> dict[str, Any]:
    """A generated problem's answer as JSON (no operators to name): the result envelope, then the
    problem, planner, status, candidate index per node, notes and solver failure."""
    from solver_plan.result import with_envelope
    return with_envelope(result.envelope, {
        "problem": problem, "planner": result.planner, "status": result.status.value,
        "assignment": None if result.assignment is None else list(result.assignment),
        "notes": list(result.notes), "solver_failure": result.solver_failure})
