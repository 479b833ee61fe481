"""Root LP of the binding-memory bench instances by other LP methods than dual simplex (issue 28).

Builds the one-hot model of the simplified `bench_binding_memory` instance (`config_model`, as
milp's root LP route does) and solves its LP relaxation with HiGHS in this process, one method per
run: dual simplex as milp does it (`simplex`), the interior-point method without or with crossover
(`ipm-off`, `ipm-on`: IPX) or PDLP (`pdlp`). Prints, per method: HiGHS' status and objective, the
safe bound `lp_fixing.safe_bound` computes from the returned row duals (valid for any duals, so an
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
from solver_plan.intra.backends.highs import _variables_and_constraints
from solver_plan.intra.linear_model import LinearModel, LpSolution, config_model, row_scales
from solver_plan.intra.lp_fixing import lp_relaxation, safe_bound
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


def pair_ends(model) -> np.ndarray:
    """Per y column of `model` (after its x columns), the x columns of its two ends: each y column sits
    in two marginal rows, sum_l y[k, l] - x[u, k] = 0, whose -1 entry is its end's x column."""
    num_x = model.num_decode_columns
    marginal = (model.columns < num_x) & (model.values == -1.0)
    row_x = np.full(model.num_rows, -1, dtype=np.int64)
    row_x[model.rows[marginal]] = model.columns[marginal]
    pair = model.columns >= num_x
    order = np.argsort(model.columns[pair], kind="stable")
    return row_x[model.rows[pair][order]].reshape(-1, 2)


def column_submodel(model, keep: np.ndarray):
    """`model` on the columns where `keep` (x columns first), every row kept (so row duals map 1:1)."""
    index = np.cumsum(keep) - 1
    entries = keep[model.columns]
    num_x = int(keep[:model.num_decode_columns].sum())
    offsets = np.searchsorted(np.flatnonzero(keep[:model.num_decode_columns]), model.node_offsets)
    return LinearModel(model.cost[keep], model.offset, model.lower[keep], model.upper[keep], model.integer[keep],
                       model.rows[entries], index[model.columns[entries]], model.values[entries], model.row_lower,
                       model.row_upper, num_x, offsets)


def complete_duals(model, duals: np.ndarray, rows: np.ndarray, ends: np.ndarray, passes: int
                   ) -> tuple[np.ndarray, float, list]:
    """Duals of the marginal `rows` the restricted LP left empty (sum_l y[k, l] - x[u, k] = 0 with
    x[u, k] not in it): each set to the least reduced cost of its pair columns without it, so that
    none of them is negative and x[u, k] gets what any plan using it must pay on that edge (as a
    min-marginal); a pair column sits in one row of each end, so the rows at the edges' first ends
    are set first, then those at their second ends, `passes` times. Any duals give a valid bound, so
    this only decides how tight it is. Returns the best duals, their safe bound and each step's bound."""
    duals = duals.copy()
    chosen = np.zeros(model.num_rows, dtype=bool)
    chosen[rows] = True
    entries = chosen[model.rows] & (model.columns >= model.num_decode_columns)
    e_rows, e_columns = model.rows[entries], model.columns[entries]
    row_x = np.full(model.num_rows, -1, dtype=np.int64)
    marginal = (model.columns < model.num_decode_columns) & (model.values == -1.0)
    row_x[model.rows[marginal]] = model.columns[marginal]
    first_end = row_x[e_rows] == ends[e_columns - model.num_decode_columns, 0]
    best, best_duals, history = -np.inf, duals.copy(), []
    for _ in range(passes):
        for side in (first_end, ~first_end):
            _, reduced = safe_bound(model, duals)
            own = reduced[e_columns[side]] + duals[e_rows[side]]  # the pair's reduced cost without this row
            least = np.full(model.num_rows, np.inf)
            np.minimum.at(least, e_rows[side], own)
            touched = np.isfinite(least)
            duals[touched] = least[touched]
            bound, _ = safe_bound(model, duals)
            history.append(bound)
            if bound > best:
                best, best_duals = bound, duals.copy()
    return best_duals, best, history


class WarmLp:
    """HiGHS in this process on all rows of `model` and a growing set of its columns (added with
    addCols, so each solve starts from the last basis), rows scaled as the backend scales the whole
    model; row duals returned unscaled."""

    def __init__(self, model):
        self.model, self.scale = model, row_scales(model)
        order = np.lexsort((model.rows, model.columns))
        self.starts = np.searchsorted(model.columns[order], np.arange(model.num_columns + 1))
        self.index = model.rows[order].astype(np.int32)
        self.value = model.values[order] * self.scale[model.rows[order]]
        self.highs = highspy.Highs()
        for name, value in (("output_flag", False), ("presolve", "off"), ("threads", 1)):
            self.highs.setOptionValue(name, value)
        infinity = self.highs.getInfinity()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = 0, model.num_rows
        lp.row_lower_ = np.where(np.isinf(model.row_lower), -infinity, model.row_lower * self.scale)
        lp.row_upper_ = np.where(np.isinf(model.row_upper), infinity, model.row_upper * self.scale)
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.zeros(1, dtype=np.int32)
        self.highs.passModel(lp)

    def add(self, columns: np.ndarray) -> None:
        """Columns (indices of the model) joining the LP."""
        lengths = self.starts[columns + 1] - self.starts[columns]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
        take = np.repeat(self.starts[columns] - starts, lengths) + np.arange(int(lengths.sum()))
        self.highs.addCols(len(columns), self.model.cost[columns], self.model.lower[columns], self.model.upper[columns],
                           int(lengths.sum()), starts, self.index[take], self.value[take])

    def solve(self) -> LpSolution:
        """The LP on the columns added so far."""
        self.highs.run()
        if self.highs.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return LpSolution(Status.TIME_LIMIT)
        solution = self.highs.getSolution()
        return LpSolution(Status.OPTIMAL, np.asarray(solution.col_value), np.asarray(solution.row_dual) * self.scale,
                          self.highs.getInfo().objective_function_value)


def column_generation(problem, model, seed_per_node: int, passes: int, rounds: int, add_limit: int,
                      add_below: float = -1e-9, log=print) -> dict:
    """The root LP by column generation: the LP on a few candidates per node (the `seed_per_node`
    cheapest and the least-memory one) and the pairs between them, its duals completed on the rows it
    left empty (complete_duals), every column priced on the whole model; columns whose reduced cost is
    negative (for a pair column: its ends) join, until the whole model's safe bound reaches the
    restricted LP's optimum (then that is the LP's optimum) or `rounds` rounds."""
    warm = WarmLp(model)
    in_lp = np.zeros(model.num_columns, dtype=bool)
    num_x = model.num_decode_columns
    ends = pair_ends(model)
    keep_x = np.zeros(num_x, dtype=bool)
    memory = np.bincount(model.columns[model.rows >= 0], weights=np.where(
        model.row_upper[model.rows] > 1.0, model.values, 0.0), minlength=model.num_columns)[:num_x]
    for start, stop in zip(model.node_offsets[:-1], model.node_offsets[1:]):
        costs = model.cost[start:stop]
        keep_x[start + np.argsort(costs, kind="stable")[:seed_per_node]] = True
        keep_x[start + int(np.argmin(memory[start:stop]))] = True
    out: dict = {"rounds": []}
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for round_ in range(rounds):
        keep = np.concatenate([keep_x, keep_x[ends[:, 0]] & keep_x[ends[:, 1]]])
        warm.add(np.flatnonzero(keep & ~in_lp))
        in_lp |= keep
        lp_cpu = time.process_time()
        solution = warm.solve()
        lp_cpu = time.process_time() - lp_cpu
        if solution.status is not Status.OPTIMAL:
            log(f"#   round {round_}: restricted LP {solution.status}")
            return out
        has_entry = np.zeros(model.num_rows, dtype=bool)
        has_entry[model.rows[keep[model.columns]]] = True
        empty = np.flatnonzero(~has_entry & (model.row_lower == model.row_upper))
        dual_cpu = time.process_time()
        duals, bound, history = complete_duals(model, solution.row_duals, empty, ends, passes)
        _, reduced = safe_bound(model, duals)
        dual_cpu = time.process_time() - dual_cpu
        negative = np.flatnonzero(reduced < add_below)
        add = np.zeros(num_x, dtype=bool)
        worst = negative[np.argsort(reduced[negative])[:add_limit]]
        x_cols = worst[worst < num_x]
        add[x_cols] = True
        y_ends = ends[worst[worst >= num_x] - num_x].ravel()
        add[y_ends] = True
        add &= ~keep_x
        row = {"round": round_, "x": int(keep_x.sum()), "columns": int(keep.sum()), "lp": solution.objective,
               "bound": bound, "history": history, "lp_cpu": lp_cpu, "dual_cpu": dual_cpu,
               "negative": len(negative), "added": int(add.sum()), "cpu": time.process_time() - cpu0,
               "wall": time.perf_counter() - wall0}
        out["rounds"].append(row)
        log(f"#   round {round_}: {row['x']:,} candidates, {row['columns']:,} columns; restricted LP "
            f"{solution.objective:.10g} ({lp_cpu:.1f} s CPU); safe bound {bound:.10g} (passes "
            f"{' '.join(f'{h:.6g}' for h in history)}; {dual_cpu:.1f} s CPU); {len(negative):,} negative "
            f"reduced costs, {row['added']:,} candidates added; total {row['cpu']:.1f} s CPU, {row['wall']:.1f} s wall")
        out.update(duals=duals, bound=bound, values=None)
        if bound >= solution.objective - 1e-7 * (1 + abs(solution.objective)) or not add.any():
            break
        keep_x |= add
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
    parser.add_argument("--seed-per-node", type=int, default=2, help="colgen: cheapest candidates per node to start")
    parser.add_argument("--passes", type=int, default=2, help="colgen: dual completion passes")
    parser.add_argument("--rounds", type=int, default=20, help="colgen: rounds at most")
    parser.add_argument("--add-below", type=float, default=-1e-9, help="colgen: price in columns below this reduced cost")
    parser.add_argument("--add-limit", type=int, default=50_000, help="colgen: most negative columns priced in a round")
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
            result = column_generation(problem, model, args.seed_per_node, args.passes, args.rounds, args.add_limit,
                                       args.add_below)
            print(f"colgen   safe bound {result.get('bound', float('nan')):.10g} wall {time.perf_counter() - wall:.1f} s "
                  f"CPU {time.process_time() - cpu:.1f} s", flush=True)
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
