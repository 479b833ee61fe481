"""Check every export of a set of plans with each runtime's own argument / configuration code.

    python scripts/check_exports.py [--plans tests/fixtures/plans] [--megatron NAME=PATH ...] [--out FILE]

For each hybrid plan (`kind: hybrid`) and expert-parallel plan (`kind: moe-hybrid`, the hybrid
command's --out on a mixture of experts) in --plans (a runtime whose exporter refuses the plan is
reported as refused, with the exporter's line):
- Megatron-LM: the exported flags through `megatron.training.arguments.parse_args` and
  `validate_args` of each Megatron-LM source tree given with --megatron (a checkout's root: the
  PyPI package megatron-core lacks megatron/training), with WORLD_SIZE = the plan's devices; the
  parsed arguments must give the plan's tp, pp, data parallelism, batch and layers; for expert-parallel
  plans also ep, etp and the capacity factor, and `core_transformer_config_from_args` builds the
  TransformerConfig (its MoE, recomputation and overlap checks; rope fusion off: no Transformer
  Engine on a CPU).
- DeepSpeed: the ds_config through `deepspeed.runtime.config.DeepSpeedConfig` with the data-parallel
  size DeepSpeed would see (a pipeline's topology: dp; AutoTP alone: the world size) and its batch
  assertion; the parsed config must give the plan's micro-batch, accumulation, ZeRO stage and, with
  a pipeline, the checkpoint interval; for expert-parallel plans DeepSpeed's `MoE` layer built from
  the export's `moe_layer` and its expert(-data)-parallel rank groups computed for the plan's world.
- torchtitan: the command line through `torchtitan.config.manager.ConfigManager.parse_args`
  (`--module llama3 --config llama3_debugmodel`, for expert-parallel plans `--module qwen3 --config
  qwen3_moe_debug`, added when the export names no model) and
  `ParallelDims` with the plan's world size.
For each per-operator plan (listed in models.json beside the plans, with the MODEL it was made
for): the DTensor export's meshes built as `DeviceMesh` shapes and its placements parsed into
torch's placement types.

Each check runs in its own Python process (Megatron-LM keeps global state). A runtime that is not
importable is reported as skipped, not passed. The report (a markdown table) goes to --out or
standard output; the exit status is 1 when any check fails.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECOMPUTE_ORDER = ("none", "selective", "full")


def command_line(text: str) -> list[str]:
    """An exported command line (comments dropped, continuation backslashes joined)."""
    return shlex.split(" ".join(line.rstrip("\\") for line in text.splitlines() if not line.startswith("#")))


def plan_of(doc: dict) -> dict:
    """The plan of a plan file: an expert-parallel result (moe-hybrid) holds it under `plan`."""
    return doc["plan"] if isinstance(doc.get("plan"), dict) and doc["plan"].get("kind") == "moe-hybrid" else doc


def stage_layers(plan: dict) -> int:
    """Layers over the stages (hybrid stages: num_layers; moe-hybrid stages: layers)."""
    return sum(s["num_layers"] if "num_layers" in s else s["layers"] for s in plan["stages"])


def strongest(plan: dict) -> str:
    modes = [s.get("recompute", plan["parallelism"].get("recompute", "none")) for s in plan["stages"]]
    return max(modes, key=RECOMPUTE_ORDER.index)


# --- workers: run in a child process, print one JSON line -------------------------------------
def worker_megatron(plan: dict, text: str, tree: str) -> str:
    sys.path.insert(0, tree)
    plan = plan_of(plan)
    p = plan["parallelism"]
    os.environ.update(WORLD_SIZE=str(plan["devices"]), RANK="0", CUDA_DEVICE_MAX_CONNECTIONS="1")
    import megatron.training.arguments as arguments
    import torch
    if hasattr(arguments, "get_device_arch_version"):  # core_v0.15+ asks the GPU: answer as an A100 (8)
        arguments.get_device_arch_version = lambda: 8
    torch.cuda.get_device_capability = lambda device=None: (8, 0)  # --moe-grouped-gemm asks it too
    from megatron.training.arguments import parse_args, validate_args
    sys.argv = ["pretrain_gpt.py"] + command_line(text)
    args = parse_args()
    validate_args(args)
    checks = {"tp": (args.tensor_model_parallel_size, p["tp"]), "pp": (args.pipeline_model_parallel_size, p["pp"]),
              "dp": (args.data_parallel_size, p["dp"]), "global batch": (args.global_batch_size, plan["global_batch"]),
              "micro batch": (args.micro_batch_size, p["micro_batch_size"]),
              "layers": (args.num_layers, stage_layers(plan)),
              "recompute": (args.recompute_granularity or "none", strongest(plan))}
    if "ep" in p:  # expert-parallel: the folding and capacity read back, and the core's MoE checks run
        checks.update({"ep": (args.expert_model_parallel_size, p["ep"]),
                       "etp": (args.expert_tensor_parallel_size, p["etp"]),
                       "capacity": (args.moe_expert_capacity_factor, p.get("capacity_factor")),
                       "experts per ep rank": (args.num_experts % p["ep"], 0)})
        try:  # main moved it to argument_utils
            from megatron.training.arguments import core_transformer_config_from_args
        except ImportError:
            from megatron.training.argument_utils import core_transformer_config_from_args
        args.apply_rope_fusion = False  # a fused kernel of Transformer Engine, which a CPU check has not
        core_transformer_config_from_args(args)  # TransformerConfig.__post_init__: MoE and recompute checks
    layout = getattr(args, "pipeline_model_parallel_layout", None)
    if layout is not None:  # the explicit stage layout, checked as TransformerConfig checks it
        from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout
        parsed = PipelineParallelLayerLayout.from_str(layout, args.pipeline_model_parallel_size)
        parsed.validate_layer_layout(args.num_layers, 0)  # every block once, one embedding, one loss
    wrong = [f"{k} {got} != {want}" for k, (got, want) in checks.items() if got != want]
    assert not wrong, "; ".join(wrong)
    return f"hidden {args.hidden_size}, seq {args.seq_length}, dp {args.data_parallel_size}, " \
           f"recompute {args.recompute_granularity}" + (f", experts {args.num_experts}" if args.num_experts else "") \
        + (f", layout of {len(layout.split('|'))} stages" if layout else "")


def check_deepspeed_moe(plan: dict, layer_args: dict) -> str:
    """An expert-parallel plan's `moe_layer` built as DeepSpeed's own MoE layer (an identity module as
    each expert), and DeepSpeed's expert-parallel and expert-data-parallel rank groups for the plan's
    world (deepspeed.utils.groups._get_expert_parallel_ranks): ep ranks per group, the plan's edp."""
    import torch
    from deepspeed.moe.layer import MoE
    from deepspeed.utils.groups import _get_expert_parallel_ranks
    p = plan["parallelism"]
    layer = MoE(expert=torch.nn.Identity(), **layer_args)
    gate = layer.deepspeed_moe.gate
    checks = {"ep_size": (layer.ep_size, p["ep"]),
              "local experts": (layer.num_local_experts * p["ep"], layer_args["num_experts"]),
              "capacity": (gate.capacity_factor if gate.drop_tokens else None, p.get("capacity_factor"))}
    tp = p["tp"] if layer_args.get("enable_expert_tensor_parallelism") else 1
    ep_groups, edp_groups = _get_expert_parallel_ranks(plan["devices"] // (p["tp"] // tp), tp, p["ep"], p["pp"])
    checks["ep group"] = (len(ep_groups[0]), p["ep"])
    if p.get("cp", 1) == 1:
        checks["edp group"] = (len(edp_groups[0]), p["edp"])
    wrong = [f"{k} {got} != {want}" for k, (got, want) in checks.items() if got != want]
    assert not wrong, "; ".join(wrong)
    return f"; MoE: {layer.num_local_experts} local experts x ep {layer.ep_size}, top-{gate.k}, " \
           f"{len(ep_groups)} expert-parallel groups"


def worker_deepspeed(plan: dict, text: str, _tree: str) -> str:
    import deepspeed
    from deepspeed.runtime import config as ds_config
    plan = plan_of(plan)
    config = json.loads(text)
    ours, p = config["solver_plan"], plan["parallelism"]
    mpu = None
    ds_config.dist.get_rank = lambda group=None: 0  # as rank 0 of an initialised process group
    if ours["pp"] > 1:  # PipelineModule's topology hands DeepSpeed the data-parallel group
        class PipelineTopologyMpu:
            def get_data_parallel_world_size(self):
                return ours["dp"]

            def get_model_parallel_world_size(self):
                return ours["tp"]
        mpu = PipelineTopologyMpu()
    else:  # no mpu: DeepSpeed reads the process group's world size
        ds_config.dist.get_world_size = lambda group=None: plan["devices"]
    parsed = ds_config.DeepSpeedConfig(config, mpu=mpu)
    checks = {"micro": (parsed.train_micro_batch_size_per_gpu, p["micro_batch_size"]),
              "accumulation": (parsed.gradient_accumulation_steps, p["micro_batches"]),
              "zero": (parsed.zero_optimization_stage, p["zero_stage"])}
    if ours["pp"] > 1:
        checks["train batch"] = (parsed.train_batch_size, plan["global_batch"])
        checks["checkpoint interval"] = (parsed.pipeline["activation_checkpoint_interval"],
                                         0 if strongest(plan) == "none" else 1)
    if ours["tp"] > 1 and ours["pp"] == 1:
        checks["autotp"] = (parsed.tensor_parallel_config.autotp_size, p["tp"])
    wrong = [f"{k} {got} != {want}" for k, (got, want) in checks.items() if got != want]
    assert not wrong, "; ".join(wrong)
    moe = check_deepspeed_moe(plan, ours["moe_layer"]) if "moe_layer" in ours else ""
    return f"deepspeed {deepspeed.__version__}: train_batch_size {parsed.train_batch_size}, " \
           f"micro {parsed.train_micro_batch_size_per_gpu} x accumulation {parsed.gradient_accumulation_steps}" + moe


def worker_torchtitan(plan: dict, text: str, _tree: str) -> str:
    from importlib.metadata import version

    from torchtitan.config.manager import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims
    plan = plan_of(plan)
    args = command_line(text)
    named = "--module" in args
    stand_in = ("qwen3", "qwen3_moe_debug") if "ep" in plan["parallelism"] else ("llama3", "llama3_debugmodel")
    if "--module" not in args:
        args = ["--module", stand_in[0]] + args
    if "--config" not in args:
        args = ["--config", stand_in[1]] + args
    config = ConfigManager().parse_args(args)
    par, p = config.parallelism, plan["parallelism"]
    dims = ParallelDims.from_config(par, plan["devices"])
    dp = dims.dp_replicate * dims.dp_shard
    layers = stage_layers(plan)
    checks = {"dp": (dp, p["dp"]), "tp": (dims.tp, p["tp"]), "pp": (dims.pp, p["pp"]),
              "global batch": (config.training.global_batch_size, plan["global_batch"]),
              "accumulation x local x dp": (config.training.global_batch_size // (config.training.local_batch_size * dp)
                                            * config.training.local_batch_size * dp, plan["global_batch"])}
    if p["pp"] > 1:
        parts = par.module_fqns_per_model_part
        names = [n for part in parts for n in part]
        checks["stage layers"] = (names, ["tok_embeddings"] + [f"layers.{i}" for i in range(layers)]
                                  + ["norm", "lm_head"])
        checks["microbatches"] = (config.training.local_batch_size // par.pipeline_parallel_microbatch_size,
                                  p["micro_batches"])
    experts = ""
    if "ep" in p:  # expert-parallel: the degree, its mesh constraint (configs.py: efsdp = dp_shard cp tp / ep)
        checks["ep"] = (dims.ep, p["ep"])
        checks["ep divides dp_shard x cp x tp"] = ((dims.dp_shard * dims.cp * dims.tp) % dims.ep, 0)
        moe = [layer.moe for layer in config.model_spec.model.layers if getattr(layer, "moe", None)] if named else []
        if moe:  # the registered model's experts: the plan's count divisible by ep
            checks["experts per ep rank"] = (moe[0].num_experts % dims.ep, 0)
            experts = f", {len(moe)} MoE layers of {moe[0].num_experts} experts, ep {dims.ep}"
        else:
            experts = f", ep {dims.ep}"
    mode = type(config.activation_checkpoint).__qualname__.split(".")[0] if config.activation_checkpoint else "none"
    checks["recompute"] = ({"FullAC": "full", "SelectiveAC": "selective"}.get(mode, "none"), strongest(plan))
    wrong = [f"{k} {got} != {want}" for k, (got, want) in checks.items() if got != want]
    assert not wrong, "; ".join(wrong)
    return f"torchtitan {version('torchtitan')}: dp {dp} x tp {dims.tp} x pp {dims.pp}, local batch " \
           f"{config.training.local_batch_size}, seq {config.training.seq_len}, AC {mode}" + experts + \
           ("" if named else f" (model: {stand_in[1]} stand-in)")


def worker_dtensor(plan: dict, text: str, _tree: str) -> str:
    import torch
    from torch.distributed.tensor import Partial, Replicate, Shard
    doc = json.loads(text)
    kinds = {"Replicate()": Replicate(), "Partial()": Partial()}
    count = 0
    for name, module in doc["modules"].items():
        mesh = torch.tensor(module["mesh"]["devices"])
        dims = max(mesh.dim(), 1) if mesh.dim() else 0
        assert dims == len(module["mesh"]["dim_names"]) or (mesh.dim() == 0 and not module["mesh"]["dim_names"]), name
        for group in ("output_placements", "input_placements"):
            for placements in module[group]:
                assert len(placements) == len(module["mesh"]["dim_names"]), f"{name} {group}"
                for text_placement in placements:
                    kinds.get(text_placement) or Shard(int(text_placement[6:-1]))
                    count += 1
    assert all(e["src"] in doc["modules"] and e["dst"] in doc["modules"] for e in doc["cross_mesh_edges"])
    return f"torch {torch.__version__}: {len(doc['modules'])} modules, {count} placements, " \
           f"{len(doc['cross_mesh_edges'])} cross-mesh edges"


WORKERS = {"megatron": worker_megatron, "deepspeed": worker_deepspeed, "torchtitan": worker_torchtitan,
           "dtensor": worker_dtensor}
REQUIRES = {"deepspeed": "deepspeed", "torchtitan": "torchtitan", "dtensor": "torch"}


def run_worker(kind: str, plan_path: Path, export_text: str, tree: str = "", python: str = "") -> tuple[str, str]:
    """(status, detail): status "pass", "FAIL" or "skipped"."""
    payload = json.dumps({"plan": json.loads(plan_path.read_text()), "text": export_text, "tree": tree})
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([python or sys.executable, __file__, "--worker", kind], input=payload,
                          capture_output=True, text=True, env=env, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{\"status\"")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return "FAIL", f"worker died: {tail[:300]}"
    result = json.loads(lines[-1])
    return result["status"], result["detail"]


def worker_main() -> int:
    payload = json.loads(sys.stdin.read())
    kind = sys.argv[sys.argv.index("--worker") + 1]
    module = REQUIRES.get(kind)
    try:
        if module:
            __import__(module)
    except ImportError as exc:
        print(json.dumps({"status": "skipped", "detail": f"{module} not importable ({exc})"}))
        return 0
    import contextlib
    import io
    errors = io.StringIO()  # argparse and tyro say why they exit on standard error
    try:
        with contextlib.redirect_stderr(errors):
            detail = WORKERS[kind](payload["plan"], payload["text"], payload["tree"])
        print(json.dumps({"status": "pass", "detail": detail}))
    except BaseException as exc:  # the runtime's own rejection is the finding
        said = [line.strip(" │╭╰─") for line in errors.getvalue().splitlines() if "error" in line.lower()]
        reason = f"{type(exc).__name__}: {str(exc).strip()[:400]}" + (f" ({said[-1][:300]})" if said else "")
        print(json.dumps({"status": "FAIL", "detail": reason}))
    return 0


def exports_or_refusals(plan: dict, checks: list, name: str, rows: list) -> tuple[dict, list]:
    """Each runtime's export of a hybrid plan; a runtime the exporter refuses (one line naming the
    setting it cannot express) gets a `refused` row instead of a check."""
    from solver_plan.errors import InputError
    from solver_plan.export import export_plan
    exports = {}
    for target in ("megatron", "deepspeed", "torchtitan"):
        try:
            exports[target] = export_plan(plan, target)
        except InputError as exc:
            rows.append((name, target, "refused", str(exc)))
            print(f"{name:28s} {target:22s} refused {str(exc)[:140]}", file=sys.stderr)
    return exports, [check for check in checks if check[0] in exports]


def main() -> int:
    if "--worker" in sys.argv:
        return worker_main()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", default=str(ROOT / "tests" / "fixtures" / "plans"))
    parser.add_argument("--megatron", action="append", default=[], metavar="NAME=PATH",
                        help="a Megatron-LM source tree (its root) to check the flags with; repeatable")
    parser.add_argument("--megatron-python", action="append", default=[], metavar="NAME=PYTHON",
                        help="the interpreter for Megatron-LM tree NAME (main needs Python >= 3.12)")
    parser.add_argument("--out", help="write the report here (default: standard output)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)  # plans name Hugging Face configs relative to the repository (data/hf-configs/...)
    from solver_plan.export import export_plan
    from solver_plan.export.common import plan_kind
    from solver_plan.graph.resolve import resolve_model
    plans = Path(args.plans)
    models = json.loads((plans / "models.json").read_text()) if (plans / "models.json").exists() else {}
    trees = [entry.split("=", 1) for entry in args.megatron]
    pythons = dict(entry.split("=", 1) for entry in args.megatron_python)
    rows, failed = [], 0
    for path in sorted(plans.glob("*.json")):
        if path.name == "models.json":
            continue
        plan = json.loads(path.read_text())
        kind = plan_kind(plan)  # the plan's declared kind (fixtures from before the envelope: read from keys)
        if kind in ("hybrid", "moe-hybrid"):
            checks = [("deepspeed", "deepspeed", "", ""), ("torchtitan", "torchtitan", "", "")]
            checks += [("megatron", f"Megatron-LM {name}", tree, pythons.get(name, "")) for name, tree in trees]
            exports, checks = exports_or_refusals(plan, checks, path.name, rows)
        elif kind == "config" and path.name in models:
            checks = [("dtensor", "DTensor", "", "")]
            exports = {"dtensor": export_plan(plan, "dtensor", graph=resolve_model(models[path.name]))}
        else:
            rows.append((path.name, "-", "skipped", "per-operator plan without a MODEL in models.json"))
            continue
        for kind, runtime, tree, python in checks:
            status, detail = run_worker(kind, path, exports[kind], tree, python)
            failed += status == "FAIL"
            rows.append((path.name, runtime, status, detail))
            print(f"{path.name:28s} {runtime:22s} {status:7s} {detail[:140]}", file=sys.stderr)
    report = ["# Exports checked by the runtimes' own code", "",
              f"`python scripts/check_exports.py` ({sys.version.split()[0]}; plans: "
              f"{os.path.relpath(plans, ROOT)}). pass = accepted by the runtime's argument/config code and "
              "read back as the plan's parallelism, batch, layers and recomputation (expert-parallel plans: "
              "also ep, etp, capacity; Megatron-LM's TransformerConfig built; DeepSpeed's MoE layer and expert groups "
              "built); skipped = runtime not installed; refused = the exporter names a setting the runtime cannot "
              "express (exit 2).", ""]
    report += [f"Megatron-LM {name}: {tree}" + (f" (Python: {pythons[name]})" if name in pythons else "") + "  "
               for name, tree in trees]
    report += ["", "| plan | runtime | result | detail |", "|---|---|---|---|"]
    report += [f"| {a} | {b} | {c} | {d.replace('|', '/')} |" for a, b, c, d in rows]
    text = "\n".join(report) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
