"""Pipeline memory follows the training precision and the optimizer (issue 12, deliverable 1):
state bytes per parameter by hand, a 2-stage chain's memory by hand in fp32/Adam, mixed/Adam and
PipeDream's 3 x weights rule, the INFEASIBLE least memory, where chains get their state from,
the CLI, the JSON and its schema."""
from __future__ import annotations

import json
import math

import pytest

from solver_plan.cost.precision import TrainingPrecision
from solver_plan.errors import InputError
from solver_plan.pipeline.chain import LayerChain
from solver_plan.pipeline import onef1b
from solver_plan.pipeline.allocation import Allocation, Stage
from solver_plan.pipeline.api import plan_pipeline
from solver_plan.pipeline.memory import (DEFAULT_STATE, model_state, pipedream_rule, state_bytes_per_parameter)
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.result import Status

MIXED, FP32 = TrainingPrecision.mixed("bf16"), TrainingPrecision.fp32()


@pytest.mark.parametrize("precision, optimizer, expected", [
    (MIXED, "adam", 2 + 2 + 4 + 4 + 4),  # ZeRO 3.1: bf16 weights and gradients, fp32 master and two moments
    (FP32, "adam", 4 + 4 + 4 + 4),  # fp32 weights, gradients, two moments; no master copy
    (FP32, "sgd-momentum", 4 + 4 + 4),
    (MIXED, "sgd-momentum", 2 + 2 + 4 + 4),
    (FP32, "sgd", 4 + 4),
    (TrainingPrecision.mixed("fp16"), "adam", 16),
    (TrainingPrecision.mixed("fp8"), "adam", 16),  # fp8 GEMMs, bf16 storage (Transformer Engine)
    (FP32, "pipedream", 3 * 4),  # PipeDream: weights, gradients, one more version
    (MIXED, "pipedream", 3 * 2),
])
def test_state_bytes_per_parameter_by_hand(precision, optimizer, expected):
    assert state_bytes_per_parameter(precision, optimizer) == expected
    assert model_state(precision, optimizer).bytes_per_parameter == expected


def test_unknown_optimizer_is_refused_naming_the_option():
    with pytest.raises(InputError, match="--optimizer: unknown optimizer 'lamb'"):
        state_bytes_per_parameter(FP32, "lamb")


# --- a 2-stage chain by hand --------------------------------------------------------------------
# Layers of 100 and 300 parameters, forward 1 s and backward 2 s each; the model input is 50 bytes
# and the activation crossing the cut 40 bytes in fp32 (halved in bf16). Free transfers, so 1F1B*
# at the period 3 s keeps 2 batches on stage 0 and 1 on stage 1; each stage keeps the tensor
# entering it per batch (50 and 40 B) and 2 transfer buffers of the 40-B cut.
PARAMS = (100, 300)


def two_stage(weight_bytes: int, activation_scale: float, state) -> ChainProblem:
    chain = LayerChain.simple("two", [1, 1], [2, 2], [p * weight_bytes for p in PARAMS], [40 * activation_scale] * 2,
                              50 * activation_scale)
    return ChainProblem(chain, 2, 1e9, math.inf, state)


SPLIT = Allocation((Stage(0, 0, 0), Stage(1, 1, 1)))
CASES = {
    # fp32 weights (4 B), Adam: 16 B per parameter
    "fp32/adam": (two_stage(4, 1.0, model_state(FP32, "adam")),
                  {0: 16 * 100 + 2 * 50 + 2 * 40, 1: 16 * 300 + 1 * 40 + 2 * 40}),  # 1780, 4920
    # bf16 weights (2 B) and activations, fp32 master and moments: still 16 B per parameter
    "mixed/adam": (two_stage(2, 0.5, model_state(MIXED, "adam")),
                   {0: 16 * 100 + 2 * 25 + 2 * 20, 1: 16 * 300 + 1 * 20 + 2 * 20}),  # 1690, 4860
    # PipeDream's rule on the fp32 weights: 3 x W = 12 B per parameter
    "pipedream": (two_stage(4, 1.0, pipedream_rule()),
                  {0: 3 * 400 + 2 * 50 + 2 * 40, 1: 3 * 1200 + 1 * 40 + 2 * 40}),  # 1380, 3720
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_two_stage_memory_by_hand(case):
    problem, expected = CASES[case]
    assert onef1b.peak_memory(problem, SPLIT, 3.0) == pytest.approx(expected)
    result = plan_pipeline(problem, "pipedream", "1f1b*")
    assert result.valid and result.period_s == pytest.approx(3.0)
    assert [(s.first, s.last) for s in result.allocation.allocation.stages] == [(0, 0), (1, 1)]
    assert result.validation.peak_memory == pytest.approx(expected)  # the validator charges the same
    # the DPs' formula, with the in-flight counts above
    assert problem.stage_memory(0, 0, 2) == pytest.approx(expected[0])
    assert problem.stage_memory_from(1, 1)[0] == pytest.approx(expected[1])


def test_fp32_sgd_momentum_is_pipedreams_three_copies():
    # 4 + 4 + 4 = 12 B per fp32 parameter: the same memory as PipeDream's 3 x W
    sgd = two_stage(4, 1.0, model_state(FP32, "sgd-momentum"))
    assert onef1b.peak_memory(sgd, SPLIT, 3.0) == pytest.approx(CASES["pipedream"][1])


def test_default_state_is_fp32_adam():
    assert DEFAULT_STATE.precision == "fp32" and DEFAULT_STATE.optimizer == "adam"
    assert DEFAULT_STATE.weight_factor == 4.0  # 16 B per 4-B parameter
    with pytest.raises(InputError, match="ModelState"):
        ChainProblem(LayerChain.simple("x", [1], [1], [1], [1]), 1, 1e9, 1.0, "adam")


def test_infeasible_reports_the_least_memory_of_the_state():
    """M = 4000 B: PipeDream's rule fits (least 3720 B), fp32 Adam does not: the least memory any
    plan needs is the 2-stage split with one batch each, max(1600 + 50 + 80, 4800 + 40 + 80) = 4920 B
    (one stage holding both layers: 6400 + 90 = 6490 B)."""
    adam, _ = CASES["fp32/adam"]
    rule, _ = CASES["pipedream"]
    for planner, schedule in (("pipedream", "1f1b*"), ("madpipe", "exact")):
        short = plan_pipeline(adam.with_(memory=4000.0), planner, schedule, time_limit=10)
        assert short.status == Status.INFEASIBLE
        assert short.allocation.min_memory == pytest.approx(4920.0)
        note = short.allocation.notes[0]
        assert "needs at least 4.92 KB (4920 B)" in note and "processor 1 (layers 1..1) needs" in note
        assert "920 B (920 B) more than M" in note
        fits = plan_pipeline(rule.with_(memory=4000.0), planner, schedule, time_limit=10)
        assert fits.valid and max(fits.validation.peak_memory.values()) <= 4000.0
    enough = plan_pipeline(adam.with_(memory=4920.0), "madpipe", "exact", time_limit=10)
    assert enough.valid


# --- where chains get their state ----------------------------------------------------------------
def test_chain_state_follows_the_resolved_precision():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.data import data_dir
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.pipeline.sources import blocks_state, graph_state
    a100 = resolve_cluster("a100x8-80gb")
    zoo = resolve_model("mlp:layers=2,hidden=64,batch=4")
    auto = graph_state(zoo, a100)  # A100: mixed bf16, W priced in bf16
    assert (auto.precision, auto.weight_bytes_per_parameter, auto.weight_factor) == ("mixed-bf16", 2.0, 8.0)
    assert graph_state(zoo, a100, "fp32").weight_factor == 4.0
    assert graph_state(zoo, a100, None, "sgd-momentum").bytes_per_parameter == 12.0
    profile = resolve_model(str(data_dir() / "pipedream-profiles" / "alexnet"))
    measured = graph_state(profile, a100)  # measured in fp32: auto keeps fp32
    assert (measured.precision, measured.weight_bytes_per_parameter, measured.weight_factor) == ("fp32", 4.0, 4.0)
    # bf16 Adam still keeps 16 B per parameter, of fp32-measured W: 4 x W
    assert graph_state(profile, a100, "bf16").weight_factor == 4.0
    assert graph_state(profile, a100, None, "pipedream").weight_factor == 3.0
    assert blocks_state().weight_factor == 4.0 and blocks_state("bf16", "pipedream").weight_factor == 3.0


def test_build_chain_problem_and_json_carry_the_state():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.pipeline.sources import build_chain_problem
    jsonschema = pytest.importorskip("jsonschema")
    from solver_plan.resources import REPO_ROOT
    cluster = resolve_cluster("a100x8-80gb")
    problem = build_chain_problem("mlp:layers=4,hidden=64,batch=4", cluster, 2, precision="bf16", optimizer="sgd")
    assert (problem.state.precision, problem.state.optimizer, problem.state.bytes_per_parameter) == ("mixed-bf16", "sgd", 8.0)
    data = json.loads(plan_pipeline(problem, "pipedream", "1f1b*").to_json())
    assert (data["precision"], data["optimizer"], data["state_bytes_per_parameter"]) == ("mixed-bf16", "sgd", 8.0)
    assert data["state_terms"] == {"weights": 2.0, "gradients": 2.0, "master": 4.0}
    assert data["weight_bytes_per_parameter"] == 2.0 and data["memory_rule"] == "per-parameter"
    schema = json.loads((REPO_ROOT / "docs" / "schemas" / "pipeline.v1.schema.json").read_text())
    check = jsonschema.Draft202012Validator(schema)
    assert list(check.iter_errors(data)) == []
    for key in ("precision", "state_bytes_per_parameter"):
        assert list(check.iter_errors({k: v for k, v in data.items() if k != key}))
    assert list(check.iter_errors({**data, "optimizer": "lamb"}))
    with pytest.raises(InputError, match="--optimizer: unknown optimizer"):
        build_chain_problem("mlp:layers=4,hidden=64,batch=4", cluster, 2, optimizer="lamb")


def test_cli_says_the_state_and_takes_optimizer(tmp_path, capsys):
    from solver_plan.cli import main
    args = ["pipeline", "--model", "mlp:layers=4,hidden=64,batch=4", "--cluster", "a100x8-80gb", "-P", "2",
            "--planner", "pipedream", "--schedule", "1f1b*", "--time-limit", "10"]
    assert main(args + ["--out", str(tmp_path / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "memory: mixed-bf16 with adam: 16 B per parameter (weights 2 + gradients 2 + master 4 + moments 8)" in out
    assert "keeps 8 x its weights" in out
    assert main(args + ["--optimizer", "pipedream", "--precision", "fp32"]) == 0
    out = capsys.readouterr().out
    assert "memory: PipeDream's rule: 3 x the weights (fp32 weights: 12 B per parameter" in out
