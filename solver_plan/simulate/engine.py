"""Task engine: tasks with durations on resources, dependencies, FIFO per resource; full and delta
simulation (FlexFlow, SysML'19, Algorithms 1 and 2).

Semantics (both algorithms compute exactly this timeline):
  ready(t) = max(0, end of every predecessor)
  each resource runs its tasks in increasing (ready, key) order (FIFO by arrival; `key` breaks ties)
  start(t) = max(ready(t), end of the task before t on its resource); end(t) = start(t) + duration
Tasks on resource -1 are uncontended (start = ready), e.g. zero-time barriers.

Keys must be unique and increase along every dependency. Then the full simulation's queue pops
tasks in (ready, key) order (a task becomes ready no earlier, and with a larger key, than the task
that releases it), and the equations above have exactly one solution: a task's values depend only
on tasks with a smaller (ready, key). The delta simulation (delta.py) keeps everything before the
earliest point a change can reach and restarts the same algorithm there.
"""
from __future__ import annotations

# The algorithm (delta.py) works on this state; its sentinels are the engine's vocabulary too.
from solver_plan.simulate.delta import BEGINNING, NO_TASK, UNCONTENDED, change_point, resimulate_from

__all__ = ["NO_TASK", "UNCONTENDED", "TaskEngine"]


class TaskEngine:
    """Mutable simulation state (the simulator's working memory; results are exported as frozen
    values by `timeline.py`). Task ids are small integers, reused after removal."""

    def __init__(self):
        self.duration: list[float] = []
        self.resource: list[int] = []
        self.key: list[int] = []
        self.preds: list[set[int]] = []
        self.succs: list[set[int]] = []
        self.ready: list[float] = []
        self.start: list[float] = []
        self.end: list[float] = []
        self.alive: list[bool] = []
        self.prev: list[int] = []  # the task before it on its resource
        self.next: list[int] = []
        self.queues: dict[int, list[tuple[float, int, int]]] = {}  # resource -> (ready, key, id) in run order
        self._free: list[int] = []
        self.dirty: set[int] = set()  # simulated tasks that gained a predecessor since
        self.fresh: set[int] = set()  # tasks added since the last simulation
        self.uncontended: set[int] = set()  # tasks on no resource (kept apart: no queue holds them)
        self.vacated: list[tuple[float, int]] = []  # (ready, key) of simulated tasks removed since
        self.resimulated = 0  # tasks the last simulation (full or delta) simulated

    # --- building -------------------------------------------------------------------------
    def add_task(self, duration: float, resource: int, key: int) -> int:
        """Add a task of `duration` seconds on `resource` with tie-break `key` (unique, increasing along
        dependencies); its id, reusing a removed task's."""
        if self._free:
            t = self._free.pop()
            self.duration[t], self.resource[t], self.key[t] = duration, resource, key
            self.preds[t], self.succs[t] = set(), set()
            self.ready[t] = self.start[t] = 0.0
            self.end[t] = -1.0
            self.alive[t] = True
            self.prev[t] = self.next[t] = NO_TASK
        else:
            t = len(self.duration)
            self.duration.append(duration)
            self.resource.append(resource)
            self.key.append(key)
            self.preds.append(set())
            self.succs.append(set())
            self.ready.append(0.0)
            self.start.append(0.0)
            self.end.append(-1.0)
            self.alive.append(True)
            self.prev.append(NO_TASK)
            self.next.append(NO_TASK)
        self.fresh.add(t)
        if resource == UNCONTENDED:
            self.uncontended.add(t)
        return t

    def add_dependency(self, before: int, after: int) -> None:
        """Make `after` wait for the end of `before`, marking `after` for the next delta simulation."""
        self.succs[before].add(after)
        self.preds[after].add(before)
        if after not in self.fresh:
            self.dirty.add(after)

    def remove_task(self, t: int) -> None:
        """Drop a task and its dependencies. Its place in its resource queue goes at the next
        simulation, which restarts at or before the earliest vacated position anyway."""
        for p in self.preds[t]:
            self.succs[p].discard(t)
        for s in self.succs[t]:
            self.preds[s].discard(t)
        if t in self.fresh:
            self.fresh.discard(t)
        else:
            self.vacated.append((self.ready[t], self.key[t]))
        self.dirty.discard(t)
        self.preds[t], self.succs[t] = set(), set()
        self.alive[t] = False
        self.end[t] = -1.0  # dead tasks never count in the makespan
        self.uncontended.discard(t)
        self._free.append(t)

    def task_ids(self) -> list[int]:
        """Ids of the live (not removed) tasks."""
        return [t for t, alive in enumerate(self.alive) if alive]

    def makespan(self) -> float:
        """The last end time of any live task (0 without tasks)."""
        return max(0.0, max(self.end, default=0.0))

    # --- simulation -----------------------------------------------------------------------
    def simulate_full(self) -> float:
        """Algorithm 1: simulate every task from scratch; returns the makespan."""
        self.queues = {}
        self.fresh = set(self.task_ids())
        self.resimulated = resimulate_from(self, BEGINNING)
        self._clear_changes()
        return self.makespan()

    def simulate_delta(self) -> float:
        """Algorithm 2: re-simulate only the part of the timeline the changes since the last
        simulation can reach; returns the makespan."""
        if self.fresh or self.dirty or self.vacated:
            self.resimulated = resimulate_from(self, change_point(self))
        else:
            self.resimulated = 0
        self._clear_changes()
        return self.makespan()

    def _clear_changes(self) -> None:
        self.dirty.clear()
        self.fresh.clear()
        self.vacated.clear()
