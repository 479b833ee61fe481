"""PuLP backend for a `LinearModel`, CBC by default (any PuLP solver name may be given).

PuLP reports CBC runs stopped by the time limit as "Optimal", so the solution status is read
instead, and the LP relaxation (solved first) supplies the proven bound when CBC does not finish.
CBC may overrun its time limit during root processing: callers run this in a subprocess with a
wall-clock kill (see subprocess_guard.call_in_subprocess).
"""
from __future__ import annotations

import numpy as np
import pulp

from solver_plan.intra.linear_model import LinearModel, SolveOutcome, is_integral
from solver_plan.result import Status


def _variables(model: LinearModel, relax: bool) -> list:
    names = [f"v{j}" for j in range(model.num_columns)]
    return [pulp.LpVariable(name, lowBound=float(low), upBound=None if np.isinf(up) else float(up),
                            cat=pulp.LpInteger if (flag and not relax) else pulp.LpContinuous)
            for name, low, up, flag in zip(names, model.lower, model.upper, model.integer)]


def _constraints(problem: pulp.LpProblem, model: LinearModel, variables: list) -> None:
    order = np.argsort(model.rows, kind="stable")
    bounds = np.searchsorted(model.rows[order], np.arange(model.num_rows + 1))
    for row in range(model.num_rows):
        chosen = order[bounds[row]:bounds[row + 1]]
        expression = pulp.LpAffineExpression([(variables[model.columns[j]], float(model.values[j])) for j in chosen])
        low, up = model.row_lower[row], model.row_upper[row]
        if low == up:
            problem += expression == float(low), f"r{row}"
        else:
            if np.isfinite(low):
                problem += expression >= float(low), f"r{row}l"
            if np.isfinite(up):
                problem += expression <= float(up), f"r{row}u"


def _objective(problem: pulp.LpProblem, model: LinearModel, variables: list) -> None:
    problem += pulp.LpAffineExpression([(variables[j], float(c)) for j, c in enumerate(model.cost) if c != 0.0]
                                       ) + float(model.offset)


def _decode(problem: pulp.LpProblem, model: LinearModel, variables: list):
    values = np.array([v.varValue if v.varValue is not None else 0.0 for v in variables[: model.num_decode_columns]])
    return values, pulp.value(problem.objective)


def _build(model: LinearModel, relax: bool):
    problem = pulp.LpProblem("config", pulp.LpMinimize)
    variables = _variables(model, relax)
    _objective(problem, model, variables)
    _constraints(problem, model, variables)
    return problem, variables


def _solver(name: str, time_limit: float | None, warm: bool):
    if name not in pulp.listSolvers(onlyAvailable=True):
        raise RuntimeError(f"PuLP solver {name} is not available")
    return pulp.getSolver(name, msg=False, timeLimit=time_limit, warmStart=warm)


def solve_with_pulp(model: LinearModel, *, solver: str = "PULP_CBC_CMD", time_limit: float | None = None,
                    start_values=None) -> SolveOutcome:
    """Solve `model` with PuLP (CBC unless `solver` names another PuLP solver): the LP relaxation first,
    accepted as proven optimal when integral, then the integer model warm-started from `start_values`;
    `time_limit` is the solver's own limit in seconds."""
    relaxed, relaxed_variables = _build(model, relax=True)
    relaxed.solve(_solver(solver, time_limit, False))
    if relaxed.status == pulp.LpStatusInfeasible:
        return SolveOutcome(Status.INFEASIBLE, notes=("LP relaxation infeasible",))
    lp_bound = None
    if pulp.LpStatus[relaxed.status] == "Optimal":
        x_values, lp_bound = _decode(relaxed, model, relaxed_variables)
        if is_integral(model, x_values):
            return SolveOutcome(Status.OPTIMAL, x_values, lp_bound, lp_bound, ("LP relaxation integral",))
    integer, variables = _build(model, relax=False)
    if start_values is not None:
        for variable, value in zip(variables, start_values):
            variable.setInitialValue(float(value))
    integer.solve(_solver(solver, time_limit, start_values is not None))
    if integer.status == pulp.LpStatusInfeasible:
        return SolveOutcome(Status.INFEASIBLE)
    if integer.sol_status in (pulp.LpSolutionOptimal,):
        x_values, objective = _decode(integer, model, variables)
        return SolveOutcome(Status.OPTIMAL, x_values, objective, objective)
    if integer.sol_status in (pulp.LpSolutionIntegerFeasible,):
        x_values, objective = _decode(integer, model, variables)
        return SolveOutcome(Status.TIME_LIMIT, x_values, objective, lp_bound, ("CBC stopped before proving optimality",))
    return SolveOutcome(Status.TIME_LIMIT, None, None, lp_bound, (f"CBC ended with {pulp.LpStatus[integer.status]}",))
