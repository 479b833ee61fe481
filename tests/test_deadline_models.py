"""Model builds and diagnoses that grow with the input honour the limit (issue 26 leftovers): the
one-hot MILP is not built when its size says it cannot be in time (decided by size and the nominal
limit, the wall clock only as a safety net), and the hybrid least-memory search gives the same
answer with its memory cached."""
from __future__ import annotations

import math

import numpy as np
import pytest

from solver_plan.deadline import Deadline, time_budget
from solver_plan.result import Status
from test_deadline_loops import _expired


def _problem(spec: str):
    from solver_plan.suite.generators import resolve_problem
    return resolve_problem(spec)


def test_the_size_estimate_bounds_the_model_built():
    from solver_plan.intra.linear_model import config_model, config_model_elements
    for spec in ("random-dag:nodes=60,candidates=4-9,seed=2", "random-dag:nodes=60,candidates=4-9,seed=2,memory=binding",
                 "skip-chain:nodes=40,candidates=3-7,seed=5"):
        problem = _problem(spec)
        model = config_model(problem)
        assert model.num_columns + len(model.values) <= config_model_elements(problem)


def test_the_model_build_stops_at_its_deadline_and_is_unchanged_with_time():
    from solver_plan.intra.linear_model import ModelBuildCut, config_model
    problem = _problem("random-dag:nodes=60,candidates=4-9,seed=2,memory=binding")
    with pytest.raises(ModelBuildCut):
        config_model(problem, _expired())
    plain, timed = config_model(problem), config_model(problem, Deadline(600))
    for field in ("cost", "rows", "columns", "values", "row_lower", "row_upper", "integer"):
        assert np.array_equal(getattr(plain, field), getattr(timed, field))


def test_a_model_too_big_for_the_limit_is_not_built_and_the_incumbent_is_the_answer(monkeypatch):
    from solver_plan.intra import milp
    from solver_plan.intra.linear_model import config_model_seconds
    problem = _problem("random-dag:nodes=2000,candidates=10-30,seed=1,devices=16")
    limit = 2.0
    assert config_model_seconds(problem) > milp.MODEL_BUILD_SHARE * limit  # the size decides

    def never(*args, **kwargs):
        raise AssertionError("the model was built")
    monkeypatch.setattr(milp, "config_model", never)
    result = milp.plan_milp(problem, deadline=time_budget(limit), lagrangian=False)
    assert result.status is Status.TIME_LIMIT and result.assignment is not None
    assert any("MILP not built" in note and f"{limit:g} s time limit" in note for note in result.notes)
    assert result.objective == pytest.approx(problem.objective(result.assignment))


def test_the_build_decision_depends_on_size_and_nominal_limit_only():
    from solver_plan.intra import milp
    from solver_plan.intra.linear_model import config_model_seconds
    problem = _problem("random-dag:nodes=200,candidates=4-9,seed=3")
    estimate = config_model_seconds(problem)
    enough = estimate / milp.MODEL_BUILD_SHARE * 1.01
    assert milp.too_big_note(problem, None) is None and milp.too_big_note(problem, enough) is None
    assert milp.too_big_note(problem, enough / 1.02) is not None


def test_milp_gives_the_same_answer_when_time_suffices():
    from solver_plan.intra.milp import plan_milp
    problem = _problem("random-dag:nodes=40,candidates=4-9,seed=4")
    free, limited = plan_milp(problem), plan_milp(problem, deadline=time_budget(60))
    assert free.status is Status.OPTIMAL and limited.status is Status.OPTIMAL
    assert limited.objective == pytest.approx(free.objective, rel=1e-9)
    assert not any("not built" in note for note in limited.notes)


def test_least_memory_with_cached_stage_memory_equals_the_uncached_bisection():
    from solver_plan.hybrid import search
    from solver_plan.hybrid.evaluate import stage_caps
    from solver_plan.hybrid.stages import least_layers
    from test_deadline_loops import _infeasible_context
    ctx, points, floors, _ = _infeasible_context()
    for par, floor in list(zip(points, floors))[:40]:
        least = least_layers(par.schedule, par.virtual_stages)

        def fits(limit, par=par, least=least):
            caps = stage_caps(ctx, par, limit)
            return min(caps) >= least and sum(caps) >= ctx.spec.layers
        need = search._least_memory(ctx, par, floor)
        if math.isinf(need):
            continue
        assert fits(need) and (need <= floor or not fits(need * (1 - 1e-8)))


BLOCKS = {"model": {"hidden_dim": 12288, "seq_len": 2048}, "Mparams": 1812.0, "Mf": 1300.0,
          "Tf": 9.5, "Tb": 19.0, "Tw": 9.5}  # one gpt3-175B block, as bench_time_limits.py writes it


def _blocks_problem(tmp_path, blocks: int, processors: int):
    import json
    from solver_plan.cluster import resolve_cluster
    from solver_plan.pipeline.sources import build_chain_problem
    path = tmp_path / "blocks.json"
    path.write_text(json.dumps(BLOCKS))
    return build_chain_problem(str(path), resolve_cluster("a100-80gb-superpod"), processors, blocks=blocks)


def _small_chain(memory=8e9):
    from solver_plan.cluster import resolve_cluster
    from solver_plan.pipeline.sources import build_chain_problem
    return build_chain_problem("gpt2:layers=30,batch=2", resolve_cluster("v100x8-nvlink"), 8, memory=memory)


def _least_memory_reference(problem, in_flight):
    """The min-max DP computing every stage memory vector afresh for every p (before the cache)."""
    L, P = problem.layers, problem.processors
    best = np.full((L + 1, P + 1), np.inf)
    best[L, 0] = 0.0
    for k in range(L - 1, -1, -1):
        for p in range(1, P + 1):
            best[k, p] = np.min(np.maximum(problem.stage_memory_from(k, in_flight(p)), best[k + 1:, p - 1]))
    return min(float(best[0, p]) for p in range(1, P + 1))


def test_least_memory_with_cached_stage_vectors_equals_the_reference_dp():
    from solver_plan.pipeline.minimal_memory import least_memory_allocation
    problem = _small_chain()
    for in_flight in (lambda p: 1, lambda p: p, lambda p: min(p, 3)):
        need, allocation = least_memory_allocation(problem, in_flight)
        assert need == _least_memory_reference(problem, in_flight)
        assert allocation is not None and allocation.stages[-1].last == problem.layers - 1


def test_the_infeasible_diagnosis_and_pipedream_dp_stop_at_the_deadline():
    import time
    from solver_plan.pipeline import pipedream_dp
    from solver_plan.pipeline.minimal_memory import infeasible_result
    problem = _small_chain(memory=1e6)  # nothing fits
    full = infeasible_result("pipedream", problem, time.perf_counter(), "why")
    assert full.min_memory is not None and "too small" in full.notes[0]
    cut = infeasible_result("pipedream", problem, time.perf_counter(), "why", deadline=_expired())
    assert cut.status is Status.INFEASIBLE and cut.min_memory is None and "time limit ran out" in cut.notes[0]
    stopped = pipedream_dp.plan(_small_chain(), deadline=_expired())
    assert stopped.status is Status.TIME_LIMIT and stopped.allocation is None


def test_the_pipeline_baseline_is_skipped_by_size_at_a_short_limit_and_run_with_time(tmp_path):
    from solver_plan.pipeline import api
    problem = _blocks_problem(tmp_path, 400, 32)  # the instance: INFEASIBLE at 80 GB
    assert api.baseline_seconds(problem) > api.BASELINE_SHARE * 1.0
    short = api.plan_pipeline(problem, "madpipe", deadline=Deadline(1.0))
    assert not short.compared and any("not compared with pipedream" in n and "1 s time limit" in n
                                      for n in short.notes)
    small = _small_chain()
    enough = api.baseline_seconds(small) / api.BASELINE_SHARE * 1.5
    timed = api.plan_pipeline(small, "madpipe", time_limit=enough)
    assert timed.compared and not any("not compared" in n for n in timed.notes)


def test_pipedream_through_the_front_door_gives_the_same_plan_with_the_baseline_reused():
    from solver_plan.pipeline import api, pipedream_dp
    problem = _small_chain()
    direct = pipedream_dp.plan(problem)
    for limit in (None, 60.0):
        result = api.plan_pipeline(problem, "pipedream", time_limit=limit)
        alone = api.plan_pipeline(problem, "pipedream", time_limit=limit, compare_baseline=False)
        assert result.allocation.allocation == direct.allocation == alone.allocation.allocation
        assert result.period_s == pytest.approx(alone.period_s, rel=1e-12)
