"""Root LP of the binding-memory bench instances by other LP methods than dual simplex (issue 28).

Builds the one-hot model of the simplified `bench_binding_memory` instance (`config_model`, as
milp's root LP route does) and solves its LP relaxation with HiGHS in this process, one method per
run: dual simplex as milp does it (`simplex`), the interior-point method without or with crossover
(`ipm-off`, `ipm-on`: IPX), PDLP (`pdlp`) or column generation as milp's LP route runs it in its
worker (`colgen`: column_generation.py on the backend's ColumnLp, each round logged with its
pricing CPU per non-zero, the figure behind `PRICING_UNITS_PER_NONZERO`). Prints, per method: HiGHS'
status and objective, the safe bound `column_generation.safe_bound` computes from the returned row duals (valid for any duals, so an
approximate dual, as from an IPM without crossover or PDLP, never claims more than it proves),
iterations, wall seconds and CPU seconds of this process (HiGHS' threads included), one thread
unless `--threads`. With `--plan-cost C`, also how many candidates and edge pairs the safe bound's
reduced costs would leave open below a plan of cost C (`lp_fixing.lp_relaxation`'s rule), and
`--save DIR` writes the row duals (`DIR/<method>.npy`). HiGHS' log of each run goes to
`DIR/<method>.log` when `--save` is given. Figures, not assertions: quote the machine's load.
Example (minutes at 10,000 operators):
    python scripts/probe_root_lp.py --instance random-dag:1000 --methods simplex ipm-off ipm-on pdlp
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import highspy
import numpy as np

from bench_binding_memory import instance
from solver_plan.intra import column_generation as column_generation_module
from solver_plan.intra.backends.highs import ColumnLp, _variables_and_constraints
from solver_plan.intra.column_generation import safe_bound
from solver_plan.intra.linear_model import LpSolution, config_model, row_scales
from solver_plan.intra.lp_fixing import lp_relaxation
from solver_plan.intra.simplify import simplify
from solver_plan.result import Status

METHODS = {  # name: HiGHS options
    "simplex": {"solver": "simplex", "simplex_strategy": 1},
    "ipm-off": {"solver": "ipm", "run_crossover": "off"},
    "ipm-on": {"solver": "ipm", "run_crossover": "on"},
    "pdlp": {"solver": "pdlp"},
}


def solve_root(model, method: str, time_limit: float, threads: int, presolve: str, log: str | None,
               extra: dict) -> dict:
    """One LP solve of `model` by `method`; HiGHS' figures, the safe bound and the duals."""
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", log is not None)
    if log is not None:
        highs.setOptionValue("log_to_console", False)
        highs.setOptionValue("log_file", log)
    highs.setOptionValue("presolve", presolve)
    highs.setOptionValue("threads", threads)
    highs.setOptionValue("time_limit", time_limit)
    for name, value in {**METHODS[method], **extra}.items():
        highs.setOptionValue(name, value)
    _variables_and_constraints(highs, model)
    cpu, wall = time.process_time(), time.perf_counter()
    highs.run()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    info = highs.getInfo()
    solution = highs.getSolution()
    out = {"status": highs.modelStatusToString(highs.getModelStatus()), "cpu": cpu, "wall": wall,
           "objective": info.objective_function_value, "simplex": info.simplex_iteration_count,
           "ipm": info.ipm_iteration_count, "pdlp": info.pdlp_iteration_count,
           "dual_valid": bool(solution.dual_valid)}
    if solution.dual_valid:
        duals = np.asarray(solution.row_dual) * row_scales(model)  # HiGHS saw row i times its scale
        out["duals"] = duals
        out["values"] = np.asarray(solution.col_value)
        out["bound"], _ = safe_bound(model, duals)
    return out


def column_generation(model, add_limit: int, log=print) -> dict:
    """The root LP by `column_generation.column_generation` (milp's route from
    `lp_fixing.COLGEN_MIN_ELEMENTS`) on the backend's `ColumnLp`, in this process, logging each
    round; `add_limit` replaces `ADD_LIMIT` for this run."""
    original = column_generation_module.ADD_LIMIT
    column_generation_module.ADD_LIMIT = add_limit
    started = time.process_time()

    def report(row: dict) -> None:
        log(f"#   round {row['round']}: {row['candidates']:,} candidates, {row['columns']:,} columns; restricted LP "
            f"{row['objective']:.10g}; safe bound {row['bound']:.10g} (pricing {row['pricing_cpu']:.2f} s CPU, "
            f"{row['pricing_cpu'] / max(1, len(model.values)) * 1e6:.3f} us a non-zero); {row['negative']:,} negative "
            f"reduced costs; {row['iterations']:,} simplex iterations; total {time.process_time() - started:.1f} s CPU",
            flush=True)
    try:
        lp = ColumnLp(model)
        solution, rounds = column_generation_module.column_generation(model, lp, report=report)
    finally:
        column_generation_module.ADD_LIMIT = original
    out: dict = {"status": solution.status, "rounds": rounds}
    if solution.status is Status.OPTIMAL:
        out["duals"] = solution.row_duals
        out["bound"], _ = safe_bound(model, solution.row_duals)
    return out


def open_counts(problem, model, result: dict, plan_cost: float) -> str:
    """Candidates and edge pairs the safe bound's reduced costs leave open below `plan_cost`."""
    solution = LpSolution(Status.OPTIMAL, result["values"], result["duals"], result["objective"])
    relaxation = lp_relaxation(problem, model, solution)
    open_ = relaxation.open_candidates(plan_cost)
    candidates = sum(len(c) for c in open_)
    several = sum(len(c) > 1 for c in open_)
    closed = relaxation.closed_pairs(problem, plan_cost)
    pairs = sum(int(m.size) for m in closed if m is not None)
    shut = sum(int(m.sum()) for m in closed if m is not None)
    return (f"open below {plan_cost:.10g}: {candidates:,} of {relaxation.num_candidates:,} candidates, "
            f"{pairs - shut:,} of {pairs:,} pairs; {several:,} of {len(open_):,} nodes with more than one open")


def fixed_problem(problem, model, duals: np.ndarray, plan_cost: float):
    """The problem and model `lp_fixing.restrict_by` would build from these duals against a plan of
    cost `plan_cost` (without the plan itself: its candidates are not kept open by force)."""
    from solver_plan.intra.lagrangian import restricted
    from solver_plan.intra.lagrangian_fixing import _without_closed_rows
    solution = LpSolution(Status.OPTIMAL, np.zeros(model.num_columns), duals, 0.0)
    relaxation = lp_relaxation(problem, model, solution)
    closed = relaxation.closed_pairs(problem, plan_cost)
    choices = _without_closed_rows(problem, relaxation.open_candidates(plan_cost), closed)
    closed = tuple(None if c is None else c[np.ix_(choices[u], choices[v])] for (u, v), c in zip(problem.edges, closed))
    fixed = restricted(problem, choices)
    return fixed, config_model(fixed, closed_pairs=closed)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instance", default="random-dag:10000")
    parser.add_argument("--methods", nargs="+", default=["ipm-off"], choices=sorted(METHODS) + ["colgen"])
    parser.add_argument("--add-limit", type=int, default=column_generation_module.ADD_LIMIT,
                        help="colgen: most negative columns priced in a round")
    parser.add_argument("--time-limit", type=float, default=600.0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--presolve", default="off", choices=["on", "off"])
    parser.add_argument("--option", nargs="*", default=[], help="extra HiGHS options name=value (float if it parses)")
    parser.add_argument("--plan-cost", type=float, default=None)
    parser.add_argument("--fixed", action="store_true",
                        help="after the first colgen method, run the others on the model its duals fix against --plan-cost")
    parser.add_argument("--save", default=None, help="folder for duals and HiGHS logs")
    args = parser.parse_args(argv)
    extra: dict = {}
    for item in args.option:
        name, value = item.split("=")
        try:
            extra[name] = int(value) if value.isdigit() else float(value)
        except ValueError:
            extra[name] = value
    started = time.process_time()
    problem = simplify(instance(args.instance)).problem
    model = config_model(problem)
    print(f"# {args.instance} simplified: {problem.num_nodes} nodes, {problem.num_candidates} candidates; model "
          f"{model.num_columns:,} columns, {model.num_rows:,} rows, {len(model.values):,} non-zeros "
          f"({time.process_time() - started:.1f} s of CPU to build)", flush=True)
    if args.save:
        os.makedirs(args.save, exist_ok=True)
    fixed_done = False
    for method in args.methods:
        if method == "colgen":
            cpu, wall = time.process_time(), time.perf_counter()
            result = column_generation(model, args.add_limit)
            print(f"colgen   {result['status'].value:<22} safe bound {result.get('bound', float('nan')):.10g} rounds "
                  f"{result['rounds']} wall {time.perf_counter() - wall:.1f} s CPU {time.process_time() - cpu:.1f} s",
                  flush=True)
            if "duals" in result and args.plan_cost is not None and not fixed_done:
                result["values"], result["objective"] = np.zeros(model.num_columns), result["bound"]
                print(f"#   {open_counts(problem, model, result, args.plan_cost)}", flush=True)
                if args.fixed and not fixed_done:
                    problem, model = fixed_problem(problem, model, result["duals"], args.plan_cost)
                    fixed_done = True
                    print(f"# fixed model: {problem.num_candidates:,} candidates; {model.num_columns:,} columns, "
                          f"{model.num_rows:,} rows, {len(model.values):,} non-zeros", flush=True)
            continue
        log = None if args.save is None else os.path.join(args.save, f"{method}.log")
        result = solve_root(model, method, args.time_limit, args.threads, args.presolve, log, extra)
        bound = result.get("bound")
        print(f"{method:<8} {result['status']:<22} objective {result['objective']:.10g} safe bound "
              f"{'-' if bound is None else f'{bound:.10g}'} iterations simplex {result['simplex']} ipm {result['ipm']} "
              f"pdlp {result['pdlp']} wall {result['wall']:.1f} s CPU {result['cpu']:.1f} s", flush=True)
        if bound is not None and args.plan_cost is not None and not fixed_done:
            print(f"#   {open_counts(problem, model, result, args.plan_cost)}", flush=True)
        if bound is not None and args.save:
            np.save(os.path.join(args.save, f"{method}.npy"), result["duals"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
