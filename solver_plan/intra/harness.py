"""Shared plumbing of every configuration planner: timing, the wall-clock guard, warm starts,
fallbacks, infeasibility diagnosis and turning a planner's raw answer into a `ConfigResult`.

A planner module only writes a *core*: core(problem, context) -> Answer. `run_planner` does the rest:
- exact planners get the best heuristic plan (`context.incumbent`) as a warm start, and never
  return anything worse than it; if the solver fails or is missing, the heuristic plan comes back
  FEASIBLE with a note; the heuristics get at most HEURISTIC_SHARE of the time, and a note says
  where the time went ("time: relaxation 0.41 s, heuristics 1.20 s, milp 8.10 s");
- every objective is recomputed from the problem (planners' own numbers are never reported);
- a plan that breaks the memory limit is discarded; without a plan, the least busiest-device
  memory is computed, so an INFEASIBLE result always says why;
- `call_in_subprocess` enforces a wall clock on solvers that overrun their own time limit.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
import time
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable

from solver_plan.deadline import Deadline  # noqa: F401  (re-exported: planners import it from here)
from solver_plan.errors import InputError
from solver_plan.intra import progress
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import ConfigResult, Status
from solver_plan.units import format_seconds

PASS_S_PER_NODE = 5e-4  # one simplify + heuristics pass, measured ~0.5 s for 1,160 operators
SUBPROCESS_GRACE_S = 0.3  # a forked solver killed this long after its limit (time limits allow +10% / +0.5 s)
REPAIR_HINT = "repair_hint"  # option: a cheap plan that may break memory, for heuristics to repair
# Exact planners: the warm-start heuristics and the edge-dropping relaxation get at most this share
# of the time; the exact model always gets the rest (at 10,000 operators under a binding memory
# limit, repair and local search had used all of it and the MILP never ran).
HEURISTIC_SHARE = 0.3
# ... 15% under a memory limit that can bind, where the Lagrangian of milp finds better plans (at
# 10,000 operators the greedy plan was 13% above its bound, the Lagrangian's ~1%)
BINDING_HEURISTIC_SHARE = 0.15
MEMORY_FREE_SHARE = 0.3  # run_simplified: the pass without the memory limit, when it could bind
MEMORY_FREE_PASSES = 40  # ... run only with time for this many passes (20 s at 1,000 operators)


@dataclass(frozen=True)
class Answer:
    """A core's raw answer: a plan (or None), what is proven about it, and notes."""
    status: Status
    assignment: tuple[int, ...] | None = None
    lower_bound: float | None = None
    notes: tuple[str, ...] = ()


@dataclass
class Context:
    """What a core may use: the clock, the seed, the warm start and planner options."""
    deadline: Deadline
    seed: int = 0
    incumbent: tuple[int, ...] | None = None
    options: dict = field(default_factory=dict)
    incumbent_source: str = ""  # what found the incumbent, for notes


class SolverUnavailable(RuntimeError):
    """The backend's solver is not installed or cannot run here."""


def start_clock(limit: "Deadline | float | None") -> Deadline:
    """A clock started now that ends no later than `limit`: a caller's Deadline (so time already
    spent by the command counts), a number of seconds, or None (no limit). Its `elapsed()` is
    this piece's own runtime."""
    if isinstance(limit, Deadline):
        return Deadline(None, parent=limit)
    return Deadline(limit)


MIN_LIMIT_S = 1e-3  # a planner handed an expired clock still gets a (tiny) positive limit


def seconds_left(limit: "Deadline | float | None") -> float | None:
    """`limit` as seconds from now for a registered planner's `time_limit=` (planners of other
    packages take plain seconds); never 0, which a planner would refuse as a bad limit."""
    if isinstance(limit, Deadline):
        left = limit.remaining()
        return None if left is None else max(MIN_LIMIT_S, left)
    return limit


def time_for_passes(deadline: Deadline, problem: ConfigProblem, passes: float) -> bool:
    """Whether `passes` whole-problem passes (simplify, relaxation, heuristics: PASS_S_PER_NODE
    each per node) fit in what is left: optional work is skipped when they do not."""
    left = deadline.remaining()
    return left is None or left > passes * PASS_S_PER_NODE * problem.num_nodes


def failure_note(name: str, exc: BaseException) -> str:
    """A one-line note for a failed solver (no traceback: users see notes)."""
    if isinstance(exc, TimeoutError):
        return f"{name} stopped at the time limit: {exc}"
    text = str(exc).strip().splitlines()
    return f"{name} failed ({type(exc).__name__}: {text[-1] if text else 'no message'})"


def _usable(problem: ConfigProblem, assignment) -> bool:
    if assignment is None or len(assignment) != problem.num_nodes:
        return False
    if any(not 0 <= c < len(problem.node_costs[i]) for i, c in enumerate(assignment)):
        return False
    return problem.memory_ok(assignment)


def best_heuristic_plan(problem: ConfigProblem, warm_start=None, deadline: Deadline | None = None,
                        hint=None) -> tuple[tuple[int, ...] | None, str]:
    """The cheapest memory-feasible plan among the warm start and the greedy heuristics."""
    from solver_plan.intra.greedy import heuristic_plans
    options = []
    if warm_start is not None:
        warm_start = tuple(int(c) for c in warm_start)
        if _usable(problem, warm_start):
            options.append((problem.objective(warm_start), warm_start, "warm start"))
    for plan in heuristic_plans(problem, deadline, hint=hint):
        options.append((problem.objective(plan), plan, "greedy"))
    if not options:
        return None, "no heuristic plan"
    _, plan, source = min(options, key=lambda item: item[0])
    return plan, source


def _diagnose(problem: ConfigProblem, deadline: Deadline, answer: Answer, name: str) -> ConfigResult | Answer:
    """Without a usable plan: INFEASIBLE with the least peak memory, or a plan that fits memory."""
    from solver_plan.intra.memory import DEFAULT_DIAGNOSIS_TIME_S, min_peak_memory
    if problem.memory_limit is None:
        return answer
    budget = deadline.remaining()
    if budget is not None and budget < 0.05:  # no time left to diagnose: say so instead of overrunning
        if answer.status is Status.INFEASIBLE:
            return Answer(Status.ERROR, None, None, answer.notes + (
                f"{name} reported INFEASIBLE; no time left to confirm it",))
        return Answer(Status.TIME_LIMIT if answer.status is not Status.ERROR else answer.status, None,
                      answer.lower_bound, answer.notes + ("no plan found within the time limit",))
    budget = DEFAULT_DIAGNOSIS_TIME_S if budget is None else min(budget, DEFAULT_DIAGNOSIS_TIME_S)
    limit = float(problem.memory_limit)
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


def _finish(problem: ConfigProblem, name: str, answer: Answer, deadline: Deadline) -> ConfigResult:
    if answer.assignment is None:
        return ConfigResult(name, answer.status, None, None, deadline.elapsed(), None, answer.notes)
    objective = problem.objective(answer.assignment)
    bound = answer.lower_bound
    if bound is not None:
        bound = min(float(bound), objective)  # solver tolerance can put a bound a hair above
    status = answer.status
    if status is Status.OPTIMAL and (bound is None or (objective - bound) > 1e-6 * max(1.0, abs(objective))):
        status = Status.FEASIBLE
    return ConfigResult(name, status, objective, bound, deadline.elapsed(), tuple(answer.assignment),
                        answer.notes + (cost_breakdown_note(problem, answer.assignment),))


def cost_breakdown(problem: ConfigProblem, assignment) -> dict[str, float]:
    """Seconds spent in operators (compute, intra-op communication, gradient sync) and in
    redistribution between operators."""
    operators, redistribution = problem.breakdown(assignment)
    return {"operators_s": operators, "redistribution_s": redistribution}


def cost_breakdown_note(problem: ConfigProblem, assignment) -> str:
    parts = cost_breakdown(problem, assignment)
    return (f"cost breakdown: operators {format_seconds(parts['operators_s'])} + "
            f"redistribution {format_seconds(parts['redistribution_s'])}")


def _keep_incumbent_if_better(problem: ConfigProblem, answer: Answer, incumbent, source: str) -> Answer:
    """Exact planners never return worse than their warm start."""
    if incumbent is None:
        return answer
    if answer.assignment is not None and problem.objective(answer.assignment) <= problem.objective(incumbent):
        return answer
    if answer.status in (Status.ERROR, Status.INFEASIBLE):
        why = "solver failed" if answer.status is Status.ERROR else "solver claimed INFEASIBLE (rounding?)"
        return Answer(Status.FEASIBLE, incumbent, None, answer.notes + (f"{why}; returned the {source} plan",))
    status = answer.status if answer.status in (Status.OPTIMAL, Status.TIME_LIMIT) else Status.FEASIBLE
    return Answer(status, incumbent, answer.lower_bound, answer.notes + (f"kept the {source} plan (no better found)",))


class PhaseTimes:
    """Seconds per phase of an exact planner, for the note saying where the time went."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def phase(self, label: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[label] = self.seconds.get(label, 0.0) + time.perf_counter() - started

    def note(self) -> str:
        return "time: " + ", ".join(f"{label} {seconds:.2f} s" for label, seconds in self.seconds.items())


def _seed_exact(problem: ConfigProblem, context: Context, warm_start, timings: PhaseTimes):
    """The incumbent of an exact planner (warm start, greedy heuristics, the edge-dropping
    relaxation's plan improved by local search) and the relaxation, within HEURISTIC_SHARE of the
    time: the exact model always gets the rest, however slow the heuristics are."""
    from solver_plan.intra.relaxation import edge_dropping_relaxation
    from solver_plan.intra.simplify import memory_can_bind
    binds = memory_can_bind(problem)
    clock = context.deadline.share(BINDING_HEURISTIC_SHARE if binds else HEURISTIC_SHARE)
    relaxation = None
    with timings.phase("relaxation"):
        # the bound costs a few passes: without time for them, keep the time for a plan. Under a
        # binding limit its bound ignores memory and its plan is only a hint: half the share at most
        relaxation_clock = clock.share(0.5) if binds else clock
        if time_for_passes(relaxation_clock, problem, 3):
            relaxation = edge_dropping_relaxation(problem, relaxation_clock)
    if relaxation is not None:
        progress.report(bound=relaxation.lower_bound)
    with timings.phase("heuristics"):
        hint = context.options.get(REPAIR_HINT)
        if relaxation is not None and hint is None:
            hint = relaxation.assignment  # repaired to fit memory if needed
        context.incumbent, context.incumbent_source = best_heuristic_plan(problem, warm_start, clock, hint)
        if relaxation is not None and _usable(problem, relaxation.assignment) and not clock.expired():
            from solver_plan.intra.forest_search import improve_by_forests
            from solver_plan.intra.local_search import improve
            relaxed_plan = improve(problem, relaxation.assignment, clock)
            relaxed_plan = improve_by_forests(problem, relaxed_plan, clock, seed=context.seed)
            if context.incumbent is None or problem.objective(relaxed_plan) < problem.objective(context.incumbent):
                context.incumbent, context.incumbent_source = relaxed_plan, "edge-dropping relaxation"
    return relaxation


def run_planner(name: str, problem: ConfigProblem, core: Callable[[ConfigProblem, Context], Answer], *,
                exact: bool, time_limit: "Deadline | float | None" = None, seed: int = 0, warm_start=None,
                options: dict | None = None) -> ConfigResult:
    """Run `core` with the shared plumbing and return a `ConfigResult` (not yet validated).
    `time_limit` is seconds or a caller's `Deadline`."""
    deadline = start_clock(time_limit)
    context = Context(deadline, seed, None, dict(options or {}))
    timings = PhaseTimes()
    relaxation = None
    if exact:
        relaxation = _seed_exact(problem, context, warm_start, timings)
    elif warm_start is not None:
        context.incumbent = tuple(int(c) for c in warm_start) if _usable(problem, warm_start) else None
    if context.incumbent is not None:
        progress.report(incumbent=problem.objective(context.incumbent))
    failure = None  # why the solver failed (never a time-out): reported, never silently replaced
    try:
        with timings.phase(name):
            answer = core(problem, context)
    except InputError:
        raise
    except SolverUnavailable as exc:
        failure = f"{name}: solver unavailable: {exc}"
        answer = Answer(Status.ERROR, notes=(f"solver unavailable: {exc}",))
    except TimeoutError as exc:  # a solver killed at the wall clock: the incumbent still counts
        answer = Answer(Status.TIME_LIMIT, notes=(failure_note(name, exc),))
    except Exception as exc:  # a failing backend must not lose the heuristic answer
        _log_traceback(name)
        failure = failure_note(name, exc)
        answer = Answer(Status.ERROR, notes=(failure,))
    if answer.assignment is not None and not _usable(problem, answer.assignment):
        answer = Answer(Status.ERROR, None, answer.lower_bound,
                        answer.notes + ("the planner's plan is invalid or breaks the memory limit; discarded",))
    if failure is None and answer.status is Status.ERROR and exact:
        # an exact solver that answered ERROR failed; a heuristic without a plan did not (diagnosed below)
        failure = f"{name} failed ({'; '.join(answer.notes) or 'no message'})"
    if exact:
        answer = _keep_incumbent_if_better(problem, answer, context.incumbent, context.incumbent_source)
        answer = replace(answer, notes=answer.notes + (timings.note(),))
    if answer.assignment is None:
        answer = _diagnose(problem, deadline, answer, name)
    if relaxation is not None and answer.assignment is not None and (
            answer.lower_bound is None or answer.lower_bound < relaxation.lower_bound):
        answer = replace(answer, lower_bound=relaxation.lower_bound,
                         notes=answer.notes + ("bound from the edge-dropping relaxation",))
    result = _finish(problem, name, answer, deadline)
    if failure is not None:
        result = replace(result, solver_failure=failure)
    progress.report(result.objective, result.lower_bound)
    return result


def _log_traceback(name: str) -> None:
    """Tracebacks go to the debug log, never into results users read."""
    import logging
    logging.getLogger("solver_plan.intra").debug("%s failed:\n%s", name, traceback.format_exc())


def _child(func, args, connection) -> None:
    from solver_plan.intra.isolated import die_with_parent, redirect_solver_output
    os.setpgid(0, 0)  # own process group, so a time-out also ends the solver processes it starts
    die_with_parent()
    redirect_solver_output()
    try:
        connection.send(("ok", func(*args)))
    except BaseException as exc:  # report every failure to the parent
        connection.send(("error", repr(exc)))
    finally:
        connection.close()


def call_in_subprocess(func: Callable, args: tuple, timeout: float | None):
    """Run func(*args) in a forked child; kill its whole process group if it exceeds `timeout`.
    Raises TimeoutError on time-out and RuntimeError if the child fails."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(func, args, sender), daemon=True)
    process.start()
    sender.close()
    try:
        wait = None if timeout is None else timeout + SUBPROCESS_GRACE_S
        if not receiver.poll(wait):
            raise TimeoutError(f"killed after {wait:.1f} s of wall clock")
        kind, payload = receiver.recv()
    except EOFError:
        raise RuntimeError(f"solver process died (exit code {process.exitcode})") from None
    finally:
        if process.is_alive():
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.join(1.0)
        receiver.close()
    if kind == "error":
        raise RuntimeError(payload)
    return payload


def checked(problem: ConfigProblem, result: ConfigResult) -> ConfigResult:
    """The result if the independent validator accepts it, else an ERROR result saying why."""
    from dataclasses import replace

    from solver_plan.intra.validate import validate_config_result
    problems = validate_config_result(problem, result)
    if not problems:
        return result
    return replace(result, status=Status.ERROR, objective=None, lower_bound=None, assignment=None,
                   notes=result.notes + tuple(f"invalid: {p}" for p in problems))


def _reduce_and_run(problem: ConfigProblem, func: Callable, time_limit, seed: int, warm_start, options) -> ConfigResult:
    """Simplify exactly, run `func` on the reduced problem and decode its plan to `problem`."""
    from dataclasses import replace

    from solver_plan.intra.simplify import simplify
    if isinstance(time_limit, Deadline) and not time_for_passes(time_limit, problem, 2):
        # simplification is exact but optional: with too little time, plan the problem as it is
        result = func(problem, time_limit=seconds_left(time_limit), seed=seed, warm_start=warm_start, **options)
        return replace(result, notes=result.notes + ("not simplified (too little time left)",))
    reduced = simplify(problem, deadline=time_limit if isinstance(time_limit, Deadline) else None)
    reduced_start = reduced.encode(warm_start) if warm_start is not None else None
    if REPAIR_HINT in options:
        options = {**options, REPAIR_HINT: reduced.encode(options[REPAIR_HINT])}
    result = func(reduced.problem, time_limit=seconds_left(time_limit), seed=seed, warm_start=reduced_start,
                  **options)
    notes = tuple(note for note in result.notes if not note.startswith("cost breakdown:")) + (reduced.describe(),)
    if result.assignment is None:
        return replace(result, notes=notes)
    plan = reduced.decode(result.assignment)  # the breakdown of folded costs means nothing: redo it
    return replace(result, assignment=plan, objective=problem.objective(plan),
                   notes=notes + (cost_breakdown_note(problem, plan),))


def run_simplified(problem: ConfigProblem, func: Callable, *, exact: bool, time_limit: float | None, seed: int,
                   warm_start, options: dict) -> ConfigResult:
    """Run `func` on the exactly simplified problem. When the memory limit could bind (which stops
    most folding), first solve without it (using at most MEMORY_FREE_SHARE of the time): an
    unconstrained optimum that fits in memory is the constrained optimum; a fitting heuristic plan
    becomes a warm start."""
    from dataclasses import replace

    from solver_plan.intra.simplify import memory_can_bind
    deadline = start_clock(time_limit)
    # The memory-free pass costs about as much as the real one: only when time is plentiful (at
    # 10,000 operators and 60 s it took its whole share and gave nothing the Lagrangian does not).
    if memory_can_bind(problem) and time_for_passes(deadline, problem, MEMORY_FREE_PASSES):
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
    if memory_free_s >= 0.01:
        result = replace(result, notes=result.notes + (f"memory-free pass first: {memory_free_s:.2f} s",))
    return replace(result, runtime_s=deadline.elapsed())
