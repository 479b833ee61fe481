"""The work budget of the hybrid searches (the dense one, search.py, and the expert-parallel one,
moe_plan.py): what both charge to a `Deadline`'s nominal budget and how they stop.

Policy (docs/architecture.md, "Time budget and determinism"): each unit of work -- enumerating a
point, bounding its memory or time, pricing it -- is charged a fixed estimate of its seconds
(`Deadline.spend`), and work starts only while the nominal budget left covers it (`affords`), so
what is found is decided by the instance and the nominal limit, the same on an idle or a loaded
machine. The wall clock (`Deadline.expired`, looked at every CHECK_EVERY points) only stops a
search, which marks the deadline `cut_short`.

Both searches first price a standard layout (Megatron's; `STANDARD_PRICES` points at most, by
`price_in_order(..., until_plan=True)`) as their incumbent, so a limit too short to search the
space still returns a plan.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Generic, Iterable, Protocol, Sequence, TypeVar

from solver_plan.deadline import Deadline

CHECK_EVERY = 256  # points between two looks at the clock
STANDARD_PRICES = 16  # points of a standard layout priced at most (in order of their time bound)



class Plan(Protocol):
    """What the searches compare: a priced plan's step time."""

    @property
    def step_time_s(self) -> float:
        """Predicted seconds of one training step."""
        ...


P = TypeVar("P")  # a point of a search space
T = TypeVar("T")  # what a function of a point gives
Q = TypeVar("Q", bound=Plan)  # a priced plan


def affords(deadline: Deadline, seconds: float) -> bool:
    """Whether the nominal budget left covers `seconds` more work (always, without a limit)."""
    left = deadline.nominal_left()
    return left is None or left >= seconds


def enumerate_within(points: Iterable[P], deadline: Deadline, seconds_each: float,
                     keep: Callable[[P], bool] | None = None) -> list[P] | None:
    """The points `keep` accepts (all without it), `seconds_each` charged to the nominal budget for
    every point enumerated; None when that budget cannot pay for the next (a work limit: the same on a
    loaded machine) or the wall clock passes first (looked at every CHECK_EVERY points)."""
    left = deadline.nominal_left()
    most = None if left is None else int(left / seconds_each)
    kept: list[P] = []
    index = 0
    for index, point in enumerate(points):
        if index % CHECK_EVERY == 0 and ((most is not None and index > most) or deadline.expired()):
            return None
        if keep is None or keep(point):
            kept.append(point)
    deadline.spend(index * seconds_each)
    return kept


def map_within(items: Sequence[P], function: Callable[[P], T], deadline: Deadline) -> list[T] | None:
    """`function` of every item (a bound of each point: its caller charged their estimate), or None
    when the wall clock passes first (looked at every CHECK_EVERY items)."""
    out: list[T] = []
    for index, item in enumerate(items):
        if index % CHECK_EVERY == 0 and deadline.expired():
            return None
        out.append(function(item))
    return out


@dataclass(frozen=True)
class Priced(Generic[Q]):
    """What `price_in_order` found: the best plan (the incumbent given when nothing beat it), how
    many points it priced, and the bound of the first point left unpriced when the budget or the
    clock stopped it (None when it stopped because the rest could not beat the best, or ran out)."""
    best: Q | None
    priced: int
    open_bound: float | None


def price_in_order(ranked: Iterable[tuple[float, P]], price: Callable[[P], Q | None], deadline: Deadline,
                   price_s: float, best: Q | None = None, until_plan: bool = False,
                   grace_s: float = 0.0) -> Priced[Q]:
    """Points priced in order of their time bound (`ranked`: (bound, point), ascending; `price` gives a
    plan with `step_time_s`, or None for a point without one, and charges its own work) until the next
    bound reaches the best step time (no point left can beat it). Before each point: stopped when the
    nominal budget left does not cover `price_s` and there is a plan already, or when the wall clock has
    run out (`grace_s` past its end: for a few points worth finishing late); `until_plan`: neither
    stops it before its first plan (a standard layout, a few points, so a short limit still answers
    with a plan)."""
    priced = 0
    for bound, point in ranked:
        if best is not None and bound >= best.step_time_s:
            return Priced(best, priced, None)
        late = deadline.overrun(grace_s) if grace_s > 0 else deadline.expired()
        if (best is not None or not until_plan) and (late or (best is not None and not affords(deadline, price_s))):
            return Priced(best, priced, bound)
        plan = price(point)
        priced += 1
        if plan is not None and (best is None or plan.step_time_s < best.step_time_s):
            best = plan
    return Priced(best, priced, None)
