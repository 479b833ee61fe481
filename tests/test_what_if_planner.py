"""The what-if planner (kind "hybrid", `solver-plan hybrid --what-if`, job planner `what-if`): a configuration
pinned in full is priced as `evaluate` prices it, the runtime's own layer split included, from the terminal,
from Python and from job files alike; incomplete pins and a device count that disagrees are input errors
naming the option."""
from __future__ import annotations

import json
import textwrap

import pytest

from solver_plan import api
from solver_plan.batch.store import iter_records
from solver_plan.cli import main
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.search import what_if
from solver_plan.result import Status

MODEL = "gpt2:layers=6,hidden=256,heads=4,head_dim=64,ffn=1024,seq=128,positions=128,vocab=1024"
PINS = {"dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 2, "recompute": "full", "zero_stage": 3,
        "schedule": "1f1b"}
FIX_TEXT = "dp=2,tp=2,pp=2,micro_batch_size=2,recompute=full,zero_stage=3,schedule=1f1b"


def test_what_if_prices_as_evaluate_with_the_runtimes_own_split():
    given = what_if(MODEL, "a100x8-80gb", 16, fix=PINS, runtime="torchtitan")
    direct = evaluate(MODEL, "a100x8-80gb", 16, PINS, runtime="torchtitan")
    assert given.status == direct.status == Status.FEASIBLE
    assert given.plan.step_time_s == direct.plan.step_time_s
    # torchtitan's generate_split_points for 6 layers on 2 stages: 3 and 3; the search's cut is its own
    assert [s.layers for s in given.plan.stages] == [3, 3]
    searched = plan_hybrid(MODEL, "a100x8-80gb", 16, fix=PINS, runtime="torchtitan")
    assert searched.plan.step_time_s <= given.plan.step_time_s * (1 + 1e-9)


def test_the_command_line_what_if_agrees_with_python(tmp_path, capsys):
    out = tmp_path / "plan.json"
    code = main(["hybrid", "--model", MODEL, "--cluster", "a100x8-80gb", "--batch", "16", "--runtime", "torchtitan",
                 "--fix", FIX_TEXT, "--what-if", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0 and "what-if evaluation of a given configuration" in printed
    record = json.loads(out.read_text())
    direct = api.hybrid(MODEL, "a100x8-80gb", 16, fix=PINS, runtime="torchtitan", planner="what-if")
    assert record["step_time_s"] == pytest.approx(direct.plan.step_time_s, rel=1e-12)
    assert record["parallelism"]["micro_batch_size"] == 2


@pytest.mark.parametrize("fix, where, words", [
    ("dp=2,tp=2,pp=2", "--fix", "pin micro_batch_size too"),
    ("tp=2,micro_batch_size=2", "--fix", "pin dp, pp too"),
])
def test_incomplete_pins_name_the_missing_keys(fix, where, words, capsys):
    code = main(["hybrid", "--model", MODEL, "--cluster", "a100x8-80gb", "--batch", "16", "--fix", fix, "--what-if"])
    err = capsys.readouterr().err
    assert code != 0 and where in err and words in err and "Traceback" not in err


def test_a_device_count_that_disagrees_is_refused():
    with pytest.raises(InputError) as exc:
        what_if(MODEL, "a100x8-80gb", 16, devices=4, fix=PINS)
    assert exc.value.where == "--devices" and "8 devices, not 4" in str(exc.value)


def test_a_job_file_runs_the_what_if_planner(tmp_path):
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(f"""
        defaults: {{time_limit: 30, grace: 30}}
        jobs:
          - name: pinned
            kind: hybrid
            models: ["{MODEL}"]
            clusters: [a100x8-80gb]
            devices: [8]
            planners:
              - {{name: what-if, options: {{batch: 16, fix: "{FIX_TEXT}", runtime: torchtitan}}}}
        """))
    out = tmp_path / "runs"
    assert main(["batch", str(path), "--out", str(out), "--workers", "1"]) == 0
    records = [record for _, record, _ in iter_records(out)]
    assert len(records) == 1 and records[0]["status"] == "FEASIBLE"
    direct = evaluate(MODEL, "a100x8-80gb", 16, PINS, runtime="torchtitan")
    assert records[0]["objective_s"] == pytest.approx(direct.plan.step_time_s, rel=1e-12)


def test_a_tensor_parallel_degree_that_splits_a_head_is_refused():
    with pytest.raises(InputError) as exc:  # 4 heads: tp 3 would split them
        what_if(MODEL, "a100x8-80gb", 16, fix={"dp": 2, "tp": 3, "pp": 1, "micro_batch_size": 1})
    assert exc.value.where == "--fix tp" and "4 heads" in str(exc.value)


def test_a_mixture_of_experts_what_if_names_the_option(capsys):
    code = main(["hybrid", "--model", "data/hf-configs/mixtral-8x7b-v0.1.json", "--cluster", "h100-4x8-ib",
                 "--batch", "16", "--fix", "dp=4,tp=8,pp=1,micro_batch_size=1", "--what-if"])
    err = capsys.readouterr().err
    assert code != 0 and "--what-if" in err and "pin every dimension" in err and "Traceback" not in err
