"""The greedy pass's nominal charge against its CPU time: for each instance, `greedy_pass_seconds`
(what the budget gates of milp's warm start and milp-load's seeds read) beside the CPU seconds
(time.process_time, least of `--repeats` runs) of one greedy pass, of the reserving greedy pass
(under a memory limit, from the least-memory plan; charged as greedy is) and of one pass of
`improve` (charged `node_units` a node), each on a fresh copy of the problem (its caches --
visiting order, device arrays, neighbours -- not yet built: "cold"; "warm" repeats the pass on the
same copy), under a deadline nested as a job's (a command's budget, a job's within it, a planner's
child charging it; limits far off), so each step's charges and clock checks are counted as in a job.
Then a least-squares fit of each greedy step's time (timed between the pass's charges)
on its candidates x (1 + degree), the shape of `local_search.node_units`' memory term.

Instances: the suite's random-dag 100 / 1,000 / 10,000, series-parallel 300, skip-chain 1,000
(binding and none), and the per-operator problems of gpt3-175B on 64 and 1,024 devices and
megatron-1T on 64 and 3,072 (a100-80gb-superpod, `prepare_problem`, with the device's memory and
without a limit). `--in-job PLANNER LIMIT` instead answers each instance with PLANNER at LIMIT
seconds (as `bench_cpu_clock.py` does, the memory-bound variants) and prints, for each greedy,
reserving-greedy, improve and repair call inside the job, its CPU seconds against the nominal
seconds it charged (its meter's units), the job's whole CPU at the end. Run it niced on a quiet machine and record `uptime` beside it:

    nice python scripts/bench_greedy_charge.py
    nice python scripts/bench_greedy_charge.py --instances dag-10000-binding --repeats 5
    nice python scripts/bench_greedy_charge.py --instances dag-10000-binding --in-job greedy 3
"""
from __future__ import annotations

import argparse
import dataclasses
import pickle
import sys
import time

import numpy as np

from solver_plan.deadline import WORK_UNIT_S, WorkMeter, command_budget, time_budget
from solver_plan.intra.greedy_plans import (greedy_assignment, greedy_pass_seconds, least_memory_plan,
                                            reserving_greedy)
from solver_plan.intra.local_search import improve, node_units

SUPERPOD = "a100-80gb-superpod"
FAR_S = 1e5  # the deadlines' limit: never reached, so every pass runs to its end
SUITE = {
    "dag-100": "random-dag:nodes=100,candidates=6-30,seed=1,memory={memory},devices=8",
    "dag-1000": "random-dag:nodes=1000,candidates=6-30,seed=2,memory={memory},devices=8",
    "dag-10000": "random-dag:nodes=10000,candidates=10-30,seed=1,memory={memory},devices=16",
    "sp-300": "series-parallel:nodes=300,candidates=6-30,seed=1,memory={memory},devices=8",
    "skip-1000": "skip-chain:nodes=1000,candidates=6,seed=1,memory={memory},devices=8",
}
MODELS = {"gpt3-175B@64": ("gpt3-175B", 64), "gpt3-175B@1024": ("gpt3-175B", 1024),
          "megatron-1T@64": ("megatron-1T", 64), "megatron-1T@3072": ("megatron-1T", 3072)}
MEMORY = {"binding": "binding", "none": "none"}  # suite levels; models: the device's memory or none
INSTANCES = tuple(f"{name}-{memory}" for name in (*SUITE, *MODELS) for memory in MEMORY)


def build(instance: str):
    """The instance's ConfigProblem (`name-memory`)."""
    name, memory = instance.rsplit("-", 1)
    if name in SUITE:
        from solver_plan.suite.generators import resolve_problem
        return resolve_problem(SUITE[name].format(memory=memory))
    from solver_plan.cluster.loader import resolve_cluster
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.planning import DEVICE_MEMORY, prepare_problem
    model, devices = MODELS[name]
    problem, _ = prepare_problem(resolve_model(model), resolve_cluster(SUPERPOD, devices),
                                 DEVICE_MEMORY if memory == "binding" else None)
    return problem


def stripped(problem) -> bytes:
    """The problem pickled without its caches (cached properties, the visiting order): each load is cold."""
    fields = {field.name for field in dataclasses.fields(problem)}
    state = {key: value for key, value in problem.__dict__.items() if key in fields}
    bare = object.__new__(type(problem))
    bare.__dict__.update(state)
    return pickle.dumps(bare)


class StepClock(WorkMeter):
    """A meter that also notes the time of each charge: a pass charges once a node, at the start of
    its step, so consecutive notes time one step."""

    def __init__(self):
        super().__init__(job_deadline())
        self.times: list[float] = []

    def charge(self, units: float) -> None:
        self.times.append(time.perf_counter())
        super().charge(units)


def job_deadline():
    """A planner's deadline inside a job inside a command, as `solve` gets it, with a far limit."""
    command = time_budget(FAR_S)
    return time_budget(FAR_S, within=command).child(charges_parent=True)


def cpu(run) -> tuple[float, object]:
    started = time.process_time()
    out = run()
    return time.process_time() - started, out


def measure(instance: str, repeats: int) -> dict:
    problem = build(instance)
    blob = stripped(problem)
    adjacency = problem.neighbours()
    units = node_units(problem)
    row = {"instance": instance, "nodes": problem.num_nodes, "edges": len(problem.edges),
           "candidates": problem.num_candidates, "limit": problem.memory_limit is not None,
           "nominal": greedy_pass_seconds(problem), "visit_nominal": sum(units) * WORK_UNIT_S}
    cold, warm, reserve, visits = [], [], [], []
    steps = None
    for _ in range(repeats):
        fresh = pickle.loads(blob)
        seconds, plan = cpu(lambda: greedy_assignment(fresh, job_deadline()))
        cold.append(seconds)
        clock = StepClock()
        seconds, _ = cpu(lambda: greedy_assignment(fresh, meter=clock))
        warm.append(seconds)
        step = np.diff(clock.times + [time.perf_counter()])
        steps = step if steps is None else np.minimum(steps, step)
        if fresh.memory_limit is not None:
            reference = least_memory_plan(fresh)
            reserve.append(cpu(lambda: reserving_greedy(fresh, reference, job_deadline()))[0])
        visits.append(cpu(lambda: improve(fresh, plan, job_deadline(), max_passes=1))[0])
    row.update(cold=min(cold), warm=min(warm), reserve=min(reserve) if reserve else None, improve=min(visits))
    row["fit"] = fit(problem, adjacency, steps)
    return row


def fit(problem, adjacency, steps) -> dict:
    """Least squares of each step's microseconds (in visiting order) on 1 and candidates x (1 + degree)."""
    from solver_plan.intra.greedy_plans import visiting_order
    order = visiting_order(problem)
    prices = np.array([len(problem.candidates[node]) * (1 + len(adjacency[node])) for node in order], dtype=float)
    micro = np.asarray(steps) * 1e6
    design = np.column_stack([np.ones_like(prices), prices])
    (constant, per_price), *_ = np.linalg.lstsq(design, micro, rcond=None)
    return {"step_us_median": float(np.median(micro)), "step_us_mean": float(micro.mean()),
            "steps_s": float(micro.sum() * 1e-6),
            "constant_us": float(constant), "per_price_us": float(per_price), "mean_price": float(prices.mean())}


TRACED = ("greedy_assignment", "reserving_greedy", "improve", "repair_memory")


def in_job(instance: str, planner: str, limit: float) -> list[tuple[str, float, float]]:
    """(loop, CPU seconds, nominal seconds charged) of each traced call while a job answers
    `instance` with `planner` at `limit` seconds, then ("job", its CPU, the limit)."""
    from solver_plan.intra import greedy_plans
    calls: list[tuple[str, float, float]] = []

    def traced(name, loop):
        def run(*args, **kwargs):
            meter = kwargs.get("meter") or next((a for a in args if isinstance(a, WorkMeter)), None)
            units = 0.0 if meter is None else meter.units
            seconds, out = cpu(lambda: loop(*args, **kwargs))
            calls.append((name, seconds, 0.0 if meter is None else (meter.units - units) * meter.unit_s))
            return out
        return run
    for name in TRACED:
        setattr(greedy_plans, name, traced(name, getattr(greedy_plans, name)))
    started = time.process_time()
    name, memory = instance.rsplit("-", 1)
    if name in SUITE:
        from solver_plan.suite.run import answer_problem
        answer_problem(SUITE[name].format(memory=memory), planner, time_limit=limit)
    else:
        from solver_plan.planning import UNLIMITED, answer_plan
        from solver_plan.requests import PlanRequest
        model, devices = MODELS[name]
        request = PlanRequest(model, SUPERPOD, planner, devices=devices, time_limit=limit,
                              memory_limit=None if memory == "binding" else UNLIMITED)
        answer_plan(request, command_budget(limit, None))
    calls.append(("job", time.process_time() - started, limit))
    return calls


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--instances", nargs="+", default=list(INSTANCES), choices=INSTANCES, metavar="INSTANCE")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--in-job", nargs=2, metavar=("PLANNER", "LIMIT"))
    args = parser.parse_args(argv)
    if args.in_job:
        for instance in args.instances:
            for loop, seconds, nominal in in_job(instance, args.in_job[0], float(args.in_job[1])):
                print(f"{instance:<24} {loop:<18} cpu {seconds:6.3f} nominal {nominal:6.3f}", flush=True)
        return 0
    print(f"{'instance':<24} {'nodes':>6} {'cands':>7} {'nominal':>8} {'cold':>7} {'warm':>7} {'ratio':>6} "
          f"{'reserve':>7} {'visits':>8} {'improve':>7} {'ratio':>6} | {'step us':>7} {'fit c':>6} "
          f"{'fit/price':>9} {'price':>6}")
    for instance in args.instances:
        row = measure(instance, args.repeats)
        f = row["fit"]
        reserve = "-" if row["reserve"] is None else f"{row['reserve']:.3f}"
        print(f"{instance:<24} {row['nodes']:>6} {row['candidates']:>7} {row['nominal']:>8.3f} {row['cold']:>7.3f} "
              f"{row['warm']:>7.3f} {row['nominal'] / row['cold']:>6.2f} {reserve:>7} {row['visit_nominal']:>8.3f} "
              f"{row['improve']:>7.3f} {row['visit_nominal'] / row['improve']:>6.2f} | {f['step_us_median']:>7.1f} "
              f"{f['constant_us']:>6.1f} {f['per_price_us']:>9.3f} {f['mean_price']:>6.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
