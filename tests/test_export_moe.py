"""Exports of expert-parallel plans (`kind: moe-hybrid`, hybrid/moe_plan.py) to Megatron-LM, DeepSpeed
and torchtitan: each export read back must give the plan's folding (ep, etp), capacity, the model's
experts and router, or the exporter refuses with one line naming the setting the runtime cannot
express. The runtimes' own parsers (scripts/check_exports.py's workers) run where the runtime is
installed (the exports CI job); elsewhere those tests skip."""
from __future__ import annotations

import importlib.util
import json
import os
import sys

import pytest

from solver_plan.errors import InputError
from solver_plan.export import export_plan
from solver_plan.resources import REPO_ROOT
from test_export import command_args

PLANS = REPO_ROOT / "tests" / "fixtures" / "plans"
FIXTURES = sorted(p.name for p in PLANS.glob("moe-*.json"))


def load(name: str) -> dict:
    return json.loads((PLANS / name).read_text())


@pytest.fixture(autouse=True)
def _repository_root(monkeypatch):
    monkeypatch.chdir(REPO_ROOT)  # the plans name their config.json relative to the repository


def test_fixtures_are_planner_results():
    """The committed plans are the hybrid command's --out JSON of four families and foldings."""
    assert len(FIXTURES) == 4
    foldings = set()
    for name in FIXTURES:
        d = load(name)
        assert d["kind"] == "moe-hybrid" and d["plan"]["kind"] == "moe-hybrid" and d["status"] == "OPTIMAL"
        p = d["plan"]["parallelism"]
        assert p["ep"] * p["etp"] * p["edp"] == p["dp"] * p["tp"] * p["cp"]
        foldings.add((p["etp"] > 1, p["capacity"] != "dropless", p["cp"] > 1, p["pp"] > 1))
    assert len(foldings) == 4


@pytest.mark.parametrize("name", FIXTURES)
def test_megatron_expert_flags(name):
    """Folding, experts, router top-k, dispatcher, capacity and the batch arithmetic read back from the
    flags equal the plan's and the model's (read with the planner's reader)."""
    from solver_plan.hybrid.moe_model import moe_model
    d = load(name)
    plan, p = d["plan"], d["plan"]["parallelism"]
    model = moe_model(plan["model"])
    text = export_plan(d, "megatron")
    a = command_args(text)
    assert int(a["--expert-model-parallel-size"]) == p["ep"]
    assert int(a.get("--expert-tensor-parallel-size", p["tp"])) == p["etp"]  # Megatron's default: tp
    assert (int(a["--num-experts"]), int(a["--moe-router-topk"]), int(a["--moe-ffn-hidden-size"])) == \
        (model.experts, model.top_k, model.expert_ffn)
    assert a["--moe-token-dispatcher-type"] == "alltoall" and a["--moe-grouped-gemm"] is True
    assert int(a["--num-layers"]) == model.layers == sum(s["layers"] for s in plan["stages"])
    world = plan["devices"] // (int(a["--tensor-model-parallel-size"]) * int(a["--pipeline-model-parallel-size"])
                                * int(a.get("--context-parallel-size", 1)))
    assert world == p["dp"]
    assert int(a["--global-batch-size"]) == world * int(a["--micro-batch-size"]) * p["micro_batches"]
    if p["capacity"] == "dropless":
        assert "--moe-expert-capacity-factor" not in a and "dropless" in text
    else:
        assert float(a["--moe-expert-capacity-factor"]) == p["capacity"]
        assert a["--moe-pad-expert-input-to-capacity"] is True and a["--moe-token-drop-policy"] == "probs"
    if p["tp"] > 1:
        assert a["--sequence-parallel"] is True  # Megatron-LM requires it for MoE with tp > 1
    assert a["--moe-router-load-balancing-type"] in ("aux_loss", "seq_aux_loss") and float(a["--moe-aux-loss-coeff"]) > 0
    assert f"etp {p['etp']} x ep {p['ep']} x edp {p['edp']}" in text


def test_megatron_deepseek_latent_attention_dense_layers_and_router():
    """DeepSeek-V3 (8 layers: 3 dense, 5 MoE): latent attention's ranks, the dense/MoE pattern, the
    sigmoid router with its expert bias and group-limited top-k, the shared expert, the selective
    recomputation of the experts and latent up-projections, and the shared-expert overlap."""
    a = command_args(export_plan(load("moe-deepseek-v3-capacity.json"), "megatron"))
    assert a["--moe-layer-freq"] == "([0]*3+[1]*5)"
    assert (a["--q-lora-rank"], a["--kv-lora-rank"], a["--qk-head-dim"], a["--qk-pos-emb-head-dim"],
            a["--v-head-dim"]) == ("1536", "512", "128", "64", "128")
    assert a["--multi-latent-attention"] is True and a["--moe-router-score-function"] == "sigmoid"
    assert a["--moe-router-enable-expert-bias"] is True and a["--moe-router-load-balancing-type"] == "seq_aux_loss"
    assert (a["--moe-router-num-groups"], a["--moe-router-group-topk"]) == ("8", "4")
    assert a["--moe-shared-expert-intermediate-size"] == "2048" and a["--moe-shared-expert-overlap"] is True
    assert a["--recompute-modules"] == ["moe", "mla_up_proj"] and a["--recompute-granularity"] == "selective"
    assert a["--ffn-hidden-size"] == "18432"  # the dense layers' width


def test_megatron_qwen_families():
    """Qwen2-MoE: q/k/v biases, softmax before top-k (norm_topk_prob false), the shared expert's gate
    listed; Qwen3-MoE: q/k norms, grouped-query attention with head size 128."""
    qwen2 = export_plan(load("moe-qwen2-cp-full.json"), "megatron")
    a = command_args(qwen2)
    assert a["--add-qkv-bias"] is True and a["--moe-router-pre-softmax"] is True
    assert a["--moe-shared-expert-intermediate-size"] == "5632" and a["--context-parallel-size"] == "2"
    assert "not expressible: the shared expert's sigmoid gate" in qwen2
    b = command_args(export_plan(load("moe-qwen3-30b-ep8.json"), "megatron"))
    assert b["--qk-layernorm"] is True and (b["--num-query-groups"], b["--kv-channels"]) == ("4", "128")
    assert "--moe-router-pre-softmax" not in b and "--moe-layer-freq" not in b


def test_megatron_overlap_and_its_limits():
    """The full all-to-all overlap is Megatron-core's --overlap-moe-expert-parallel-comm where its
    TransformerConfig allows it (virtual stages in a pipeline); without virtual stages it is listed
    and not written."""
    d = load("moe-mixtral-etp2-overlap.json")
    assert "--overlap-moe-expert-parallel-comm" in command_args(export_plan(d, "megatron"))
    flat = json.loads(json.dumps(d))
    p = flat["plan"]["parallelism"]
    p["virtual_stages"], p["schedule"] = 1, "1f1b"
    text = export_plan(flat, "megatron")
    assert "--overlap-moe-expert-parallel-comm" not in command_args(text)
    assert "refuses a pipeline without virtual stages" in text


def test_deepspeed_moe_layer():
    """DeepSpeed-MoE's layer arguments under solver_plan.moe_layer: ep_size, experts, top-k, capacity
    (dropless: drop_tokens false), expert tensor parallelism when etp = tp; the MoE layers listed."""
    config = json.loads(export_plan(load("moe-qwen3-30b-ep8.json"), "deepspeed"))
    layer = config["solver_plan"]["moe_layer"]
    assert (layer["ep_size"], layer["num_experts"], layer["k"], layer["hidden_size"]) == (8, 128, 8, 2048)
    assert layer["drop_tokens"] is False and layer["enable_expert_tensor_parallelism"] is False
    assert config["solver_plan"]["moe_layers"] == list(range(48))
    assert config["zero_optimization"]["stage"] == 1
    mixtral = json.loads(export_plan(load("moe-mixtral-etp2-overlap.json"), "deepspeed"))["solver_plan"]
    assert mixtral["moe_layer"]["enable_expert_tensor_parallelism"] is True
    assert any("all-to-all overlap full" in line for line in mixtral["not_expressible"])


def test_torchtitan_expert_parallel_degree():
    """torchtitan: its registered Qwen3-30B-A3B, the expert-parallel degree, FSDP ranks it borrows, CUDA
    graphs off (its all-to-all refuses them); an unregistered model is listed."""
    a = command_args(export_plan(load("moe-qwen3-30b-ep8.json"), "torchtitan"))
    assert (a["--module"], a["--config"]) == ("qwen3", "qwen3_30b_a3b")
    assert a["--parallelism.expert_parallel_degree"] == "8" and a["--training.disable_cuda_graphs"] is True
    assert int(a["--parallelism.data_parallel_shard_degree"]) * int(a["--parallelism.tensor_parallel_degree"]) % 8 == 0
    text = export_plan(load("moe-deepseek-v3-capacity.json"), "torchtitan")
    assert "--module" not in command_args(text) and "registers no mixture of experts of this shape" in text
    assert "capacity factor 1.25" in text and "dropless" in text


def test_torchtitan_plain_data_parallel_borrows_fsdp():
    """A plan without the distributed optimizer whose ep needs data-parallel ranks: torchtitan takes
    ep from FSDP ranks, so the export shards (and says so)."""
    d = load("moe-qwen3-30b-ep8.json")
    d["plan"]["parallelism"]["zero_stage"] = 0
    text = export_plan(d, "torchtitan")
    a = command_args(text)
    assert (a["--parallelism.data_parallel_replicate_degree"], a["--parallelism.data_parallel_shard_degree"]) == \
        ("1", "16")
    assert "torchtitan borrows expert-parallel ranks from FSDP" in text


@pytest.mark.parametrize("name,target,match", [
    ("moe-mixtral-etp2-overlap.json", "torchtitan", "etp 2: torchtitan 0.3 has no expert tensor parallelism"),
    ("moe-deepseek-v3-capacity.json", "deepspeed", "expert folding etp 1 x ep 16 over dp 16 x cp 1 x tp 2"),
    ("moe-qwen2-cp-full.json", "deepspeed", "ep must divide dp"),
])
def test_refusals_name_the_setting(name, target, match):
    with pytest.raises(InputError, match=match):
        export_plan(load(name), target)


def test_fp16_expert_parallelism_is_refused_for_megatron():
    d = load("moe-qwen3-30b-ep8.json")
    d["plan"]["precision"] = "mixed-fp16"
    with pytest.raises(InputError, match="precision mixed-fp16 with expert parallelism"):
        export_plan(d, "megatron")


def test_malformed_and_unsolved_plans():
    d = load("moe-qwen3-30b-ep8.json")
    unsolved = dict(d, status="INFEASIBLE", plan=None)
    with pytest.raises(InputError, match="no solution"):
        export_plan(unsolved, "megatron")
    broken = json.loads(json.dumps(d))
    broken["plan"]["parallelism"]["edp"] = 3
    with pytest.raises(InputError, match="ep x etp x edp = 24 != dp x cp x tp 16"):
        export_plan(broken, "deepspeed")
    assert export_plan(d["plan"], "megatron") == export_plan(d, "megatron")  # the plan alone (a batch record's)


@pytest.mark.parametrize("key,where", [("dispatcher", "parallelism"), ("a2a_overlap", "plan")])
@pytest.mark.parametrize("target", ["megatron", "torchtitan"])
def test_an_unknown_dispatcher_or_overlap_is_refused_not_written_as_a_flag(key, where, target):
    """A plan JSON is input: a dispatcher or overlap it names that the planner has no such word for would
    otherwise reach a runtime flag as it stands (`--moe-flex-dispatcher-backend bogus`)."""
    d = json.loads(json.dumps(load("moe-qwen3-30b-ep8.json")))
    (d["plan"]["parallelism"] if where == "parallelism" else d["plan"])[key] = "bogus"
    with pytest.raises(InputError, match=f"{key} 'bogus' is not one of"):
        export_plan(d, target)


def test_unreadable_model_lists_the_model_flags(tmp_path):
    """A plan whose config.json is not on this machine still exports its folding; the model's flags
    are the user's (listed)."""
    d = load("moe-qwen3-30b-ep8.json")
    d["plan"]["model"] = str(tmp_path / "missing.json")
    text = export_plan(d, "megatron")
    assert "--expert-model-parallel-size 8" in text and "add --hidden-size" in text and "--num-experts" in text


def test_interleaved_stages_split_per_virtual_stage():
    """The planner's cut per stage split over its virtual stages: Megatron's layout gets them."""
    d = load("moe-mixtral-etp2-overlap.json")  # pp 4, v 2, 8 layers per stage
    a = command_args(export_plan(d, "megatron"))
    assert a["--num-layers-per-virtual-pipeline-stage"] == "4"
    assert "fewer layers than virtual stages" in export_plan(load("moe-deepseek-v3-capacity.json"), "megatron")


def test_command_line(tmp_path, capsys):
    """`solver-plan hybrid --export` on a mixture of experts writes export_plan's text for its --out plan;
    `solver-plan export` of a plan a runtime cannot express exits 2 with one line."""
    from solver_plan.cli import main
    out, exported = tmp_path / "moe.json", tmp_path / "megatron.txt"
    assert main(["hybrid", "--model", "data/hf-configs/qwen3-30b-a3b.json:seq=4096,layers=4", "--cluster",
                 "h100-80gb-superpod", "--devices", "8", "--batch", "16", "--fix", "ep=4", "--time-limit", "30",
                 "--out", str(out), "--export", "megatron", "--export-out", str(exported)]) == 0
    assert exported.read_text() == export_plan(json.loads(out.read_text()), "megatron")
    assert command_args(exported.read_text())["--expert-model-parallel-size"] == "4"
    capsys.readouterr()
    assert main(["export", str(PLANS / "moe-mixtral-etp2-overlap.json"), "--target", "torchtitan"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "etp 2" in err


# --- the runtimes' own code (scripts/check_exports.py's workers), where installed -------------------
def _check_exports():
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    try:
        import check_exports
    finally:
        sys.path.remove(str(REPO_ROOT / "scripts"))
    return check_exports


def _runtime_cases():
    cases = []
    for name in FIXTURES:
        for target in ("deepspeed", "torchtitan", "megatron"):
            cases.append((name, target))
    return cases


def runtime_check(path, target: str) -> None:
    """The export of the plan at `path` through the runtime's own code (scripts/check_exports.py's
    worker), which must pass; skipped where the runtime is absent (Megatron-LM: a source tree named
    by MEGATRON_LM) or the exporter refuses the plan (tested by the refusal tests)."""
    tree = os.environ.get("MEGATRON_LM", "")
    if target == "megatron" and not tree:
        pytest.skip("MEGATRON_LM (a Megatron-LM source tree) not set")
    if target != "megatron" and importlib.util.find_spec(target) is None:
        pytest.skip(f"{target} not installed")
    import tempfile

    from solver_plan.export import export_files
    with tempfile.TemporaryDirectory() as folder:
        try:  # files beside the export (a zb-exact plan's schedule CSV) written in the folder
            *companions, (_, text) = export_files(json.loads(path.read_text()), target, os.path.join(folder, "export"))
        except InputError:
            pytest.skip(f"the {target} exporter refuses {path.name} (the refusal tests)")
        for companion, content in companions:
            with open(companion, "w") as handle:
                handle.write(content)
        status, detail = _check_exports().run_worker(target, path, text, tree)
    if status == "skipped":  # the runtime not importable there, or a tree older than the export says it needs
        pytest.skip(detail)
    assert status == "pass", detail


@pytest.mark.parametrize("name,target", _runtime_cases())
def test_runtime_parses_the_export(name, target):
    """Each export the exporter writes is accepted by the runtime's own code and read back as the
    plan (scripts/check_exports.py). Megatron-LM: a source tree named by MEGATRON_LM."""
    runtime_check(PLANS / name, target)


@pytest.mark.parametrize("dispatcher", ["deepep", "hybridep"])
@pytest.mark.parametrize("target", ["megatron", "deepspeed", "torchtitan"])
def test_runtime_parses_the_dispatcher_exports(tmp_path, dispatcher, target):
    """A plan with a deduplicating dispatcher (moe-qwen3-30b-ep8's folding, the dispatcher changed) is
    accepted by the runtime's own code: Megatron-LM's flex dispatcher flags (core_v0.15.3 takes
    --moe-enable-deepep; HybridEP's --moe-flex-dispatcher-backend is skipped on a tree older than the
    core_v0.16 its export says it needs), the others with the dispatch listed as not expressed."""
    d = load("moe-qwen3-30b-ep8.json")
    d["plan"]["parallelism"]["dispatcher"] = dispatcher
    path = tmp_path / f"moe-qwen3-30b-ep8-{dispatcher}.json"
    path.write_text(json.dumps(d))
    runtime_check(path, target)


def test_zero3_exports_megatron_fsdp_torchtitan_fsdp2_and_deepspeed_refuses():
    """ZeRO-3 of an expert-parallel plan: Megatron FSDP (optim_grads_params, with its fsdp_dtensor
    checkpoints; ZeRO-2 is optim_grads) and nothing listed as lost; torchtitan shards with FSDP2 over
    the data-parallel ranks; DeepSpeed's engine refuses MoE with stage 3: one line naming it."""
    d = load("moe-qwen3-30b-ep8.json")
    d["plan"]["parallelism"]["zero_stage"] = 3
    text = export_plan(d, "megatron")
    a = command_args(text)
    assert a["--use-megatron-fsdp"] is True and a["--data-parallel-sharding-strategy"] == "optim_grads_params"
    assert a["--ckpt-format"] == "fsdp_dtensor" and "zero_stage 3" not in text
    t = command_args(export_plan(d, "torchtitan"))
    assert int(t["--parallelism.data_parallel_shard_degree"]) == d["plan"]["parallelism"]["dp"]
    with pytest.raises(InputError, match="MoE not supported with Stage 3"):
        export_plan(d, "deepspeed")
    d["plan"]["parallelism"]["zero_stage"] = 2
    assert command_args(export_plan(d, "megatron"))["--data-parallel-sharding-strategy"] == "optim_grads"
