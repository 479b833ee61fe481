"""A DeepSpeed ds_config JSON (keys as in deepspeed/runtime/config.py, v0.14+): batch arithmetic,
ZeRO stage, precision, pipeline stages; what ds_config cannot say goes under `solver_plan`."""
from __future__ import annotations

import json

from solver_plan.export.common import block_config_loss, hybrid_view


def export_deepspeed(d: dict) -> str:
    v = hybrid_view(d)
    lost: list[str] = []
    config: dict = {
        "train_batch_size": v.global_batch,
        "train_micro_batch_size_per_gpu": v.micro_batch_size,
        "gradient_accumulation_steps": v.micro_batches,
        "zero_optimization": {"stage": v.zero_stage},
    }
    # mixed precision: DeepSpeed's bf16 / fp16 sections (16-bit weights, fp32 master and Adam
    # state); fp32 and tf32: neither (DeepSpeed trains in fp32 by default). Plans without a
    # precision were priced in mixed bf16 on the A100/H100 presets.
    if v.precision in (None, "mixed-bf16", "mixed-fp8"):
        config["bf16"] = {"enabled": True}
    elif v.precision == "mixed-fp16":
        config["fp16"] = {"enabled": True}
    if v.precision == "mixed-fp8":
        lost.append("fp8 GEMMs: ds_config has no key; wrap the model's linear layers with Transformer Engine")
    if v.precision == "tf32":
        lost.append("tf32 matrix units: set torch.backends.cuda.matmul.allow_tf32 = True in the training script")
    if v.tp > 1:
        config["tensor_parallel"] = {"autotp_size": v.tp}
    if v.pp > 1:
        # DeepSpeed's PipelineModule(num_stages=pp, partition_method=...) reads these in user code
        config["pipeline"] = {"stages": v.pp, "partition_method": "uniform" if v.even_stages else "custom",
                              "layers_per_stage": list(v.stage_layers)}
        if not v.even_stages:
            lost.append(f"uneven stages {list(v.stage_layers)}: pass them to PipelineModule as explicit part boundaries")
    if v.recompute != "none":
        config["activation_checkpointing"] = {"partition_activations": v.sequence_parallel,
                                              "contiguous_memory_optimization": False, "cpu_checkpointing": False}
        if v.recompute == "selective":
            lost.append("selective recomputation: DeepSpeed checkpoints whole layers (set in the model code)")
    if v.sequence_parallel:
        lost.append("Megatron-style sequence parallelism inside tensor-parallel groups has no ds_config key")
    if v.virtual_stages > 1:
        lost.append(f"interleaved schedule with {v.virtual_stages} virtual stages: DeepSpeed pipelines run 1F1B")
    if v.schedule == "gpipe":
        lost.append("schedule gpipe: DeepSpeed pipelines run 1F1B")
    lost += block_config_loss(v, "DeepSpeed AutoTP")
    config["solver_plan"] = {"model": v.model, "devices": v.devices, "dp": v.dp, "tp": v.tp, "pp": v.pp,
                             "precision": v.precision, "not_expressible": lost}
    return json.dumps(config, indent=2) + "\n"
