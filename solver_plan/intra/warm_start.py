"""The incumbent a planner starts from: the warm start and the greedy plans (`best_heuristic_plan`),
and for exact planners also the edge-dropping relaxation's plan improved by local search, all
within HEURISTIC_SHARE of the time (`seed_exact`)."""
from __future__ import annotations

from solver_plan.deadline import GRACE_S, Deadline
from solver_plan.intra import progress
from solver_plan.intra.clock import PhaseTimes, time_for_passes
from solver_plan.intra.context import REPAIR_HINT, Context
from solver_plan.intra.forest_search import improve_by_forests
from solver_plan.intra.greedy_plans import greedy_pass_seconds, heuristic_plans
from solver_plan.intra.local_search import improve
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.relaxation import Relaxation, edge_dropping_relaxation
from solver_plan.intra.simplify import memory_can_bind

# Exact planners: the warm-start heuristics and the edge-dropping relaxation get at most this share
# of the time; the exact model always gets the rest (at 10,000 operators under a binding memory
# limit, repair and local search had used all of it and the MILP never ran).
HEURISTIC_SHARE = 0.3
# ... 15% under a memory limit that can bind, where the Lagrangian of milp finds better plans (at
# 10,000 operators the greedy plan was 13% above its bound, the Lagrangian's ~1%)
BINDING_HEURISTIC_SHARE = 0.15
# The wall clock of that share (the safety net; its work is sized by the nominal share): 40% of the
# time left: so the greedy passes that must run finish where their work exceeds the share (0.53-0.72 s
# of CPU against 0.36 s nominal on 10,000 operators at 3 s, where a wall clock of the share's 15% cut
# them short and left their unvisited nodes at least memory), and the exact model keeps the rest
# whatever the heuristics do.
HEURISTIC_WALL_SHARE = 0.4
# ... or, where longer, the greedy pass and the reserving greedy (which must run) at their nominal
# cost (`greedy_pass_seconds`) plus the share (at 3 s on 10,000 operators, 1.0-1.8 s of CPU for the
# heuristics, loaded: 40% of the time left cut their reserving greedy short)
MUST_RUN_PASSES = 2


def usable_plan(problem: ConfigProblem, assignment) -> bool:
    """Whether `assignment` is a plan of `problem` (one valid candidate per node) that fits memory."""
    if assignment is None or len(assignment) != problem.num_nodes:
        return False
    if any(not 0 <= c < len(problem.node_costs[i]) for i, c in enumerate(assignment)):
        return False
    return problem.memory_ok(assignment)


def best_heuristic_plan(problem: ConfigProblem, warm_start=None, deadline: Deadline | None = None,
                        hint=None) -> tuple[tuple[int, ...] | None, str]:
    """The cheapest memory-feasible plan among the warm start and the greedy heuristics."""
    options = []
    if warm_start is not None:
        warm_start = tuple(int(c) for c in warm_start)
        if usable_plan(problem, warm_start):
            options.append((problem.objective(warm_start), warm_start, "warm start"))
    for plan in heuristic_plans(problem, deadline, hint=hint):
        options.append((problem.objective(plan), plan, "greedy"))
    if not options:
        return None, "no heuristic plan"
    _, plan, source = min(options, key=lambda item: item[0])
    return plan, source


def seed_exact(problem: ConfigProblem, context: Context, warm_start, timings: PhaseTimes,
               relax: bool = True) -> Relaxation | None:
    """The incumbent of an exact planner (warm start, greedy heuristics, the edge-dropping
    relaxation's plan improved by local search) and the relaxation, within HEURISTIC_SHARE of the
    time: the exact model always gets the rest, however slow the heuristics are. `relax=False`:
    no edge-dropping relaxation, for a planner whose own relaxation makes its bound and plan useless
    (milp's root LP holds the memory rows the edge-dropping bound ignores)."""
    binds = memory_can_bind(problem)
    # sized by work (`WorkMeter`) from its nominal share; what the greedy passes that must run spend
    # beyond it is spent from the exact model's budget (`Deadline.spend`), and its wall clock, the
    # safety net, lasts HEURISTIC_WALL_SHARE of the time left
    left, fraction = context.deadline.remaining(), BINDING_HEURISTIC_SHARE if binds else HEURISTIC_SHARE
    nominal = context.deadline.nominal_left()
    must_run = MUST_RUN_PASSES * greedy_pass_seconds(problem) + (0.0 if nominal is None else fraction * nominal)
    clock = context.deadline.share(fraction, floor_s=0.0 if left is None else max(HEURISTIC_WALL_SHARE * left, must_run))
    relaxation = None
    with timings.phase("relaxation"):
        # the bound costs a few passes: without time for them, keep the time for a plan. Under a
        # binding limit its bound ignores memory and its plan is only a hint: half the share at most
        relaxation_clock = clock.share(0.5) if binds else clock
        if relax and time_for_passes(relaxation_clock, problem, 3):
            relaxation = edge_dropping_relaxation(problem, relaxation_clock)
    if relaxation is not None:
        progress.report(bound=relaxation.lower_bound)
    with timings.phase("heuristics"):
        hint = context.options.get(REPAIR_HINT)
        if relaxation is not None and hint is None:
            hint = relaxation.assignment  # repaired to fit memory if needed
        context.incumbent, context.incumbent_source = best_heuristic_plan(problem, warm_start, clock, hint)
        if relaxation is not None and usable_plan(problem, relaxation.assignment) and not clock.overrun(GRACE_S):
            relaxed_plan = improve(problem, relaxation.assignment, clock)
            relaxed_plan = improve_by_forests(problem, relaxed_plan, clock, seed=context.seed)
            if context.incumbent is None or problem.objective(relaxed_plan) < problem.objective(context.incumbent):
                context.incumbent, context.incumbent_source = relaxed_plan, "edge-dropping relaxation"
    return relaxation
