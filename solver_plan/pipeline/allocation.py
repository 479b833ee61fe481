"""Allocations of a chain's layers to processors, and the answer of an allocation planner.

An `Allocation` is a partition of the layers into stages (consecutive inclusive layer ranges, in
chain order), each on a processor 0..P-1. Consecutive stages on the same processor exchange nothing;
a cut between stages on different processors uses the link of that processor pair (one resource
per unordered pair, carrying the forward activation and the backward gradient: load 2 a / beta).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from solver_plan.errors import InputError
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status, relative_gap


@dataclass(frozen=True)
class Stage:
    """Layers `first`..`last` (inclusive, 0-based) of the chain on processor `processor`."""
    first: int
    last: int
    processor: int

    def layers(self) -> range:
        """The stage's layer indices."""
        return range(self.first, self.last + 1)


def link_name(p: int, q: int) -> str:
    """The resource name of the link between processors p and q ("L0-2", either order)."""
    a, b = sorted((p, q))
    return f"L{a}-{b}"


def processor_name(p: int) -> str:
    """The resource name of processor p ("P2")."""
    return f"P{p}"


@dataclass(frozen=True)
class Allocation:
    """A partition of the chain into stages, in chain order, each on a processor (see the module text).
    """
    stages: tuple[Stage, ...]

    def __post_init__(self):
        expected = 0
        for s in self.stages:
            if s.first != expected or s.last < s.first or s.processor < 0:
                raise InputError(f"stages must cover the layers in order with valid processors, got {self.stages}",
                                 "allocation")
            expected = s.last + 1

    @staticmethod
    def from_processors(per_layer: list[int] | tuple[int, ...]) -> "Allocation":
        """Maximal runs of layers on one processor become stages."""
        stages, first = [], 0
        for i in range(1, len(per_layer) + 1):
            if i == len(per_layer) or per_layer[i] != per_layer[first]:
                stages.append(Stage(first, i - 1, per_layer[first]))
                first = i
        return Allocation(tuple(stages))

    def check(self, problem: ChainProblem) -> None:
        """InputError unless the stages cover every layer of `problem` on its processors."""
        if self.stages[-1].last != problem.layers - 1:
            raise InputError(f"allocation covers {self.stages[-1].last + 1} of {problem.layers} layers", "allocation")
        if max(s.processor for s in self.stages) >= problem.processors:
            raise InputError(f"allocation uses processor {max(s.processor for s in self.stages)} "
                             f"but the problem has {problem.processors}", "allocation")

    @property
    def processors_used(self) -> tuple[int, ...]:
        """The processors holding at least one stage, in increasing order."""
        return tuple(sorted({s.processor for s in self.stages}))

    @property
    def is_contiguous(self) -> bool:
        """Each processor holds one stage (PipeDream's straight pipeline)."""
        return len(self.processors_used) == len(self.stages)

    def crossings(self) -> list[int]:
        """Indices s such that stages s and s+1 are on different processors."""
        return [i for i in range(len(self.stages) - 1) if self.stages[i].processor != self.stages[i + 1].processor]

    def processor_loads(self, problem: ChainProblem) -> dict[int, float]:
        """Forward plus backward seconds per processor, for one batch."""
        loads: dict[int, float] = {}
        for s in self.stages:
            loads[s.processor] = loads.get(s.processor, 0.0) + problem.load(s.first, s.last)
        return loads

    def link_loads(self, problem: ChainProblem) -> dict[str, float]:
        """Seconds per link for one batch: C(i) = 2 a_i / beta for every cut between processors."""
        loads: dict[str, float] = {}
        for i in self.crossings():
            name = link_name(self.stages[i].processor, self.stages[i + 1].processor)
            loads[name] = loads.get(name, 0.0) + problem.comm_load(self.stages[i].last)
        return loads

    def load_bound(self, problem: ChainProblem) -> float:
        """The period without memory limits: the busiest processor or link."""
        return max([*self.processor_loads(problem).values(), *self.link_loads(problem).values(), 0.0])

    def static_memory(self, problem: ChainProblem) -> dict[int, float]:
        """Model state (`ChainProblem.state_memory`) and communication buffers per processor
        (independent of the schedule)."""
        memory = {p: 0.0 for p in self.processors_used}
        for i, s in enumerate(self.stages):
            memory[s.processor] += problem.state_memory(s.first, s.last)
            if i > 0 and self.stages[i - 1].processor != s.processor:
                memory[s.processor] += 2 * problem.cut(s.first - 1)
            if i + 1 < len(self.stages) and self.stages[i + 1].processor != s.processor:
                memory[s.processor] += 2 * problem.cut(s.last)
        return memory

    def least_memory(self, problem: ChainProblem) -> dict[int, float]:
        """Memory per processor with one batch in flight per stage (any schedule needs at least this)."""
        memory = self.static_memory(problem)
        for s in self.stages:
            memory[s.processor] += problem.stored(s.first, s.last)
        return memory

    def to_dict(self, problem: ChainProblem | None = None) -> list[dict]:
        """The stages as JSON rows (first, last layer and processor), with layer names and load when
        `problem` is given."""
        rows = []
        for s in self.stages:
            row = {"first_layer": s.first, "last_layer": s.last, "processor": s.processor}
            if problem is not None:
                row["layer_names"] = [problem.chain.layer_names[s.first], problem.chain.layer_names[s.last]]
                row["load_s"] = problem.load(s.first, s.last)
            rows.append(row)
        return rows


@dataclass(frozen=True)
class AllocationResult:
    """Answer of an allocation planner. `period_s` is the planner's own estimate of the period
    (for MadPipe, max of the load bound and the target period its memory estimate assumed)."""
    planner: str
    status: Status
    allocation: Allocation | None = None
    period_s: float | None = None
    lower_bound_s: float | None = None
    runtime_s: float = 0.0
    min_memory: float | None = None  # when INFEASIBLE: the smallest memory that would work
    pattern: object | None = None  # a PeriodicPattern when the planner schedules too (exact-joint)
    alternatives: tuple[Allocation, ...] = ()  # other candidates worth scheduling (MadPipe)
    notes: tuple[str, ...] = field(default=())

    @property
    def gap(self) -> float | None:
        """Relative gap between the planner's period estimate and its lower bound (None without both)."""
        return relative_gap(self.period_s, self.lower_bound_s)
