"""Memory floors of the dense hybrid search's points, computed when the search first needs one.

A point's memory floor (`evaluate.memory_floor`, three stage memories) costs about a hundred
microseconds; the space of a model on tens of devices has 10^4-10^5 points, of which the search
prices a few hundred: the others are pruned by their time bound, which needs no floor. So a floor
is computed only where the answer depends on it -- before a point is priced (it is skipped when
its floor exceeds the limit), and before a (tp, micro-batch) group's block is solved (some point of
the group must fit, tried in order of the points' state bounds, usually the first) -- and each
FLOOR_S_PER_POINT is charged to the nominal budget as it is computed (docs/architecture.md, "Time
budget and determinism"). The proof is unchanged: every point is priced, or its time bound reaches
the best plan, or its floor (or its state bound, a lower bound of the floor) exceeds the limit.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from solver_plan.deadline import Deadline
from solver_plan.hybrid.budget import CHECK_EVERY, affords
from solver_plan.hybrid.evaluate import Context, memory_floor
from solver_plan.hybrid.space import Parallelism

# Nominal seconds of one point's memory floor (three stage memories; Llama 3 8B on 64 A100s,
# torchtitan: 107 us of CPU a floor on the shared 2-core machine, 3,000 points).
FLOOR_S_PER_POINT = 1e-4


@dataclass
class MemoryFloors:
    """The floors of `points` under `ctx.memory_limit` (every point fits without one); `bounds`:
    each point's state bound (search.state_bound), which stands for the floor where it already
    exceeds the limit."""
    ctx: Context
    points: Sequence[Parallelism]
    bounds: Sequence[float] | None
    deadline: Deadline
    known: dict[int, float] = field(default_factory=dict)
    computed: int = 0

    def floor(self, i: int) -> float:
        """Point i's memory floor (its state bound where that exceeds the limit), computed once."""
        if i not in self.known:
            limit = self.ctx.memory_limit
            if self.bounds is not None and limit is not None and self.bounds[i] > limit:
                self.known[i] = self.bounds[i]
            else:
                self.deadline.spend(FLOOR_S_PER_POINT)
                self.computed += 1
                self.known[i] = memory_floor(self.ctx, self.points[i])
        return self.known[i]

    def fits(self, i: int) -> bool:
        """Whether point i's floor is within the limit (always, without one)."""
        limit = self.ctx.memory_limit
        return limit is None or self.floor(i) <= limit

    def any_fits(self, indices: Sequence[int]) -> bool | None:
        """Whether some point of `indices` fits by its floor, tried in order of their state bounds (the
        likeliest first); None when the nominal budget cannot pay for the next floor or the wall clock
        has passed (looked at every CHECK_EVERY floors) before one is found."""
        if self.ctx.memory_limit is None:
            return bool(indices)
        bounds = self.bounds
        order = sorted(indices, key=lambda i: bounds[i]) if bounds is not None else list(indices)
        for n, i in enumerate(order):
            if i not in self.known and ((n % CHECK_EVERY == 0 and self.deadline.expired())
                                        or not affords(self.deadline, FLOOR_S_PER_POINT)):
                return None
            if self.fits(i):
                return True
        return False

    def every(self) -> list[float] | None:
        """Every point's floor (the INFEASIBLE diagnosis ranks them all), charged as computed; None
        when the wall clock passes first (looked at every CHECK_EVERY points)."""
        out = []
        for i in range(len(self.points)):
            if i % CHECK_EVERY == 0 and self.deadline.expired():
                return None
            out.append(self.floor(i))
        return out
