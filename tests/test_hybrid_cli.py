"""`solver-plan hybrid`: what-if with --fix, JSON keys, bad input on one line with exit 2."""
import json

import pytest

from solver_plan.cli import main

MODEL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"
KEYS = {"schema_version", "kind", "status", "step_time_s", "lower_bound_s", "parallelism", "memory_per_device_bytes",
        "model_flops_per_step", "tflops_per_device", "stages"}
PARALLELISM = {"dp", "tp", "pp", "micro_batch_size", "virtual_stages", "recompute", "zero_stage", "schedule",
               "micro_batches"}


def test_what_if_with_everything_pinned(tmp_path, capsys):
    out = tmp_path / "plan.json"
    fix = "dp=2,tp=2,pp=2,micro_batch_size=2,recompute=full,zero_stage=1,virtual_stages=1,sequence_parallel=true"
    assert main(["hybrid", "--model", MODEL, "--cluster", "a100x8-80gb", "--batch", "8", "--fix", fix,
                 "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert KEYS <= set(plan) and PARALLELISM <= set(plan["parallelism"])
    assert plan["schema_version"] == 1 and plan["kind"] == "hybrid"
    q = plan["parallelism"]
    assert (q["dp"], q["tp"], q["pp"], q["micro_batch_size"], q["micro_batches"]) == (2, 2, 2, 2, 2)
    assert (q["recompute"], q["zero_stage"], q["schedule"]) == ("full", 1, "1f1b")
    assert [s["layers"] for s in plan["stages"]] in ([[0, 2], [2, 4]], [[0, 1], [1, 4]], [[0, 3], [3, 4]])
    for stage in plan["stages"]:
        assert stage["memory_bytes"]["total"] <= plan["memory_per_device_bytes"]
        assert stage["submesh"]["devices_per_replica"] == 2 and stage["submesh"]["replicas"] == 2
        groups = {c["group"] for c in stage["operator_configs"]}
        assert "block" in groups and ("embedding" in groups) == stage["embedding"] and ("head" in groups) == stage["head"]
    assert plan["tflops_per_device"] == pytest.approx(plan["model_flops_per_step"] / plan["step_time_s"] / 8 / 1e12)
    assert "step time" in capsys.readouterr().out


def test_planner_never_slower_than_a_pinned_configuration(tmp_path):
    free, pinned = tmp_path / "free.json", tmp_path / "pinned.json"
    args = ["hybrid", "--model", MODEL, "--cluster", "a100x8-80gb", "--batch", "8"]
    assert main(args + ["--out", str(free)]) == 0
    assert main(args + ["--fix", "dp=1,tp=8,pp=1,micro_batch_size=1", "--out", str(pinned)]) == 0
    assert json.loads(free.read_text())["step_time_s"] <= json.loads(pinned.read_text())["step_time_s"]


@pytest.mark.parametrize("fix, named", [("tq=2", "tq"), ("recompute=some", "recompute"), ("zero_stage=5", "zero_stage"),
                                        ("tp", "--fix"), ("tp=2,tp=4", "tp")])
def test_bad_fix_exits_2_naming_the_key(fix, named, capsys):
    assert main(["hybrid", "--model", MODEL, "--cluster", "a100x8-80gb", "--batch", "8", "--fix", fix]) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_non_transformer_model_exits_2(capsys):
    assert main(["hybrid", "--model", "resnet50", "--cluster", "a100x8-80gb", "--batch", "8"]) == 2
    assert "GPT-style" in capsys.readouterr().err


def test_unsatisfiable_pins_are_infeasible_with_a_reason(capsys):
    assert main(["hybrid", "--model", MODEL, "--cluster", "a100x8-80gb", "--batch", "8", "--fix", "dp=3"]) == 1
    assert "INFEASIBLE" in capsys.readouterr().out


@pytest.mark.parametrize("extra, named", [(["--devices", "12"], "--devices"), (["--time-limit", "0"], "--time-limit"),
                                          (["--memory-limit", "10XB"], "--memory-limit"),
                                          (["--compute-scale", "-1"], "--compute-scale")])
def test_bad_arguments_exit_2_naming_them(extra, named, capsys):
    assert main(["hybrid", "--model", MODEL, "--cluster", "h100-4x8-ib", "--batch", "8"] + extra) == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1


def test_hugging_face_decoder_and_per_stage_recompute_on_the_command_line(tmp_path, capsys):
    """A LLaMA-style config.json (GQA, SwiGLU, untied head) is a MODEL; per-stage recomputation is a
    --fix value and every stage reports its own mode in the JSON."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 128, "intermediate_size": 384,
                                  "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 4,
                                  "max_position_embeddings": 256, "vocab_size": 1000}))
    out = tmp_path / "plan.json"
    assert main(["hybrid", "--model", f"{config}:seq=128", "--cluster", "a100x8-80gb", "--batch", "8",
                 "--fix", "pp=2,recompute=per-stage", "--out", str(out)]) == 0
    plan = json.loads(out.read_text())
    assert plan["parallelism"]["recompute"] == "per-stage"
    assert all(s["recompute"] in ("none", "selective", "full") for s in plan["stages"])
    assert "recompute" in capsys.readouterr().out


def test_encoder_decoder_config_is_one_line_exit_2(tmp_path, capsys):
    config = tmp_path / "t5.json"
    config.write_text(json.dumps({"model_type": "t5", "d_model": 64, "num_heads": 2, "d_kv": 32, "d_ff": 128,
                                  "vocab_size": 100, "num_layers": 2}))
    assert main(["hybrid", "--model", str(config), "--cluster", "a100x8-80gb", "--batch", "8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "decoder-only" in err[0]
