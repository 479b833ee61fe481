"""The expert-parallel search (hybrid/moe_plan.py) gives the same answer on an idle machine and on one
three times slower (issue 26), as tests/test_deadline_loaded.py checks for the other planners: the
nominal budget, charged fixed estimates per unit of work, decides how far the search goes; the wall
clock only stops it (and the answer then says so).

"Loaded" is a wall clock running 3x faster than the real one (`deadline.clock`), with 40% of the
limit gone before the run starts. Small instances: the clock never stops them, so only what decides
the answer is compared, including where the budget, not the clock, ends the search early."""
from __future__ import annotations

import re

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.deadline import CUT_SHORT_NOTE, Deadline, time_budget
from solver_plan.hybrid import moe_plan
from solver_plan.hybrid.moe_model import MoEModel
from solver_plan.hybrid.moe_plan import plan_moe
from solver_plan.hybrid.moe_price import make_context, memory_floor
from solver_plan.hybrid.moe_space import enumerate_points
from solver_plan.result import Status
from test_deadline_loaded import LIMIT_S, _idle_and_loaded

CLUSTER = resolve_cluster("h100-4x8-ib", 8)
BATCH = 16


def tiny() -> MoEModel:
    """4 experts, top-2, h 64, f_e 128, one dense and three MoE layers, seq 16 (tests/test_moe.py's)."""
    h = 64
    return MoEModel(name="tiny-moe", hidden=h, seq=16, vocab=100, heads=4, attention_gemms=((h, h),) * 4,
                    attention_extra_params=0, scores_width=h, values_width=h, attention_stored=4 * h,
                    attention_recomputable=3 * h, kv_width=2 * h, moe_layers=(False, True, True, True),
                    dense_ffn=256, experts=4, top_k=2, expert_ffn=128)


def _answer(budget: Deadline, **kwargs) -> tuple:
    result = plan_moe(tiny(), CLUSTER, BATCH, routing="zipf:0.7", deadline=budget, **kwargs)
    assert CUT_SHORT_NOTE not in result.notes, result.notes  # the clock stopped nothing
    return result.status, result.step_time_s, result.plan and result.plan.point, result.lower_bound_s, result.notes


@pytest.mark.parametrize("limit", [None, 1.5e9])  # 1.5 GB binds: points over their floor
def test_moe_search_gives_the_same_answer_loaded(monkeypatch, limit):
    idle, loaded = _idle_and_loaded(monkeypatch, lambda budget: _answer(budget, memory_limit=limit))
    assert idle[0] is Status.OPTIMAL and loaded == idle


def test_a_budget_that_ends_mid_search_gives_the_same_plan_loaded(monkeypatch):
    """Pricing charged 4 s a point: the nominal budget (0.9 x 30 s) pays for the standard layout and a
    few points of the search, then stops it: TIME_LIMIT with the best plan so far and the least bound
    of the points left, the same plan and bound under the loaded clock."""
    optimum = plan_moe(tiny(), CLUSTER, BATCH, routing="zipf:0.7", time_limit=None)
    monkeypatch.setattr(moe_plan, "PRICE_S", 4.0)
    idle, loaded = _idle_and_loaded(monkeypatch, _answer)
    status, step, point, bound, notes = idle
    assert status is Status.TIME_LIMIT and point is not None and loaded == idle
    assert bound <= optimum.step_time_s <= step
    assert "time limit reached; bound: the least bound of the points left" in notes


@pytest.mark.parametrize("pins", [None, "zero_stage=3"])
def test_a_short_budget_still_plans_the_standard_layout(monkeypatch, pins):
    """When the budget cannot rank the space, the answer is the standard layout priced first (Megatron-
    core's MoE recipes: tp 1, etp 1, cp 1, ep within a node, micro-batch 1, ZeRO-1; the pins given
    override): TIME_LIMIT with a plan no better than the search's, the same under a loaded clock."""
    searched = plan_moe(tiny(), CLUSTER, BATCH, routing="zipf:0.7", fix=pins, time_limit=None)
    monkeypatch.setattr(moe_plan, "BOUND_S_PER_POINT", 1.0)  # no budget ranks the space
    idle, loaded = _idle_and_loaded(monkeypatch, lambda budget: _answer(budget, fix=pins))
    status, step, point, bound, notes = idle
    assert status is Status.TIME_LIMIT and point is not None and loaded == idle
    assert (point.tp, point.etp, point.cp, point.micro_batch_size) == (1, 1, 1, 1)
    assert point.ep == 4  # the 4 experts within a node of 8
    assert point.zero_stage == (3 if pins else 1)
    assert bound is None and searched.step_time_s <= step
    assert any(note.startswith("ranking ") for note in notes)


def test_infeasible_names_the_least_memory_floor_of_the_space():
    """No point fits: every point's floor is computed (lazily, but all of them), and the note names the
    least, as a search that bounded every point first would."""
    limit = 1e6
    result = plan_moe(tiny(), CLUSTER, BATCH, memory_limit=limit, deadline=time_budget(LIMIT_S))
    ctx = make_context(tiny(), CLUSTER, BATCH, limit)
    least = min(memory_floor(ctx, p) for p in enumerate_points(tiny(), 8, CLUSTER.devices_per_node, BATCH, {}))
    assert result.status is Status.INFEASIBLE and result.plan is None
    found = re.search(r"least memory floor is ([0-9.]+) GB", result.notes[0])
    assert found and float(found.group(1)) == pytest.approx(least / 1e9, abs=0.005)


def test_the_hybrid_front_door_plans_a_moe_config_the_same_loaded(monkeypatch):
    """The front door hands its own budget to the search (a command's counts from the process's
    start): a MoE config.json through `answer_hybrid`, idle and loaded."""
    from solver_plan.hybrid.answer import answer_hybrid
    from solver_plan.hybrid.request import HybridRequest
    request = HybridRequest("data/hf-configs/qwen1.5-moe-a2.7b.json:seq=512,layers=4", "h100-4x8-ib", 64, devices=8,
                            time_limit=LIMIT_S)

    def answer(budget):
        report = answer_hybrid(request, budget)
        result = report.result
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        return result.status, result.step_time_s, result.plan.point, result.lower_bound_s, report.robustness

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle[0] is Status.OPTIMAL and loaded == idle


def test_price_in_order_stops_by_the_budget_only_once_it_has_a_plan():
    """The shared pricing loop (hybrid/budget.py): with no budget left, `until_plan` prices until its
    first plan and stops there (the next bound left open); pruning stops at the first bound >= the
    best step time, leaving no bound open."""
    from types import SimpleNamespace

    from solver_plan.hybrid.budget import price_in_order
    steps = {"a": None, "b": 5.0, "c": 4.0, "d": 9.0}  # no plan for "a"

    def price(name):
        return None if steps[name] is None else SimpleNamespace(step_time_s=steps[name])

    ranked = [(1.0, "a"), (2.0, "b"), (3.0, "c"), (6.0, "d")]
    spent = price_in_order(ranked, price, Deadline(60.0, nominal_s=0.0), 0.01, until_plan=True)
    assert (spent.best.step_time_s, spent.priced, spent.open_bound) == (5.0, 2, 3.0)
    ample = price_in_order(ranked, price, time_budget(LIMIT_S), 0.01)
    assert (ample.best.step_time_s, ample.priced, ample.open_bound) == (4.0, 3, None)  # "d": 6.0 >= 4.0
