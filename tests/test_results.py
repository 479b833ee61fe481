"""Issue 21, results: one status enum, one result protocol (solver_plan/result.py) that every answer
exposes, one JSON envelope on every result JSON, and readers that learn a file's kind from `kind`."""
from __future__ import annotations

import json

import numpy as np
import pytest

from solver_plan.result import (ENVELOPE_KEYS, OBJECTIVE_KINDS, ConfigResult, Envelope, Objective, Result, Status,
                                read_kind, read_schema_version)
from solver_plan.resources import REPO_ROOT

FIXTURES = REPO_ROOT / "tests" / "fixtures" / "plans"


def check_protocol(result, kind: str, objective: str) -> Envelope:
    assert isinstance(result, Result)
    envelope = result.envelope
    assert isinstance(envelope, Envelope) and isinstance(envelope.status, Status)
    assert envelope.status is Status.parse(result.status)
    assert (envelope.kind, envelope.objective.name) == (kind, objective)
    assert envelope.schema_version == 1 and envelope.objective.unit and envelope.objective.meaning
    assert isinstance(envelope.notes, tuple) and isinstance(envelope.solver_failures, tuple)
    return envelope


def test_status_parse_maps_the_backends_lowercase_words_onto_the_one_enum():
    for word in ("optimal", "feasible", "infeasible", "time_limit", "error"):
        assert Status.parse(word) is Status[word.upper()]
    assert Status.parse(Status.FEASIBLE) is Status.FEASIBLE
    with pytest.raises(ValueError, match="unknown status 'done'"):
        Status.parse("done")


def test_solve_outcome_speaks_status_and_the_protocol():
    from solver_plan.intra.linear_model import SolveOutcome
    outcome = SolveOutcome("time_limit", np.zeros(3), 5.0, 4.0, ("stopped",))  # a backend's old spelling
    assert outcome.status is Status.TIME_LIMIT
    envelope = check_protocol(outcome, "config", "model")
    assert (envelope.objective.value, envelope.bound, envelope.gap) == (5.0, 4.0, pytest.approx(0.2))


def test_config_result_and_plan_expose_the_protocol_with_their_objective():
    from solver_plan.api import plan
    result = ConfigResult("milp", Status.TIME_LIMIT, 2.0, 1.5, 3.0, (0,), ("n",), "HiGHS crashed")
    envelope = check_protocol(result, "config", "sum")
    assert (envelope.bound, envelope.gap, envelope.runtime_s) == (1.5, result.gap, 3.0)
    assert envelope.solver_failures == ("HiGHS crashed",)
    assert ConfigResult("x", Status.FEASIBLE, 1.0, objective_kind="load").envelope.objective.name == "load"
    p = plan("mlp:layers=2,hidden=128,batch=32", "v100x8-nvlink", "greedy", devices=4, memory_limit=None)
    envelope = check_protocol(p, "config", "sum")
    assert envelope.objective.value == p.objective_s and envelope.solver_failures == ()


def test_milp_load_plans_say_their_objective_is_the_load_estimate():
    from solver_plan.api import plan
    p = plan("mlp:layers=2,hidden=128,batch=32", "v100x8-nvlink", "milp-load", devices=4, memory_limit=None,
             time_limit=20)
    assert p.objective_kind == "load" and p.to_dict()["objective"]["name"] == "load"


def test_pipeline_hybrid_and_moe_results_expose_the_protocol():
    from solver_plan.hybrid.moe_plan import MoEResult
    from solver_plan.hybrid.plan import HybridResult
    from solver_plan.api import pipeline
    result = pipeline("resnet50:batch=8", "v100x8-nvlink", 2, "pipedream", "1f1b*", time_limit=10)
    envelope = check_protocol(result, "pipeline", "period")
    assert envelope.objective.value == result.period_s and envelope.bound == result.lower_bound_s
    assert envelope.notes == tuple(result.to_dict()["notes"])
    hybrid = HybridResult(Status.INFEASIBLE, None, None, 0.5, notes=("nothing fits",), solver_failure="CP-SAT died")
    envelope = check_protocol(hybrid, "hybrid", "step_time")
    assert envelope.objective.value is None and envelope.solver_failures == ("CP-SAT died",)
    check_protocol(MoEResult(Status.TIME_LIMIT, None, 2.0, 1.0), "moe-hybrid", "step_time")


def test_answer_exposes_the_protocol():
    from solver_plan.intra.answer import Answer
    answer = Answer(Status.FEASIBLE, (0, 1), 1.0, ("a note",))
    envelope = check_protocol(answer, "config", "sum")
    assert envelope.bound == 1.0 and envelope.notes == ("a note",)


def test_envelope_refuses_what_it_does_not_know():
    with pytest.raises(ValueError, match="unknown objective"):
        Objective("throughput", 1.0)
    with pytest.raises(ValueError, match="unknown result kind"):
        Envelope("plan", 1, Status.OPTIMAL, Objective("sum", 1.0))
    with pytest.raises(ValueError, match="schema_version"):
        Envelope("config", 0, Status.OPTIMAL, Objective("sum", 1.0))
    d = Envelope("config", 1, "optimal", Objective("sum", float("inf")), float("nan")).to_dict()
    assert tuple(d) == ENVELOPE_KEYS and d["status"] == "OPTIMAL"
    assert d["objective"]["value"] is None and d["bound"] is None  # JSON has no infinities
    assert set(OBJECTIVE_KINDS) >= {"sum", "load", "period", "step_time"}


def test_the_plan_command_says_what_its_objective_is(capsys):
    from solver_plan.cli import main
    assert main(["plan", "--model", "mlp:layers=2,hidden=128,batch=32", "--cluster", "v100x8-nvlink",
                 "--devices", "4", "--planner", "greedy", "--memory-limit", "none", "--quiet"]) == 0
    out = capsys.readouterr().out
    headline = next(line for line in out.splitlines() if line.startswith("status "))
    assert "(sum of per-operator compute and communication costs, no overlap)" in headline
    assert "per step" not in headline


@pytest.mark.parametrize("name", ["operators-mlp.json", "operators-gpt2.json", "operators-gpt2-alldevices.json"])
def test_committed_plans_are_unchanged_but_for_the_envelope(name):
    """The committed per-operator plans (tests/fixtures/plans, written before the envelope; regenerated
    once when attention became the runtime's fused kernel, cost/attention.py, and the plan named its runtime,
    and once when megatron-core's loss became its counted kernels, s39: same configurations) come out
    of today's planner key for key; only the envelope's keys are new (runtime_s is a timing)."""
    from solver_plan.api import load_cluster, plan
    old = json.loads((FIXTURES / name).read_text())
    from solver_plan.requests import UNLIMITED
    # written with no memory limit (since issue 21 None means the device's memory everywhere)
    new = plan(old["model"], load_cluster("v100x8-nvlink", 4), old["planner"], memory_limit=UNLIMITED,
               all_devices="alldevices" in name).to_dict()
    assert {k: v for k, v in new.items() if k in old and k != "runtime_s"} == \
        {k: v for k, v in old.items() if k != "runtime_s"}
    assert set(new) - set(old) == {"kind", "objective", "bound", "solver_failures"}
    assert read_kind(old).note is not None and read_kind(new).note is None


def test_read_kind_trusts_kind_and_only_guesses_for_files_before_the_envelope():
    assert read_kind({"kind": "hybrid", "operators": [], "edges": []}).kind == "hybrid"  # kind wins over keys
    reading = read_kind({"kind": "config"})
    assert (reading.kind, reading.note) == ("config", None)
    legacy = read_kind({"version": 1, "period_s": 1.0, "operations": []})
    assert legacy.kind == "pipeline" and "before the result envelope" in legacy.note
    assert read_schema_version({"version": 1, "period_s": 1.0}) == 1  # pipeline JSON's old name
    assert read_kind({"plan": {"kind": "moe-hybrid"}, "status": "OPTIMAL"}).kind == "moe-hybrid"
    with pytest.raises(ValueError, match="unknown kind 'plan'"):
        read_kind({"kind": "plan"})
    with pytest.raises(ValueError, match="no 'kind'"):
        read_kind({"status": "OPTIMAL"})


def test_exports_read_kind_not_keys(tmp_path, capsys):
    from solver_plan.cli import main
    from solver_plan.errors import InputError
    from solver_plan.export import export_plan
    from solver_plan.export.common import plan_kind
    hybrid = json.loads((FIXTURES / "hybrid-gpt2-8.json").read_text())
    assert plan_kind(hybrid) == "hybrid"
    with pytest.raises(InputError, match="got a config plan"):  # declared kind, whatever else it holds
        export_plan({**hybrid, "kind": "config"}, "deepspeed")
    with pytest.raises(InputError, match=r"malformed expert-parallel plan \(KeyError: 'ep'\)"):  # read as one
        export_plan({**hybrid, "kind": "moe-hybrid"}, "megatron")
    with pytest.raises(InputError, match="batch record"):
        plan_kind({"kind": "batch-record"})
    with pytest.raises(InputError, match="unsupported schema_version 2"):
        plan_kind({**hybrid, "schema_version": 2})
    notes: list[str] = []
    legacy = json.loads((FIXTURES / "operators-mlp.json").read_text())  # written before the envelope
    assert plan_kind(legacy, notes) == "config" and len(notes) == 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(legacy))
    assert main(["export", str(path), "--target", "dtensor", "--out", str(tmp_path / "d.json")]) == 0
    assert "has no 'kind' (written before the result envelope): read as a config result" in capsys.readouterr().err


def test_generated_problem_answers_carry_the_envelope():
    """The batch's plain dict for a generated problem (no operators) is a result JSON too."""
    from solver_plan.suite.run import answer_problem
    answer = answer_problem("random-dag:nodes=8,candidates=3,seed=1", "greedy")
    plan = answer.plan
    assert read_kind(plan) == read_kind({"kind": "config"}) and plan["schema_version"] == 1
    assert plan["objective"]["name"] == "sum" and plan["objective"]["value"] == answer.objective
    assert plan["assignment"] and plan["status"] == answer.status.value
