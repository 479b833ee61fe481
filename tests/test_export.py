"""Exports to Megatron-LM, DeepSpeed, torchtitan (hybrid plans) and DTensor placements
(per-operator plans): each is parsed back and must describe the plan's arithmetic."""
from __future__ import annotations

import json
import shlex

import pytest

from solver_plan.errors import InputError
from solver_plan.export import export_plan
from solver_plan.resources import REPO_ROOT


def hybrid_plan(dp=2, tp=2, pp=2, micro=2, micro_batches=4, layers=(12, 12), v=1, recompute="none", zero=1,
                sp=False, schedule="1f1b", block_configs=True, stage_recompute=None, model="gpt2", cp=1, dp_shard=0,
                recompute_blocks=None) -> dict:
    """A hand-written hybrid plan in the JSON layout of solver_plan/hybrid/plan.py."""
    stages, first = [], 0
    for i, n in enumerate(layers):
        stages.append({"index": i, "layers": [first, first + n], "num_layers": n, "embedding": i == 0,
                       "head": i == len(layers) - 1,
                       "recompute": stage_recompute[i] if stage_recompute else recompute,
                       **({"recompute_blocks": recompute_blocks[i]} if recompute_blocks else {}),
                       "submesh": {"devices_per_replica": tp, "replicas": dp,
                                   "devices": [i * tp * dp, (i + 1) * tp * dp - 1]}})
        first += n
    return {"schema_version": 1, "kind": "hybrid", "status": "FEASIBLE", "step_time_s": 1.0, "lower_bound_s": 0.9,
            "model": model, "cluster": "c", "devices": dp * cp * tp * pp, "global_batch": dp * micro * micro_batches,
            "parallelism": {"dp": dp, "tp": tp, "pp": pp, "micro_batch_size": micro, "micro_batches": micro_batches,
                            "virtual_stages": v, "recompute": recompute, "zero_stage": zero,
                            "sequence_parallel": sp, "schedule": schedule, "cp": cp, "dp_shard": dp_shard},
            "memory_per_device_bytes": 10**9, "stages": stages,
            "block_configs": [{"operator": "self_attn/q", "config": f"out={tp}@{tp}"},
                              {"operator": "mlp/fc2", "config": "sequence=2@2" if tp == 2 else f"in={tp}@{tp}"}]
            if block_configs else []}


LLAMA = str(REPO_ROOT / "data" / "hf-configs" / "llama-3-8b.json") + ":seq=4096"
MIXTRAL = str(REPO_ROOT / "data" / "hf-configs" / "mixtral-8x7b-v0.1.json") + ":seq=4096"
PLANS = {
    "even": hybrid_plan(),
    "interleaved": hybrid_plan(dp=1, tp=2, pp=4, micro=1, micro_batches=8, layers=(6, 6, 6, 6), v=3,
                               schedule="interleaved", recompute="full", sp=True),
    "uneven": hybrid_plan(dp=4, tp=1, pp=2, micro=1, micro_batches=2, layers=(10, 14), zero=0),
    "zero3": hybrid_plan(dp=8, tp=1, pp=1, micro=4, micro_batches=1, layers=(24,), zero=3, recompute="selective"),
    "per-stage": hybrid_plan(dp=2, tp=4, pp=4, micro=1, micro_batches=16, layers=(9, 9, 9, 5), recompute="per-stage",
                             stage_recompute=("selective", "selective", "none", "none"), model=LLAMA),
    "autotp": hybrid_plan(dp=8, tp=8, pp=1, micro=16, micro_batches=4, layers=(32,), model=LLAMA, sp=True),
    "mixtral": hybrid_plan(dp=8, tp=2, pp=4, micro=2, micro_batches=16, layers=(8, 8, 8, 8), v=8,
                           schedule="interleaved", sp=True, model=MIXTRAL),
}


def megatron_args(text: str) -> dict:
    args = shlex.split(" ".join(line for line in text.splitlines() if not line.startswith("#")).replace("\\", " "))
    out, i = {}, 0
    while i < len(args):
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            out[args[i]] = args[i + 1]
            i += 2
        else:
            out[args[i]] = True
            i += 1
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
def test_megatron_arithmetic(name):
    plan = PLANS[name]
    p = plan["parallelism"]
    text = export_plan(plan, "megatron")
    a = megatron_args(text)
    tp, pp = int(a["--tensor-model-parallel-size"]), int(a["--pipeline-model-parallel-size"])
    dp = plan["devices"] // (tp * pp)  # Megatron derives dp from the world size
    assert dp * tp * pp == plan["devices"] and (tp, pp, dp) == (p["tp"], p["pp"], p["dp"])
    layers = int(a["--num-layers"])
    assert layers == sum(s["num_layers"] for s in plan["stages"])
    if "--decoder-first-pipeline-num-layers" not in a and "--pipeline-model-parallel-layout" not in a:
        assert layers % pp == 0
    if p["virtual_stages"] > 1:
        assert layers == int(a["--num-layers-per-virtual-pipeline-stage"]) * pp * p["virtual_stages"]
    micro, global_batch = int(a["--micro-batch-size"]), int(a["--global-batch-size"])
    assert global_batch == micro * p["micro_batches"] * dp
    assert ("--sequence-parallel" in a) == p["sequence_parallel"]
    assert ("--use-distributed-optimizer" in a) == (p["zero_stage"] >= 1)
    if p["zero_stage"] >= 2:
        assert "# not expressible: zero_stage" in text


def command_args(text: str) -> dict:
    """A command-line export (Megatron-LM, torchtitan) as {flag: value or True}, plus the torchtitan
    subcommand under "subcommand" and multi-token values as lists."""
    args = shlex.split(" ".join(line.rstrip("\\") for line in text.splitlines() if not line.startswith("#")))
    out, i = {}, 0
    while i < len(args):
        if not args[i].startswith("--"):
            out["subcommand"] = args[i]
            i += 1
            continue
        values = []
        while i + 1 + len(values) < len(args) and not args[i + 1 + len(values)].startswith("--") \
                and ":" not in args[i + 1 + len(values)]:
            values.append(args[i + 1 + len(values)])
        out[args[i]] = True if not values else values[0] if len(values) == 1 else values
        i += 1 + len(values)
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
def test_deepspeed_arithmetic(name):
    plan = PLANS[name]
    p = plan["parallelism"]
    config = json.loads(export_plan(plan, "deepspeed"))
    ours = config["solver_plan"]
    dp, tp, pp = ours["dp"], ours["tp"], ours["pp"]
    assert dp * tp * pp == plan["devices"] and (dp, tp, pp) == (p["dp"], p["tp"], p["pp"])
    micro, accumulation = config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]
    # DeepSpeed's own check: train_batch_size = micro x accumulation x its data-parallel size, which
    # is dp under a pipeline topology and the world size under AutoTP alone (then it is left out)
    if tp > 1 and pp == 1:
        assert "train_batch_size" not in config and config["tensor_parallel"]["autotp_size"] == tp
        assert micro * accumulation * dp == plan["global_batch"]
    else:
        assert config["train_batch_size"] == micro * accumulation * dp == plan["global_batch"]
    assert config["zero_optimization"]["stage"] == p["zero_stage"]
    modes = {s["recompute"] for s in plan["stages"]}
    if pp > 1:
        # only keys DeepSpeed reads: the pipeline engine's checkpoint interval; PipelineModule's
        # arguments (never partition_method "custom", which raises NotImplementedError) are ours
        assert set(config["pipeline"]) == {"activation_checkpoint_interval"}
        assert config["pipeline"]["activation_checkpoint_interval"] == (0 if modes == {"none"} else 1)
        assert ours["pipeline_module"] == {"num_stages": pp, "partition_method": "uniform"}
    if modes != {"none"}:
        assert "activation_checkpointing" in config
    if len(modes) > 1:
        assert any("per-stage recomputation" in item for item in ours["not_expressible"])
    if p["virtual_stages"] > 1:
        assert any("interleaved" in item for item in ours["not_expressible"])


@pytest.mark.parametrize("name", sorted(PLANS))
def test_torchtitan_arithmetic(name):
    plan = PLANS[name]
    p = plan["parallelism"]
    text = export_plan(plan, "torchtitan")
    a = command_args(text)
    degree = lambda key: int(a[f"--parallelism.{key}"])  # noqa: E731
    dp = degree("data_parallel_replicate_degree") * degree("data_parallel_shard_degree")
    assert dp == p["dp"] and dp * degree("tensor_parallel_degree") * degree("pipeline_parallel_degree") * \
        degree("context_parallel_degree") == plan["devices"]
    local, global_batch = int(a["--training.local_batch_size"]), int(a["--training.global_batch_size"])
    assert global_batch == plan["global_batch"]
    layers = sum(s["num_layers"] for s in plan["stages"])
    if p["pp"] > 1:
        # the plan's stages as model parts: every layer once, in order, embedding first, output last
        parts = a["--parallelism.module_fqns_per_model_part"]
        parts = [part.split(",") for part in ([parts] if isinstance(parts, str) else parts)]
        assert len(parts) == p["pp"] * p["virtual_stages"]
        names = [n for part in parts for n in part]
        assert names == ["tok_embeddings"] + [f"layers.{i}" for i in range(layers)] + ["norm", "lm_head"]
        if p["virtual_stages"] == 1:
            assert [sum(n.startswith("layers.") for n in part) for part in parts] == \
                [s["num_layers"] for s in plan["stages"]]
        assert local == p["micro_batch_size"] * p["micro_batches"]  # the schedule cuts it into micro-batches
        assert int(a["--parallelism.pipeline_parallel_microbatch_size"]) == p["micro_batch_size"]
    else:
        assert local == p["micro_batch_size"]  # torchtitan accumulates global / (local x dp)
    assert global_batch // (local * dp) * local * dp == global_batch
    assert int(a["--training.seq_len"]) == (4096 if plan["model"] in (LLAMA, MIXTRAL) else 1024)
    modes = [s["recompute"] for s in plan["stages"]]
    strongest = max(modes, key=("none", "selective", "full").index)
    assert a["subcommand"] == f"activation_checkpoint:{strongest}"
    if p["zero_stage"] in (1, 2) and p["dp"] > 1:
        assert "not expressible: zero_stage" in text


def test_model_shape_flags():
    """Megatron-LM gets the model the plan priced: LLaMA-3-8B's grouped-query attention, SwiGLU,
    RMSNorm, rotary positions, untied output and no biases; GPT-2's learned positions and LayerNorm;
    Mixtral's experts (split by the tensor-parallel degree: expert parallelism)."""
    llama = command_args(export_plan(PLANS["autotp"], "megatron"))
    assert (llama["--num-layers"], llama["--hidden-size"], llama["--ffn-hidden-size"], llama["--num-attention-heads"],
            llama["--num-query-groups"], llama["--seq-length"]) == ("32", "4096", "14336", "32", "8", "4096")
    assert {"--group-query-attention", "--swiglu", "--untie-embeddings-and-output-weights",
            "--disable-bias-linear"} <= set(llama)
    assert (llama["--normalization"], llama["--position-embedding-type"]) == ("RMSNorm", "rope")
    gpt2 = command_args(export_plan(PLANS["even"], "megatron"))
    assert (gpt2["--hidden-size"], gpt2["--seq-length"], gpt2["--normalization"]) == ("768", "1024", "LayerNorm")
    assert gpt2["--position-embedding-type"] == "learned_absolute" and "--swiglu" not in gpt2
    assert "--untie-embeddings-and-output-weights" not in gpt2 and "--disable-bias-linear" not in gpt2
    mixtral = command_args(export_plan(PLANS["mixtral"], "megatron"))
    assert (mixtral["--num-experts"], mixtral["--moe-router-topk"], mixtral["--expert-model-parallel-size"]) == \
        ("8", "2", "2")
    qwen = command_args(export_plan(hybrid_plan(layers=(12, 12), model=str(REPO_ROOT / "data" / "hf-configs" /
                                                                           "qwen2-0.5b.json")), "megatron"))
    assert {"--disable-bias-linear", "--add-qkv-bias"} <= set(qwen)  # q/k/v biases only
    assert "--untie-embeddings-and-output-weights" not in qwen  # Qwen2-0.5B ties its output to the embedding
    unreadable = hybrid_plan(model="no/such/config.json")
    text = export_plan(unreadable, "megatron")
    assert "not expressible: model shape" in text and "--hidden-size" not in command_args(text)
    configs = REPO_ROOT / "data" / "hf-configs"
    qwen3 = command_args(export_plan(hybrid_plan(layers=(14, 14), model=str(configs / "qwen3-0.6b.json")), "megatron"))
    assert {"--qk-layernorm", "--swiglu"} <= set(qwen3) and qwen3["--kv-channels"] == "128"  # 16 x 128 != 1024
    gemma = export_plan(hybrid_plan(layers=(13, 13), model=str(configs / "gemma-2-2b.json")), "megatron")
    assert "not expressible: Gemma's norms after the attention" in gemma and "--qk-layernorm" not in command_args(gemma)
    titan = export_plan(hybrid_plan(layers=(14, 14), model=str(configs / "qwen3-0.6b.json")), "torchtitan")
    assert "llama3 with q/k norms" in titan and "--module llama3" not in titan


def test_recomputation_is_never_dropped():
    """Every plan that recomputes gets the runtime's recomputation, stage by stage where the
    runtime cannot: the strongest planned mode everywhere, and a line saying so."""
    plan = PLANS["per-stage"]
    megatron = export_plan(plan, "megatron")
    assert command_args(megatron)["--recompute-granularity"] == "selective"
    assert "not expressible: per-stage recomputation ['selective', 'selective', 'none', 'none']" in megatron
    full = hybrid_plan(recompute="per-stage", stage_recompute=("full", "none"))
    a = command_args(export_plan(full, "megatron"))
    assert (a["--recompute-granularity"], a["--recompute-method"], a["--recompute-num-layers"]) == \
        ("full", "uniform", "1")
    everywhere = hybrid_plan(recompute="per-stage", stage_recompute=("selective", "selective"))
    assert "--recompute-granularity selective" in export_plan(everywhere, "megatron")
    assert "not expressible: per-stage" not in export_plan(everywhere, "megatron")
    broken = hybrid_plan(recompute="per-stage")
    for stage in broken["stages"]:
        stage.pop("recompute")
    with pytest.raises(InputError, match="recompute 'per-stage'"):
        export_plan(broken, "torchtitan")


def test_layout_warnings_know_every_family():
    """A LLaMA-family plan whose block splits k_proj by `in` and q_proj out x in is named; one whose
    projections follow the column/row layout is not."""
    differing = hybrid_plan(tp=4, dp=1, pp=2, micro_batches=8, model=LLAMA)
    differing["block_configs"] = [{"operator": "layers.0/self_attn/q_proj", "config": "out=2,in=2@4"},
                                  {"operator": "layers.0/self_attn/k_proj", "config": "in=4@4"},
                                  {"operator": "layers.0/mlp/down_proj", "config": "in=4@4"}]
    text = export_plan(differing, "megatron")
    assert "q_proj planned out=2,in=2@4" in text and "k_proj planned in=4@4" in text and "down_proj" not in text
    agrees = hybrid_plan(tp=4, dp=1, pp=2, micro_batches=8, model=LLAMA)
    agrees["block_configs"] = [{"operator": f"layers.0/{name}", "config": f"{dim}=4@4"} for name, dim in (
        ("self_attn/q_proj", "out"), ("self_attn/k_proj", "out"), ("self_attn/v_proj", "out"),
        ("self_attn/attention", "heads"), ("self_attn/o_proj", "in"), ("mlp/gate_proj", "out"),
        ("mlp/up_proj", "out"), ("mlp/down_proj", "in"))]
    assert "per-operator split" not in export_plan(agrees, "megatron")


def test_losses_are_named():
    text = export_plan(PLANS["uneven"], "megatron")
    assert "--decoder-first-pipeline-num-layers 10" in text and "--decoder-last-pipeline-num-layers 14" in text
    three = hybrid_plan(dp=1, tp=1, pp=3, micro=1, micro_batches=3, layers=(7, 9, 8), zero=0)
    assert "--decoder-first-pipeline-num-layers 7" in export_plan(three, "megatron")  # middle: the rest, evenly
    four = hybrid_plan(dp=1, tp=1, pp=4, micro=1, micro_batches=4, layers=(7, 9, 10, 8), zero=0)
    assert command_args(export_plan(four, "megatron"))["--pipeline-model-parallel-layout"] == "Et*7|t*9|t*10|t*8L"
    chunks = hybrid_plan(dp=1, tp=1, pp=2, micro=1, micro_batches=4, layers=(5, 3), v=2, schedule="interleaved", zero=0)
    for stage, parts in zip(chunks["stages"], ((3, 2), (2, 1))):
        stage["chunk_layers"] = list(parts)
    # virtual stages in Megatron-LM's order: chunk 0 of ranks 0 and 1, then chunk 1 of each
    assert command_args(export_plan(chunks, "megatron"))["--pipeline-model-parallel-layout"] == "Et*3|t*2|t*2|t*1L"
    # the planned split of mlp/fc2 (by sequence) is not Megatron's row-parallel fc2: named; q agrees
    text = export_plan(PLANS["even"], "torchtitan")
    assert "mlp/fc2 planned sequence=2@2, torchtitan runs in=2@2" in text and "self_attn/q" not in text
    agrees = hybrid_plan(tp=4, dp=1, pp=2, micro_batches=8)
    assert "not expressible" not in export_plan(agrees, "megatron")


def test_bad_plans_are_input_errors():
    with pytest.raises(InputError, match="unknown export target 'horovod'"):
        export_plan(PLANS["even"], "horovod")
    broken = hybrid_plan()
    broken["global_batch"] += 1
    with pytest.raises(InputError, match="global_batch"):
        export_plan(broken, "deepspeed")
    with pytest.raises(InputError, match="no solution"):
        export_plan({"kind": "hybrid", "status": "INFEASIBLE"}, "megatron")
    with pytest.raises(InputError, match="takes a hybrid plan"):
        export_plan({"operators": [], "edges": []}, "megatron")
    expert = hybrid_plan(model=MIXTRAL)
    expert["parallelism"].update(ep=2, etp=1, edp=4, capacity=1.25)  # a folding in a plan not saying moe-hybrid
    for target in ("megatron", "deepspeed", "torchtitan"):
        with pytest.raises(InputError, match=r"ep, etp, edp, capacity in the parallelism of a plan of kind 'hybrid'"):
            export_plan(expert, target)


def test_dtensor_placements_of_a_real_plan():
    """A per-operator plan of a small MLP on 4 devices: every module's mesh holds as many devices as
    the product of its degrees, and every Shard(axis) names an axis of the tensor."""
    from solver_plan.api import load_cluster, load_model, plan
    graph = load_model("mlp:layers=2,hidden=256,batch=64")
    result = plan(graph, load_cluster("v100x8-nvlink", 4), "greedy", memory_limit=None)
    d = result.to_dict()
    doc = json.loads(export_plan(d, "dtensor", graph=graph))
    assert doc["format"] == "solver-plan-dtensor" and doc["world_size"] == 4
    assert set(doc["modules"]) == {op["name"] for op in d["operators"]}
    for entry in d["operators"]:
        module = doc["modules"][entry["name"]]
        split = [k for k in entry["degrees"].values() if k > 1]
        mesh = module["mesh"]["devices"]
        flat = json.dumps(mesh).replace("[", "").replace("]", "").split(",")
        count = 1
        for k in split:
            count *= k
        assert len([x for x in flat if x.strip()]) == count
        op = graph.op(entry["name"])
        for placements, tensor in zip(module["output_placements"], op.outputs):
            assert len(placements) == len(split)
            for p in placements:
                if p.startswith("Shard("):
                    assert 0 <= int(p[6:-1]) < len(tensor.shape)
    with pytest.raises(InputError, match="needs the graph"):
        export_plan(d, "dtensor")
    jsonschema = pytest.importorskip("jsonschema")
    from solver_plan.resources import REPO_ROOT
    schema = json.loads((REPO_ROOT / "docs" / "schemas" / "dtensor-export.v1.schema.json").read_text())
    jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)


def test_cli_exports(tmp_path, capsys):
    """`solver-plan hybrid --export` and `solver-plan plan --export dtensor` write what export_plan
    gives for the --out plan."""
    from solver_plan.cli import main
    out, exported = tmp_path / "plan.json", tmp_path / "megatron.txt"
    assert main(["hybrid", "--model", "gpt2:layers=4,seq=128", "--cluster", "v100x8-nvlink", "--batch", "16",
                 "--time-limit", "30", "--out", str(out), "--export", "megatron",
                 "--export-out", str(exported)]) == 0
    assert exported.read_text() == export_plan(json.loads(out.read_text()), "megatron")
    a = megatron_args(exported.read_text())
    assert int(a["--global-batch-size"]) == 16
    out, exported = tmp_path / "ops.json", tmp_path / "dtensor.json"
    assert main(["plan", "--model", "mlp:layers=2,hidden=128,batch=32", "--devices", "2", "--planner", "greedy",
                 "--memory-limit", "none", "--out", str(out), "--export", "dtensor",
                 "--export-out", str(exported)]) == 0
    assert json.loads(exported.read_text())["world_size"] == 2
    capsys.readouterr()


def test_dtensor_placements_follow_the_split():
    """Linear fc0 split out=2 x in=2 on devices 0-3: a 2x2 mesh; the weight (out, in) is sharded on
    both axes, the output is sharded by columns and partial over `in`, the input sharded by columns."""
    from solver_plan.api import load_model
    graph = load_model("mlp:layers=2,hidden=128,batch=32")
    operators = []
    for op in graph:
        degrees = {"sample": 1, "out": 2, "in": 2} if op.name == "fc0" else {"sample": 4}
        operators.append({"name": op.name, "type": op.op_type.value, "degrees": degrees, "devices": [0, 1, 2, 3]})
    d = {"schema_version": 1, "model": graph.name, "status": "FEASIBLE", "operators": operators, "edges": [],
         "device_memory_bytes": [0, 0, 0, 0]}
    fc0 = json.loads(export_plan(d, "dtensor", graph=graph))["modules"]["fc0"]
    assert fc0["mesh"] == {"devices": [[0, 1], [2, 3]], "dim_names": ["out", "in"]}
    assert fc0["weight_placements"] == ["Shard(0)", "Shard(1)"]
    assert fc0["output_placements"] == [["Shard(1)", "Partial()"]]
    assert fc0["input_placements"] == [["Replicate()", "Shard(1)"]]


def test_export_command(tmp_path, capsys):
    from solver_plan.cli import main
    plan_path = tmp_path / "hybrid.json"
    plan_path.write_text(json.dumps(PLANS["uneven"]))
    assert main(["export", str(plan_path), "--target", "torchtitan"]) == 0
    assert command_args(capsys.readouterr().out)["--parallelism.data_parallel_replicate_degree"] == "4"
    assert main(["export", str(plan_path), "--target", "dtensor", "--model", "mlp"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hybrid.json" in err and "per-operator plan" in err


def test_dtensor_bad_plans_are_one_line_errors():
    """A per-operator plan without devices, or with a degree given as a list, is an InputError
    naming the operator (not a KeyError or TypeError)."""
    from solver_plan.api import load_model
    graph = load_model("mlp:layers=2,hidden=128,batch=32")
    operators = [{"name": op.name, "type": op.op_type.value, "degrees": {"sample": 2}, "devices": [0, 1]}
                 for op in graph]
    plan = {"schema_version": 1, "model": graph.name, "status": "FEASIBLE", "operators": operators, "edges": []}
    no_devices = json.loads(json.dumps(plan))
    del no_devices["operators"][1]["devices"]
    with pytest.raises(InputError, match=f"operator '{operators[1]['name']}' has no devices"):
        export_plan(no_devices, "dtensor", graph=graph)
    listed = json.loads(json.dumps(plan))
    listed["operators"][1]["degrees"]["sample"] = [2]
    with pytest.raises(InputError, match="degrees must map dimension names to positive integers"):
        export_plan(listed, "dtensor", graph=graph)


def test_dtensor_biases_and_mesh_changes():
    """fc0 split out=2 on devices 0-1 and fc1 by sample on 0-3: fc0's bias is sharded like its
    output features, and the edge fc0 -> relu0 (devices 0-1 -> 0-3) is listed as a mesh change."""
    from solver_plan.api import load_model
    graph = load_model("mlp:layers=2,hidden=128,batch=32")
    operators = []
    for op in graph:
        on_two = op.name in ("features", "fc0")
        degrees = {"sample": 1, "out": 2, "in": 1} if op.name == "fc0" else {"sample": 2 if on_two else 4}
        operators.append({"name": op.name, "type": op.op_type.value, "degrees": degrees,
                          "devices": [0, 1] if on_two else [0, 1, 2, 3]})
    edges = [{"src": src, "dst": dst, "tensors": [src]} for src, dst in
             (("features", "fc0"), ("fc0", "relu0"), ("relu0", "fc1"))]
    d = {"schema_version": 1, "model": graph.name, "status": "FEASIBLE", "operators": operators, "edges": edges,
         "device_memory_bytes": [0] * 4}
    doc = json.loads(export_plan(d, "dtensor", graph=graph))
    assert doc["modules"]["fc0"]["bias_placements"] == ["Shard(0)"]
    assert doc["cross_mesh_edges"] == [edges[1]]  # features -> fc0 share devices 0-1; relu0 -> fc1 share 0-3


def test_context_parallelism_hybrid_sharding_zero_bubble_and_partial_recomputation():
    """cp: Megatron-LM's --context-parallel-size and torchtitan's context_parallel_degree (the world is
    dp x cp x tp x pp); hybrid sharding in groups of 4 of the 8 replicas: two distributed-optimizer
    instances, torchtitan's HSDP 2 x 2 (x cp 2); zero-bubble schedules and partial recomputation
    (the first 3 of 6 blocks) export as what the runtimes have, and say so."""
    plan = hybrid_plan(dp=4, cp=2, tp=2, pp=2, micro=1, micro_batches=8, layers=(6, 6), dp_shard=4,
                       schedule="zb-h1", recompute="full", recompute_blocks=(3, 2), model=LLAMA)
    megatron = export_plan(plan, "megatron")
    a = command_args(megatron)
    assert (a["--context-parallel-size"], a["--num-distributed-optimizer-instances"]) == ("2", "2")
    assert plan["devices"] // (int(a["--tensor-model-parallel-size"]) * int(a["--pipeline-model-parallel-size"])
                               * int(a["--context-parallel-size"])) == 4  # Megatron-LM's data parallelism
    assert (a["--recompute-method"], a["--recompute-num-layers"]) == ("block", "3")
    assert "not expressible: schedule zb-h1" in megatron
    titan = command_args(export_plan(plan, "torchtitan"))
    degrees = [int(titan[f"--parallelism.{key}_degree"])
               for key in ("data_parallel_replicate", "data_parallel_shard", "context_parallel")]
    assert degrees == [2, 2, 2] and titan["--parallelism.pipeline_parallel_schedule"] == "1F1B"
    ds = json.loads(export_plan(plan, "deepspeed"))["solver_plan"]["not_expressible"]
    assert any("context parallelism 2" in x for x in ds) and any("partial recomputation" in x for x in ds)
    with pytest.raises(InputError, match="dp x cp x tp x pp = 32 != devices 16"):
        export_plan(dict(plan, devices=16), "megatron")
