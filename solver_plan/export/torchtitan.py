"""torchtitan's TOML job-config sections for parallelism, batch and activation checkpointing
(keys as in torchtitan/config/job_config.py, 2025)."""
from __future__ import annotations

from solver_plan.export.common import block_config_loss, hybrid_view

SCHEDULES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved": "Interleaved1F1B"}


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml(x) for x in value) + "]"
    return str(value)


def export_torchtitan(d: dict) -> str:
    v = hybrid_view(d)
    lost: list[str] = []
    # FSDP (dp_shard) shards parameters, gradients and optimizer states (ZeRO-3); DDP (dp_replicate)
    # shards nothing; torchtitan has nothing in between
    shard = v.zero_stage >= 1
    if v.zero_stage in (1, 2) and v.dp > 1:
        lost.append(f"zero_stage {v.zero_stage}: torchtitan shards with FSDP (ZeRO-3) or not at all; exported as FSDP")
    parallelism = {
        "data_parallel_replicate_degree": 1 if shard else v.dp,
        "data_parallel_shard_degree": v.dp if shard else 1,
        "tensor_parallel_degree": v.tp,
        "pipeline_parallel_degree": v.pp,
        "context_parallel_degree": 1,
    }
    if v.pp > 1:
        parallelism["pipeline_parallel_schedule"] = SCHEDULES[v.schedule]
        parallelism["pipeline_parallel_microbatch_size"] = v.micro_batch_size
        if v.virtual_stages > 1 or v.even_stages:
            parallelism["pipeline_parallel_layers_per_stage"] = v.layers // (v.pp * v.virtual_stages)
        if not v.even_stages:
            lost.append(f"uneven stages {list(v.stage_layers)}: torchtitan splits layers evenly "
                        "(or by pipeline_parallel_split_points in module names)")
    if v.tp > 1 and not v.sequence_parallel:
        lost.append("tensor parallelism without sequence parallelism: torchtitan's TP always shards norms by sequence")
    lost += block_config_loss(v, "torchtitan")
    training = {"local_batch_size": v.micro_batch_size * v.micro_batches, "global_batch_size": v.global_batch}
    # precision: torchtitan's FSDP mixed-precision policy (training.mixed_precision_param: bfloat16 or
    # float32; gradients reduced in float32); it has no fp16 policy and no tf32 switch
    if v.precision in ("mixed-bf16", "mixed-fp8"):
        training["mixed_precision_param"] = "bfloat16"
    elif v.precision in ("fp32", "tf32"):
        training["mixed_precision_param"] = "float32"
    elif v.precision == "mixed-fp16":
        training["mixed_precision_param"] = "bfloat16"
        lost.append("mixed fp16: torchtitan's mixed precision is bfloat16 (exported as bfloat16)")
    if v.precision == "mixed-fp8":
        lost.append("fp8 GEMMs: enable torchtitan's float8 converter (model.converters = [\"float8\"])")
    checkpoint = {"mode": {"none": "none", "selective": "selective", "full": "full"}[v.recompute]}
    lines = [f"# torchtitan parallelism for {v.model}: {v.devices} devices = dp {v.dp} x tp {v.tp} x pp {v.pp}"
             + (f"; planned in {v.precision}" if v.precision else "")]
    lines += [f"# not expressible: {item}" for item in lost]
    for section, values in (("parallelism", parallelism), ("training", training), ("activation_checkpoint", checkpoint)):
        lines.append(f"\n[{section}]")
        lines += [f"{key} = {_toml(value)}" for key, value in values.items()]
    return "\n".join(lines) + "\n"
