"""Chrome trace export (chrome://tracing, ui.perfetto.dev): one thread per device or link, one
complete event ("X") per task, times in microseconds."""
from __future__ import annotations

from pathlib import Path

from solver_plan.files import write_json_atomic
from solver_plan.simulate.timeline import Simulation


def chrome_trace(sim: Simulation, process_name: str = "solver-plan simulation") -> dict:
    """The simulation as a Chrome trace object (one thread per resource, times in microseconds)."""
    threads = {use.name: i for i, use in enumerate(sim.resources)}
    events = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": process_name}}]
    for name, tid in threads.items():
        events.append({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 0, "tid": tid, "args": {"sort_index": tid}})
    for task in sim.tasks:
        if task.resource not in threads:  # zero-time barriers run on no resource
            continue
        events.append({"name": task.label, "cat": task.category, "ph": "X", "pid": 0,
                       "tid": threads[task.resource], "ts": task.start * 1e6, "dur": task.duration * 1e6})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"iteration_s": sim.iteration_s}}


def write_chrome_trace(sim: Simulation, path: str | Path, process_name: str = "solver-plan simulation") -> None:
    """Write `chrome_trace(sim)` to `path` as JSON, atomically."""
    write_json_atomic(path, chrome_trace(sim, process_name))
