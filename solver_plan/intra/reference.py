"""The reference formulation: the plain one-hot MILP as the field states it, solved by PuLP.

Alpa (Zheng et al., OSDI'22, section 4.2; its auto-sharding solver builds this in PuLP) and PyTorch
AutoParallel (facebookresearch/autoparallel, also PuLP; its binary x[op, argument, output placement,
input placement] is the edge-pair variable e below) both state intra-operator planning as
  min  sum_v c_v . s_v + sum_(u,v) r_uv . e_uv
  s.t. sum_k s_v[k] = 1                                  one candidate per node
       sum_(k,l) e_uv[k,l] = 1                           one candidate pair per edge
       sum_l e_uv[k,l] <= s_u[k],  sum_k e_uv[k,l] <= s_v[l]   the pair agrees with both ends
       sum over (v, k) using device d of m_v[k] s_v[k] <= M     for every device d
       s, e binary
and hand it to CBC. `reference-cbc` and `reference-highs` solve exactly this, with every edge
variable (none dropped for zero cost), no simplification, no warm start, no LP-first pass and no
bound from our relaxations, single-threaded, so reports show our planners against it as a ratio on
the same instances. The solve runs in a separate process with a wall-clock limit (a forked child for
CBC; the HiGHS worker of `isolated`, since highspy must not load next to ortools), and the time
spent building the PuLP model counts against the limit, as it does for its users.
"""
from __future__ import annotations

import time

from solver_plan.intra import isolated
from solver_plan.intra.answer import Answer
from solver_plan.intra.context import Context
from solver_plan.intra.harness import run_planner
from solver_plan.intra.subprocess_guard import call_in_subprocess
from solver_plan.intra.problem import ConfigProblem
from solver_plan.result import Status

BUILD_MARGIN_S = 0.5  # kept from the solver's limit for reading the answer back
OPTIMALITY_GAP = 1e-6  # relative, as the harness requires of an OPTIMAL plan


def problem_data(problem: ConfigProblem) -> dict:
    """The arrays the formulation needs (cheap to pickle: no graph, no configurations)."""
    return {"node_costs": [list(map(float, c)) for c in problem.node_costs],
            "node_memory": [list(map(float, m)) for m in problem.node_memory],
            "node_devices": problem.node_devices, "edges": problem.edges,
            "edge_costs": [m.tolist() for m in problem.edge_costs],
            "num_devices": problem.num_devices, "memory_limit": problem.memory_limit}


def build_model(data: dict):
    """The PuLP model above and its node variables s[v][k]."""
    import pulp

    model = pulp.LpProblem("reference", pulp.LpMinimize)
    binary = model.add_variable if hasattr(model, "add_variable") else pulp.LpVariable  # PuLP >= 3.3 : older
    s = [[binary(f"s_{v}_{k}", cat="Binary") for k in range(len(costs))]
         for v, costs in enumerate(data["node_costs"])]
    objective = [(s[v][k], cost) for v, costs in enumerate(data["node_costs"]) for k, cost in enumerate(costs)]
    for j, ((u, v), matrix) in enumerate(zip(data["edges"], data["edge_costs"])):
        e = [[binary(f"e_{j}_{k}_{l}", cat="Binary") for l in range(len(row))] for k, row in enumerate(matrix)]
        objective += [(e[k][l], cost) for k, row in enumerate(matrix) for l, cost in enumerate(row)]
        model += pulp.lpSum(x for row in e for x in row) == 1
        for k, row in enumerate(e):
            model += pulp.lpSum(row) <= s[u][k]
        for l in range(len(e[0])):
            model += pulp.lpSum(row[l] for row in e) <= s[v][l]
    model += pulp.LpAffineExpression(objective)
    for row in s:
        model += pulp.lpSum(row) == 1
    if data["memory_limit"] is not None:
        per_device = [[] for _ in range(data["num_devices"])]
        for v, (memory, devices) in enumerate(zip(data["node_memory"], data["node_devices"])):
            for k, used in enumerate(devices):
                for d in used:
                    per_device[d].append((s[v][k], memory[k]))
        for terms in per_device:
            model += pulp.LpAffineExpression(terms) <= data["memory_limit"]
    return model, s


def solve_reference(data: dict, solver: str, time_limit: float | None) -> dict:
    """Build and solve; runs in a child process. Returns status, assignment, bound and notes."""
    import pulp

    start = time.monotonic()
    model, s = build_model(data)
    built = time.monotonic() - start
    notes = [f"PuLP model: {model.numVariables()} variables, {model.numConstraints()} constraints, "
             f"built in {built:.2f} s"]
    limit = None if time_limit is None else time_limit - built - BUILD_MARGIN_S
    if limit is not None and limit <= 0:
        return {"status": "TIME_LIMIT", "assignment": None, "bound": None, "notes": notes + ["no time left to solve"]}
    # The gap at which a solver may call a plan optimal: our validator's tolerance (HiGHS' default,
    # 1e-4, would stop short of what our planners must prove).
    if solver == "cbc":
        backend = pulp.PULP_CBC_CMD(msg=False, timeLimit=limit, threads=1, gapRel=OPTIMALITY_GAP)
    else:
        backend = pulp.HiGHS(msg=False, timeLimit=limit, threads=1, gapRel=OPTIMALITY_GAP)
    solve_started = time.monotonic()
    model.solve(backend)
    solve_s = time.monotonic() - solve_started
    assignment = []
    for row in s:
        chosen = [k for k, x in enumerate(row) if (x.varValue or 0.0) > 0.5]
        assignment.append(chosen[0] if len(chosen) == 1 else None)
    assignment = None if None in assignment else assignment
    bound = None
    if solver == "highs":  # HiGHS' proven bound; PuLP reads none from CBC
        try:
            bound = float(model.solverModel.getInfo().mip_dual_bound)
        except Exception:  # noqa: BLE001  (an older PuLP/highspy: no bound, not an error)
            bound = None
    status = {pulp.LpSolutionOptimal: "OPTIMAL", pulp.LpSolutionIntegerFeasible: "TIME_LIMIT",
              pulp.LpSolutionInfeasible: "INFEASIBLE", pulp.LpSolutionNoSolutionFound: "TIME_LIMIT"}.get(
        model.sol_status, "ERROR")
    if status == "TIME_LIMIT" and assignment is None and (limit is None or solve_s < 0.5 * limit):
        # "no solution found" long before the limit is a solver failure, not a time-out
        status = "ERROR"
        notes.append(f"{solver} stopped after {solve_s:.2f} s without a solution, before its time limit")
    if status == "OPTIMAL" and bound is None:  # CBC proved it within OPTIMALITY_GAP
        bound = pulp.value(model.objective)
    notes.append(f"{solver}: {pulp.LpStatus[model.status]}, solution status {model.sol_status}")
    return {"status": status, "assignment": assignment, "bound": bound, "notes": notes}


def _core(solver: str):
    def core(problem: ConfigProblem, context: Context) -> Answer:
        remaining = context.deadline.remaining()
        data = problem_data(problem)
        try:
            if solver == "highs":
                out = isolated.call("highspy:pulp", __name__, "solve_reference", timeout=remaining, killable=True,
                                    data=data, solver=solver, time_limit=remaining)
            else:
                out = call_in_subprocess(solve_reference, (data, solver, remaining), remaining)
        except TimeoutError as exc:
            return Answer(Status.TIME_LIMIT, notes=(f"reference-{solver}: {exc}",))
        assignment = None if out["assignment"] is None else tuple(out["assignment"])
        status = Status(out["status"])
        if status is Status.OPTIMAL and assignment is None:
            status = Status.ERROR
        return Answer(status, assignment, out["bound"], tuple(out["notes"]))
    return core


def _planner(solver: str):
    name = f"reference-{solver}"

    def plan(problem: ConfigProblem, *, time_limit=None, seed=0, warm_start=None, **options):
        # exact=False: no warm start, no heuristic incumbent, no bound but the solver's own.
        return run_planner(name, problem, _core(solver), exact=False, time_limit=time_limit, seed=seed,
                           options=options)
    plan.__name__ = f"plan_reference_{solver}"
    return plan  # a row of planner_tables.config_planners


plan_reference_cbc = _planner("cbc")
plan_reference_highs = _planner("highs")
