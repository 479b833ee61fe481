"""The delta simulation (FlexFlow Algorithm 2): re-simulate only the part of the timeline a change
can reach.

Write a(t) = (old ready, key) for a task simulated before and b(t) = (new ready, key). Tasks run in
(ready, key) order (engine.py), so the earliest task whose values differ between the old and the new
timeline has a structural reason at or after the change point
  x = min(a(t) over removed tasks and over old tasks whose predecessors or resource neighbour
          changed; (lower bound of ready, key) over added tasks),
where an added task's ready is at least the end of each predecessor that is final (an old task with
a(p) < x). Every task with a(t) < x therefore keeps its values and its place in its resource queue,
and every other task has b(t) >= x. The full algorithm restarted at x -- resource queues cut at x,
each task's ready time seeded with the ends of its final predecessors -- pops the remaining tasks
in the same order as a simulation from scratch and gives the same timeline bit for bit.
"""
from __future__ import annotations

import bisect
import heapq

UNCONTENDED = -1  # the resource of tasks that never wait for one (start = ready), e.g. zero-time barriers
NO_TASK = -1  # no task before or after this one on its resource
BEGINNING = (float("-inf"), -1)  # the change point of a full simulation: before every (ready, key)


def change_point(engine) -> tuple[float, int]:
    """The (ready, key) before which nothing changes (see the module docstring)."""
    ready, key, alive, preds, end = engine.ready, engine.key, engine.alive, engine.preds, engine.end
    fresh = engine.fresh
    point = min(engine.vacated, default=(float("inf"), 0))
    for t in engine.dirty:
        if alive[t]:
            point = min(point, (ready[t], key[t]))
    # an added task is ready no earlier than its final old predecessors end and its added
    # predecessors' bounds (keys increase along dependencies, so key order is topological)
    bound: dict[int, float] = {}
    for t in sorted(fresh, key=key.__getitem__):
        low = 0.0
        for p in preds[t]:
            if p in bound:
                low = max(low, bound[p])
            elif (ready[p], key[p]) < point:
                low = max(low, end[p])
            else:  # after an old task at or past the point: ready after the point too
                low = float("inf")
                break
        bound[t] = low
        point = min(point, (low, key[t]))
    return point


def resimulate_from(engine, point: tuple[float, int]) -> int:
    """Run the full algorithm on the tasks at or after `point` (every task if it is
    BEGINNING); returns how many tasks it simulated."""
    ready, start, end, key, duration, resource = (engine.ready, engine.start, engine.end, engine.key,
                                                  engine.duration, engine.resource)
    prev, nxt, succs, preds, alive = engine.prev, engine.next, engine.succs, engine.preds, engine.alive
    fresh = engine.fresh
    pr, pk = point
    later = [t for t in fresh if alive[t]]
    last: dict[int, int] = {}
    for d, queue in engine.queues.items():  # keep each queue's part before the point
        cut = bisect.bisect_left(queue, (pr, pk, -1))
        # entries of removed tasks go too (their ids may already be reused by added tasks)
        later.extend(entry[2] for entry in queue[cut:] if alive[entry[2]] and entry[2] not in fresh)
        del queue[cut:]
        last[d] = queue[-1][2] if queue else NO_TASK
        if queue:
            nxt[queue[-1][2]] = NO_TASK
    for t in engine.uncontended:
        if t not in fresh and (ready[t] > pr or (ready[t] == pr and key[t] >= pk)):
            later.append(t)
    is_later = bytearray(len(alive))
    for t in later:
        is_later[t] = 1
    remaining = [0] * len(alive)
    queues = engine.queues
    heap = []
    for t in later:
        r, count = 0.0, 0
        for p in preds[t]:
            if is_later[p]:
                count += 1
            elif end[p] > r:
                r = end[p]
        ready[t] = r
        remaining[t] = count
        if not count:
            heap.append((r, key[t], t))
        d = resource[t]
        if d != UNCONTENDED and d not in last:
            last[d] = NO_TASK
            queues[d] = []
    heapq.heapify(heap)
    pop, push = heapq.heappop, heapq.heappush
    done = 0
    while heap:
        item = pop(heap)
        r, _, t = item
        done += 1
        d = resource[t]
        if d == UNCONTENDED:
            s = r
        else:
            before = last[d]
            s = r if before == NO_TASK or end[before] <= r else end[before]
            prev[t], nxt[t] = before, NO_TASK
            if before != NO_TASK:
                nxt[before] = t
            last[d] = t
            queues[d].append(item)
        e = s + duration[t]
        start[t], end[t] = s, e
        for n in succs[t]:
            if e > ready[n]:  # noqa: PLR1730 -- a plain comparison is faster than max() here
                ready[n] = e
            left = remaining[n] - 1
            remaining[n] = left
            if not left:
                push(heap, (ready[n], key[n], n))
    if done != len(later):
        raise ValueError("task graph has a cycle (keys must increase along dependencies)")
    return done
