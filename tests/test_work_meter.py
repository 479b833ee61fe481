"""`deadline.WorkMeter`: work counted at a fixed nominal cost per unit against a deadline's nominal
budget (issue 26); the wall clock only stops past the deadline's grace."""
from __future__ import annotations

import pytest

from solver_plan import deadline as deadline_module
from solver_plan.deadline import GRACE_S, WORK_UNIT_S, Deadline, WorkMeter


def test_charges_spend_the_nominal_budget_and_stop_when_it_is_used():
    deadline = Deadline(60.0, nominal_s=1.0)
    meter = WorkMeter(deadline)
    meter.charge(400_000)
    assert deadline.nominal_left() == pytest.approx(1.0 - 400_000 * WORK_UNIT_S)
    assert not meter.spent() and meter.affords(600_000) and not meter.affords(600_001)
    meter.charge(600_000)
    assert meter.spent() and meter.stop() and deadline.nominal_left() == 0.0
    assert not deadline.cut_short  # the budget, not the clock, stopped it


def test_a_part_has_its_share_of_what_is_left_and_passes_on_the_rest():
    deadline = Deadline(60.0, nominal_s=1.0)
    meter = WorkMeter(deadline)
    part = meter.part(0.25)
    assert part.left_s() == pytest.approx(0.25)
    part.charge(250_000)
    assert part.spent() and not meter.spent() and meter.left_s() == pytest.approx(0.75)


def test_without_a_limit_nothing_is_spent():
    for meter in (WorkMeter(None), WorkMeter(Deadline(None))):
        meter.charge(1e12)
        assert not meter.stop() and meter.left_s() is None and meter.part(0.5).left_s() is None


def test_the_wall_clock_stops_only_past_the_grace(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(deadline_module, "clock", lambda: now[0])
    deadline = Deadline(1.0, nominal_s=1.0)
    meter = WorkMeter(deadline)
    now[0] = 1.0 + GRACE_S / 2  # past the end, within the grace: work still runs
    assert not meter.clock_out() and not deadline.cut_short
    now[0] = 1.0 + GRACE_S * 1.5
    assert meter.clock_out() and meter.stop() and deadline.cut_short
