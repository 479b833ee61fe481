"""Megatron-LM command-line arguments (names as in megatron/training/arguments.py, core_r0.9+)."""
from __future__ import annotations

from solver_plan.export.common import block_config_loss, hybrid_view


def export_megatron(d: dict) -> str:
    v = hybrid_view(d)
    flags: list[tuple[str, object]] = [
        ("--tensor-model-parallel-size", v.tp), ("--pipeline-model-parallel-size", v.pp),
        ("--num-layers", v.layers), ("--micro-batch-size", v.micro_batch_size),
        ("--global-batch-size", v.global_batch),
    ]
    lost: list[str] = []
    if v.virtual_stages > 1:
        flags.append(("--num-layers-per-virtual-pipeline-stage", v.layers // (v.pp * v.virtual_stages)))
        if v.layers % (v.pp * v.virtual_stages):
            lost.append(f"{v.layers} layers do not divide into {v.pp} x {v.virtual_stages} virtual stages")
    if not v.even_stages:
        first, last, middle = v.stage_layers[0], v.stage_layers[-1], set(v.stage_layers[1:-1])
        if len(middle) <= 1 and v.virtual_stages == 1:
            flags += [("--decoder-first-pipeline-num-layers", first), ("--decoder-last-pipeline-num-layers", last)]
        else:
            lost.append(f"uneven stages {list(v.stage_layers)}: Megatron-LM sets only the first and last stage sizes")
    if v.sequence_parallel:
        flags.append(("--sequence-parallel", None))
    if v.recompute == "full":
        flags += [("--recompute-granularity", "full"), ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)]
    elif v.recompute == "selective":
        flags.append(("--recompute-granularity", "selective"))
    if v.zero_stage >= 1:
        flags.append(("--use-distributed-optimizer", None))  # optimizer state sharded over dp (ZeRO-1)
    if v.zero_stage >= 2:
        lost.append(f"zero_stage {v.zero_stage}: Megatron-LM's distributed optimizer shards optimizer states only "
                    "(ZeRO-1); gradient/parameter sharding is not exported")
    # precision (megatron/training/arguments.py: --bf16, --fp16; Transformer Engine's --fp8-format
    # hybrid = e4m3 forward, e5m2 gradients); fp32 is Megatron-LM's default, no flag
    if v.precision in ("mixed-bf16", "mixed-fp8"):
        flags.append(("--bf16", None))
    elif v.precision == "mixed-fp16":
        flags.append(("--fp16", None))
    if v.precision == "mixed-fp8":
        flags += [("--fp8-format", "hybrid"), ("--transformer-impl", "transformer_engine")]
    if v.precision == "tf32":
        lost.append("tf32 matrix units: Megatron-LM has no flag (PyTorch's torch.backends.cuda.matmul.allow_tf32)")
    if v.schedule == "gpipe":
        lost.append("schedule gpipe: Megatron-LM runs 1F1B (same bubble, less activation memory)")
    lost += block_config_loss(v, "Megatron-LM")
    header = [f"# Megatron-LM arguments for {v.model}: {v.devices} devices = dp {v.dp} x tp {v.tp} x pp {v.pp} "
              f"(data parallelism is world size / (tp x pp): launch {v.devices} ranks)"
              + (f"; planned in {v.precision}" if v.precision else "")]
    header += [f"# not expressible: {item}" for item in lost]
    arguments = [f"{name} {value}" if value is not None else name for name, value in flags]
    return "\n".join(header) + "\n" + " \\\n".join(arguments) + "\n"
