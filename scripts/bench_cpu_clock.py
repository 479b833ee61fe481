"""Idle vs loaded on a shared machine: the per-operator cases of bench_time_limits.py (plan on the
large models, the 10,000-operator DAG as a suite problem) run in fresh processes whose deadline
clock (`solver_plan.deadline.clock`) reads the process's own CPU time, from its start (start-up
included): x1 is an idle machine, x3 one three times slower, whatever else the machine runs.

Prints one row per case: status, objective, whether the wall clock cut it short ("CUT") and the
CPU seconds of each run, then whether the answer changed. Counts the idle runs cut short and the
answers changed without saying so (target 0). The solver workers (HiGHS: milp, milp-load's MILP)
run in other processes, whose CPU this clock does not see: their rows are approximate.

    python scripts/bench_cpu_clock.py --limits 1,3 --planners greedy,edge-drop,mcmc,milp-load
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench_time_limits import DAG, SUPERPOD, _compile_package

INSTANCES = ("gpt3-175B@64", "gpt3-175B@1024", "megatron-1T@64", "megatron-1T@3072", "dag-10000")
DAG_PLANNERS = ("greedy", "milp-load", "milp")  # the batch command's planners
RATES = (1.0, 3.0)
ROOT = Path(__file__).resolve().parents[1]

RUN = r'''
import json, sys, time
from solver_plan import deadline
rate, limit, instance, planner, cluster, dag = float(sys.argv[1]), float(sys.argv[2]), *sys.argv[3:7]
deadline.clock = lambda: time.process_time() * rate  # the process's CPU: the machine's load is not seen
if instance == "dag-10000":
    from solver_plan.suite.run import answer_problem
    answer = answer_problem(dag, planner, time_limit=limit)
    status, objective, notes = answer.status, answer.objective, answer.notes
else:
    from solver_plan.planning import answer_plan
    from solver_plan.requests import PlanRequest
    model, devices = instance.split("@")
    request = PlanRequest(model, cluster, planner, devices=int(devices), time_limit=limit)
    result = answer_plan(request, deadline.command_budget(limit, 0.0)).result
    status, objective, notes = result.status, result.objective, result.notes
print(json.dumps({"status": status.value, "objective": objective, "cut": deadline.CUT_SHORT_NOTE in notes,
                  "cpu": time.process_time()}))
'''


def run(instance: str, planner: str, limit: float, rate: float) -> dict:
    """One case in a fresh process with the CPU-time clock at `rate`."""
    done = subprocess.run([sys.executable, "-c", RUN, str(rate), str(limit), instance, planner, SUPERPOD, DAG],
                          cwd=ROOT, capture_output=True, text=True)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return {"status": "CRASH " + done.stderr.strip()[-120:], "objective": None, "cut": False, "cpu": 0.0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--limits", default="1,3")
    parser.add_argument("--instances", default=",".join(INSTANCES))
    parser.add_argument("--planners", default="greedy,edge-drop,mcmc,milp-load")
    args = parser.parse_args()
    _compile_package()  # as an install has it: else each run compiles ~180 modules (~0.2 s of CPU) first
    idle_cut = changed = unsaid = total = 0
    for limit in (float(x) for x in args.limits.split(",")):
        for instance in args.instances.split(","):
            for planner in args.planners.split(","):
                if instance == "dag-10000" and planner not in DAG_PLANNERS:
                    continue
                idle, loaded = (run(instance, planner, limit, rate) for rate in RATES)
                same = (idle["status"], idle["objective"]) == (loaded["status"], loaded["objective"])
                total += 1
                idle_cut += idle["cut"]
                changed += not same
                unsaid += not same and not (idle["cut"] or loaded["cut"])
                cells = []
                for rate, row in zip(RATES, (idle, loaded)):
                    objective = "" if row["objective"] is None else f"{row['objective']:.6g}"
                    cells.append(f"x{rate:g} {row['status']:<10} {objective:<9} {'CUT' if row['cut'] else '   '} "
                                 f"cpu {row['cpu']:5.2f}")
                print(f"{instance:<17} {planner:<10} {limit:>3g} | " + " | ".join(cells)
                      + ("  same" if same else "  CHANGED"), flush=True)
    print(f"{idle_cut} of {total} idle (x1) runs cut short by the clock; {changed} answers changed at x3, "
          f"{unsaid} of them without saying so (target 0)")


if __name__ == "__main__":
    main()
