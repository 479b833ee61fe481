"""`run_simplified`: a registered planner run on the exactly simplified problem, its plan decoded to
every original operator; first without the memory limit when that could bind and time is plentiful."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from solver_plan.deadline import Deadline
from solver_plan.intra import progress
from solver_plan.intra.clock import start_clock, time_for_passes
from solver_plan.intra.context import REPAIR_HINT
from solver_plan.intra.harness import cost_breakdown_note
from solver_plan.intra.memory import can_fit
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.simplify import memory_can_bind, simplify
from solver_plan.result import ConfigResult, Status

MEMORY_FREE_SHARE = 0.3  # run_simplified: the pass without the memory limit, when it could bind
MEMORY_FREE_PASSES = 40  # ... run only with time for this many passes (20 s at 1,000 operators)


def _reduce_and_run(problem: ConfigProblem, func: Callable, deadline: Deadline, seed: int, warm_start,
                    options) -> ConfigResult:
    """Simplify exactly, run `func` on the reduced problem and decode its plan to `problem`."""
    if not time_for_passes(deadline, problem, 2):
        # simplification is exact but optional: with too little time, plan the problem as it is
        result = func(problem, deadline=deadline, seed=seed, warm_start=warm_start, **options)
        return replace(result, notes=result.notes + ("not simplified (too little time left)",))
    reduced = simplify(problem, deadline=deadline)
    reduced_start = reduced.encode(warm_start) if warm_start is not None else None
    if REPAIR_HINT in options:
        options = {**options, REPAIR_HINT: reduced.encode(options[REPAIR_HINT])}
    result = func(reduced.problem, deadline=deadline, seed=seed, warm_start=reduced_start, **options)
    notes = tuple(note for note in result.notes if not note.startswith("cost breakdown:")) + (reduced.describe(),)
    if result.assignment is None:
        return replace(result, notes=notes)
    plan = reduced.decode(result.assignment)  # the breakdown of folded costs means nothing: redo it
    return replace(result, assignment=plan, objective=problem.objective(plan),
                   notes=notes + (cost_breakdown_note(problem, plan),))


def run_simplified(problem: ConfigProblem, func: Callable, *, exact: bool, deadline: Deadline | None, seed: int,
                   warm_start, options: dict, memory_free_first: bool = True) -> ConfigResult:
    """Run `func` on the exactly simplified problem. When the memory limit could bind (which stops
    most folding), first solve without it (using at most MEMORY_FREE_SHARE of the time; not when
    `memory_free_first` is False): an unconstrained optimum that fits in memory is the constrained
    optimum; a fitting heuristic plan becomes a warm start."""
    deadline = start_clock(deadline)
    ran_free = False
    # The memory-free pass costs about as much as the real one: only when time is plentiful (at
    # 10,000 operators and 60 s it took its whole share and gave nothing the Lagrangian does not).
    # Nor where no plan can fit memory (`can_fit`): the planner is then not run at all (harness).
    if (memory_free_first and memory_can_bind(problem) and can_fit(problem)
            and time_for_passes(deadline, problem, MEMORY_FREE_PASSES)):
        ran_free = True
        with progress.bounds_only():  # its plans may break memory
            relaxed = _reduce_and_run(problem.with_memory_limit(None), func, deadline.share(MEMORY_FREE_SHARE),
                                      seed, warm_start, options)
        if relaxed.assignment is not None and problem.memory_ok(relaxed.assignment):
            if exact and relaxed.status is Status.OPTIMAL:
                return replace(relaxed, runtime_s=deadline.elapsed(), notes=relaxed.notes + (
                    "the memory limit does not bind at the unconstrained optimum",))
            if warm_start is None or problem.objective(relaxed.assignment) < problem.objective(warm_start):
                warm_start = relaxed.assignment
        elif relaxed.assignment is not None:
            options = {**options, REPAIR_HINT: relaxed.assignment}  # for the heuristics to repair
    memory_free_s = deadline.elapsed()
    result = _reduce_and_run(problem, func, deadline, seed, warm_start, options)
    if ran_free and memory_free_s >= 0.01:
        result = replace(result, notes=result.notes + (f"memory-free pass first: {memory_free_s:.2f} s",))
    return replace(result, runtime_s=deadline.elapsed())
