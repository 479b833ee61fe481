"""Deterministic work limits for HiGHS calls, sized from a nominal budget (deadline.py's policy: the
budget decides what is found, the wall clock only stops): simplex iterations for an LP
(`lp_iteration_limit`) and limit checks for a MIP (`mip_check_limit`), each at a fixed nominal cost
in work units (`deadline.WORK_UNIT_S`) per unit of work and non-zero of the model, measured on this
project's one-hot models. backends/highs.py says what each limit covers and what it cannot.
"""
from __future__ import annotations

from solver_plan.deadline import WORK_UNIT_S
from solver_plan.intra.linear_model import LinearModel
from solver_plan.result import Status

# Work units of one dual simplex iteration without presolve, per iteration plus per non-zero of the
# model: measured (CPU, one thread, random DAGs of 300-3,000 nodes, 28 k-531 k non-zeros) 16-57 us an
# iteration (14 us + 0.08 us per thousand non-zeros: within 25%).
LP_ITERATION_UNITS = 14.0
LP_ITERATION_UNITS_PER_NONZERO = 8e-5
# Work units of the MIP per limit check it makes, per non-zero of the model: the root's first
# ROOT_CHECKS checks (presolve, root LP, cut rounds, heuristics from the start plan) at
# ROOT_CHECK_UNITS_PER_NONZERO each, the rest (the last cut rounds, the nodes) at
# CHECK_UNITS_PER_NONZERO. Measured (highspy 1.16, one thread: backends/highs.py; CPU on the shared
# 2-core machine; the LP relaxation first and a greedy start plan, as `milp` solves; to optimality) on
# random DAGs of 50 and 500 nodes and a 200-node series-parallel graph, memory binding, 46 k-188 k
# non-zeros: the 30th check after 4.6, 5.1 and 5.3 s (3.3, 3.0 and 0.94 us a non-zero a check), then
# 0.23 us a non-zero a check on the first (809 checks in 11.4 s), the others closing within 0.6 s.
# Without a start plan the checks come sooner and more evenly (0.15-0.34 us a non-zero a check over
# whole runs of five models). The rates are rough (the gaps between checks run from a node's
# milliseconds to a restart's seconds), so where the checks come late the wall clock still stops
# the MIP first (and says so); where they come early the MIP stops before its budget.
ROOT_CHECKS = 30
ROOT_CHECK_UNITS_PER_NONZERO = 2.0
CHECK_UNITS_PER_NONZERO = 0.25
WORK_LIMIT_NOTE = "HiGHS stopped by its work limit"  # in a solve's notes: the work limit, not the clock, decided


def stopped_by_clock(status, notes) -> bool:
    """Whether a HiGHS answer of `status` with `notes` was stopped by the wall clock (TIME_LIMIT
    without WORK_LIMIT_NOTE), so its caller marks the deadline cut short."""
    return status is Status.TIME_LIMIT and not any(WORK_LIMIT_NOTE in note for note in notes)


def lp_iteration_limit(model: LinearModel, nominal_s: float | None) -> int | None:
    """Simplex iterations `nominal_s` pays for on `model`, at LP_ITERATION_UNITS (+ _PER_NONZERO)
    each (None: unlimited; at least 1)."""
    if nominal_s is None:
        return None
    per_iteration = (LP_ITERATION_UNITS + LP_ITERATION_UNITS_PER_NONZERO * len(model.values)) * WORK_UNIT_S
    return max(1, int(max(0.0, nominal_s) / per_iteration))


def mip_check_limit(model: LinearModel, nominal_s: float | None) -> int | None:
    """The MIP's limit checks `nominal_s` pays for on `model`: ROOT_CHECKS at
    ROOT_CHECK_UNITS_PER_NONZERO a non-zero, then CHECK_UNITS_PER_NONZERO (None: unlimited; at
    least 1, so the MIP stops at its first check, after the root LP)."""
    if nominal_s is None:
        return None
    units, nonzeros = max(0.0, nominal_s) / WORK_UNIT_S, max(1, len(model.values))
    root = ROOT_CHECKS * ROOT_CHECK_UNITS_PER_NONZERO * nonzeros
    if units <= root:
        return max(1, int(units / (ROOT_CHECK_UNITS_PER_NONZERO * nonzeros)))
    return ROOT_CHECKS + int((units - root) / (CHECK_UNITS_PER_NONZERO * nonzeros))
