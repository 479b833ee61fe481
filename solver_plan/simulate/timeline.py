"""`Simulation`: the frozen result of simulating a strategy — iteration time, every task's interval,
per-device busy time and utilisation, the critical path — and its text summary."""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.simulate.engine import NO_TASK, UNCONTENDED, TaskEngine
from solver_plan.units import format_seconds


@dataclass(frozen=True)
class TaskRecord:
    """One simulated task: label, category, resource and interval (seconds)."""
    label: str
    category: str  # forward, backward, transfer, sync, barrier
    resource: str
    start: float
    end: float

    @property
    def duration(self) -> float:
        """Seconds from start to end."""
        return self.end - self.start


@dataclass(frozen=True)
class ResourceUse:
    """Busy seconds, utilisation and task count of one resource over an iteration."""
    name: str
    busy_s: float
    utilisation: float  # busy / iteration time
    tasks: int


@dataclass(frozen=True)
class Simulation:
    """The frozen result of one simulation (see the module text)."""
    iteration_s: float
    tasks: tuple[TaskRecord, ...]  # in start order
    resources: tuple[ResourceUse, ...]  # devices first, then the links that carried something
    critical_path: tuple[TaskRecord, ...]  # first task to last

    @property
    def devices(self) -> tuple[ResourceUse, ...]:
        """The accelerators' use, without the links."""
        return tuple(r for r in self.resources if r.name.startswith("device "))


def critical_path(engine: TaskEngine) -> list[int]:
    """Walk back from the last task to end: at each step the predecessor that made it ready, or the
    task before it on its device when that is what it waited for."""
    ids = engine.task_ids()
    if not ids:
        return []
    t = max(ids, key=lambda i: (engine.end[i], engine.key[i]))
    path = [t]
    while True:
        before = engine.prev[t] if engine.resource[t] != UNCONTENDED else NO_TASK
        if before != NO_TASK and engine.end[before] > engine.ready[t] and engine.end[before] == engine.start[t]:
            t = before
        elif engine.preds[t] and engine.ready[t] > 0:
            t = max(engine.preds[t], key=lambda p: (engine.end[p], engine.key[p]))
        else:
            break
        path.append(t)
    path.reverse()
    return path


def snapshot(engine: TaskEngine, lowering) -> Simulation:
    """Freeze the engine's current timeline as a `Simulation`, with labels from `lowering`."""
    resources = lowering.resources
    ids = engine.task_ids()
    iteration = max((engine.end[t] for t in ids), default=0.0)

    def record(t: int) -> TaskRecord:
        category, label = lowering.describe_key(engine.key[t])
        return TaskRecord(label, category, resources.name(engine.resource[t]), engine.start[t], engine.end[t])

    records = {t: record(t) for t in ids}
    busy: dict[int, float] = {}
    count: dict[int, int] = {}
    for t in ids:
        r = engine.resource[t]
        if r != UNCONTENDED:
            busy[r] = busy.get(r, 0.0) + engine.duration[t]
            count[r] = count.get(r, 0) + 1
    used = list(range(resources.num_devices)) + sorted(r for r in busy if not resources.is_device(r))
    uses = tuple(ResourceUse(resources.name(r), busy.get(r, 0.0),
                             busy.get(r, 0.0) / iteration if iteration > 0 else 0.0, count.get(r, 0))
                 for r in used)
    ordered = tuple(sorted(records.values(), key=lambda rec: (rec.start, rec.end, rec.label)))
    path = tuple(records[t] for t in critical_path(engine))
    return Simulation(iteration, ordered, uses, path)


def format_simulation(sim: Simulation, max_rows: int = 12) -> str:
    """A readable summary: iteration time, device utilisation, busiest links, critical path."""
    lines = [f"simulated iteration {format_seconds(sim.iteration_s)} ({len(sim.tasks)} tasks)"]
    devices = sim.devices
    if devices:
        mean = sum(d.utilisation for d in devices) / len(devices)
        lines.append(f"device utilisation: mean {100 * mean:.1f}%, "
                     f"min {100 * min(d.utilisation for d in devices):.1f}%, "
                     f"max {100 * max(d.utilisation for d in devices):.1f}%")
        shown = devices if len(devices) <= max_rows else devices[:max_rows]
        lines.append("  " + ", ".join(f"d{i} {format_seconds(d.busy_s)} ({100 * d.utilisation:.0f}%)"
                                      for i, d in enumerate(shown))
                     + (" ..." if len(devices) > len(shown) else ""))
    links = sorted((r for r in sim.resources if not r.name.startswith("device ")), key=lambda r: -r.busy_s)
    if links:
        lines.append("busiest links: " + ", ".join(f"{r.name} {format_seconds(r.busy_s)} ({100 * r.utilisation:.0f}%)"
                                                  for r in links[:4]))
    path = sim.critical_path
    if path:
        by_category: dict[str, float] = {}
        for rec in path:
            by_category[rec.category] = by_category.get(rec.category, 0.0) + rec.duration
        lines.append(f"critical path: {len(path)} tasks; " + ", ".join(
            f"{k} {format_seconds(v)}" for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])))
        shown_path = path if len(path) <= max_rows else path[: max_rows // 2] + path[-max_rows // 2:]
        for i, rec in enumerate(shown_path):
            if len(path) > max_rows and i == max_rows // 2:
                lines.append(f"    ... {len(path) - max_rows} more ...")
            lines.append(f"    {format_seconds(rec.start):>10} {format_seconds(rec.duration):>10}  {rec.label} [{rec.resource}]")
    return "\n".join(lines)
