"""`solver-plan hybrid`: how to train MODEL on N devices (dp x tp x pp, micro-batches, recomputation,
ZeRO), and how fast; with --fix, the same for a partly or fully pinned configuration (what-if)."""
from __future__ import annotations

import json

from solver_plan.requests import DEFAULT_TIME_LIMIT_S


def register_command(subparsers) -> None:
    """Add the `hybrid` subcommand and its options to the command line's subparsers."""
    from solver_plan import cli_options as o
    from solver_plan.requests import A2A_OVERLAPS, DEFAULT_A2A_OVERLAP, DEFAULT_BLOCK_SOLVER, DEFAULT_RUNTIME
    parser = subparsers.add_parser(
        "hybrid", help="data x tensor x pipeline training plan for a transformer (step time, memory, stages)",
        description="Plan the training of a GPT-style MODEL on the first N devices of CLUSTER for a global batch: "
                    "data, tensor and pipeline parallel degrees, micro-batches, schedule, recomputation and "
                    "ZeRO stage, with per-stage memory and the predicted step time.")
    o.add(parser, "--model", required=True,
          help="a decoder-only transformer: a GPT-style zoo spec (gpt2, gpt2-medium/-large/-xl, an "
               "llm-shapes model such as gpt3-175B; options as gpt2:layers=96,hidden=12288,heads=96) "
               "or a Hugging Face config.json of model_type gpt2, llama, mistral, qwen2 or mixtral "
               "(data/hf-configs/llama-3-8b.json:seq=4096); `solver-plan models` lists the zoo")
    o.add_cluster(parser, default=None, required=True, help="preset name (a100-80gb-superpod, ...) or YAML file")
    o.add_devices(parser)
    o.add(parser, "--batch", type=int, required=True, help="global batch (sequences per optimizer step)")
    o.add_memory_limit(parser)
    o.add(parser, "--fix", help="pin choices: KEY=VALUE,... with keys dp, tp, pp, micro_batch_size, "
                                "virtual_stages, recompute (none|selective|full|per-stage), zero_stage (0-3), "
                                "sequence_parallel (true|false), schedule (1f1b|interleaved|gpipe|zb-h1|zb-h2|zb-v|zb-exact), "
                                "cp (context parallel), dp_shard (ZeRO shard group, hybrid sharding), offload "
                                "(none|optimizer|activations|both: state or activations on the host), attention "
                                "(a fused attention kernel the runtime runs, e.g. llm-foundry's triton2022|flash2); for a "
                                "mixture of experts dp, tp, pp, ep, etp, micro_batch_size, virtual_stages, "
                                "recompute, zero_stage (0|1), capacity (dropless|factor)")
    o.add(parser, "--routing", default=None,  # issue 24: hybrid/moe_cli.py
          help="mixture of experts: expert load priced, uniform (default), zipf:S or histogram:c0/c1/...")
    parser.add_argument("--a2a-overlap", default=DEFAULT_A2A_OVERLAP, choices=A2A_OVERLAPS,
                        help="mixture of experts: what hides the all-to-all (default none)")
    o.add(parser, "--compute-scale", type=float, default=1.0,
          help="multiply every kernel time of the cost model (calibration; see docs/hybrid-accuracy.md; "
               "default 1.0)")
    o.add_precision(parser, help="training precision: auto (default: the device's, mixed bf16 on A100/H100, mixed fp16 "
                                 "on V100, fp32 on K80/P100), fp32, tf32, bf16, fp16 or fp8 (mixed: 16-bit weights, "
                                 "activations and gradients, fp32 master weights and Adam moments); sets memory, bytes "
                                 "moved and the peak FLOP/s")
    from solver_plan.runtime import runtime_names
    o.add(parser, "--runtime", default=DEFAULT_RUNTIME,
          help="software stack whose kernels, communication overlap and memory reserve are priced: "
               f"{', '.join(runtime_names())} (default megatron-core; facts and sources in "
               "solver_plan/runtime/profiles.py)")
    o.add(parser, "--block-solver", "--planner", default=DEFAULT_BLOCK_SOLVER,
          help=f"per-operator planner for the block solves (default {DEFAULT_BLOCK_SOLVER}; `solver-plan planners`)")
    o.add(parser, "--time-limit", type=float, default=DEFAULT_TIME_LIMIT_S,
          help=f"seconds for the whole command (default {DEFAULT_TIME_LIMIT_S:g})")
    o.add(parser, "--quiet", action="store_true", help="accepted for symmetry with plan and pipeline: hybrid "
                                         "prints no progress line")
    o.add_seed(parser)
    parser.add_argument("--what-if", action="store_true",
                        help="price the configuration --fix pins (dp, tp, pp, micro_batch_size at least) as the "
                             "runtime runs it, its own layer split included, instead of searching (planner what-if)")
    parser.add_argument("--out", help="write the plan as JSON here")
    o.add_export_arguments(parser, ("megatron", "deepspeed", "torchtitan"))
    parser.set_defaults(func=run)


def check_model_name(spec: str) -> None:
    """An unknown zoo name is refused naming only the models `hybrid` takes (not CNNs), with the closest."""
    from solver_plan.errors import InputError
    from solver_plan.graph.importers.graph_file import is_model_file
    from solver_plan.graph.zoo import gpt
    from solver_plan.graph.zoo.catalog import model_entry, model_names
    from solver_plan.graph.zoo.spec import split_spec
    from solver_plan.hybrid.model import HF_DECODERS
    from solver_plan.suggest import did_you_mean
    if is_model_file(spec):
        return
    name = split_spec(spec)[0]
    if name not in model_names():
        decoders = [n for n in model_names() if model_entry(n).build is gpt.gpt]
        raise InputError(f"unknown model {name!r}{did_you_mean(name, decoders)}; hybrid takes the decoder-only "
                         f"zoo models {', '.join(decoders)} or a Hugging Face config.json of model_type "
                         f"{', '.join(HF_DECODERS)}", "--model")


def hybrid_request(args):
    """The `HybridRequest` of parsed `hybrid` arguments."""
    from solver_plan import cli_options as o
    from solver_plan.hybrid.request import HybridRequest
    return o.build(HybridRequest, args, model=args.model, cluster=args.cluster, global_batch=args.batch,
                   block_solver=args.block_solver, devices=args.devices, time_limit=args.time_limit,
                   memory_limit=args.memory_limit, precision=args.precision, runtime=args.runtime, fix=args.fix,
                   compute_scale=args.compute_scale, routing=args.routing, a2a_overlap=args.a2a_overlap,
                   seed=args.seed, **({"planner": "what-if"} if args.what_if else {}))


def run(args) -> int:
    """Run `solver-plan hybrid` on parsed arguments: plan (expert-parallel for a mixture of experts), print
    the table or JSON, write --out and exports; returns the exit code.
    """
    from solver_plan import cli_options as o
    from solver_plan.deadline import command_budget
    from solver_plan.errors import solver_failure_exit
    from solver_plan.files import check_output_path, write_text_atomic
    from solver_plan.hybrid.answer import answer_hybrid

    check_output_path(args.out, "--out")
    o.check_export_arguments(args)  # --export-out checked before any work, like --out
    request = hybrid_request(args)
    if not request.is_moe:  # mixtures of experts: expert-parallel plans (issue 24)
        check_model_name(args.model)
    deadline = command_budget(request.time_limit, getattr(args, "started", None))
    report = o.check(args, request, answer_hybrid, request, deadline)
    result = report.result
    if request.is_moe:
        from solver_plan.hybrid.moe_cli import print_moe
        code = print_moe(args, report)
        if result.plan is not None and result.status.has_solution:
            o.write_export(args, result.to_dict())  # ep, etp, capacity as each runtime takes them (export/)
        return code
    if args.out:  # before printing: a closed pipe must not lose the plan
        write_text_atomic(args.out, json.dumps(result.to_dict(), indent=2) + "\n")
    print(result.table())
    if result.plan is not None and result.status.has_solution:
        o.write_export(args, result.to_dict())
    if args.out:
        print(f"wrote {args.out}")
    if result.solver_failure:  # priced with a fallback block plan: say so on stderr and exit distinctly
        return solver_failure_exit(result.solver_failure)
    return 0 if result.status.has_solution else 1
