"""The time budget: one type (`Deadline`), one conversion from seconds (`time_budget`), one
determinism policy (docs/architecture.md, "Time budget and determinism").

A `Deadline` is made once, where a command (or a Python front door, or a batch job) begins, by
`time_budget(seconds)`, and passed down -- never seconds -- to everything that spends time:
parsing, building problems, simplification, every planner and solver, decoding, validation.

It carries two things:
- the *nominal* budget (`nominal_s`): the seconds the user gave, and for a `share(fraction)` that
  fraction of what its parent had not yet handed out (`nominal_left()`). It never depends on how
  fast the machine runs, so every decision about how much work to do (how many candidates to
  build, whether an optional pass is worth running, a solver's deterministic work limit) is taken
  from it, and the same input with the same budget gives the same answer on an idle or a loaded
  machine;
- the *wall clock* (`remaining()`, `expired()`): the safety net that keeps every command within
  its limit. Work stopped by it is marked (`cut_short`, on the deadline and its ancestors) so the
  result can say that its answer depended on the machine's speed.
"""
from __future__ import annotations

import math
import os
import time

from solver_plan.errors import InputError

DEFAULT_TIME_LIMIT_S = 60.0  # every command that solves stops by then unless told otherwise
# Longest limit accepted (115 days): beyond it, waits on threads and processes overflow
# (threading.TIMEOUT_MAX); `time_limit: 1e30` is a typo for "no limit" (null), not a plan.
MAX_TIME_LIMIT_S = 1e7
MIN_LIMIT_S = 1e-3  # the least limit handed to a solver: an expired clock still gives a positive one
WALL_CLOCK_STOP = "stopped by the wall clock before its work limit"  # in a solver's note: the clock decided
CUT_SHORT_NOTE = ("the wall clock stopped part of the search before its work budget (slow or loaded "
                  "machine): this answer may differ on another run")

clock = time.perf_counter  # the wall clock every Deadline reads (tests replace it with a slow one)


def process_started() -> float:
    """The `clock()` reading of when this process started (Linux: its start time in
    /proc/self/stat against CLOCK_BOOTTIME, 10 ms ticks), so a command's deadline counts the
    interpreter's start-up and its imports, which the user waits for too; now where unknown."""
    now = clock()
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        since = time.clock_gettime(time.CLOCK_BOOTTIME) - int(fields[19]) / ticks  # field 22: starttime
    except (OSError, ValueError, IndexError, AttributeError):
        return now
    return now - since if 0.0 <= since < 60.0 else now  # a process older than a minute: not a command's start


# Seconds of work worth doing past the nominal budget: a problem half built, or a plan half scored,
# is none at all, and a command's limit allows 10% + 0.5 s of slack (issue 26's target) for it.
GRACE_S = 0.2

# ... and for a share of a budget (`Deadline.share`, `work_share`), this fraction of its own length
# where longer: its work is sized by estimates (each within ~25%), whose drift over a long share
# exceeds GRACE_S (at 60 s, a 9 s share's last step ran 1.81 s of CPU against 1.65 s nominal and was
# stopped 0.2 s past the share's end). The command's own deadline keeps GRACE_S, so the command
# still ends within its limit + GRACE_S; a share running late leaves the work after it less.
SHARE_GRACE_FRACTION = 0.1

# Nominal seconds a command's process spends before its work (interpreter, imports, parsing the
# command line; measured 0.2-0.3 s on an idle machine with compiled byte-code): handed out of every
# command's nominal budget by a fixed amount, so its work decisions leave room for it whatever the
# start-up actually took (its real duration is on the wall clock, counted from the process's start).
START_UP_S = 0.3


# Nominal seconds of one unit of heuristic work (`WorkMeter`): a microsecond of CPU on the 2-core
# development machine. Each loop charges each step a fixed count of units, stated and measured
# next to it (a local-search visit of a node, a greedy step, a repair's scan and pricing, a
# forest round, an mcmc proposal), never timed on the machine running: what a loop may do is then
# the same idle or loaded, and the budget it leaves to the next loop too.
WORK_UNIT_S = 1.0e-6


class WorkMeter:
    """Work counted in units (`charge`) at a fixed nominal cost each (`unit_s`, WORK_UNIT_S by default),
    spent from a deadline's nominal budget as it goes, so a loop stops after the work its budget
    pays for (`spent`): the same count on an idle or a loaded machine. `stop()` adds the wall
    clock, the safety net (it marks the deadline cut short). A loop that must finish (a path that
    can make the only plan fitting memory) charges its work but asks only `clock_out()`; what it
    spends leaves less for the optional work after it. Without a deadline or a limit, unlimited."""

    def __init__(self, deadline: "Deadline | None", unit_s: float = WORK_UNIT_S, budget_s: float | None = None,
                 parent: "WorkMeter | None" = None):
        self.deadline, self.unit_s = deadline, unit_s
        self.budget_s = budget_s  # nominal seconds this meter may spend at most (None: the deadline's)
        self.parent = parent  # the meter this one is a `part` of: its work counts there too
        self.units = 0.0  # charged so far

    def charge(self, units: float) -> None:
        """Count `units` of work done (here and in the meters this is part of), spending their
        nominal seconds."""
        meter: WorkMeter | None = self
        while meter is not None:
            meter.units += units
            meter = meter.parent
        if self.deadline is not None:
            self.deadline.spend(units * self.unit_s)

    def spent(self) -> bool:
        """Whether the work budget is used up (decided by work counts alone, never the clock)."""
        left = self.left_s()
        return left is not None and left <= 0.0

    def left_s(self) -> float | None:
        """Nominal seconds this meter may still spend (None: unlimited)."""
        left = None if self.deadline is None else self.deadline.nominal_left()
        if self.budget_s is not None:
            own = max(0.0, self.budget_s - self.units * self.unit_s)
            left = own if left is None else min(left, own)
        return left

    def affords(self, units: float) -> bool:
        """Whether `units` more fit the budget (for work charged in large steps: a whole round)."""
        left = self.left_s()
        return left is None or units * self.unit_s <= left

    def clock_out(self) -> bool:
        """Whether the wall clock, the safety net, stops the loop: GRACE_S past the deadline's end,
        since the nominal budget the work counts are drawn from may exceed the wall time left by
        what earlier steps took beyond their fixed estimates (start-up, the build); marks the
        deadline cut short."""
        return self.deadline is not None and self.deadline.overrun(GRACE_S)

    def stop(self) -> bool:
        """Whether optional work should stop: its budget spent, or the wall clock out."""
        return self.spent() or self.clock_out()

    def part(self, fraction: float) -> "WorkMeter":
        """A meter on the same deadline allowed `fraction` of the nominal budget left now (for one
        of several pieces of optional work sharing it; what it does not use stays with this one, and
        what it does counts here too); the wall clock is the deadline's."""
        left = self.left_s()
        return WorkMeter(self.deadline, self.unit_s, None if left is None else fraction * left, parent=self)


def command_budget(seconds: float | None, started: float | None) -> "Deadline":
    """A command's one budget: `time_budget(seconds)` counted from `started` (`process_started()`
    when run as the program), with START_UP_S of its nominal budget handed to the start-up."""
    deadline = time_budget(seconds, start=started)
    deadline.spend(START_UP_S)
    return deadline


def time_budget(seconds: float | None, *, start: float | None = None,
                within: "Deadline | None" = None) -> "Deadline":
    """The one conversion of a time limit in seconds (None: no limit) into the budget type, done
    where a request enters (the front doors answering a request: CLI, Python API, batch and suite
    jobs); `start` (a `clock()` reading) counts time already spent, e.g. parsing the command line;
    `within`: a caller's deadline the new one never outlives (returned as is for None seconds).
    Refuses limits that are not positive and finite, or too long (InputError naming `time_limit`)."""
    if seconds is None and within is not None:
        return within
    return Deadline(seconds, start=start, parent=within)


def check_time_limit(time_limit, where: str = "time_limit") -> None:
    """The one check of a time limit in seconds (None: no limit): positive, finite, at most
    MAX_TIME_LIMIT_S; an InputError naming `where` otherwise."""
    if time_limit is None:
        return
    if isinstance(time_limit, bool) or not (isinstance(time_limit, (int, float)) and math.isfinite(time_limit)
                                            and time_limit > 0):
        raise InputError(f"time limit must be positive (seconds), got {time_limit!r}", where)
    if time_limit > MAX_TIME_LIMIT_S:
        raise InputError(f"time limit {time_limit:g} s is too long (at most {MAX_TIME_LIMIT_S:g} s; "
                         "none for no limit)", where)


class Deadline:
    """A nominal budget in seconds and the wall clock started at construction; `remaining()` is
    None without a limit. Made from seconds by `time_budget`, inside by `share` and `child`."""

    def __init__(self, time_limit: float | None, *, start: float | None = None,
                 parent: "Deadline | None" = None, nominal_s: float | None = None):
        check_time_limit(time_limit)
        self.time_limit = time_limit
        self.start = clock() if start is None else start
        self.parent = parent
        if nominal_s is None:
            inherited = None if parent is None else parent.nominal_left()
            nominal_s = time_limit if inherited is None else (
                inherited if time_limit is None else min(inherited, time_limit))
        self.nominal_s = nominal_s
        self.allotted_s = 0.0  # nominal seconds handed to shares so far
        self.cut_short = False
        self.charges_parent = False  # `spend` also spends from the parent (`child(charges_parent=True)`)
        self.handed_out = False  # its nominal budget was handed out of the parent's (`share`, `work_part`)

    def nominal_left(self) -> float | None:
        """The nominal budget not yet handed to shares (None: unlimited)."""
        return None if self.nominal_s is None else max(0.0, self.nominal_s - self.allotted_s)

    def child(self, charges_parent: bool = False) -> "Deadline":
        """A clock started now that ends with this one and has what is left of its nominal budget;
        its `elapsed()` is the child's own runtime. `charges_parent`: what it spends is spent from
        this one too (a planner's clock, so a caller handing several planners one budget sees
        what each used; `solve()`'s own clock does not, so a caller charging its solves by
        estimate, as the hybrid search does, is not charged twice)."""
        made = Deadline(None, parent=self)
        made.charges_parent = charges_parent
        return made

    def elapsed(self) -> float:
        """Seconds since this deadline started."""
        return clock() - self.start

    def remaining(self) -> float | None:
        """Seconds left: the smaller of this deadline's own and its parent's (None when neither has a limit).
        """
        own = None if self.time_limit is None else max(0.0, self.time_limit - self.elapsed())
        above = None if self.parent is None else self.parent.remaining()
        if own is None:
            return above
        return own if above is None else min(own, above)

    def expired(self) -> bool:
        """Whether the wall clock has run out: the safety net. A True answer marks this deadline
        and its ancestors `cut_short`, so the result can say the clock decided."""
        left = self.remaining()
        if left is not None and left <= 0.0:
            self.mark_cut_short()
            return True
        return False

    def end(self) -> float | None:
        """The `clock()` reading when this deadline ends: the earliest of its own end and its
        ancestors' (None when neither has a limit)."""
        own = None if self.time_limit is None else self.start + self.time_limit
        above = None if self.parent is None else self.parent.end()
        if own is None:
            return above
        return own if above is None else min(own, above)

    def overrun(self, grace_s: float) -> bool:
        """Whether the wall clock is more than `grace_s` past this deadline's end or an ancestor's
        (for a share handed out of its parent's budget: `grace_s` or SHARE_GRACE_FRACTION of its own
        length, whichever is longer): for work that is worth finishing a little late (a problem half
        built is no problem at all) within the slack a command's limit allows. A True answer marks
        the deadline `cut_short`, as `expired`."""
        now = clock()
        deadline: Deadline | None = self
        while deadline is not None:
            if deadline.time_limit is not None:
                grace = max(grace_s, SHARE_GRACE_FRACTION * deadline.time_limit) if deadline.handed_out else grace_s
                if now > deadline.start + deadline.time_limit + grace:
                    self.mark_cut_short()
                    return True
            deadline = deadline.parent
        return False

    def mark_cut_short(self) -> None:
        """Record that the wall clock, not the work budget, stopped some work under this deadline."""
        deadline: Deadline | None = self
        while deadline is not None:
            deadline.cut_short = True
            deadline = deadline.parent

    def share(self, fraction: float, floor_s: float = 0.0) -> "Deadline":
        """A child with `fraction` of the nominal budget not yet handed out (for its work
        decisions; handed out now), and on the wall clock `fraction` of what is left now (at least
        `floor_s`, never past this one); unlimited when this one is."""
        unallotted = self.nominal_left()
        nominal = None if unallotted is None else unallotted * fraction
        if nominal is not None:
            self.allotted_s += nominal
        left = self.remaining()
        if left is None:
            made = Deadline(None, parent=self, nominal_s=nominal)
        else:
            made = Deadline(max(max(min(left, floor_s), left * fraction), 1e-6), parent=self, nominal_s=nominal)
        made.handed_out = nominal is not None
        return made

    def work_share(self, fraction: float) -> "Deadline":
        """`share(fraction)` whose wall clock lasts at least its nominal seconds (never past this
        deadline): for work sized by its nominal budget (`WorkMeter`, move and proposal counts),
        which a wall-clock share already shortened by a slow start-up or build would otherwise
        stop on an idle machine."""
        unallotted = self.nominal_left()
        return self.share(fraction, floor_s=0.0 if unallotted is None else fraction * unallotted)

    def work_part(self, fraction: float) -> "Deadline":
        """A child with `fraction` of the nominal budget not yet handed out (handed out now) and no
        wall clock of its own: it ends with this one. For a piece of work sized by its nominal
        budget alone (`WorkMeter` counts), whose safety net is then this deadline's end: a
        wall-clock share, a fraction of the time left, would stop it early on a loaded machine or
        after a slow start, where the same work fits the nominal budget."""
        unallotted = self.nominal_left()
        nominal = None if unallotted is None else unallotted * fraction
        if nominal is not None:
            self.allotted_s += nominal
        made = Deadline(None, parent=self, nominal_s=nominal)
        made.handed_out = nominal is not None
        return made

    def spend(self, seconds: float) -> None:
        """Hand out `seconds` of the nominal budget to work the holder does itself, by a
        deterministic estimate (building the problem), so what follows plans with the rest. What a
        share spends beyond its budget (work that must run, as a greedy pass making the only plan)
        is spent from its parent's too: the work after it plans with what is really left."""
        seconds = max(0.0, seconds)
        unallotted = self.nominal_left()
        overdraft = 0.0
        if unallotted is not None:
            self.allotted_s += min(seconds, unallotted)
            overdraft = max(0.0, seconds - unallotted)
        if self.parent is not None:
            if self.charges_parent:
                self.parent.spend(seconds)
            elif self.handed_out and overdraft > 0.0:
                self.parent.spend(overdraft)

    def ending_early(self, reserve_s: float) -> "Deadline":
        """A child ending `reserve_s` earlier (at most a quarter of the budget), for the work that
        must follow it (decoding, validating, printing), so the whole command ends in time. Its
        nominal budget is reduced likewise; its `elapsed()` is this deadline's."""
        def less(seconds: float) -> float:
            return max(MIN_LIMIT_S, seconds - min(0.25 * seconds, reserve_s))
        unallotted = self.nominal_left()
        nominal = None if unallotted is None else less(unallotted)
        left = self.remaining()
        if left is None:
            return Deadline(None, start=self.start, parent=self, nominal_s=nominal)
        return Deadline(self.elapsed() + less(left), start=self.start, parent=self, nominal_s=nominal)
