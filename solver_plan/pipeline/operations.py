"""The operations of an allocation: what every periodic schedule of it must place.

For each stage s: F_s and B_s on its processor. Where stages s and s+1 are on different
processors: CF_s (activation, after F_s, before F_{s+1}) and CB_s (gradient, after B_{s+1},
before B_s) on the link of that pair, each taking a / beta. Dependencies are between operations
on the same batch.
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.pipeline.allocation import Allocation, link_name, processor_name
from solver_plan.pipeline.problem import ChainProblem


@dataclass(frozen=True)
class Operation:
    """One operation of a pipeline: a forward, backward or transfer of one stage on one resource."""
    name: str  # F3, B3, CF3, CB3 (stage index)
    kind: str  # "F", "B", "CF", "CB"
    stage: int
    resource: str  # "P2" or "L1-2"
    duration: float  # seconds


@dataclass(frozen=True)
class PipelineOps:
    """The operations of an allocation, their same-batch dependencies and what each stage keeps in
    memory."""
    operations: tuple[Operation, ...]
    dependencies: tuple[tuple[int, int], ...]  # (before, after) operation indices, same batch
    stage_processor: tuple[int, ...]
    stored: tuple[float, ...]  # abar per stage (bytes per batch in flight)
    static: tuple[tuple[int, float], ...]  # (processor, bytes of weights and buffers)
    memory_limit: float

    def index(self, name: str) -> int:
        """Index of the operation named `name` (KeyError if none)."""
        for i, op in enumerate(self.operations):
            if op.name == name:
                return i
        raise KeyError(name)

    def on_resource(self) -> dict[str, list[int]]:
        """Operation indices per resource name."""
        groups: dict[str, list[int]] = {}
        for i, op in enumerate(self.operations):
            groups.setdefault(op.resource, []).append(i)
        return groups

    @property
    def static_by_processor(self) -> dict[int, float]:
        """Bytes of weights and buffers per processor."""
        return dict(self.static)

    def resource_loads(self) -> dict[str, float]:
        """Busy seconds per resource in one period."""
        loads: dict[str, float] = {}
        for op in self.operations:
            loads[op.resource] = loads.get(op.resource, 0.0) + op.duration
        return loads


def pipeline_operations(problem: ChainProblem, allocation: Allocation) -> PipelineOps:
    """The operations every periodic schedule of `allocation` must place: F and B per stage, CF and CB
    per cut between processors, with their dependencies (InputError for an allocation that does not
    fit `problem`)."""
    allocation.check(problem)
    stages = allocation.stages
    ops: list[Operation] = []
    idx: dict[str, int] = {}

    def add(name, kind, stage, resource, duration):
        idx[name] = len(ops)
        ops.append(Operation(name, kind, stage, resource, duration))

    for s, st in enumerate(stages):
        proc = processor_name(st.processor)
        add(f"F{s}", "F", s, proc, problem.forward_time(st.first, st.last))
        add(f"B{s}", "B", s, proc, problem.backward_time(st.first, st.last))
    crossings = set(allocation.crossings())
    for s in sorted(crossings):
        link = link_name(stages[s].processor, stages[s + 1].processor)
        add(f"CF{s}", "CF", s, link, problem.comm_time(stages[s].last))
        add(f"CB{s}", "CB", s, link, problem.comm_time(stages[s].last))
    deps: list[tuple[int, int]] = []
    for s in range(len(stages) - 1):
        if s in crossings:
            deps += [(idx[f"F{s}"], idx[f"CF{s}"]), (idx[f"CF{s}"], idx[f"F{s + 1}"]),
                     (idx[f"B{s + 1}"], idx[f"CB{s}"]), (idx[f"CB{s}"], idx[f"B{s}"])]
        else:
            deps += [(idx[f"F{s}"], idx[f"F{s + 1}"]), (idx[f"B{s + 1}"], idx[f"B{s}"])]
    last = len(stages) - 1
    deps.append((idx[f"F{last}"], idx[f"B{last}"]))
    return PipelineOps(tuple(ops), tuple(deps), tuple(st.processor for st in stages),
                       tuple(problem.stored(st.first, st.last) for st in stages),
                       tuple(sorted(allocation.static_memory(problem).items())), problem.memory)
