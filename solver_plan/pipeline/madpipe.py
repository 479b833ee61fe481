"""MadPipe-DP (section 4.2): an allocation with P-1 normal processors holding one stage each and
one special processor that may hold several non-contiguous stages.

For a target period T^ (which sets the memory estimates) and a candidate period tau, the DP
decides whether some allocation has every normal stage, every transfer and the special
processor's load within tau while the memory estimates fit in M. Layers are taken from the end of
the chain, as in the paper: the state after allocating layers l..L-1 is (l, p normal processors
left, m_P special memory used, V the delay between F_{l-1} and B_{l-1}), and the value is the least
special load needed for layers 0..l-1. Normal stages keep g = ceil((V + U)/T^) batches; the special
processor is under-estimated with g - 1 (the exact schedule settles it). V moves to
(V (+) U(k, l)) (+) C(k-1), with (+) the group-closing sum of the paper.

Differences from the paper, for speed: the special load t_P is kept exactly as the DP value
instead of being discretised, and Algorithm 1's search over T^ is run with T^ = tau: because
MadPipe-DP(T^) is non-increasing, the T^* that minimises max(MadPipe-DP(T^), T^) is the smallest
tau with MadPipe-DP(tau) <= tau, found by bisection in `iterations` steps between U/P and
U + sum(C). m_P (`memory_levels`, default 11 values in [0, M]) and V (`delay_levels`, default 51
values in [0, U + sum C]) are discretised as in the paper (rounded to the nearest level).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from solver_plan.deadline import Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.pipeline.allocation import Allocation, AllocationResult
from solver_plan.pipeline.minimal_memory import infeasible_result, least_memory_allocation
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status

INF = np.inf
# Batches charged to each stage of the special processor, relative to g: the paper's lower estimate
# (g - 1) or the upper one (g, as if all its forwards ran before its backwards).
# "contiguous" has no special processor: P normal ones, each estimated exactly as 1F1B* would need.
SPECIAL_ESTIMATES = {"optimistic": 0, "conservative": 1, "contiguous": None}


@dataclass(frozen=True)
class Grid:
    """The discretised levels of the special processor's memory m_P and of the delay V (MadPipe 4.2)."""
    memory: np.ndarray  # m_P levels (bytes)
    delay: np.ndarray  # V levels (seconds)

    @property
    def memory_step(self) -> float:
        """Bytes between two memory levels."""
        return float(self.memory[1] - self.memory[0]) if len(self.memory) > 1 else 1.0

    @property
    def delay_step(self) -> float:
        """Seconds between two delay levels."""
        return float(self.delay[1] - self.delay[0]) if len(self.delay) > 1 else 1.0


def _oplus(x: np.ndarray, y: np.ndarray, target: float) -> np.ndarray:
    """x (+) y: add y, or close x's group first when x + y would cross into the next one."""
    group = np.ceil(x / target - 1e-12)
    same = np.ceil((x + y) / target - 1e-12) == group
    return np.where(same, x + y, target * group + y)


class _StageTables:
    """Per-stage quantities for all stages ending at layer l - 1, as vectors over the first layer k."""

    def __init__(self, problem: ChainProblem, l: int):
        ks = np.arange(l)
        last = l - 1
        self.first = ks
        self.load = np.array([problem.load(k, last) for k in ks])
        self.comm = np.array([problem.comm_load(k - 1) if k > 0 else 0.0 for k in ks])
        self.state = np.array([problem.state_memory(k, last) for k in ks])  # model state
        self.stored = np.array([problem.stored(k, last) for k in ks])
        self.buffers = np.array([problem.buffers(k, last) for k in ks])

    def memory(self, in_flight: np.ndarray, first: int = 0) -> np.ndarray:
        """Memory of stages k..l-1 for k >= first, with in_flight[k - first, :] batches."""
        return (self.state[first:, None] + in_flight * self.stored[first:, None]) + self.buffers[first:, None]


class MadPipeDP:
    """MadPipe-DP (MadPipe section 4.2, ../shared/papers/madpipe-memory-aware-pipelining.md) for one
    special-processor memory estimate: `solve` fills the value tables for a target period and a
    candidate period, `allocation` reads an allocation back from them."""

    def __init__(self, problem: ChainProblem, memory_levels: int = 11, delay_levels: int = 51,
                 special_estimate: str = "optimistic"):
        if special_estimate not in SPECIAL_ESTIMATES:
            raise InputError(f"special_estimate must be one of {', '.join(SPECIAL_ESTIMATES)}, got {special_estimate!r}",
                             "madpipe")
        self.problem = problem
        self.special_extra = SPECIAL_ESTIMATES[special_estimate]
        self.has_special = self.special_extra is not None
        # index p of the value arrays: normal processors left (0..P-1 with a special one, else 0..P)
        self.normal = problem.processors - 1 if self.has_special else problem.processors
        horizon = problem.total_load + problem.total_comm
        self.grid = Grid(np.linspace(0.0, problem.memory, memory_levels), np.linspace(0.0, horizon, delay_levels))
        self.tables = [None] + [_StageTables(problem, l) for l in range(1, problem.layers + 1)]

    def _transitions(self, l: int, target: float, tau: float):
        """For the stages k..l-1 short enough for tau (a suffix of k, since loads grow as k falls):
        feasibility and next-state indices of the normal and special choices, indexed by k - first."""
        tab, grid = self.tables[l], self.grid
        first = int(np.searchsorted(-tab.load, -tau * (1 + 1e-12)))  # loads decrease with k
        load, comm = tab.load[first:, None], tab.comm[first:, None]
        delays = grid.delay[None, :]
        in_flight = np.maximum(1.0, np.ceil((delays + load) / target - 1e-12))
        next_delay = _oplus(_oplus(delays, load, target), comm, target)
        v_next = np.clip(np.rint(next_delay / grid.delay_step), 0, len(grid.delay) - 1).astype(np.intp)
        fits_time = comm <= tau
        normal_ok = (tab.memory(in_flight, first) <= self.problem.memory) & fits_time
        # every stage keeps at least one batch, whatever the estimate (the validator's least memory)
        special_flight = np.maximum(1.0, in_flight - 1 + (self.special_extra or 0))
        special_memory = grid.memory[None, :, None] + tab.memory(special_flight, first)[:, None, :]
        special_ok = (special_memory <= self.problem.memory) & fits_time[:, :, None] & self.has_special
        # rounded up to the next level: the special processor's memory is never under-counted
        m_next = np.clip(np.ceil(special_memory / grid.memory_step - 1e-9), 0, len(grid.memory) - 1).astype(np.intp)
        special_ok &= special_memory <= grid.memory[m_next] * (1 + 1e-12)
        return first, tab.load[first:], v_next, normal_ok, m_next, special_ok

    def solve(self, target: float, tau: float) -> np.ndarray:
        """values[l][v, m, p]: least special load for layers 0..l-1 from that state (inf: none)."""
        L, P = self.problem.layers, self.normal + 1  # P: size of the p axis
        nv, nm = len(self.grid.delay), len(self.grid.memory)
        values = np.full((L + 1, nv, nm, P), INF)
        values[0] = 0.0
        for l in range(1, L + 1):
            first, load, v_next, normal_ok, m_next, special_ok = self._transitions(l, target, tau)
            if first >= l:
                continue
            ks = np.arange(first, l)
            best = np.full((nv, nm, P), INF)
            if self.has_special:
                special = values[ks[:, None, None], v_next[:, None, :], m_next]  # (k, m, v, p), a copy
                special += np.where(special_ok, load[:, None, None], INF)[..., None]
                best = special.min(axis=0).transpose(1, 0, 2)  # (v, m, p)
            if P > 1:
                normal = values[ks[:, None], v_next, :, :-1]  # (k, v, m, p - 1), a copy
                normal += np.where(normal_ok, 0.0, INF)[:, :, None, None]
                best[..., 1:] = np.minimum(best[..., 1:], normal.min(axis=0))
            best[best > tau * (1 + 1e-12)] = INF
            values[l] = best
        return values

    def allocation(self, values, target: float, tau: float) -> Allocation | None:
        """Trace back the allocation behind `values` from the start state (all layers left, no delay, no
        special memory), or None when no allocation fits period `tau`."""
        L = self.problem.layers
        state = (0, 0, self.normal)  # (v, m, p)
        if not np.isfinite(values[L][state]):
            return None
        special_layers, normal_stages, l = [], [], L
        while l > 0:
            v, m, p = state
            first, load, v_next, normal_ok, m_next, special_ok = self._transitions(l, target, tau)
            goal = values[l][state] * (1 + 1e-12) + 1e-15
            for j in range(l - first):
                k = first + j
                if p > 0 and normal_ok[j, v] and values[k][v_next[j, v], m, p - 1] <= goal:
                    normal_stages.append((k, l - 1))
                    state = (v_next[j, v], m, p - 1)
                    break
                if special_ok[j, m, v] and values[k][v_next[j, v], m_next[j, m, v], p] + load[j] <= goal:
                    special_layers.append((k, l - 1))
                    state = (v_next[j, v], m_next[j, m, v], p)
                    break
            else:
                raise RuntimeError("MadPipe-DP reconstruction lost its path")  # an internal bug, not input
            l = k
        return _number_processors(L, normal_stages, special_layers)


def _number_processors(layers: int, normal_stages, special_stages) -> Allocation:
    """Processors numbered in order of first appearance along the chain; the special one shared."""
    owner = [None] * layers
    for index, (k, last) in enumerate(normal_stages):
        for i in range(k, last + 1):
            owner[i] = ("normal", index)
    for k, last in special_stages:
        for i in range(k, last + 1):
            owner[i] = ("special", 0)
    numbering: dict = {}
    per_layer = [numbering.setdefault(o, len(numbering)) for o in owner]
    return Allocation.from_processors(per_layer)


def search(problem: ChainProblem, iterations: int, memory_levels: int, delay_levels: int,
           special_estimate: str, deadline: Deadline | None, known_infeasible: float | None = None,
           period_hint: float | None = None):
    """Algorithm 1 (collapsed, see the module docstring): (allocation, target T^, infeasible tau,
    cut short) or None.

    Bisection stops at the precision `iterations` halvings of [U/P, U + sum C] give: a fixed amount
    of work, so the answer does not depend on the machine's load. The deadline is only a safety net;
    when it ends the search early, the result says so. A known infeasible tau (from a more
    optimistic estimate) narrows the start and so saves iterations, and so does a period known to be
    achievable (`period_hint`, e.g. PipeDream + 1F1B*'s): tried first, it bounds the bisection from
    above when the DP finds an allocation there and from below when it proves none."""
    dp = MadPipeDP(problem, memory_levels, delay_levels, special_estimate)
    upper = problem.total_load + problem.total_comm
    low, high = problem.load_bound, upper
    precision = (high - low) / 2 ** iterations
    low = max(low, known_infeasible or low)
    best, best_target, cut_short = None, upper, False
    if period_hint is not None and low < period_hint < high:
        found = dp.allocation(dp.solve(period_hint, period_hint), period_hint, period_hint)
        if found is None:
            low = period_hint
        else:
            high, best, best_target = period_hint, found, period_hint
    while high - low > precision * (1 + 1e-9):
        if deadline is not None and deadline.expired():
            cut_short = True
            break
        mid = 0.5 * (low + high)
        found = dp.allocation(dp.solve(mid, mid), mid, mid)
        if found is None:
            low = mid
        else:
            high, best, best_target = mid, found, mid
    if best is None:  # nothing below the longest period: the sequential bound decides
        best = dp.allocation(dp.solve(upper, upper), upper, upper)
    if best is None:
        return None
    return best, best_target, low, cut_short




def plan(problem: ChainProblem, *, time_limit: float | None = None, seed: int = 0, iterations: int = 10,
         memory_levels: int = 11, delay_levels: int = 51,
         special_estimates: tuple[str, ...] = ("optimistic", "conservative", "contiguous"),
         **options) -> AllocationResult:
    """The paper's DP (optimistic special-processor estimate) first. Two more runs of the same DP give
    alternatives that `plan_pipeline` also schedules, keeping the best valid period: the conservative
    estimate (the special processor charged g batches per stage) and the contiguous one (no special
    processor, every stage charged exactly what 1F1B* keeps, so Proposition 1 schedules it optimally)."""
    begin = time.perf_counter()
    deadline = options.get("deadline") or (None if time_limit is None else time_budget(time_limit))
    found, infeasible, cut_short = [], None, False
    for estimate in special_estimates:  # ordered from optimistic: each one's infeasible tau holds for the next
        answer = search(problem, iterations, memory_levels, delay_levels, estimate, deadline, infeasible,
                        options.get("period_hint"))
        if answer is not None:
            found.append((estimate, answer))
            infeasible = answer[2]
            cut_short |= answer[3]
    if not found:
        need, fallback = least_memory_allocation(problem)
        if fallback is None or need > problem.memory:
            return infeasible_result("madpipe", problem, begin, "MadPipe-DP finds no allocation even at the longest period")
        # the DP's estimates reject everything, yet one batch per stage fits: a long period exists
        return AllocationResult("madpipe", Status.FEASIBLE, fallback, problem.total_load + problem.total_comm,
                                problem.load_bound, time.perf_counter() - begin,
                                notes=("MadPipe-DP's memory estimates reject every allocation; returned the "
                                       f"least-memory contiguous allocation ({need:.0f} B <= M), scheduled below",))
    (estimate, (best, target, _, _)), others = found[0], found[1:]
    load = best.load_bound(problem)
    alternatives = tuple(answer[0] for _, answer in others if answer[0] != best)
    notes = (f"{estimate} estimate: target period T^ = {target:.6g} s, allocation load {load:.6g} s",)
    notes += tuple(f"{e} estimate: {'the same allocation' if a[0] == best else 'another allocation'} "
                   f"({len(a[0].stages)} stages) at T^ = {a[1]:.6g} s" for e, a in others)
    if cut_short:
        notes += ("the time limit cut the DP's bisection short: the allocation may be worse than with more time",)
    return AllocationResult("madpipe", Status.TIME_LIMIT if cut_short else Status.FEASIBLE, best,
                            max(load, target), problem.load_bound, time.perf_counter() - begin,
                            alternatives=alternatives, notes=notes)
