"""Before an exact model under a binding memory limit: the Lagrangian bound, a better incumbent, and
the model restricted to the candidates the multipliers leave open.

1. `lagrangian_dual` (a share of the time) gives a bound, minimisers and per-candidate bounds.
2. The best-bound minimiser repaired to fit (memory_repair) and the minimisers that fit memory
   are improved by local search, the cheapest then by forest search; it, or the plan passed in if
   cheaper, is the incumbent. The Lagrangian gets LAGRANGIAN_SHARE of the time, LARGE_MODEL_SHARE
   when the model would be too big for the MILP to do anything with the rest.
3. Where the model on what the Lagrangian leaves open is too big for the MILP (LARGE_MODEL_ENTRIES
   edge entries) and a MILP solver is given, the MILP on the Lagrangian's support (support_plan:
   SUPPORT_WIDTH candidates per node with the least bounds, and the incumbent's) improves the
   incumbent where the nominal budget leaves it SUPPORT_MIN_S (random-dag:nodes=10000 binding at
   120 s: 0.155% gap, 0.423% without it); with less, and a solver for its LP, the MILP on the
   neighbourhood of the support's LP does (support_plan.neighbourhood_plan; at 60 s 0.05-0.06%,
   0.081% without it); milp then builds no model on the open candidates.
4. Every candidate whose Lagrangian bound is not below the incumbent's cost is in no cheaper plan:
   the exact model is built on the others only (Lagrangian reduced-cost fixing). Its optimum is the
   problem's optimum, and min(its proven bound, the incumbent's cost) is a proven bound for the
   problem: a plan outside the restriction costs at least the incumbent.
`Restriction` and `restrict_by` serve any relaxation with per-candidate bounds (`FixingBounds`): the
root LP's (lp_fixing) also closes pairs of candidates on an edge.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from solver_plan.deadline import WorkMeter
from solver_plan.intra.answer import Answer
from solver_plan.intra.forest_search import improve_by_forests
from solver_plan.intra.lagrangian import ROUNDING_SLACK, lagrangian_dual, restricted
from solver_plan.intra.local_search import improve
from solver_plan.intra.memory import can_fit
from solver_plan.intra.memory_repair import FINE_ROUNDS, repair_memory
from solver_plan.intra.pair_search import improve_by_pairs
from solver_plan.intra.problem import ConfigProblem
from solver_plan.intra.support_plan import SolveLp, SolveModel, neighbourhood_plan, support_plan
from solver_plan.result import Status
from solver_plan.units import format_seconds

LAGRANGIAN_SHARE = 0.5  # of the time the exact planner has left
REPAIR_SHARE = 0.85  # of the Lagrangian's remaining time, for repairing its best minimiser (see ASCENT_SHARE)
# A MILP with more edge entries than this does nothing in a minute on two cores (10,000 operators:
# ~4.5 million; the model is not even shipped to the solver in time): the Lagrangian gets most time.
LARGE_MODEL_ENTRIES = 2_000_000
LARGE_MODEL_SHARE = 0.8
# ... or this share, where what the Lagrangian would leave is too little for the MILP on its support
LARGEST_SHARE = 0.95
SUPPORT_WIDTH = 2  # candidates per node in the Lagrangian's support (with the incumbent's: ~2.6)
# of the time left after the Lagrangian, for the MILP on its support: the model on the open candidates
# is then too big to be worth building (milp answers with the support's plan)
SUPPORT_SHARE = 0.95
# Nominal seconds the MILP on the Lagrangian's support needs to find anything at 10,000 operators
# (measured, 2 shared cores: nothing in 10 s, -0.06% in 20 s); below, the Lagrangian gets the time.
SUPPORT_MIN_S = 20.0
# ... and where a solver for the support's LP is given too, the Lagrangian gets this share instead of
# LARGEST_SHARE, its best-bound minimiser's repair runs to its end (the neighbourhood is only as good
# as the plan it starts from: from the repaired plan 43,999.5, from the fitting minimisers' 44,046,
# and where the repair was cut by its work budget the greedy plan was all there was), and the LP's
# neighbourhood (support_plan.neighbourhood_plan) gets the rest: random-dag:nodes=10000 binding at
# 60 s (the whole run), from 0.081% in 42-45 s of CPU to 0.051-0.061% in 38-40 s (s39,
# docs/architecture.md, with the shares measured against it).
NEIGHBOURHOOD_SHARE = 0.6
# Nominal seconds the rest must come to for that (the LP ~3 s and the MILP ~5 s of nominal work at
# 10,000 operators); with less (a limit under ~20 s) the Lagrangian keeps LARGEST_SHARE as before.
NEIGHBOURHOOD_MIN_S = 8.0
IMPROVED_PLANS = 4  # fitting minimisers improved by local search (each a pass over the nodes)
# The Lagrangian's least run (its memory entries, the spanning forest and the forest's arrays, a few
# multiplier steps and the pass with min-marginals) takes about this many seconds per edge entry and
# candidate: measured 0.6 s of set-up and 0.1 s per step at 5.5 M entries (random-dag:nodes=10000,
# candidates=10-30, 16 devices; 1.2 s with 5 steps, CPU). Where it does not
# fit the share of the nominal budget it would get, it does not start (at 1 s it had ended at 1.67 s).
LAGRANGIAN_S_PER_ENTRY = 2.5e-7
# ... plus this per memory entry (node, candidate, device): building them and the multipliers'
# penalties (0.23 s of CPU at 3.7 M entries, gpt3-175B on 1,024 devices) and pricing them in each of
# the least run's ~5 forest passes (`lagrangian.STEP_UNITS_PER_MEMORY_ENTRY`): at 1 s that
# instance's Lagrangian started and was stopped by the clock in its plan's repair.
LAGRANGIAN_S_PER_MEMORY_ENTRY = 1.2e-7


class FixingBounds(Protocol):
    """What a restriction needs of a relaxation (LagrangianBound here, LpRelaxation in lp_fixing)."""
    bound: float

    @property
    def num_candidates(self) -> int:
        """Candidates of the problem."""

    def open_candidates(self, upper_bound: float, keep=None) -> tuple[np.ndarray, ...]:
        """Per node, the candidates that may be in a plan cheaper than `upper_bound`."""

    def closed_pairs(self, problem: ConfigProblem, upper_bound: float, keep=None):
        """Per edge, the pairs in no plan cheaper than `upper_bound` (None: no pair bounds)."""


@dataclass(frozen=True, eq=False)
class Restriction:
    """The problem restricted to the candidates the Lagrangian multipliers leave open, with the incumbent
    that justified the restriction and the bounds to carry a result back to the whole problem."""
    problem: ConfigProblem  # the problem on the open candidates
    choices: tuple[np.ndarray, ...]  # per node, the original index of each open candidate
    incumbent: tuple[int, ...] | None  # best plan known (original indices), fits memory
    source: str  # what found it: "Lagrangian", "LP support", "given" (the plan passed in) or "first MILP stage"
    relaxation: FixingBounds
    outside_bound: float  # no plan using a removed candidate (or closed pair) costs less
    base_note: str  # what the relaxation did (the note adds how many candidates are left open)
    closed_pairs: tuple | None = None  # per edge of `problem`: bool matrix of pairs no better plan uses

    @property
    def note(self) -> str:
        """What the relaxation did and how many candidates (and edge pairs) it left open."""
        text = f"{self.base_note}, {self.open_count()} of {self.relaxation.num_candidates} candidates left open"
        if self.closed_pairs is not None:
            closed = sum(int(c.sum()) for c in self.closed_pairs if c is not None)
            text += f", {closed} of {sum(m.size for m in self.problem.edge_costs)} edge pairs closed"
        return text

    @property
    def bound(self) -> float:
        """The Lagrangian bound: no plan of the problem costs less."""
        return self.relaxation.bound

    def encode(self, plan) -> tuple[int, ...]:
        """A plan in original candidate indices as one of the restricted problem (each choice must be
        open)."""
        return tuple(int(np.flatnonzero(self.choices[node] == choice)[0]) for node, choice in enumerate(plan))

    def decode(self, plan) -> tuple[int, ...]:
        """A plan of the restricted problem in original candidate indices."""
        return tuple(int(self.choices[node][choice]) for node, choice in enumerate(plan))

    def problem_bound(self, restricted_bound: float | None) -> float:
        """A proven bound for the whole problem from one for the restricted problem."""
        inner = -np.inf if restricted_bound is None else min(restricted_bound, self.outside_bound)
        return max(self.bound, inner)

    def open_entries(self) -> int:
        """Edge entries of the problem on the open candidates (the size that decides whether its MILP
        can do anything in time: LARGE_MODEL_ENTRIES)."""
        return sum(m.size for m in self.problem.edge_costs)

    def open_count(self) -> int:
        """Candidates left open, over all nodes."""
        return sum(len(c) for c in self.choices)

    def widen(self, problem: ConfigProblem, answer):
        """A solver's Answer on the restricted problem as one on `problem`: plan decoded, bound made
        global, and this restriction's plan kept when the solver found nothing better."""
        notes = (self.note,) + answer.notes
        bound = self.problem_bound(answer.lower_bound)
        if answer.status is Status.ERROR:  # a failed solver stays one (the harness reports it, keeps the plan)
            return Answer(Status.ERROR, None, bound, notes)
        plan = self.decode(answer.assignment) if answer.assignment is not None else None
        incumbent = self.incumbent if self.source != "given" else None  # the harness keeps its own
        if incumbent is not None and (plan is None or problem.objective(incumbent) < problem.objective(plan)):
            # (a restricted optimum above the incumbent is rounding: FEASIBLE)
            status = Status.TIME_LIMIT if answer.status is Status.TIME_LIMIT else Status.FEASIBLE
            return Answer(status, incumbent, bound, notes + (f"kept the {self.source} plan (no better found)",))
        return Answer(answer.status, plan, bound, notes)

    def tightened(self, original: ConfigProblem, plan, source: str) -> "Restriction":
        """The restriction a cheaper plan (original indices) leaves: fewer candidates open."""
        return restrict_by(original, self.relaxation, tuple(plan), source, self.base_note)


def restrict_by(problem: ConfigProblem, relaxation, plan, source: str, note: str) -> Restriction:
    """`problem` restricted to what `relaxation` leaves open given the plan `plan` (None: nothing
    removed): candidates, and pairs of candidates when the relaxation bounds them."""
    if plan is None:
        choices = tuple(np.arange(len(c)) for c in problem.node_costs)
        return Restriction(problem, choices, plan, source, relaxation, np.inf, note)
    cost = problem.objective(plan)
    choices = relaxation.open_candidates(cost, keep=plan)
    closed = relaxation.closed_pairs(problem, cost, keep=plan)
    if closed is not None:
        choices = _without_closed_rows(problem, choices, closed)
        closed = tuple(None if c is None else c[np.ix_(choices[u], choices[v])]
                       for (u, v), c in zip(problem.edges, closed))
    outside = cost - ROUNDING_SLACK * (1.0 + abs(cost))
    return Restriction(restricted(problem, choices), choices, plan, source, relaxation, outside, note, closed)


def _without_closed_rows(problem: ConfigProblem, choices, closed) -> tuple[np.ndarray, ...]:
    """`choices` less every candidate all of whose pairs on some edge (with the other end's open
    candidates) are closed: it is in no better plan either. Repeated until nothing changes."""
    choices = [np.asarray(c) for c in choices]
    changed = True
    while changed:
        changed = False
        for (u, v), matrix in zip(problem.edges, closed):
            if matrix is None:
                continue
            block = matrix[np.ix_(choices[u], choices[v])]
            rows, columns = ~block.all(axis=1), ~block.all(axis=0)
            if not rows.all() or not columns.all():
                choices[u], choices[v] = choices[u][rows], choices[v][columns]
                changed = True
    return tuple(choices)

PAIRS_SHARE = 0.5  # of best_plan's time left after local search, for pair exchanges


def best_plan(problem: ConfigProblem, minimisers, incumbent, deadline, seed: int, repair_all: bool = False):
    """The best of: the first of `minimisers` repaired to fit memory, the fitting minimisers (those
    cheaper than the best improved so far), each improved by local search (the best then by pair
    exchanges and forest search), and `incumbent`. `repair_all`: the repair runs to its end (its
    work charged, only the wall clock stops it), where a plan that fits is known too."""
    options = []
    meter = WorkMeter(deadline)  # the wall clock, past its grace, is only the safety net
    fitting = [plan for plan in minimisers if problem.memory_ok(plan)]
    fitting.sort(key=problem.objective)
    if (minimisers and not problem.memory_ok(minimisers[0]) and can_fit(problem) and not meter.clock_out()):
        # the best bound's minimiser breaks the limit by a few percent (at 10,000 operators no
        # minimiser fits, the minimisers swing between devices): repaired, it is within ~1%. The
        # repair's work is counted against its share; it stops there only where a plan that fits
        # is known (otherwise it may make the only one: only the clock stops it). Where no plan can
        # fit (megatron-1T@64: the closed-form bound is 3.5x the limit) it would only run until the
        # clock stopped it, and leave the diagnosis that proves INFEASIBLE no time (at 1 s)
        repaired = repair_memory(problem, minimisers[0], deadline.work_part(REPAIR_SHARE), FINE_ROUNDS,
                                 optional=not repair_all and (incumbent is not None or bool(fitting)))
        if repaired is not None:
            options.append(improve(problem, repaired, deadline))
    for plan in fitting[:IMPROVED_PLANS]:
        # one already dearer than an improved plan is not worth a pass (at 10,000 operators 2.5 s
        # each, for plans 0.3% dearer: forest search does more with the time)
        if not options or problem.objective(plan) < min(map(problem.objective, options)):
            options.append(improve(problem, plan, deadline))
    if not options:
        return None if incumbent is None else tuple(incumbent)
    best = min(options, key=problem.objective)
    if not meter.clock_out():  # two nodes at once, where one alone breaks the limit (pair_search)
        # at most half of what is left: at 10,000 operators a sweep takes ~1 s and gains a few
        # units (44,142.9 -> 44,134.7 in 7 s), where forest search is then the next try
        best = improve_by_pairs(problem, best, deadline.work_part(PAIRS_SHARE))
    if not meter.clock_out():  # exact re-solves of random forests: never worse, memory kept
        best = improve_by_forests(problem, best, deadline, seed=seed)
    if incumbent is not None and problem.objective(incumbent) <= problem.objective(best):
        return tuple(incumbent)
    return best


def lagrangian_fits(problem: ConfigProblem, nominal_s: float | None) -> bool:
    """Whether the Lagrangian's least run (LAGRANGIAN_S_PER_ENTRY and _PER_MEMORY_ENTRY, from the
    sizes) fits the share of `nominal_s` it would get."""
    if nominal_s is None:
        return True
    entries = sum(m.size for m in problem.edge_costs)
    share = LARGE_MODEL_SHARE if entries > LARGE_MODEL_ENTRIES else LAGRANGIAN_SHARE
    memory = sum(len(devices) for node in problem.node_devices for devices in node)
    least = LAGRANGIAN_S_PER_ENTRY * (entries + problem.num_candidates) + LAGRANGIAN_S_PER_MEMORY_ENTRY * memory
    return least <= share * nominal_s


def lagrangian_restriction(problem: ConfigProblem, deadline, incumbent=None, seed: int = 0,
                           solve: SolveModel | None = None, relax: SolveLp | None = None) -> Restriction | None:
    """None when the memory limit cannot bind (nothing to relax) or the Lagrangian does not fit the
    nominal budget (`lagrangian_fits`). `solve` (a sub-problem's MILP from a start plan within a
    deadline) is for a plan from the Lagrangian's support where the open model is too big: the MILP
    on the support where the nominal budget leaves it SUPPORT_MIN_S, else, with `relax` (a
    sub-problem's LP values), the MILP on the neighbourhood of the support's LP where it leaves
    NEIGHBOURHOOD_MIN_S (the Lagrangian then gets NEIGHBOURHOOD_SHARE of the time; otherwise
    LARGEST_SHARE)."""
    if not lagrangian_fits(problem, deadline.nominal_left()):
        return None
    started = time.perf_counter()
    entries = sum(m.size for m in problem.edge_costs)
    nominal = deadline.nominal_left()
    with_support = solve is not None and (nominal is None or (1 - LARGE_MODEL_SHARE) * nominal >= SUPPORT_MIN_S)
    # the MILP on the whole support holds the neighbourhood and, given the time, does better alone
    # (random-dag:nodes=10000 binding at 120 s: 0.0108%; after the neighbourhood, with 30% less
    # time, 0.0143%)
    with_neighbourhood = not with_support and solve is not None and relax is not None and (
        nominal is None or (1 - NEIGHBOURHOOD_SHARE) * nominal >= NEIGHBOURHOOD_MIN_S)
    share = LAGRANGIAN_SHARE
    if entries > LARGE_MODEL_ENTRIES:
        share = (LARGE_MODEL_SHARE if with_support else NEIGHBOURHOOD_SHARE if with_neighbourhood
                 else LARGEST_SHARE)
    clock = deadline.work_part(share)  # work counts decide; the wall clock is the caller's
    # the neighbourhood's share handed out now, so the repair's work past its own share (it runs to its
    # end: `repair_all`) is not taken from it (at 45 s its LP was left 1 s of nominal work and stopped)
    rest = deadline.share(SUPPORT_SHARE) if with_neighbourhood else None
    upper = None if incumbent is None else problem.objective(incumbent)
    relaxation = lagrangian_dual(problem, clock, upper)
    if relaxation is None:
        return None
    plan = best_plan(problem, relaxation.plans, incumbent, clock, seed,
                     repair_all=with_neighbourhood and entries > LARGE_MODEL_ENTRIES)
    source = "given" if incumbent is not None and plan == tuple(incumbent) else "Lagrangian"
    note = (f"lagrangian: bound {relaxation.bound:.10g} after {relaxation.steps} multiplier steps "
            f"({'exact' if relaxation.exact_inner else 'spanning-forest'} inner minimum) in "
            f"{format_seconds(time.perf_counter() - started)}")
    restriction = restrict_by(problem, relaxation, plan, source, note)
    if (solve is None or not (with_support or with_neighbourhood) or plan is None or deadline.expired()
            or restriction.open_entries() <= LARGE_MODEL_ENTRIES):
        return restriction
    support = relaxation.support(SUPPORT_WIDTH)
    begun = time.perf_counter()
    if rest is not None and relax is not None:
        found = neighbourhood_plan(problem, support, plan, rest, relax, solve)
        what, found_by = "support LP's neighbourhood", "Lagrangian neighbourhood"
    else:
        found = support_plan(problem, support, plan, deadline.share(SUPPORT_SHARE), solve)
        what, found_by = f"support ({SUPPORT_WIDTH} per node)", "Lagrangian support"
    note += f", MILP on its {what} in {format_seconds(time.perf_counter() - begun)}"
    if found is None or not problem.memory_ok(found) or problem.objective(found) >= problem.objective(plan):
        return restrict_by(problem, relaxation, plan, source, note + " found nothing better")
    return restrict_by(problem, relaxation, found, found_by, note)
