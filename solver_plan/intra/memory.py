"""Least memory any plan needs on its busiest device: the diagnosis given with INFEASIBLE.

Solved exactly as a small MILP (min z s.t. one candidate per node and, per device, the chosen
memory <= z) with HiGHS under a time limit; if that runs out, HiGHS' proven bound is reported as a
lower bound instead, and the answer says so. A closed-form bound (per device, the sum over nodes of
their least memory there) is used when the solver is unavailable.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver_plan.intra import isolated
from solver_plan.intra.linear_model import decode, min_peak_memory_model
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import Status
from solver_plan.units import format_bytes

DEFAULT_DIAGNOSIS_TIME_S = 10.0
EXACT_DIAGNOSIS_MIN_S = 2.0  # below this, a closed-form bound above the limit ends the diagnosis


@dataclass(frozen=True)
class PeakMemory:
    """The least memory any plan puts on its busiest device (exact or a lower bound), with a plan if
    found."""
    lower_bound: float  # no plan puts less than this on its busiest device
    exact: bool  # lower_bound is attained by `assignment`
    assignment: tuple[int, ...] | None = None  # a plan with the least peak found (None if none)
    peak: float | None = None  # busiest-device memory of `assignment`

    def describe(self, limit: float | None) -> str:
        """The diagnosis line given with INFEASIBLE, compared with `limit` when given."""
        how = "exactly" if self.exact else "lower bound"
        text = f"least possible memory on the busiest device: {format_bytes(self.lower_bound)} ({how})"
        return text if limit is None else f"{text} vs limit {format_bytes(limit)}"


def closed_form_bound(problem: ConfigProblem) -> float:
    """Per device: each node adds its least memory on that device (0 if some candidate avoids it)."""
    if not problem.num_devices:
        return 0.0
    matrix = problem.least_memory_matrix()  # the same per-node terms, vectorised (None when too big)
    if matrix is not None:
        return float(matrix.sum(axis=0).max())
    least = np.zeros(problem.num_devices)
    for node in range(problem.num_nodes):
        on_device = np.full(problem.num_devices, np.inf)
        touched = np.zeros((len(problem.node_devices[node]), problem.num_devices), dtype=bool)
        for choice, devices in enumerate(problem.node_devices[node]):
            used = list(devices)
            touched[choice, used] = True
            on_device[used] = np.minimum(on_device[used], problem.node_memory[node][choice])
        least += np.where(touched.all(axis=0), on_device, 0.0)
    return float(least.max()) if problem.num_devices else 0.0


def can_fit(problem: ConfigProblem) -> bool:
    """Whether some plan may fit the memory limit: no limit, or the closed-form bound (each node's
    unavoidable bytes per device) within it. False proves that none does. Memoised on the problem
    (0.15 s of CPU on megatron-1T's 1,544 operators x 3,072 devices; asked by several steps)."""
    if problem.memory_limit is None:
        return True
    bound = problem.__dict__.get("_closed_form_bound")
    if bound is None:
        bound = closed_form_bound(problem)
        object.__setattr__(problem, "_closed_form_bound", bound)  # a cache, as functools.cached_property keeps
    return bound <= problem.memory_limit * (1 + 1e-9)


def min_peak_memory(problem: ConfigProblem, time_limit: float | None = DEFAULT_DIAGNOSIS_TIME_S,
                    limit: float | None = None) -> PeakMemory:
    """Least busiest-device memory over all plans (exact, or a proven lower bound on time-out).
    With `limit` and less than `EXACT_DIAGNOSIS_MIN_S` to spend, a closed-form bound already above
    the limit is answer enough: it proves INFEASIBLE, and the exact figure (a MILP that takes about
    a second on a thousand operators) would overrun the caller's deadline."""
    floor = closed_form_bound(problem)
    short_of_time = time_limit is not None and time_limit < EXACT_DIAGNOSIS_MIN_S
    if limit is not None and short_of_time and floor > limit * (1 + 1e-9):
        return PeakMemory(floor, exact=False)
    model = min_peak_memory_model(problem)
    try:
        outcome = isolated.call("highspy", "solver_plan.intra.backends.highs", "solve_with_highs", timeout=time_limit,
                                model=model, time_limit=time_limit, relax_first=False, mip_rel_gap=1e-9)
    except (RuntimeError, TimeoutError, OSError):
        return PeakMemory(floor, exact=False)
    if outcome.x_values is None:
        bound = max(floor, outcome.bound or 0.0)
        return PeakMemory(bound, exact=False)
    assignment = decode(model, outcome.x_values)
    peak = float(problem.device_memory(assignment).max())
    bound = max(floor, outcome.bound if outcome.bound is not None else 0.0)
    exact = outcome.status == Status.OPTIMAL and peak <= bound * (1 + 1e-9) + 1e-9
    return PeakMemory(peak if exact else min(bound, peak), exact, assignment, peak)
