"""`milp-load`: the one-hot MILP with the load-aware objective (`intra/load_objective.py`) instead of the
sum, so concurrent branches on disjoint devices pay off. It lives in `simulate/` (above `intra/`)
because the plan it returns is chosen by the execution simulator (below).

Registered with simplify=False: node and edge elimination are exact for a sum only (a folded node
forgets which devices its members ran on). Warm start: the cheaper under the load objective of the
sum optimum (`milp`, given a share of the time), the greedy plans (where the budget pays for a
greedy pass), data parallelism, and roundings of the LP optimum, with parallel branches moved onto
disjoint device halves, each improved by local search (`intra/load_search.py`: the LP relaxation of
a max objective is too weak for branch and bound to close on real graphs in a minute); HiGHS then
improves the best with part of what time is left. The LP optimum is a proven lower bound. The
reported objective and bound are those of the load objective, which the validator recomputes
(`objective="load"` in the registry). The least work for a plan (data parallelism scored and
validated, `least_plan_seconds`) is charged to the budget by its estimate; a budget below it answers
TIME_LIMIT without a plan, one just above it (1 s on 10,000 operators) the data-parallel seed.

Where the problem can be simulated (one node per operator, graph in `problem.context`, a task
graph small enough: `refine.py`), the plan returned is chosen by the execution simulator,
not by the load objective, which is a maximum of lower bounds and misranks plans (module text of
refine.py): every plan found (seeds, the sum optimum among them, LP roundings, local search,
HiGHS) is simulated and the fastest is refined by simulated branch moves and single-operator
changes with the last SIMULATE_SHARE of the time. So the plan never simulates slower than the sum
optimum it was seeded with. Its reported objective is still its load objective, with the LP / MILP
bound; the status is OPTIMAL only when that plan is the proven load optimum, else FEASIBLE.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from solver_plan.deadline import GRACE_S, Deadline, WorkMeter
from solver_plan.intra import isolated
from solver_plan.intra.baselines import plan_data_parallel
from solver_plan.intra.clock import start_clock
from solver_plan.intra.failures import failure_note
from solver_plan.intra.greedy_plans import greedy_pass_seconds
from solver_plan.intra.highs_work import lp_iteration_limit, mip_check_limit, stopped_by_clock
from solver_plan.intra.linear_model import decode
from solver_plan.intra.load_objective import (LoadModelExpired, encode_load, load_breakdown, load_model,
                                              split_edges, topological_order)
from solver_plan.intra.load_search import branch_moves, improve_load, lp_roundings, move_seconds
from solver_plan.intra.memory import min_peak_memory
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.solve import solve
from solver_plan.intra.warm_start import best_heuristic_plan, usable_plan
from solver_plan.result import ConfigResult, Status
from solver_plan.simulate.refine import can_simulate, fastest, refine_branches, refine_nodes

SUM_SHARE = 0.15  # of the time limit for the sum optimum that seeds the search
LP_SHARE = 0.4  # of what is left, for the LP relaxation (its optimum is a bound and a guide)
SEARCH_SHARE = 0.4  # of what is left, for local search from the seeds and LP roundings
SIMULATE_SHARE = 0.6  # of what is left after local search, for choosing and refining by simulation
ROUNDINGS = 8
NAME = "milp-load"
# Building the load MILP is not interruptible and grows with the edge-matrix entries (one y column
# each, in up to 2 x devices busy rows): measured 15.6 s and 0.3 GB for 492,145 entries (1,000-node
# random DAG, 6-30 candidates, 8 devices) and 6.6 GB at 10,000 nodes. It is built only when its
# estimated time fits in BUILD_FRACTION of what is left and it stays under MAX_MODEL_ENTRIES;
# otherwise the best seed (load local search included) comes back without the MILP.
BUILD_S_PER_ENTRY = 3.2e-5
BUILD_FRACTION = 0.5
MAX_MODEL_ENTRIES = 1_000_000


# The sum MILP's seed is sought only when its share pays for this many greedy passes
# (`greedy_plans.greedy_pass_seconds`): its heuristics get 15-30% of it (`warm_start`), HiGHS the rest.
SUM_SEED_PASSES = 8.0


def sum_seed_fits(problem: ConfigProblem, nominal_s: float | None, pass_s: float | None = None) -> bool:
    """Whether a nominal share of `nominal_s` seconds pays for the sum optimum's seed (None: unlimited);
    `pass_s`: `greedy_pass_seconds(problem)` where known (it walks every node's neighbours)."""
    return nominal_s is None or nominal_s >= SUM_SEED_PASSES * (greedy_pass_seconds(problem) if pass_s is None else pass_s)


# The greedy plans are sought when the nominal budget left pays for this many greedy passes
# (`greedy_pass_seconds`; the pass, once started, runs to its end), or when data parallelism breaks
# memory (they are then the only way to a plan). Below it, data parallelism is the seed: at 1 s on
# the 10,000-operator DAG (0.3 s left, a pass charged 1.04 s) the greedy passes took the job to 1.4 s
# of CPU idle and were cut short by the clock under a profiler: the clock, not the budget, decided
# what came back.
GREEDY_SEED_PASSES = 1.0


def _seeds(problem: ConfigProblem, warm_start, deadline: Deadline,
           notes: list[str] | None = None) -> list[tuple[tuple[int, ...], str]]:
    seeds = []
    if warm_start is not None and usable_plan(problem, tuple(int(c) for c in warm_start)):
        seeds.append((tuple(int(c) for c in warm_start), "warm start"))
    # data parallelism, the baseline every plan is compared with: under a tight clock the sum
    # planner's greedy plan can be far worse under the load objective (single-device operators pile
    # onto one device), and this seed costs one candidate lookup per node (None: it breaks memory)
    data_parallel = plan_data_parallel(problem).assignment
    pass_s, nominal = greedy_pass_seconds(problem), deadline.nominal_left()
    greedy = data_parallel is None or nominal is None or nominal >= GREEDY_SEED_PASSES * pass_s
    # the sum optimum gets its share of the budget, where that pays for its heuristics' greedy passes
    # (a share too small for them only ran into the wall clock, and HiGHS with no time left)
    share = deadline.share(SUM_SHARE)
    summed = None
    if sum_seed_fits(problem, share.nominal_left(), pass_s):
        summed = solve(problem, "milp", deadline=share)
    elif notes is not None:
        notes.append("sum optimum (milp) not sought: its share of the budget does not pay for its heuristics")
    if summed is not None and summed.assignment is not None:
        seeds.append((tuple(summed.assignment), "sum optimum (milp)"))
    # the sum planner already kept the best greedy plan: run the heuristics only without its answer
    plan, source = None, ""
    if (summed is None or summed.assignment is None) and greedy:
        plan, source = best_heuristic_plan(problem, None, deadline)
    elif summed is None or summed.assignment is None:
        if notes is not None:
            notes.append(f"greedy plans not sought: the budget left does not pay for a greedy pass "
                         f"(about {pass_s:.2f} s)")
    if plan is not None:
        seeds.append((plan, source))
    if data_parallel is not None:
        seeds.append((tuple(data_parallel), "data parallel"))
    return seeds


# The least work for any plan, charged by these estimates per operator and per operator and device
# (data parallelism puts every operator on every device; a breakdown's per-device sums and the
# validator's memory check read each of them): the seed (data parallelism, the edge split and the
# seeds' load breakdowns, charged up front so what follows plans with the rest) and the finish (the
# plan's load breakdown and the validator's recomputation, kept back by `Deadline.ending_early`).
# Measured as CPU on the 2-core machine at load average 1.8-2.2 (each step timed in a fresh
# process, least of three; the constants carry a 1.5x margin): the seed 0.21 s and the finish 0.022 s on
# random-dag:nodes=10000,candidates=10-30,memory=binding,devices=16 (inside a 1 s job 0.29-0.32 s
# and 0.03-0.045 s), 0.26 s and 0.063 s on megatron-1T over 3,072 devices (1,544 operators, 4.7
# million operator-devices), 0.10 s and 0.017 s on gpt3-175B over 1,024. Before the split and the
# breakdown were array code (b053265) the 10,000-operator DAG's least work took 1.65 s, and at 1 s
# that job refused.
SEED_S_PER_NODE, SEED_S_PER_NODE_DEVICE = 3e-5, 7e-8
FINISH_S_PER_NODE, FINISH_S_PER_NODE_DEVICE = 5e-6, 2e-8


def seed_seconds(problem: ConfigProblem) -> float:
    """Nominal seconds of the seed's least work (SEED_S_PER_NODE and SEED_S_PER_NODE_DEVICE)."""
    return problem.num_nodes * (SEED_S_PER_NODE + SEED_S_PER_NODE_DEVICE * problem.num_devices)


def finish_seconds(problem: ConfigProblem) -> float:
    """Nominal seconds of scoring and validating the plan (FINISH_S_PER_NODE and FINISH_S_PER_NODE_DEVICE)."""
    return problem.num_nodes * (FINISH_S_PER_NODE + FINISH_S_PER_NODE_DEVICE * problem.num_devices)


def least_plan_seconds(problem: ConfigProblem) -> float:
    """The least work for any plan: `seed_seconds` + `finish_seconds`. A nominal budget below it by
    more than GRACE_S answers TIME_LIMIT without a plan, saying so, rather than overrun the limit by
    seconds; on small problems a plan costs milliseconds and an expired budget still gets one."""
    return seed_seconds(problem) + finish_seconds(problem)


def model_entries(problem: ConfigProblem) -> int:
    """Edge-matrix entries: the y columns of the load MILP, which dominate its size."""
    return int(sum(matrix.size for matrix in problem.edge_costs))


def model_fits(problem: ConfigProblem, deadline: Deadline) -> str | None:
    """None if the load MILP may be built now, else why not: its estimated build (edge entries and
    the per-device terms of its busy and moved rows, `model_seconds`) must fit BUILD_FRACTION of
    the nominal budget left."""
    entries = model_entries(problem)
    if entries > MAX_MODEL_ENTRIES:
        return f"load MILP not built: {entries:,} edge entries exceed {MAX_MODEL_ENTRIES:,} (memory)"
    budget = deadline.nominal_left()  # decided by the budget, not the clock: the same on a loaded machine
    if budget is None:
        return None
    seconds = model_seconds(problem)
    if seconds > BUILD_FRACTION * budget:
        return (f"load MILP not built: {entries:,} edge entries and {device_terms(problem):,} per-device terms take "
                f"about {seconds:.1f} s, over {BUILD_FRACTION:.0%} of its {budget:.1f} s budget")
    return None


# One candidate on one device: a term in each of the busy, moved (and busy + sync) rows, ~0.4 us each
# (megatron-1T on 3,072 devices: 12.7 s for two passes of 15 million terms, loaded 2-core machine).
BUILD_S_PER_DEVICE_TERM = 1.3e-6


def device_terms(problem: ConfigProblem) -> int:
    """Candidates times their devices: the per-device terms of the load MILP's busy and moved rows."""
    return sum(len(devices) for node in problem.node_devices for devices in node)


def model_seconds(problem: ConfigProblem) -> float:
    """Estimated seconds to build the load MILP (`load_objective.load_model`)."""
    return model_entries(problem) * BUILD_S_PER_ENTRY + device_terms(problem) * BUILD_S_PER_DEVICE_TERM


def _highs(model, clock: Deadline, start=None, seed=0, relax_first=True):
    """HiGHS on `model` within `clock`: its work limits from the nominal budget (`highs_work`), the
    wall clock the safety net (a stop by it marks `clock` cut short)."""
    remaining = clock.remaining()
    # margin for shipping a model of ~10^5 columns to the worker, and the LP phase's overrun
    solver_limit = None if remaining is None else max(0.05, 0.85 * remaining - 1.0)
    try:
        outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs", timeout=remaining,
                                model=model, time_limit=solver_limit, start_values=start, seed=seed,
                                relax_first=relax_first, iteration_limit=lp_iteration_limit(model, clock.nominal_left()),
                                check_limit=mip_check_limit(model, clock.nominal_left()))
    except TimeoutError:
        clock.mark_cut_short()
        raise
    if stopped_by_clock(outcome.status, outcome.notes):
        clock.mark_cut_short()
    return outcome


def _relaxation(problem, load, deadline: Deadline, seed: int, notes: list[str]):
    """(LP bound or None, plans from rounding the LP optimum and improving them by local search)."""
    lp = replace(load.model, integer=np.zeros_like(load.model.integer))
    try:
        outcome = _highs(lp, deadline.share(LP_SHARE), relax_first=False)
    except Exception as exc:  # the rounding is a heuristic: without it the MILP still runs
        notes.append(failure_note("LP relaxation", exc))
        return None, []
    if outcome.status != Status.OPTIMAL or outcome.x_values is None:
        notes.append(f"LP relaxation: {outcome.status.value.lower()}")
        return None, []
    plans = lp_roundings(problem, outcome.x_values, load.model.node_offsets, ROUNDINGS, seed)
    return float(outcome.objective), [p for p in dict.fromkeys(plans) if usable_plan(problem, p)]


def plan_milp_load(problem: ConfigProblem, *, deadline: Deadline | None = None, seed=0, warm_start=None,
                   **options) -> ConfigResult:
    """`deadline`: the caller's budget (time already spent counts). On a time-out the best plan so
    far comes back (TIME_LIMIT) with the LP bound when there was time for it."""
    clock = start_clock(deadline)
    budget, least = clock.nominal_left(), least_plan_seconds(problem)
    if budget is not None and budget + GRACE_S < least:  # decided by the budget: the same answer idle or loaded
        return ConfigResult(NAME, Status.TIME_LIMIT, runtime_s=clock.elapsed(), notes=(
            f"no plan: the least work for one on {problem.num_nodes:,} operators (a seed, its load breakdown "
            f"and validation, about {least:.2f} s) exceeds the {budget:.2f} s budget left",))
    # keep time to score the plan and validate it afterwards; the seed's work is charged up front
    deadline = clock.ending_early(finish_seconds(problem))
    deadline.spend(seed_seconds(problem))
    if topological_order(problem) is None:
        return ConfigResult(NAME, Status.ERROR, runtime_s=deadline.elapsed(),
                            notes=("the load objective needs acyclic edges (a critical path)",))
    notes: list[str] = []
    seeds = _seeds(problem, warm_start, deadline, notes)
    skipped = model_fits(problem, deadline)
    if skipped is not None:
        notes.append(skipped)
        return _seed_only(problem, seeds, deadline, notes)
    try:
        load = load_model(problem, deadline)
    except LoadModelExpired:  # its rows grow with edges x devices: the seeds stand
        notes.append("load MILP build stopped at the time limit")
        return _seed_only(problem, seeds, deadline, notes)
    lp_bound, rounded = _relaxation(problem, load, deadline, seed, notes)
    seeds += [(plan, "LP rounding") for plan in rounded]
    search = deadline.work_share(SEARCH_SHARE)  # sized by move counts (`improve_load`)
    improved = []
    for plan, origin in list(seeds[:3]):
        moved = branch_moves(problem, load.split, plan, search.share(0.3))
        if moved != plan:
            seeds.append((moved, f"{origin} + branch moves"))
    for plan, origin in sorted(seeds, key=lambda s: load_breakdown(problem, s[0], load.split).objective):
        if search.overrun(GRACE_S):
            break
        better = improve_load(problem, load.split, plan, search.work_share(0.5))
        improved.append((better, f"{origin} + local search"))
    seeds += improved
    simulate = can_simulate(problem)
    incumbent, source = None, ""
    if seeds:
        incumbent, source = min(seeds, key=lambda s: load_breakdown(problem, s[0], load.split).objective)
    assignment, bound, status = incumbent, lp_bound, Status.FEASIBLE if incumbent is not None else Status.ERROR
    failure = None  # why HiGHS failed (not a time-out): the result says so, never silently
    milp_clock = deadline.share(1 - SIMULATE_SHARE) if simulate else deadline
    remaining = milp_clock.remaining()
    if remaining is not None and remaining <= 0.5:  # the wall clock, not the budget, skips the MILP: say so
        milp_clock.mark_cut_short()
    if remaining is None or remaining > 0.5:
        start = encode_load(load, problem, incumbent) if incumbent is not None else None
        try:
            # the LP was solved above: by default go straight to branch and bound
            outcome = _highs(load.model, milp_clock, start, seed, options.get("relax_first", False))
        except TimeoutError as exc:  # killed at the wall clock: the seed plan stands
            outcome = None
            notes.append(failure_note("HiGHS", exc))
        except Exception as exc:  # a failing solver must not lose the seed plan, and says so
            outcome = None
            failure = failure_note(f"{NAME} (HiGHS)", exc)
            notes.append(failure)
        if outcome is not None:
            notes.extend(outcome.notes)
            if outcome.bound is not None:
                bound = outcome.bound if bound is None else max(bound, outcome.bound)
            found = decode(load.model, outcome.x_values) if outcome.x_values is not None else None
            if found is not None and usable_plan(problem, found):
                seeds.append((tuple(found), "HiGHS"))
            if found is not None and usable_plan(problem, found) and (
                    incumbent is None or load_breakdown(problem, found, load.split).objective
                    <= load_breakdown(problem, incumbent, load.split).objective):
                assignment, source = found, "HiGHS"
            status = (outcome.status if outcome.status in (Status.OPTIMAL, Status.TIME_LIMIT, Status.INFEASIBLE)
                      else Status.FEASIBLE)
    else:
        status = Status.TIME_LIMIT
    if assignment is None:  # no plan at all: the same diagnosis as without seeds (least memory, or out of time)
        return replace(_seed_only(problem, [], deadline, notes), solver_failure=failure)
    if simulate and not deadline.expired():
        assignment, source = _by_simulation(problem, seeds, assignment, source, deadline, notes)
    parts = load_breakdown(problem, assignment, load.split)
    if bound is not None:
        bound = min(float(bound), parts.objective)
    if status is Status.INFEASIBLE:  # the seed fits memory, so the solver's claim is wrong
        status, bound = Status.FEASIBLE, None
    if status is Status.OPTIMAL and (bound is None or parts.objective - bound > 1e-6 * max(1.0, parts.objective)):
        status = Status.FEASIBLE
    notes += [f"plan from {source}", parts.describe()]
    return ConfigResult(NAME, status, parts.objective, bound, deadline.elapsed(), tuple(assignment), tuple(notes),
                        solver_failure=failure)


def _by_simulation(problem: ConfigProblem, seeds, incumbent, source: str, deadline: Deadline,
                   notes: list[str]) -> tuple[tuple[int, ...], str]:
    """The fastest plan in simulation among the seeds and the load incumbent, refined by
    simulated branch moves and single-operator changes (simulate/refine.py) until the deadline."""
    pool = [(tuple(incumbent), source)] + [(tuple(p), s) for p, s in seeds if usable_plan(problem, tuple(p))]
    ranked = fastest(problem, pool, deadline)
    by_source = {s: t for t, _, s in ranked}
    seconds, plan, origin = ranked[0]
    notes.append(f"simulated step {seconds * 1e3:.6g} ms: fastest of {len(ranked)} plans ({origin}); "
                 f"load incumbent ({source}) {by_source.get(source, float('nan')) * 1e3:.6g} ms")
    refined_s, refined = refine_branches(problem, plan, deadline.share(0.75))
    refined_s, refined = refine_nodes(problem, refined, deadline)
    if refined_s < seconds:
        notes.append(f"simulated step {refined_s * 1e3:.6g} ms after simulated branch and operator moves")
        return refined, f"{origin} + simulated moves"
    return plan, origin


# Local search from the best seed runs when its share pays for this many tried moves (`move_seconds`):
# fewer try the candidates of the first few operators only (1 s on the 10,000-operator DAG paid 5,
# each a re-timing of the graph: the wall clock, not the budget, then decided whether they ran).
LEAST_SEARCH_MOVES = 64


def search_fits(problem: ConfigProblem, deadline: Deadline) -> bool:
    """Whether SEARCH_SHARE of the nominal budget left pays for LEAST_SEARCH_MOVES local-search moves."""
    budget = deadline.nominal_left()
    return budget is None or SEARCH_SHARE * budget >= LEAST_SEARCH_MOVES * move_seconds(problem)


def _seed_only(problem: ConfigProblem, seeds, deadline: Deadline, notes: list[str]) -> ConfigResult:
    """The best seed under the load objective, improved by load local search while time is left."""
    if not seeds:  # no heuristic plan fits memory: say whether any plan could (as the harness does)
        status, why = Status.TIME_LIMIT, "no plan found within the time limit"
        if problem.memory_limit is not None:
            left = deadline.remaining()
            peak = min_peak_memory(problem, None if left is None else max(left, 0.05), float(problem.memory_limit))
            if peak.lower_bound > problem.memory_limit * (1 + 1e-9):
                status, why = Status.INFEASIBLE, peak.describe(float(problem.memory_limit))
        return ConfigResult(NAME, status, None, None, deadline.elapsed(), None, tuple(notes + ["no seed plan", why]))
    split = split_edges(problem)
    # ranked even when the clock has run out: a breakdown per seed is milliseconds (8 ms for
    # Inception-v3's 312 operators), and returning the first seed unranked returned a plan 4x
    # slower than data parallelism at --time-limit 1
    scored = [(load_breakdown(problem, plan, split), plan, source) for plan, source in dict(seeds).items()]
    parts, plan, source = min(scored, key=lambda item: item[0].objective)
    meter = WorkMeter(deadline)
    if search_fits(problem, deadline) and not meter.clock_out():  # the budget decides; the clock only past its grace
        better = improve_load(problem, split, plan, deadline.work_share(SEARCH_SHARE))
        if better != plan:
            better_parts = load_breakdown(problem, better, split)
            if better_parts.objective < parts.objective:
                parts, plan, source = better_parts, better, f"{source} + local search"
    if can_simulate(problem) and not deadline.expired():  # as after the MILP: the plan by simulation
        chosen, source = _by_simulation(problem, list(seeds), plan, source, deadline, notes)
        if tuple(chosen) != tuple(plan):
            plan, parts = chosen, load_breakdown(problem, chosen, split)
    status = Status.TIME_LIMIT if deadline.remaining() is not None else Status.FEASIBLE
    notes += [f"plan from {source}", parts.describe()]
    return ConfigResult(NAME, status, parts.objective, None, deadline.elapsed(), tuple(plan), tuple(notes))
