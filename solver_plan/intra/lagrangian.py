"""Lagrangian relaxation of the memory rows: a proven bound, plans, and candidates it rules out.

For multipliers lam_d >= 0 (seconds per memory limit, one per device whose row can bind), every
memory-feasible plan x satisfies
  objective(x) >= objective(x) + sum_d lam_d (memory_d(x) / M - 1) =: L(x, lam),
and L(x, lam) is the objective of the unconstrained problem whose candidate costs carry the
penalty memory / M x (sum of lam_d over the devices the candidate uses), minus sum_d lam_d. Its
minimum over all plans is the Lagrangian bound (Held and Karp 1971; Fisher 1981). The inner
minimum is solved by the forest DP (forest_dp): exactly on a forest (chains, trees), and on other
graphs as a lower bound after min-sum diffusion (dual_ascent), whose reparametrisation keeps every
plan's cost, so the edges outside the spanning forest lose little when cut to their smallest entry.
The DP's min-marginals bound every plan that uses a given candidate: a candidate whose bound
exceeds a known plan's cost is in no better plan and can be removed before an exact model is built
(Lagrangian reduced-cost fixing). Multipliers follow projected subgradient steps with Polyak's step
length towards the best known plan's cost.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from solver_plan.deadline import WorkMeter
from solver_plan.intra.dual_ascent import ROUNDING_SLACK, reparametrise
from solver_plan.intra.forest_dp import Forest, spanning_forest
from solver_plan.intra.problem import ConfigProblem

# of the Lagrangian's time, for the reparametrisation of non-forest graphs (its first sweeps and the
# main diffusion); a part of the steps' for each later one (rare)
DIFFUSION_SHARE = 0.3
# of the Lagrangian's time, for the multipliers; the rest finds plans that fit. Measured on
# random-dag:nodes=10000 binding at 60 s (2 shared cores): 0.55 with REPAIR_SHARE 0.6 left the repair
# of the best minimiser 7 s (it needs 8 s of CPU: cut, 0.66-0.74% gap); 0.4 with 0.85: the same
# bound, the repair done, 0.51%.
ASCENT_SHARE = 0.4
# Order on non-forest graphs: FIRST_SWEEPS of diffusion at the multipliers 0, FIRST_STEPS multiplier
# steps, then the main diffusion at the best multipliers so far (the rest of DIFFUSION_SHARE), then
# the other steps. A reparametrisation is best for the costs it diffused: made at the multipliers 0
# (as before session 35), it left the penalised problem's forest bound low. random-dag:nodes=10000
# binding, CPU (float64 sweeps): 30 sweeps at 0 then 120 steps 43,951.0 in 30.5 s; 5 sweeps, 30
# steps, 25 sweeps at the best multipliers, 90 steps 43,981.0 in 28.8 s (the LP bound is 43,993.5).
FIRST_SWEEPS = 5
FIRST_STEPS = 30
FITTING_SHARE = 0.25  # of what the ascent leaves, for raising multipliers until a minimiser fits
MAX_STEPS = 200
# Work units (`deadline.WORK_UNIT_S`, a microsecond of the development machine's CPU) of one forest
# pass without marginals (a multiplier step, a raise or a bisection of `_fitting_plans`): per node
# plus per edge entry and candidate. Measured (CPU, random DAGs with 16 devices): 1.7-34 ms at
# 300-6,000 nodes of 2-5 candidates (~18 entries a node), 8.7 and 27 ms at 1,000 and 3,000 nodes of
# 10-30 candidates (533 k and 1.5 M entries): 5.5 us a node + 0.006 us an entry fits all five within
# 6%; ~0.1 s at 10,000 nodes and 4.2 M entries (random-dag:nodes=10000 binding). Pricing the
# multipliers into the candidates and the subgradient (the plan's memory per device) add per memory
# entry (node, candidate, device): 31 ms of a 36 ms step at 3.7 M entries (gpt3-175B on 1,024
# devices, 1,157 nodes: 0.0084 us an entry), negligible on the random DAGs. The ascent's steps,
# the fitting minimisers and the pass with marginals are counted against the nominal budget in these
# units: work decides; the wall clock only stops a slow machine (past `deadline.GRACE_S`).
STEP_UNITS_PER_NODE = 6.0
STEP_UNITS_PER_ENTRY = 0.006
STEP_UNITS_PER_MEMORY_ENTRY = 0.009
MARGINAL_STEPS = 2.0  # the pass with min-marginals costs this many steps (measured 1.6-1.8)
# Polyak's target on graphs other than forests: at most this far (relative) above the best bound.
# The incumbent's cost as target made the steps overshoot when it was far above the bound
# (random-dag:nodes=10000 binding, 48 s nominal, targets 44,050 / 44,128 / 44,300 / 44,600: bounds
# 43,992.2 / 43,988.2 / 43,984.4 / 43,956.1; this cap: 43,988.1 whatever the incumbent). On forests
# (exact inner minimum) the incumbent stays the target: alpa-chain:10000 binding, whose dual gap is
# ~0, ended unproven with the cap (bound 40,517.8 after 96 steps, 57,783 candidates open, where the
# incumbent as target proves it optimal with 10,075 open).
TARGET_GAP = 0.003
STALL_STEPS = 6  # steps without a better bound before the step length is halved
MIN_STEP_FACTOR = 1e-3
RAISE_STEPS = 12  # raises of the multipliers over the limit (together up to ~3e4 x), until a minimiser fits
FIRST_RAISE = 0.01  # the first raise (relative), doubled each time
BISECTIONS = 8
REDIFFUSIONS = 3  # diffusions at the best multipliers, each followed by more steps
CLOSED_GAP = 1e-7  # relative: a bound this close to a known plan's cost ends the ascent


@dataclass(frozen=True, eq=False)
class LagrangianBound:
    """The Lagrangian dual's outcome: a proven bound, per-candidate bounds for fixing, and plans met."""
    bound: float  # no memory-feasible plan costs less
    multipliers: np.ndarray  # per device, seconds per memory limit
    candidate_bounds: tuple[np.ndarray, ...]  # per node and candidate: no feasible plan using it costs less
    plans: tuple[tuple[int, ...], ...]  # minimisers met on the way (they may break memory), best bound first
    steps: int
    exact_inner: bool  # the graph is a forest: each inner minimum was exact

    @property
    def num_candidates(self) -> int:
        """Candidates of the problem (all of them, open or not)."""
        return sum(len(b) for b in self.candidate_bounds)

    def open_candidates(self, upper_bound: float, keep=None) -> tuple[np.ndarray, ...]:
        """Per node, the candidates that may still be in a plan cheaper than `upper_bound` (and the
        choices of the plan `keep`, so that plan stays expressible)."""
        return candidates_below(self.candidate_bounds, upper_bound, keep)

    def closed_pairs(self, problem: ConfigProblem, upper_bound: float, keep=None) -> None:
        """No bounds on pairs of candidates here: none closed (see lp_fixing for pairs)."""
        return None

    def support(self, width: int) -> tuple[np.ndarray, ...]:
        """Per node, the `width` candidates with the least bounds (the Lagrangian's favourites)."""
        return tuple(np.sort(np.argsort(bounds, kind="stable")[:width]) for bounds in self.candidate_bounds)


def fixing_threshold(upper_bound: float) -> float:
    """Bounds at or above this (a known plan's cost less rounding) rule a candidate or pair out."""
    return upper_bound - ROUNDING_SLACK * (1.0 + abs(upper_bound))


def candidates_below(candidate_bounds, upper_bound: float, keep=None) -> tuple[np.ndarray, ...]:
    """Per node, the candidates whose bound is below `upper_bound` (less rounding), plus the choices of
    the plan `keep`."""
    threshold = fixing_threshold(upper_bound)
    masks = [bounds < threshold for bounds in candidate_bounds]
    if keep is not None:
        for node, choice in enumerate(keep):
            masks[node][choice] = True
    return tuple(np.flatnonzero(mask) for mask in masks)


class _Penalties:
    """Memory / limit of every candidate on every device, to price multipliers fast."""

    def __init__(self, problem: ConfigProblem, binding: np.ndarray):
        node, choice, device, amount = problem.memory_entries
        sizes = np.array([len(c) for c in problem.node_costs])
        self.offsets = np.concatenate([[0], np.cumsum(sizes)])
        keep = binding[device] & (amount != 0)
        self.flat = (self.offsets[node] + choice)[keep]
        self.device = device[keep]
        self.share = amount[keep] / float(problem.memory_limit)
        self.problem = problem

    def node_costs(self, base_costs, multipliers: np.ndarray) -> list[np.ndarray]:
        extra = np.bincount(self.flat, weights=self.share * multipliers[self.device], minlength=self.offsets[-1])
        return [costs + extra[start:stop] for costs, start, stop in zip(base_costs, self.offsets[:-1],
                                                                          self.offsets[1:])]

    def slack(self, plan) -> np.ndarray:
        """Per device, memory / limit - 1 under `plan`: the subgradient."""
        return self.problem.device_memory(plan) / float(self.problem.memory_limit) - 1.0


def binding_devices(problem: ConfigProblem) -> np.ndarray:
    """Devices whose memory row can bind (some plan exceeds the limit there)."""
    return problem.worst_memory_per_device() > float(problem.memory_limit)


def lagrangian_dual(problem: ConfigProblem, deadline=None, upper_bound: float | None = None,
                    max_steps: int = MAX_STEPS) -> LagrangianBound | None:
    """Subgradient ascent on the multipliers of the memory rows (None without a memory limit that
    can bind). `upper_bound`: the cost of a known memory-feasible plan (Polyak's target; minimisers
    that fit memory lower it). Stops when the bound meets it (within CLOSED_GAP), when steps stall
    or at the deadline."""
    if problem.memory_limit is None:
        return None
    binding = binding_devices(problem)
    if not binding.any():
        return None
    penalties = _Penalties(problem, binding)
    free = problem.with_memory_limit(None)
    keep = spanning_forest(problem.num_nodes, problem.edges, problem.edge_costs)
    exact = bool(keep.all())
    whole = WorkMeter(deadline)  # each part's unused budget stays for the next
    diffusion = None if exact else whole.part(DIFFUSION_SHARE)  # the first sweeps and the main diffusion
    if diffusion is not None:  # move edge cost into the nodes first, so cutting edges loses little
        free, _ = reparametrise(free, deadline, max_sweeps=FIRST_SWEEPS, meter=diffusion)
    forest = Forest(free.node_costs, free.edges, free.edge_costs, keep)
    # the steps: ASCENT_SHARE of what the diffusion leaves (its part is already reserved); the rest:
    # plans that fit
    share = ASCENT_SHARE if exact else ASCENT_SHARE * (1 - DIFFUSION_SHARE)
    meter, step_units = whole.part(share), forest_pass_units(problem)
    affordable = meter.left_s()  # the main diffusion after a quarter of the steps, if fewer than 4 x FIRST_STEPS
    main_at = FIRST_STEPS if affordable is None else min(
        FIRST_STEPS, max(1, int(affordable / (step_units * meter.unit_s)) // 4))
    multipliers = np.zeros(problem.num_devices)
    best = None  # (bound, multipliers, the forest (and its costs) that gave it)
    plans: list[tuple[int, ...]] = []
    factor, stall, rediffused, steps = 1.0, 0, 0, 0
    while steps < max_steps:
        if steps and (not meter.affords(step_units) or meter.clock_out()):  # the first step always runs
            break
        steps += 1
        meter.charge(step_units)
        solution = forest.solve(penalties.node_costs(forest.node_costs, multipliers), marginals=False)
        value = solution.value - float(multipliers.sum())
        slack = np.where(binding, penalties.slack(solution.plan), 0.0)
        if not (slack > 0).any():  # a minimiser that fits memory: a plan, and a target
            cost = problem.objective(solution.plan)
            upper_bound = cost if upper_bound is None else min(upper_bound, cost)
        if best is None or value > best[0]:
            best, stall = (value, multipliers.copy(), forest), 0
            plans.insert(0, solution.plan)
        else:
            plans.append(solution.plan)
            stall += 1
            if stall >= STALL_STEPS:
                factor, stall = factor / 2, 0
        if upper_bound is not None and best[0] >= upper_bound - CLOSED_GAP * (1.0 + abs(upper_bound)):
            break
        main_due = diffusion is not None and rediffused == 0 and steps == main_at
        if factor < MIN_STEP_FACTOR or main_due:
            if diffusion is None or rediffused >= REDIFFUSIONS:
                break
            # at the best multipliers: the main diffusion on the rest of its part, later ones on a part
            # of the steps'
            part = diffusion if rediffused == 0 else meter.part(DIFFUSION_SHARE)
            free = _rediffused(free, penalties, best[1], deadline, part)
            forest = Forest(free.node_costs, free.edges, free.edge_costs, keep)
            multipliers, factor, stall, rediffused = best[1].copy(), 1.0, 0, rediffused + 1
            continue
        projected = np.where((multipliers > 0) | (slack > 0), slack, 0.0)  # a step that stays at 0 is no step
        norm = float(projected @ projected)
        if norm == 0.0:  # the minimiser fits memory with no multiplier pushing: the bound is the optimum
            break
        target = upper_bound if upper_bound is not None else best[0] + 0.01 * (1.0 + abs(best[0]))
        if not exact:  # at most TARGET_GAP above the best bound: it moves up with the bound
            target = min(target, best[0] + TARGET_GAP * (1.0 + abs(best[0])))
        gap = max(target - value, 1e-9 * (1.0 + abs(value)))
        multipliers = np.maximum(0.0, multipliers + factor * gap / norm * projected)
    value, chosen, forest = best
    rounding = ROUNDING_SLACK * (1.0 + abs(value))
    if not whole.affords(MARGINAL_STEPS * step_units) or whole.clock_out():
        # no budget for the pass with min-marginals: the bound holds for every candidate, and
        # fixes none (a 3 s limit at 10,000 operators ended 0.03 s late with it)
        bounds = tuple(np.full(len(costs), value - rounding) for costs in problem.node_costs)
    else:
        whole.charge(MARGINAL_STEPS * step_units)
        solution = forest.solve(penalties.node_costs(forest.node_costs, chosen))  # the same minimum, with marginals
        bounds = tuple(m - float(chosen.sum()) - rounding for m in solution.min_marginals)
    plans += _fitting_plans(problem, penalties, forest, chosen, whole.part(FITTING_SHARE))  # the rest: repair
    return LagrangianBound(value - rounding, chosen, bounds, tuple(dict.fromkeys(plans)), steps, exact)


def forest_pass_units(problem: ConfigProblem) -> float:
    """Work units of one forest pass without marginals on `problem`, with the multipliers priced in
    and the subgradient (STEP_UNITS_PER_NODE a node, STEP_UNITS_PER_ENTRY an edge entry or
    candidate, STEP_UNITS_PER_MEMORY_ENTRY a memory entry)."""
    entries = sum(m.size for m in problem.edge_costs) + problem.num_candidates
    memory = len(problem.memory_entries[0]) if problem.memory_limit is not None else 0
    return (STEP_UNITS_PER_NODE * problem.num_nodes + STEP_UNITS_PER_ENTRY * entries
            + STEP_UNITS_PER_MEMORY_ENTRY * memory)


def _fitting_plans(problem: ConfigProblem, penalties: _Penalties, forest: Forest, multipliers,
                   meter: WorkMeter) -> list[tuple[int, ...]]:
    """Raise the multipliers of the devices over the limit, by a factor 1 + step with the step
    doubling from FIRST_RAISE (plus a floor for those at 0), until the minimiser fits memory; then
    bisect between the last multipliers that did not fit and the first that did (each minimiser
    charged to `meter`, which stops them where it is spent). A fitting
    minimiser is optimal for the memory it uses itself (Everett 1963), so near the best
    multipliers it is a near-optimal plan. Fitting plans, best (least raised) first."""
    binding = binding_devices(problem)
    floor = np.where(binding, max(float(multipliers[binding].mean()), 1e-3), 0.0)
    units = forest_pass_units(problem)

    def out_of_work() -> bool:  # each minimiser is charged as it starts
        if not meter.affords(units) or meter.clock_out():
            return True
        meter.charge(units)
        return False

    def minimiser(values: np.ndarray):
        plan = forest.solve(penalties.node_costs(forest.node_costs, values), marginals=False).plan
        return plan, binding & (penalties.slack(plan) > 0)

    low, high, fitting, step = multipliers.copy(), None, [], FIRST_RAISE
    for _ in range(RAISE_STEPS):
        if out_of_work():
            return fitting
        trial = np.where(binding, low, 0.0)
        plan, over = minimiser(trial)
        if not over.any():
            fitting.append(plan)
            high = trial
            break
        low = np.where(over, low * (1.0 + step) + floor * step, low)
        step *= 2.0
    if high is None:
        return fitting
    low = np.where(binding, multipliers, 0.0)  # bisect on the segment from the best multipliers
    for _ in range(BISECTIONS):
        if out_of_work():
            break
        middle = (low + high) / 2.0
        plan, over = minimiser(middle)
        if over.any():
            low = middle
        else:
            fitting.append(plan)
            high = middle
    return fitting[::-1]


def _rediffused(free: ConfigProblem, penalties: _Penalties, multipliers: np.ndarray, deadline,
                meter: WorkMeter) -> ConfigProblem:
    """`free` reparametrised again by diffusion of its costs with the multipliers' penalties (an
    exact reparametrisation of `free`: the penalties are taken back out of the node costs), its
    sweeps charged to `meter`."""
    penalised = penalties.node_costs(free.node_costs, multipliers)
    again, _ = reparametrise(replace(free, node_costs=tuple(penalised)), deadline, meter=meter)
    extra = [p - c for p, c in zip(penalised, free.node_costs)]
    return replace(again, node_costs=tuple(c - e for c, e in zip(again.node_costs, extra)))


def restricted(problem: ConfigProblem, open_candidates) -> ConfigProblem:
    """The problem with only the given candidates of every node (indices into the original)."""
    pick = [np.asarray(c, dtype=np.int64) for c in open_candidates]
    return replace(
        problem,
        candidates=tuple(tuple(problem.candidates[i][c] for c in keep) for i, keep in enumerate(pick)),
        node_costs=tuple(np.asarray(problem.node_costs[i], dtype=float)[keep] for i, keep in enumerate(pick)),
        node_memory=tuple(np.asarray(problem.node_memory[i], dtype=float)[keep] for i, keep in enumerate(pick)),
        node_devices=tuple(tuple(problem.node_devices[i][c] for c in keep) for i, keep in enumerate(pick)),
        edge_costs=tuple(m[np.ix_(pick[u], pick[v])] for (u, v), m in zip(problem.edges, problem.edge_costs)),
        name=f"{problem.name}-restricted")
