"""The hybrid planner's training precision (issue 12, deliverable 1): memory terms by hand in fp32 and
mixed bf16, bytes moved, step time on an A100, refusals, plan JSON, validator and exports."""
import json

import pytest

from solver_plan.cost.precision import TrainingPrecision
from solver_plan.errors import InputError
from solver_plan.hybrid import memory as mem
from solver_plan.hybrid import schedule
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.hybrid.search import evaluate, plan_hybrid

# a tiny GPT: h 64, 4 heads of 16, ffn 4h, s 32, vocab 100, tied embeddings
H, A, S, V, L = 64, 4, 32, 100, 2
TINY = TransformerSpec("tiny", layers=L, hidden=H, ffn=4 * H, heads=A, head_dim=H // A, seq=S, vocab=V, positions=S)
BF16 = mem.precision_state(TrainingPrecision.mixed("bf16"))
FP32 = mem.precision_state(TrainingPrecision.fp32())
SMALL = "gpt2:layers=2,hidden=256,heads=4,seq=128,vocab=1000"


def test_state_bytes_per_parameter_follow_pipeline_adam_rule():
    # mixed: 2 + 2 + (4 master + 8 moments); fp32: 4 + 4 + (0 + 8); fp8 keeps bf16 weights (Transformer Engine)
    assert (BF16.weights, BF16.gradients, BF16.optimizer, BF16.activations) == (2, 2, 12, 2)
    assert (FP32.weights, FP32.gradients, FP32.optimizer, FP32.activations) == (4, 4, 8, 4)
    fp8 = mem.precision_state(TrainingPrecision.mixed("fp8"))
    assert (fp8.weights, fp8.gradients, fp8.optimizer, fp8.activations) == (2, 2, 12, 2)
    assert BF16 == mem.MIXED_PRECISION  # the default every term had before precisions


def test_tiny_transformer_memory_by_hand_fp32_vs_bf16():
    """One stage (p = t = dp = 1), 1F1B with m = 1, no recomputation, micro-batch 2."""
    b = 2
    # parameters: per block 12 h^2 + 13 h (q, k, v, out with biases; fc1, fc2 with biases; two
    # LayerNorms of 2h); token + position embeddings (V + S) h; final norm 2h; tied output projection
    P = L * (12 * H * H + 13 * H) + (V + S) * H + 2 * H
    sbh, as2b = S * b * H, A * S * S * b
    # Korthikanti's layer in 16-bit: 34 sbh + 5 a s^2 b, of which masks 2 sbh + a s^2 b (1 byte each)
    layer_bf16 = 34 * sbh + 5 * as2b
    layer_fp32 = 2 * (layer_bf16 - 2 * sbh - as2b) + 2 * sbh + as2b  # elements x 2, masks stay
    assert layer_fp32 == 66 * sbh + 9 * as2b
    # first stage: embedding output + its mask (e + 1) s b h; last: 2 e s b h + fp32 logits 4 s b V
    ends = {2: 3 * sbh + 4 * sbh + 4 * S * b * V, 4: 5 * sbh + 8 * sbh + 4 * S * b * V}
    for state, w, opt, layer, e in ((BF16, 2, 12, layer_bf16, 2), (FP32, 4, 8, layer_fp32, 4)):
        m = mem.stage_memory(TINY, layers=L, stage=0, pp=1, tp=1, dp=1, micro_batch=b, micro_batches=1,
                             recompute="none", sequence_parallel=False, zero_stage=0, schedule="1f1b", state=state,
                             runtime="megatron-2021")
        assert (m.weights, m.gradients, m.optimizer) == (w * P, w * P, opt * P)
        assert m.activations == L * layer + ends[e]
        # the MLP's backward transients (the output projection's input gradient e s b f with the incoming
        # gradient e s b h; Megatron's fused weight gradients add none) and the loss's peak (fp32 logits
        # 4 s b V, with the final norm's and output projection's inputs) never coexist: the one stage,
        # also the last, adds the larger of the two
        loss = mem.logits_activation_bytes(TINY, b, 1, False, state, "megatron-2021")
        assert (m.recompute_working, m.buffers) == (max(0, e * (S * b * 4 * H + sbh) - loss), 0)
        assert m.allocated == m.weights + m.gradients + m.optimizer + m.activations + m.recompute_working  # no GEMM workspace in 2021
    # the whole-model ratio: weights 4P vs 2P; state 16 P either way; activations just under 2x
    one = dict(layers=L, stage=0, pp=1, tp=1, dp=1, micro_batch=b, micro_batches=1, recompute="none",
               sequence_parallel=False, zero_stage=0, schedule="1f1b", runtime="megatron-2021")
    lo, hi = mem.stage_memory(TINY, state=BF16, **one), mem.stage_memory(TINY, state=FP32, **one)
    assert hi.weights == 2 * lo.weights and hi.weights + hi.gradients + hi.optimizer == 16 * P
    assert 1.8 < hi.activations / lo.activations < 2


def test_recomputation_and_buffers_follow_activation_bytes():
    b, t = 1, 2
    sbh = S * b * H
    # full recomputation keeps the layer input: e s b h (/ t with sequence parallel)
    assert mem.layer_activation_bytes(TINY, b, t, "full", True, FP32) == 4 * sbh / t
    assert mem.layer_activation_bytes(TINY, b, t, "full", False, BF16) == 2 * sbh
    # selective: the working scores of one layer, (4 e/2 + 1) a s^2 b / t
    m21 = "megatron-2021"  # unfused attention with dropout
    # ... plus the MLP's backward transients, e (s b f / t + s b h)
    mlp = S * b * 4 * H / t + sbh
    assert mem.recompute_working_bytes(TINY, b, t, "selective", False, FP32, m21) == 9 * A * S * S * b / t + 4 * mlp
    assert mem.recompute_working_bytes(TINY, b, t, "selective", False, BF16, m21) == 5 * A * S * S * b / t + 2 * mlp
    # pipeline send/receive buffers: 4 x e s b h
    assert mem.p2p_buffer_bytes(TINY, b, 1, False, 2, FP32) == 16 * sbh
    # ZeRO-3 gathers two layers of working weights
    assert mem.zero3_gather_bytes(1000, 3, FP32) == 8000 and mem.zero3_gather_bytes(1000, 3, BF16) == 4000


def test_bytes_moved_follow_the_dtype():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid.comm import collective

    cluster = resolve_cluster("a100x8-80gb", 8)
    # pipeline send: s b h elements / t in the activation dtype
    assert schedule.p2p_send_s(cluster, TINY, 2, 1, 1, 0, FP32) == collective(cluster, "p2p", S * 2 * H * 4, 2, 2)
    assert schedule.p2p_send_s(cluster, TINY, 2, 1, 1, 0) == collective(cluster, "p2p", S * 2 * H * 2, 2, 2)
    # gradient all-reduce in the gradient dtype (one bucket here)
    params = 1e6
    assert schedule.dp_sync_s(cluster, params, 1, 8, 0, 1, FP32) == collective(cluster, "all_reduce", 4e6, 8, 8)
    assert schedule.dp_sync_s(cluster, params, 1, 8, 0, 1, BF16) == collective(cluster, "all_reduce", 2e6, 8, 8)


def test_fp32_is_slower_than_bf16_on_a100_and_uses_more_memory():
    par = {"dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 2}
    # megatron-2021: gradients in the training precision's dtype (megatron-core keeps fp32 main_grads)
    runs = {p: evaluate(SMALL, "a100x8-80gb", 16, par, precision=p, runtime="megatron-2021")
            for p in ("bf16", "tf32", "fp32")}
    for name, r in runs.items():
        assert r.status.has_solution, r.notes
        assert r.notes[-1].startswith("validator: step time and memory re-derived, agree")
    bf16, tf32, fp32 = (runs[p].plan for p in ("bf16", "tf32", "fp32"))
    assert (bf16.precision, tf32.precision, fp32.precision) == ("mixed-bf16", "tf32", "fp32")
    # peak 312 (bf16) > 156 (tf32) > 19.5 TFLOP/s (fp32), and twice the bytes moved and kept
    assert bf16.step_time_s < tf32.step_time_s < fp32.step_time_s
    assert fp32.terms.dp_sync_s > bf16.terms.dp_sync_s
    for s16, s32 in zip(bf16.stages, fp32.stages):
        assert s32.memory.weights == 2 * s16.memory.weights
        assert s32.memory.optimizer == pytest.approx(s16.memory.optimizer * 8 / 12)
        assert s32.memory.activations > 1.8 * s16.memory.activations
        assert s32.p2p_s > s16.p2p_s
    # auto on an A100 is mixed bf16, figure for figure
    auto = evaluate(SMALL, "a100x8-80gb", 16, par, runtime="megatron-2021").plan
    assert auto.precision == "mixed-bf16" and auto.step_time_s == bf16.step_time_s
    assert auto.memory_per_device_bytes == bf16.memory_per_device_bytes


def test_bad_precision_is_one_input_error_naming_the_option():
    with pytest.raises(InputError, match="unknown precision 'fp64'") as info:
        plan_hybrid(SMALL, "a100x8-80gb", 16, precision="fp64")
    assert info.value.where == "--precision"
    with pytest.raises(InputError, match="has no fp8 units") as info:  # A100: no fp8 matrix units
        evaluate(SMALL, "a100x8-80gb", 16, {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 2}, precision="fp8")
    assert info.value.where == "--precision"
    with pytest.raises(InputError, match="--precision|precision"):
        plan_hybrid(SMALL, "a100x8-80gb", 16, precision=16)
    from solver_plan.hybrid import baselines
    with pytest.raises(InputError, match="has no bf16 units"):  # P100: no half-precision matrix units
        baselines.megatron_rule(SMALL, "p100-4x4", 16, devices=4, precision="bf16")


def test_cli_precision(tmp_path, capsys):
    from solver_plan.cli import main

    out = tmp_path / "plan.json"
    args = ["hybrid", "--model", SMALL, "--cluster", "a100x8-80gb", "--devices", "4", "--batch", "8",
            "--fix", "dp=4,tp=1,pp=1,micro_batch_size=2", "--time-limit", "30"]
    assert main(args + ["--precision", "fp32", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["precision"] == "fp32" and "precision: fp32" in capsys.readouterr().out
    assert main(args + ["--precision", "fp64"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--precision" in err and "fp64" in err


def test_validator_rederives_memory_in_the_plans_precision():
    from dataclasses import replace

    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid.validate import validate_plan

    plan = evaluate(SMALL, "a100x8-80gb", 16, {"dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 2},
                    precision="fp32").plan
    cluster = resolve_cluster("a100x8-80gb", 8)
    assert validate_plan(plan, cluster) == []
    relabelled = validate_plan(replace(plan, precision="mixed-bf16"), cluster)  # fp32 figures, bf16 label
    assert any("memory" in p for p in relabelled) and any("p2p" in p for p in relabelled)
    assert validate_plan(replace(plan, precision="fp64"), cluster) == ["precision 'fp64' does not name a training "
                                                                       "precision"]


@pytest.mark.parametrize("precision, megatron, deepspeed, titan", [
    ("mixed-bf16", "--bf16", "bf16", "bfloat16"),
    ("mixed-fp16", "--fp16", "fp16", "bfloat16"),
    ("mixed-fp8", "--fp8-format hybrid", "bf16", "bfloat16"),
    ("fp32", None, None, "float32"),
])
def test_exports_write_the_planned_precision(precision, megatron, deepspeed, titan):
    from solver_plan.export.deepspeed import export_deepspeed
    from solver_plan.export.megatron import export_megatron
    from solver_plan.export.torchtitan import export_torchtitan

    d = evaluate(SMALL, "a100x8-80gb", 16, {"dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 2}).to_dict()
    d["precision"] = precision
    args = export_megatron(d)
    if megatron:
        assert megatron in args
    else:
        assert "--bf16" not in args and "--fp16" not in args
    ds = json.loads(export_deepspeed(d))
    assert ds["solver_plan"]["precision"] == precision
    assert [k for k in ("bf16", "fp16") if k in ds] == ([deepspeed] if deepspeed else [])
    assert f"--training.mixed_precision_param {titan}" in export_torchtitan(d)
    d["precision"] = "fp64"
    with pytest.raises(InputError, match="unknown precision 'fp64'"):
        export_megatron(d)


def test_plan_json_schema_lists_precision():
    jsonschema = pytest.importorskip("jsonschema")
    from solver_plan.resources import REPO_ROOT

    schema = json.loads((REPO_ROOT / "docs" / "schemas" / "hybrid.v1.schema.json").read_text())
    check = jsonschema.Draft202012Validator(schema)
    d = evaluate(SMALL, "a100x8-80gb", 16, {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 2},
                 precision="fp32").to_dict()
    assert d["precision"] == "fp32" and list(check.iter_errors(d)) == []
    assert list(check.iter_errors(dict(d, precision="fp64")))
