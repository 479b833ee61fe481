"""Lowering a strategy to tasks (FlexFlow section 5.1), one operator or one edge at a time, so that a
change of one operator's configuration replaces only its own tasks and those of its edges.

Per operator under configuration c: a forward and a backward compute task per shard on its device
(no backward for model inputs), and for parameters replicated over a group of devices a zero-time
barrier after the group's backward tasks followed by one all-reduce task on every link of the
group's ring. Where the cluster's runtime syncs through parameter owners (`cluster.gradient_sync`,
FlexFlow's runtime; cluster/sync.py) a group's sync is instead one task on the gradient port of its
owner (the group's first device) that waits for the backward barrier of every member device (a
zero-time task after all backward tasks on that device: bulk synchronous, not overlapped). Per edge u -> v: a transfer per tensor piece that crosses devices, forward (u's output
to v's devices) and backward (the gradient back to u's devices) when the edge carries a gradient.

Task keys (the simulator's tie-break, which must increase along dependencies) encode
(phase, position, sub, slot, index): phase 0 forward in topological position order, 1 backward in
reverse order, 2 gradient synchronisation; sub 0 transfers before sub 1 compute. `describe_key`
decodes a key back to a label, so tasks need no other bookkeeping.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass

from solver_plan.cost.collectives import collective_groups
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.dims import op_layout
from solver_plan.cost.model import CostModel
from solver_plan.cost.model import needs_gradient
from solver_plan.cost.tiles import tile_boxes
from solver_plan.graph.ir import Graph
from solver_plan.graph.ops import OpType
from solver_plan.simulate.durations import TaskTimes
from solver_plan.simulate.engine import UNCONTENDED, TaskEngine
from solver_plan.simulate.pieces import exchange
from solver_plan.simulate.resources import Resources

FORWARD, BACKWARD, SYNC = 0, 1, 2
_INDEX_BITS, _SLOT_BITS, _POSITION_BITS = 24, 20, 20


def task_key(phase: int, position: int, sub: int, slot: int, index: int) -> int:
    """Pack (phase, position, sub, slot, index) into one integer key, ordered as the tuple."""
    return ((((phase << _POSITION_BITS | position) << 1 | sub) << _SLOT_BITS | slot) << _INDEX_BITS) | index


def split_key(key: int) -> tuple[int, int, int, int, int]:
    """Unpack a key made by `task_key` into (phase, position, sub, slot, index)."""
    index = key & ((1 << _INDEX_BITS) - 1)
    key >>= _INDEX_BITS
    slot = key & ((1 << _SLOT_BITS) - 1)
    key >>= _SLOT_BITS
    sub = key & 1
    key >>= 1
    return key >> _POSITION_BITS, key & ((1 << _POSITION_BITS) - 1), sub, slot, index


@dataclass(frozen=True)
class OpTasks:
    """The task ids of one operator under one configuration: forward, backward and sync."""
    forward: tuple[int, ...]  # task id per shard position
    backward: tuple[int, ...]  # empty for model inputs
    sync: tuple[int, ...]  # barriers and all-reduce tasks

    @property
    def all(self) -> tuple[int, ...]:
        """Every task id of the operator."""
        return self.forward + self.backward + self.sync


class Lowering:
    """Adds and removes the tasks of one operator or one edge in a `TaskEngine`."""

    def __init__(self, graph: Graph, cost_model: CostModel):
        self.graph = graph
        self.cluster = cost_model.cluster
        self.times = TaskTimes(graph, cost_model)
        self.resources = Resources(self.cluster)
        self.order = graph.topological_order
        self.position = {name: i for i, name in enumerate(self.order)}
        self.edges = graph.edges
        self.incident: dict[str, list[int]] = {name: [] for name in self.order}
        for index, edge in enumerate(self.edges):
            self.incident[edge.src].append(index)
            if edge.dst != edge.src:
                self.incident[edge.dst].append(index)
        self.owner_sync = self.cluster.gradient_sync.owner_based
        self._barriers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # engine -> device barriers
        self._op_cache: dict[tuple[str, ParallelConfig], tuple] = {}
        self._edge_cache: dict[tuple[int, ParallelConfig, ParallelConfig], tuple] = {}

    # --- operators ------------------------------------------------------------------------
    def _op_template(self, name: str, cfg: ParallelConfig) -> tuple:
        cached = self._op_cache.get((name, cfg))
        if cached is None:
            op = self.graph.op(name)
            forward_s, backward_s = self.times.shard(op, cfg)
            has_backward = op.op_type != OpType.INPUT
            groups = []
            if has_backward and op.params > 0:
                layout = op_layout(op, self.graph)
                position = {d: i for i, d in enumerate(cfg.devices)}
                for group in collective_groups(cfg, layout.names, layout.replica_dims):
                    if len(group) <= 1:
                        continue
                    if self.owner_sync:  # one copy stream into the owner's port
                        ring = (self.resources.port(group[0]),)
                    else:
                        ring = tuple(self.resources.link(d, group[(j + 1) % len(group)]) for j, d in enumerate(group))
                    groups.append((tuple(position[d] for d in group), ring))
            sync_s = self.times.sync(op, cfg) if groups else 0.0
            cached = self._op_cache[(name, cfg)] = (forward_s, backward_s, has_backward, tuple(groups), sync_s)
        return cached

    def add_op(self, engine: TaskEngine, name: str, cfg: ParallelConfig) -> OpTasks:
        """Add the tasks of operator `name` under `cfg` to `engine`: forward and backward per shard, and
        its gradient sync (see the module text)."""
        forward_s, backward_s, has_backward, groups, sync_s = self._op_template(name, cfg)
        p = self.position[name]
        back_p = len(self.order) - 1 - p
        forward = tuple(engine.add_task(forward_s, d, task_key(FORWARD, p, 1, 0, i))
                        for i, d in enumerate(cfg.devices))
        backward: tuple[int, ...] = ()
        if has_backward:
            backward = tuple(engine.add_task(backward_s, d, task_key(BACKWARD, back_p, 1, 0, i))
                             for i, d in enumerate(cfg.devices))
            for f, b in zip(forward, backward):
                engine.add_dependency(f, b)
        sync = []
        if self.owner_sync:
            barriers = self.device_barriers(engine)
            for d, b in zip(cfg.devices, backward):
                engine.add_dependency(b, barriers[d])
            for g, (members, (port,)) in enumerate(groups):
                task = engine.add_task(sync_s, port, task_key(SYNC, p, 1, g, 0))
                for i in members:
                    engine.add_dependency(barriers[cfg.devices[i]], task)
                sync.append(task)
            return OpTasks(forward, backward, tuple(sync))
        for g, (members, ring) in enumerate(groups):
            barrier = engine.add_task(0.0, UNCONTENDED, task_key(SYNC, p, 0, g, 0))
            for i in members:
                engine.add_dependency(backward[i], barrier)
            sync.append(barrier)
            for j, link in enumerate(ring):
                task = engine.add_task(sync_s, link, task_key(SYNC, p, 1, g, j))
                engine.add_dependency(barrier, task)
                sync.append(task)
        return OpTasks(forward, backward, tuple(sync))

    def device_barriers(self, engine: TaskEngine) -> tuple[int, ...]:
        """Per device, the zero-time task after all its backward tasks (owner-based sync only;
        made once per engine and kept: operators add their backward tasks as predecessors). Key
        (SYNC, 0, 0, 0, device): after every backward key, before every sync task's."""
        barriers = self._barriers.get(engine)
        if barriers is None:
            barriers = tuple(engine.add_task(0.0, UNCONTENDED, task_key(SYNC, 0, 0, 0, d))
                             for d in range(self.cluster.num_devices))
            self._barriers[engine] = barriers
        return barriers

    # --- edges ----------------------------------------------------------------------------
    def _edge_template(self, index: int, src_cfg: ParallelConfig, dst_cfg: ParallelConfig) -> tuple:
        cached = self._edge_cache.get((index, src_cfg, dst_cfg))
        if cached is None:
            edge = self.edges[index]
            src, dst = self.graph.op(edge.src), self.graph.op(edge.dst)
            output = next(k for k, t in enumerate(src.outputs) if t.name == edge.tensor)
            tensor = src.outputs[output]
            src_layout, dst_layout = op_layout(src, self.graph), op_layout(dst, self.graph)
            held = tile_boxes(src_cfg, src_layout.names, src_layout.output_axes[output], tensor.shape)
            needed = tile_boxes(dst_cfg, dst_layout.names, dst_layout.input_axes[edge.input_index], tensor.shape)
            # bytes per element in the training precision (bf16 activations under mixed precision)
            element_bytes = self.times.cost_model.element_bytes(tensor.dtype_bytes)
            forward = self._moves(exchange(self.cluster, src_cfg, held, dst_cfg, needed), src_cfg, dst_cfg,
                                  element_bytes)
            backward = None
            if needs_gradient(self.graph, dst, edge.input_index) and src.op_type != OpType.INPUT:
                backward = self._moves(exchange(self.cluster, dst_cfg, needed, src_cfg, held), dst_cfg, src_cfg,
                                       element_bytes)
            cached = self._edge_cache[(index, src_cfg, dst_cfg)] = (forward, backward)
        return cached

    def _moves(self, ex, hold_cfg: ParallelConfig, recv_cfg: ParallelConfig, dtype_bytes: int) -> tuple:
        moves = []
        for h, r, elements in ex.moves:
            a, b = hold_cfg.devices[h], recv_cfg.devices[r]
            moves.append((h, r, self.resources.link(a, b), self.times.transfer(a, b, elements * dtype_bytes)))
        return ex.local, tuple(moves)

    def add_edge(self, engine: TaskEngine, index: int, src_cfg: ParallelConfig, src: OpTasks,
                 dst_cfg: ParallelConfig, dst: OpTasks) -> tuple[int, ...]:
        """Add the transfers of edge `index` between its source's and target's tasks, forward and (when
        the edge carries a gradient) backward; their task ids."""
        forward, backward = self._edge_template(index, src_cfg, dst_cfg)
        edge = self.edges[index]
        tasks = self._connect(engine, forward, src.forward, dst.forward,
                              task_key(FORWARD, self.position[edge.dst], 0, index, 0))
        if backward is not None:
            back_p = len(self.order) - 1 - self.position[edge.src]
            tasks += self._connect(engine, backward, dst.backward, src.backward,
                                   task_key(BACKWARD, back_p, 0, index, 0))
        return tasks

    @staticmethod
    def _connect(engine: TaskEngine, template: tuple, holders: tuple[int, ...], receivers: tuple[int, ...],
                 base_key: int) -> tuple[int, ...]:
        local, moves = template
        for h, r in local:
            engine.add_dependency(holders[h], receivers[r])
        created = []
        for i, (h, r, link, seconds) in enumerate(moves):
            task = engine.add_task(seconds, link, base_key + i)
            engine.add_dependency(holders[h], task)
            engine.add_dependency(task, receivers[r])
            created.append(task)
        return tuple(created)

    # --- labels ---------------------------------------------------------------------------
    def describe_key(self, key: int) -> tuple[str, str]:
        """(category, label) of the task with this key."""
        phase, position, sub, slot, index = split_key(key)
        if phase == SYNC:
            name = self.order[position]
            if self.owner_sync:
                if sub == 0:
                    return "barrier", f"device {index} backward barrier"
                return "sync", f"{name} grad copies to owner g{slot}"
            if sub == 0:
                return "barrier", f"{name} grad barrier g{slot}"
            return "sync", f"{name} grad all-reduce g{slot}.{index}"
        if phase == BACKWARD:
            position = len(self.order) - 1 - position
        if sub == 1:
            kind, short = ("forward", "fwd") if phase == FORWARD else ("backward", "bwd")
            return kind, f"{self.order[position]} {short}[{index}]"
        edge = self.edges[slot]
        direction = "fwd" if phase == FORWARD else "bwd"
        return "transfer", f"{edge.src}->{edge.dst} {edge.tensor} {direction} piece {index}"
