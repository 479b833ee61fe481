"""FlexFlow's MCMC strategy search (SysML'19, section 6): Metropolis-Hastings over single-operator
changes.

A proposal gives one random operator a random candidate configuration; it is accepted with
probability min(1, exp(beta (cost(S) - cost(S*)))). Proposals over the memory limit are rejected.
Chains start from each initial candidate in turn -- the warm start, data parallelism, the best
other registered heuristic (greedy, single device, ...), and a random strategy -- and share the
budget equally: proposals (`iterations`, default DEFAULT_PROPOSALS) decide how long a chain runs
(it stops early when it has not improved its best for half of its proposals); the wall clock
(`deadline`, default DEFAULT_SECONDS) is only a safety net, and a chain it stops marks the result
as cut short. The default beta is 20 / cost(initial): a proposal 5% worse than
the chain's start is accepted with probability 1/e. The cost is the simulated iteration time
(objective="simulator", needs problem.context) or the sum cost model (objective="sum"); the
reported objective is always the problem's sum cost, so every planner is compared on one scale,
and the simulated time is a note. The same seed and budget give the same answer unless the wall
clock cuts a chain short (then the result says so). simulation="full" rebuilds and re-simulates the whole task graph per proposal
(for benchmarks).
"""
from __future__ import annotations

import math
import random
import time

from solver_plan.deadline import GRACE_S, WORK_UNIT_S, Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.intra.answer import Answer
from solver_plan.intra.clock import start_clock
from solver_plan.intra.diagnose import diagnose
from solver_plan.intra.memory import can_fit
from solver_plan.intra.edge_drop import relaxation_fits
from solver_plan.intra.memory_tracker import MemoryTracker
from solver_plan.intra.problem import ConfigProblem
from solver_plan.planners import planners
from solver_plan.result import ConfigResult, Status
from solver_plan.units import format_seconds
from solver_plan.simulate.objectives import (
    SimulatedObjective,
    SumObjective,
    simulatable,
)

DEFAULT_PROPOSALS = 4000  # the budget is proposals and seconds, whichever runs out first
DEFAULT_SECONDS = 60.0
HEURISTIC_SHARE = 0.3  # of the time, at most, for the other heuristics' starting plans
_skipped: set[str] = set()  # heuristics the last search had no time for
MAX_SIMULATION_CELLS = 50_000  # operators x devices simulated at most (measured: 74k took minutes, 6 GB)
SIMULATION_CELLS_PER_S = 5_000  # ... and at most this many per second of the time limit


# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU) of one proposal
# on the sum objective: a node's terms priced twice and a memory check (measured 12 and 21 us over
# 3,000 proposals on gpt3-175B on 64 and 1,024 devices; charged above both, as chains also copy
# their best plan). The simulated objective's proposals are counted (`iterations`) but not priced:
# its task graphs are kept small (`_simulation_cells`).
SUM_PROPOSAL_UNITS = 30.0


def _affordable_proposals(deadline: Deadline, objective: str) -> int | None:
    """Proposals the nominal budget left pays for on the sum objective (None: no cap), at least one
    per start: decided by the budget, so a loaded machine runs the same chains."""
    budget = deadline.nominal_left()
    if budget is None or objective != "sum":
        return None
    return max(1, int(budget / (SUM_PROPOSAL_UNITS * WORK_UNIT_S)))


def _simulation_cells(deadline: Deadline) -> float:
    budget = deadline.nominal_left()  # the budget, not the clock, decides: the same on a loaded machine
    return MAX_SIMULATION_CELLS if budget is None else min(MAX_SIMULATION_CELLS, SIMULATION_CELLS_PER_S * budget)


def _heuristic_plans(problem: ConfigProblem, deadline: Deadline | None = None) -> list[tuple[str, tuple[int, ...]]]:
    """Plans of every registered non-exact planner but this one, cheapest (sum cost) first; they
    share at most HEURISTIC_SHARE of the budget left, so the chains keep the rest: each runs on
    what the ones before it left (a planner's clock spends from it, `start_clock`) and none starts
    once it is spent; edge-drop runs only where that pays for its relaxation (otherwise it would
    return the greedy plans, `edge_drop.relaxation_fits`). Decided by the nominal budget; the wall
    clock only stops them past its grace (marking the answer cut short)."""
    plans = []
    _skipped.clear()
    # its work budget, not a wall clock already shortened by a slow start, decides what runs
    budget = Deadline(None) if deadline is None else deadline.work_share(HEURISTIC_SHARE)
    for name, info in planners("config").items():
        if info.exact or name == "mcmc" or info.objective != "sum":
            continue
        left = budget.nominal_left()
        if name == "edge-drop" and not relaxation_fits(budget, problem):
            continue  # not a plan lost: it would return the greedy plans, which greedy gives
        if (left is not None and left <= 0.0) or budget.overrun(GRACE_S):
            _skipped.add(name)
            continue
        result = info.func(problem, deadline=budget)
        if result.assignment is not None and problem.memory_ok(result.assignment):
            plans.append((problem.objective(result.assignment), name, tuple(result.assignment)))
    return [(name, plan) for _, name, plan in sorted(plans)]


def _initial_candidates(problem: ConfigProblem, warm_start, rng: random.Random,
                        deadline: Deadline | None = None) -> list[tuple[str, tuple[int, ...]]]:
    """The warm start, data parallelism, the best other heuristic, and a random strategy."""
    found = []
    if warm_start is not None:
        found.append(("warm start", tuple(int(c) for c in warm_start)))
    heuristics = _heuristic_plans(problem, deadline)
    found += [h for h in heuristics if h[0] == "data-parallel"]
    found += [h for h in heuristics if h[0] != "data-parallel"][:1]
    found.append(("random", tuple(rng.randrange(len(c)) for c in problem.node_costs)))
    valid = []
    for source, plan in found:
        if len(plan) == problem.num_nodes and all(0 <= c < len(problem.node_costs[i]) for i, c in enumerate(plan)) \
                and problem.memory_ok(plan) and plan not in [p for _, p in valid]:
            valid.append((source, plan))
    return valid


class _Budget:
    """A chain's share of proposals (spent, or idle -- no gain -- for half of it) and its wall
    clock, the safety net: a chain the clock stops marks it `cut_short`."""

    def __init__(self, proposals: int, clock: Deadline):
        self.proposals, self.clock = proposals, clock
        self.made = self.last_gain = 0

    def gained(self) -> None:
        self.last_gain = self.made

    def over(self) -> bool:
        if self.made >= self.proposals or self.made - self.last_gain > self.proposals / 2:
            return True
        return self.clock.overrun(GRACE_S)


def _chain(objective, problem: ConfigProblem, start: tuple[int, ...], rng: random.Random, beta: float | None,
           budget: _Budget) -> tuple[float, tuple[int, ...]]:
    """One Metropolis-Hastings chain; returns (best cost, best assignment)."""
    cost = objective.load(start)
    best, best_plan = cost, tuple(start)
    scale = beta if beta is not None else (20.0 / cost if cost > 0 else 1.0)
    memory = MemoryTracker(problem, start)
    choices = [len(c) for c in problem.node_costs]
    movable = [i for i, k in enumerate(choices) if k > 1]
    while movable and not budget.over():
        budget.made += 1
        node = rng.choice(movable)
        old = objective.assignment[node]
        new = rng.randrange(choices[node] - 1)
        new += new >= old  # a different candidate, uniformly
        if not memory.fits_change(node, old, new):
            continue
        trial = objective.change(node, new)
        if trial <= cost or rng.random() < math.exp(scale * (cost - trial)):
            cost = trial
            memory.change(node, old, new)
            if cost < best:
                best, best_plan = cost, tuple(objective.assignment)
                budget.gained()
        else:
            objective.undo()
    return best, best_plan


def check_mcmc_options(options: dict) -> None:
    """Option values, checked by the registry before any work (and again when the planner starts)."""
    objective = options.get("objective", "simulator")
    simulation = options.get("simulation", "delta")
    iterations, beta = options.get("iterations"), options.get("beta")
    if objective not in ("simulator", "sum"):
        raise InputError(f"must be 'simulator' or 'sum', got {objective!r}", "objective")
    if simulation not in ("delta", "full"):
        raise InputError(f"must be 'delta' or 'full', got {simulation!r}", "simulation")
    if iterations is not None and (isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1):
        raise InputError(f"must be a positive integer, got {iterations!r}", "iterations")
    if beta is not None and (isinstance(beta, bool) or not (isinstance(beta, (int, float)) and beta > 0)):
        raise InputError(f"must be a positive number, got {beta!r}", "beta")


def plan_mcmc(problem: ConfigProblem, *, deadline: Deadline | None = None, seed: int = 0,
              warm_start=None, iterations: int | None = None, objective: str = "simulator",
              beta: float | None = None, simulation: str = "delta", **options) -> ConfigResult:
    """Planner "mcmc": FlexFlow's Metropolis-Hastings search over single-operator changes (FlexFlow
    section 6, ../shared/papers/flexflow-soap-simulator.md), on the simulated step time or the sum
    cost; reports the sum objective so every planner is on one scale."""
    started = time.perf_counter()
    deadline = start_clock(time_budget(DEFAULT_SECONDS) if deadline is None else deadline)
    check_mcmc_options({"iterations": iterations, "objective": objective, "beta": beta, "simulation": simulation})
    rng = random.Random(seed)
    notes = []
    if objective == "simulator" and not simulatable(problem):
        objective = "sum"
        notes.append("no graph to simulate (synthetic or simplified problem): searched the sum cost model")
    if objective == "simulator" and problem.num_nodes * problem.num_devices > _simulation_cells(deadline):
        # one simulation of the task graph is not interruptible and grows with operators x devices
        # (gpt3-175B on 64 devices: minutes and GBs per proposal): search the cost model instead
        objective = "sum"
        notes.append(f"task graph of {problem.num_nodes} operators x {problem.num_devices} devices too big to "
                     f"simulate within the time limit: searched the sum cost model")
    if not can_fit(problem):  # no plan can fit memory: no start to search from (harness.run_planner likewise)
        answer = diagnose(problem, deadline, Answer(Status.TIME_LIMIT, notes=(
            "mcmc not run: no plan can fit the memory limit",)), "mcmc")
        return ConfigResult("mcmc", answer.status, None, answer.lower_bound, time.perf_counter() - started,
                            None, answer.notes)
    scorer = (SimulatedObjective(problem, *problem.context, delta=simulation == "delta")
              if objective == "simulator" else SumObjective(problem))
    starts = _initial_candidates(problem, warm_start, rng, deadline)
    if not starts and (_skipped or deadline.expired()):
        return ConfigResult("mcmc", Status.TIME_LIMIT, runtime_s=time.perf_counter() - started,
                            notes=("time out before any initial strategy fitting memory was found",))
    if not starts:  # diagnosed as every other planner without a plan: INFEASIBLE with the least memory
        # any plan needs, or the least-memory plan where one fits (a heuristic finding nothing has not failed)
        answer = diagnose(problem, deadline, Answer(Status.ERROR, notes=(
            "no initial strategy (data parallel, greedy, random) fits the memory limit",)), "mcmc")
        objective = None if answer.assignment is None else problem.objective(answer.assignment)
        return ConfigResult("mcmc", answer.status, objective, answer.lower_bound, time.perf_counter() - started,
                            answer.assignment, answer.notes)
    iterations = DEFAULT_PROPOSALS if iterations is None else iterations
    affordable = _affordable_proposals(deadline, objective)
    if affordable is not None and affordable < iterations:
        notes.append(f"{affordable} proposals (of {iterations}): what the work budget left pays for")
        iterations = affordable
    share_n = max(1, iterations // len(starts))
    best = None
    for index, (source, start) in enumerate(starts):
        if best is not None and deadline.overrun(GRACE_S):
            break
        # the wall clock left is shared by the chains still to run; proposals decide the answer
        chain_clock = deadline.work_share(1 / (len(starts) - index))
        cost, plan = _chain(scorer, problem, start, rng, beta, _Budget(share_n, chain_clock))
        if best is None or cost < best[0]:
            best = (cost, plan, source)
    cost, plan, source = best
    unit = "simulated iteration" if objective == "simulator" else "sum cost"
    notes.append(f"{unit} {format_seconds(cost)} (best chain started from {source}; {objective} objective)")
    return ConfigResult("mcmc", Status.FEASIBLE, problem.objective(plan), None, time.perf_counter() - started,
                        tuple(int(c) for c in plan), tuple(notes))
