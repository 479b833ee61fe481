"""The independent checker re-derives every result's numbers and catches corrupted plans."""
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.baselines import data_parallel, megatron_rule
from solver_plan.hybrid.validate import validate_plan
from solver_plan.result import Status

MODEL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"
CLUSTER = resolve_cluster("h100-4x8-ib", 16)


@pytest.fixture(scope="module")
def result():
    return plan_hybrid(MODEL, CLUSTER, 16, time_limit=None, fix={"pp": 2})


def test_every_result_is_validated(result):
    assert result.status == Status.OPTIMAL
    assert any("validator" in note and "agree" in note for note in result.notes)
    assert validate_plan(result.plan, CLUSTER) == []


def test_corrupted_step_time_is_caught(result):
    plan = result.plan
    bad = replace(plan, terms=replace(plan.terms, pipeline_s=plan.terms.pipeline_s * 0.9))
    assert any("pipeline" in p for p in validate_plan(bad, CLUSTER))


def test_corrupted_memory_and_layers_are_caught(result):
    plan = result.plan
    stage = plan.stages[0]
    smaller = replace(stage, memory=replace(stage.memory, activations=stage.memory.activations / 2))
    assert any("memory" in p for p in validate_plan(replace(plan, stages=(smaller,) + plan.stages[1:]), CLUSTER))
    missing = replace(stage, layers=stage.layers - 1) if stage.layers > 1 else replace(stage, first_layer=1)
    assert any("blocks" in p or "contiguous" in p
               for p in validate_plan(replace(plan, stages=(missing,) + plan.stages[1:]), CLUSTER))


def test_memory_over_the_limit_is_caught(result):
    plan = replace(result.plan, memory_limit=result.plan.memory_per_device_bytes / 2)
    assert any("over the limit" in p for p in validate_plan(plan, CLUSTER))


def test_what_if_over_memory_is_infeasible_with_the_memory_it_needs():
    r = evaluate("gpt3-175B", "a100x8-80gb", 8, {"dp": 1, "tp": 8, "pp": 1, "micro_batch_size": 1})
    assert r.status == Status.INFEASIBLE
    assert r.needed_memory_bytes == pytest.approx(r.plan.memory_per_device_bytes)
    assert r.needed_memory_bytes > 80e9


def test_nothing_fits_reports_the_smallest_memory():
    r = plan_hybrid("gpt3-175B", "a100x8-80gb", 8, time_limit=None)
    assert r.status == Status.INFEASIBLE and r.plan is not None
    assert r.needed_memory_bytes > 80e9
    # every point of the space needs at least that much: with that limit a plan exists
    again = plan_hybrid("gpt3-175B", "a100x8-80gb", 8, memory_limit=r.needed_memory_bytes * 1.0001, time_limit=None)
    assert again.status.has_solution


def test_baselines_are_points_of_the_space():
    best = plan_hybrid(MODEL, CLUSTER, 16, time_limit=None)
    dp = data_parallel(MODEL, CLUSTER, 16, time_limit=None)
    mega = megatron_rule(MODEL, CLUSTER, 16, time_limit=None)
    assert dp.plan.parallelism.tp == 1 and dp.plan.parallelism.pp == 1
    assert mega.plan.parallelism.tp == 8
    assert best.step_time_s <= min(dp.step_time_s, mega.step_time_s) * (1 + 1e-12)
    # a baseline is optimal only in its corner of the space: no proof, no bound
    assert dp.status == Status.FEASIBLE and dp.lower_bound_s is None and mega.lower_bound_s is None


def test_batch_runner_reads_batch_and_fix_options():
    from types import SimpleNamespace

    from solver_plan.errors import InputError
    from solver_plan.batch.kinds import hybrid_job as run_job

    job = SimpleNamespace(kind="hybrid", model=MODEL, cluster="h100-4x8-ib", devices=16, time_limit=30.0,
                          memory_limit=None, planner="hybrid", options=(("batch", 16), ("fix", "pp=2")),
                          precision=None, seed=0)
    result, fields = run_job(job)
    assert fields["status"] == Status.OPTIMAL and result.plan.parallelism.pp == 2
    assert fields["plan"]["kind"] == "hybrid" and fields["objective_s"] == result.step_time_s
    with pytest.raises(InputError, match="batch"):
        run_job(SimpleNamespace(**{**vars(job), "options": ()}))


def test_expired_deadline_returns_time_limit_with_a_valid_bound():
    from solver_plan.deadline import Deadline

    full = plan_hybrid(MODEL, CLUSTER, 16, time_limit=None)
    expired = Deadline(1e-6)
    while not expired.expired():
        pass
    cut = plan_hybrid(MODEL, CLUSTER, 16, deadline=expired)
    assert cut.status == Status.TIME_LIMIT
    assert cut.lower_bound_s is not None and cut.lower_bound_s <= full.step_time_s * (1 + 1e-12)
    if cut.plan is not None:
        assert cut.step_time_s >= full.step_time_s * (1 - 1e-12)
