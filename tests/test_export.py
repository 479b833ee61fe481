"""Exports to Megatron-LM, DeepSpeed, torchtitan (hybrid plans) and DTensor placements
(per-operator plans): each is parsed back and must describe the plan's arithmetic."""
from __future__ import annotations

import json
import shlex
import tomllib

import pytest

from solver_plan.errors import InputError
from solver_plan.export import export_plan


def hybrid_plan(dp=2, tp=2, pp=2, micro=2, micro_batches=4, layers=(12, 12), v=1, recompute="none", zero=1,
                sp=False, schedule="1f1b", block_configs=True) -> dict:
    """A hand-written hybrid plan in the JSON layout of solver_plan/hybrid/plan.py."""
    stages, first = [], 0
    for i, n in enumerate(layers):
        stages.append({"index": i, "layers": [first, first + n], "num_layers": n, "embedding": i == 0,
                       "head": i == len(layers) - 1,
                       "submesh": {"devices_per_replica": tp, "replicas": dp,
                                   "devices": [i * tp * dp, (i + 1) * tp * dp - 1]}})
        first += n
    return {"schema_version": 1, "kind": "hybrid", "status": "FEASIBLE", "step_time_s": 1.0, "lower_bound_s": 0.9,
            "model": "gpt2", "cluster": "c", "devices": dp * tp * pp, "global_batch": dp * micro * micro_batches,
            "parallelism": {"dp": dp, "tp": tp, "pp": pp, "micro_batch_size": micro, "micro_batches": micro_batches,
                            "virtual_stages": v, "recompute": recompute, "zero_stage": zero,
                            "sequence_parallel": sp, "schedule": schedule},
            "memory_per_device_bytes": 10**9, "stages": stages,
            "block_configs": [{"operator": "self_attn/q", "config": f"out={tp}@{tp}"},
                              {"operator": "mlp/fc2", "config": "sequence=2@2" if tp == 2 else f"in={tp}@{tp}"}]
            if block_configs else []}


PLANS = {
    "even": hybrid_plan(),
    "interleaved": hybrid_plan(dp=1, tp=2, pp=4, micro=1, micro_batches=8, layers=(6, 6, 6, 6), v=3,
                               schedule="interleaved", recompute="full", sp=True),
    "uneven": hybrid_plan(dp=4, tp=1, pp=2, micro=1, micro_batches=2, layers=(10, 14), zero=0),
    "zero3": hybrid_plan(dp=8, tp=1, pp=1, micro=4, micro_batches=1, layers=(24,), zero=3, recompute="selective"),
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
    if "--decoder-first-pipeline-num-layers" not in a:
        assert layers % pp == 0
    if p["virtual_stages"] > 1:
        assert layers == int(a["--num-layers-per-virtual-pipeline-stage"]) * pp * p["virtual_stages"]
    micro, global_batch = int(a["--micro-batch-size"]), int(a["--global-batch-size"])
    assert global_batch == micro * p["micro_batches"] * dp
    assert ("--sequence-parallel" in a) == p["sequence_parallel"]
    assert ("--use-distributed-optimizer" in a) == (p["zero_stage"] >= 1)
    if p["zero_stage"] >= 2:
        assert "# not expressible: zero_stage" in text


@pytest.mark.parametrize("name", sorted(PLANS))
def test_deepspeed_arithmetic(name):
    plan = PLANS[name]
    p = plan["parallelism"]
    config = json.loads(export_plan(plan, "deepspeed"))
    dp = config["solver_plan"]["dp"]
    # DeepSpeed's own check: train_batch_size = micro x accumulation x data-parallel ranks
    assert config["train_batch_size"] == config["train_micro_batch_size_per_gpu"] * \
        config["gradient_accumulation_steps"] * dp == plan["global_batch"]
    assert config["zero_optimization"]["stage"] == p["zero_stage"]
    stages = config.get("pipeline", {}).get("stages", 1)
    tp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    assert dp * tp * stages == plan["devices"]
    if stages > 1:
        assert sum(config["pipeline"]["layers_per_stage"]) == sum(s["num_layers"] for s in plan["stages"])
    if p["virtual_stages"] > 1:
        assert any("interleaved" in item for item in config["solver_plan"]["not_expressible"])


@pytest.mark.parametrize("name", sorted(PLANS))
def test_torchtitan_arithmetic(name):
    plan = PLANS[name]
    p = plan["parallelism"]
    text = export_plan(plan, "torchtitan")
    doc = tomllib.loads(text)
    par = doc["parallelism"]
    dp = par["data_parallel_replicate_degree"] * par["data_parallel_shard_degree"]
    assert dp * par["tensor_parallel_degree"] * par["pipeline_parallel_degree"] * par["context_parallel_degree"] \
        == plan["devices"]
    layers = sum(s["num_layers"] for s in plan["stages"])
    if "pipeline_parallel_layers_per_stage" in par:
        assert par["pipeline_parallel_layers_per_stage"] * par["pipeline_parallel_degree"] * p["virtual_stages"] == layers
    else:
        assert par["pipeline_parallel_degree"] == 1 or "uneven stages" in text
    assert doc["training"]["global_batch_size"] == doc["training"]["local_batch_size"] * dp == plan["global_batch"]
    if p["zero_stage"] in (1, 2) and p["dp"] > 1:
        assert "not expressible: zero_stage" in text


def test_losses_are_named():
    text = export_plan(PLANS["uneven"], "megatron")
    assert "--decoder-first-pipeline-num-layers 10" in text and "--decoder-last-pipeline-num-layers 14" in text
    three = hybrid_plan(dp=1, tp=1, pp=3, micro=1, micro_batches=3, layers=(7, 9, 8), zero=0)
    assert "--decoder-first-pipeline-num-layers 7" in export_plan(three, "megatron")  # middle: the rest, evenly
    four = hybrid_plan(dp=1, tp=1, pp=4, micro=1, micro_batches=4, layers=(7, 9, 10, 8), zero=0)
    assert "not expressible: uneven stages [7, 9, 10, 8]" in export_plan(four, "megatron")
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
    assert tomllib.loads(capsys.readouterr().out)["parallelism"]["data_parallel_replicate_degree"] == 4
    assert main(["export", str(plan_path), "--target", "dtensor", "--model", "mlp"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "hybrid.json" in err and "per-operator plan" in err
