"""Exports of zero-bubble (zb-v, zb-exact) and host-offload plans (issue 23): the runtime's flags where
it has them, a one-line refusal (exit 2) naming the schedule or the offload where it has not. The
fixture plans were written by `solver-plan hybrid --fix ...` (tests/fixtures/plans/hybrid-gpt2-zbv.json,
-zbexact, -offload-optimizer, -offload-activations, -offload-both)."""
from __future__ import annotations

import copy
import json

import pytest

from solver_plan.errors import InputError
from solver_plan.export import export_plan
from solver_plan.resources import REPO_ROOT
from test_export import command_args, megatron_args
from test_export_moe import runtime_check

PLANS = REPO_ROOT / "tests" / "fixtures" / "plans"
FIXTURES = ("hybrid-gpt2-zbv.json", "hybrid-gpt2-zbexact.json", "hybrid-gpt2-offload-optimizer.json",
            "hybrid-gpt2-offload-activations.json", "hybrid-gpt2-offload-both.json")


def load(name: str) -> dict:
    return json.loads((PLANS / name).read_text())


def test_megatron_offload_flags():
    optimizer = megatron_args(export_plan(load("hybrid-gpt2-offload-optimizer.json"), "megatron"))
    # the CPU optimizer needs the precision-aware optimizer, which needs the distributed optimizer
    for flag in ("--optimizer-cpu-offload", "--overlap-cpu-optimizer-d2h-h2d", "--use-precision-aware-optimizer",
                 "--use-distributed-optimizer"):
        assert optimizer[flag] is True
    assert "--cpu-offloading-num-layers" not in optimizer
    plan = load("hybrid-gpt2-offload-activations.json")
    text = export_plan(plan, "megatron")
    activations = megatron_args(text)
    assert activations["--cpu-offloading-num-layers"] == str(plan["stages"][0]["offload_layers"])
    assert "--optimizer-cpu-offload" not in activations and "core_v0.16" in text
    both_plan = load("hybrid-gpt2-offload-both.json")
    both = megatron_args(export_plan(both_plan, "megatron"))
    assert both["--optimizer-cpu-offload"] is True
    assert both["--cpu-offloading-num-layers"] == str(both_plan["stages"][0]["offload_layers"])


def test_megatron_refuses_what_its_offload_cannot_run():
    # Megatron-core's CPU offloading refuses pipelining; the optimizer's needs ZeRO >= 1
    piped = load("hybrid-gpt2-offload-activations.json")
    piped["parallelism"]["recompute"] = "full"
    piped["stages"][0]["recompute"] = "full"
    with pytest.raises(InputError, match="offload activations: Megatron-LM .*recompute full"):
        export_plan(piped, "megatron")
    unsharded = load("hybrid-gpt2-offload-optimizer.json")
    unsharded["parallelism"]["zero_stage"] = 0
    for target in ("megatron", "deepspeed"):
        with pytest.raises(InputError, match="offload optimizer: .*ZeRO"):
            export_plan(unsharded, target)


def test_deepspeed_offloads_the_optimizer_and_refuses_activations():
    config = json.loads(export_plan(load("hybrid-gpt2-offload-optimizer.json"), "deepspeed"))
    assert config["zero_optimization"] == {"stage": 1, "offload_optimizer": {"device": "cpu", "pin_memory": True}}
    for name in ("hybrid-gpt2-offload-activations.json", "hybrid-gpt2-offload-both.json"):
        with pytest.raises(InputError, match="offload (activations|both): DeepSpeed.*megatron-core"):
            export_plan(load(name), "deepspeed")


def test_torchtitan_refuses_offload():
    for name, value in (("hybrid-gpt2-offload-optimizer.json", "optimizer"),
                        ("hybrid-gpt2-offload-activations.json", "activations"),
                        ("hybrid-gpt2-offload-both.json", "both")):
        with pytest.raises(InputError, match=f"offload {value}: torchtitan 0.3"):
            export_plan(load(name), "torchtitan")


def test_torchtitan_zbv_names_the_schedule_in_its_v():
    plan = load("hybrid-gpt2-zbv.json")
    a = command_args(export_plan(plan, "torchtitan"))
    assert a["--parallelism.pipeline_parallel_schedule"] == "ZBVZeroBubble"
    parts = a["--parallelism.module_fqns_per_model_part"]
    assert len(parts) == 2 * plan["parallelism"]["pp"]  # two chunks a rank
    # unequal chunks: rank i's first chunk is part i, its second part 2p - 1 - i (torchtitan's "v" style)
    uneven = copy.deepcopy(plan)
    uneven["stages"][0]["chunk_layers"] = [2, 1]  # 9 blocks: rank 0 holds blocks 0-1 and the last block 8
    uneven["stages"][0]["num_layers"] = 3
    parts = command_args(export_plan(uneven, "torchtitan"))["--parallelism.module_fqns_per_model_part"]
    assert parts[0] == "tok_embeddings,layers.0,layers.1" and parts[-1] == "layers.8,norm,lm_head"
    assert [len(p.split(",")) for p in parts[1:-1]] == [1] * 6


@pytest.mark.parametrize("target", ["megatron", "deepspeed"])
@pytest.mark.parametrize("name", ["hybrid-gpt2-zbv.json", "hybrid-gpt2-zbexact.json"])
def test_v_and_exact_schedules_are_refused_naming_who_runs_them(name, target):
    plan = load(name)
    with pytest.raises(InputError) as info:
        export_plan(plan, target)
    message = str(info.value)
    assert f"schedule {plan['parallelism']['schedule']}" in message and "torchtitan" in message
    assert "\n" not in message


def test_refusals_are_one_line_exit_2(capsys):
    from solver_plan.cli import main
    for name, target, said in (("hybrid-gpt2-zbexact.json", "torchtitan", "schedule zb-exact"),
                               ("hybrid-gpt2-zbv.json", "megatron", "schedule zb-v"),
                               ("hybrid-gpt2-offload-optimizer.json", "torchtitan", "offload optimizer"),
                               ("hybrid-gpt2-offload-activations.json", "deepspeed", "offload activations")):
        assert main(["export", str(PLANS / name), "--target", target]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and said in err and name in err


def test_unknown_offload_is_an_input_error():
    plan = load("hybrid-gpt2-offload-optimizer.json")
    plan["parallelism"]["offload"] = "disk"
    with pytest.raises(InputError, match="unknown offload 'disk'"):
        export_plan(plan, "megatron")


def test_zb_exact_schedule_csv_for_torchtitan(tmp_path, capsys):
    """The exact pattern unrolled: per rank m forwards, input-gradient and weight-gradient passes of its
    stage, in the replay's order; the export points torchtitan at the CSV written beside it."""
    from solver_plan.cli import main
    from solver_plan.export.schedule_csv import exact_schedule_rows
    plan = load("hybrid-gpt2-zbexact.json")
    pp, m = plan["parallelism"]["pp"], plan["parallelism"]["micro_batches"]
    rows = exact_schedule_rows(plan, pp, m)
    for stage, row in enumerate(rows):
        assert sorted(row) == sorted(f"{stage}{kind}{j}" for kind in "FIW" for j in range(m))
        for j in range(m):  # F before I before W of each micro-batch
            assert row.index(f"{stage}F{j}") < row.index(f"{stage}I{j}") < row.index(f"{stage}W{j}")
        # the stage's peak of micro-batches in flight (forward started, weight gradient not done) is the plan's
        live = peak = 0
        for action in row:
            live += {"F": 1, "W": -1}.get(action[len(str(stage))], 0)
            peak = max(peak, live)
        assert peak == plan["exact_schedule"]["in_flight"][stage]
    out = tmp_path / "titan.sh"
    assert main(["export", str(PLANS / "hybrid-gpt2-zbexact.json"), "--target", "torchtitan", "--out", str(out)]) == 0
    a = command_args(out.read_text())
    csv_path = tmp_path / "titan.schedule.csv"
    assert a["--parallelism.pipeline_parallel_schedule_csv"] == str(csv_path)
    assert a["--parallelism.pipeline_parallel_schedule"] == "PipelineScheduleMulti"
    assert [line.split(",") for line in csv_path.read_text().splitlines()] == rows
    capsys.readouterr()
    # to standard output there is nowhere beside it: one line asking for a file
    assert main(["export", str(PLANS / "hybrid-gpt2-zbexact.json"), "--target", "torchtitan"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "schedule zb-exact" in err


def test_torch_accepts_the_schedule_csv():
    """torch's own checks of a loaded CSV (_validate_schedule; its send/receive lowering and dry-run
    simulation, which flag a deadlock) pass on the unrolled pattern."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    from solver_plan.export.schedule_csv import exact_schedule_rows
    plan = load("hybrid-gpt2-zbexact.json")
    pp, m = plan["parallelism"]["pp"], plan["parallelism"]["micro_batches"]
    actions = {r: [schedules._Action.from_str(s) for s in row] for r, row in enumerate(exact_schedule_rows(plan, pp, m))}
    assert schedules._validate_schedule(actions, pp, pp, m) == {i: i for i in range(pp)}
    lowered = schedules._add_send_recv(actions, stage_to_rank=lambda s: s, num_stages=pp)
    schedules._simulate_comms_compute(lowered, lambda s: s, pp)


# --- the runtimes' own code (scripts/check_exports.py's workers), where installed -------------------
@pytest.mark.parametrize("target", ["deepspeed", "torchtitan", "megatron"])
@pytest.mark.parametrize("name", FIXTURES)
def test_runtime_parses_the_export(name, target):
    """Each export written is accepted by the runtime's own code and read back as the plan, its offload
    and (torchtitan) its V placement. Megatron-LM: a source tree named by MEGATRON_LM (core_v0.16+ for
    activation offload, core_v0.12+ for the optimizer's)."""
    runtime_check(PLANS / name, target)
