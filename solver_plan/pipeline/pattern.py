"""`PeriodicPattern`: one period of a pipelined schedule, repeated forever.

Each operation o has a start t_o in [0, T) and an index shift h_o >= 0: in period k it starts at
k T + t_o on batch k - h_o (MadPipe section 3). h(F_0) = 0 by convention.
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.errors import InputError
from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.operations import PipelineOps


@dataclass(frozen=True)
class PeriodicPattern:
    """One period of a schedule: start t_o in [0, T) and shift h_o per operation (MadPipe section 3; see
    the module text)."""
    allocation: Allocation
    ops: PipelineOps
    period: float
    start: tuple[float, ...]
    shift: tuple[int, ...]
    scheduler: str = ""

    def __post_init__(self):
        n = len(self.ops.operations)
        if len(self.start) != n or len(self.shift) != n:
            raise InputError(f"pattern needs {n} starts and shifts, got {len(self.start)} and {len(self.shift)}",
                             "pattern")
        if not self.period > 0:
            raise InputError(f"period must be positive, got {self.period}", "pattern")

    def replace(self, **changes) -> "PeriodicPattern":
        """A copy with `changes` applied (dataclasses.replace)."""
        from dataclasses import replace
        return replace(self, **changes)

    def rows(self) -> list[dict]:
        """One JSON row per operation: name, kind, stage, resource, start, duration and shift."""
        return [{"name": op.name, "kind": op.kind, "stage": op.stage, "resource": op.resource,
                 "start_s": t, "duration_s": op.duration, "shift": h}
                for op, t, h in zip(self.ops.operations, self.start, self.shift)]

    def normalised(self) -> "PeriodicPattern":
        """Starts folded into [0, T) (shifts adjusted) and shifts rebased so h(F_0) = 0."""
        start, shift = [], []
        for t, h in zip(self.start, self.shift):
            k = int(t // self.period)
            start.append(t - k * self.period)
            shift.append(h + k)
        base = shift[self.ops.index("F0")]
        return self.replace(start=tuple(start), shift=tuple(h - base for h in shift))
