"""Baseline planners: every operator data parallel over all devices, or all on one device.

They pick the matching candidate of each node, so their objective is priced by exactly the same
cost model as every other planner's. Over a memory limit they report INFEASIBLE with the device and
the shortfall, since a baseline has no other plan to offer.
"""
from __future__ import annotations

import time

from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import ConfigResult, Status
from solver_plan.units import format_bytes


def _fixed_plan(problem: ConfigProblem, planner: str, wanted_per_node) -> ConfigResult:
    start = time.perf_counter()
    assignment = []
    for i, wanted in enumerate(wanted_per_node):
        try:
            assignment.append(problem.candidates[i].index(wanted))
        except ValueError:
            return ConfigResult(planner, Status.ERROR, runtime_s=time.perf_counter() - start,
                                notes=(f"operator {problem.names[i]!r} has no {planner} candidate",))
    assignment = tuple(assignment)
    runtime = time.perf_counter() - start
    objective = problem.objective(assignment)
    if problem.memory_ok(assignment):
        return ConfigResult(planner, Status.FEASIBLE, objective, None, runtime, assignment)
    # A baseline has exactly one plan: over the limit there is no plan to return, only the reason.
    memory = problem.device_memory(assignment)
    device = int(memory.argmax())
    return ConfigResult(planner, Status.INFEASIBLE, runtime_s=runtime, notes=(
        f"the {planner} plan (sum of operator costs {objective:.4g} s) needs {format_bytes(memory[device])} on device "
        f"{device}, {format_bytes(memory[device] - problem.memory_limit)} over the limit "
        f"{format_bytes(problem.memory_limit)}",))


def plan_data_parallel(problem: ConfigProblem, *, deadline=None, seed: int = 0, warm_start=None,
                       **options) -> ConfigResult:
    """Baseline: every operator on its widest sample (batch) split over all devices; INFEASIBLE with the
    device and shortfall when that breaks the memory limit."""
    wanted = [_widest_sample_split(cands) for cands in problem.candidates]
    return _fixed_plan(problem, "data-parallel", wanted)


def plan_single_device(problem: ConfigProblem, *, deadline=None, seed: int = 0, warm_start=None,
                       **options) -> ConfigResult:
    """Baseline: every operator on one device; INFEASIBLE with the shortfall when that breaks the memory
    limit."""
    wanted = [_single_device(cands) for cands in problem.candidates]
    return _fixed_plan(problem, "single-device", wanted)


def _widest_sample_split(candidates):
    """The candidate splitting only the sample dimension, over the most devices starting at 0."""
    best = None
    for cfg in candidates:
        count, devices = cfg.num_devices, cfg.devices
        # cheapest tests first: milp-load seeds from this on every node (0.6 s at 10,000 nodes before)
        if (best is not None and count <= best.num_devices) or devices[0] != 0 or devices[-1] != count - 1:
            continue
        if devices == tuple(range(count)) and all(deg == 1 for dim, deg in cfg.degrees if dim != "sample"):
            best = cfg
    return best


def _single_device(candidates):
    for cfg in candidates:
        if cfg.devices == (0,):
            return cfg
    return None
