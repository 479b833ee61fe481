"""A DeepSpeed ds_config JSON (keys as deepspeed/runtime/config.py reads them; checked with
DeepSpeedConfig of deepspeed 0.19 by scripts/check_exports.py): batch arithmetic, ZeRO stage,
precision, tensor parallelism (AutoTP), the pipeline engine's activation checkpointing.

Only keys DeepSpeed reads go at the top level. What belongs in the training script
(`PipelineModule(num_stages=..., partition_method=...)`, its topology) and what DeepSpeed cannot do
at all is under `solver_plan` (DeepSpeed ignores that key): `pipeline_module` holds the arguments
to pass, `not_expressible` one line per planned setting DeepSpeed will not apply; expert-parallel
plans add `moe_layer`, the `deepspeed.moe.layer.MoE` arguments, and `moe_layers`, the layers that
have experts (deepspeed_moe.py).
"""
from __future__ import annotations

import json

from solver_plan.export import deepspeed_moe
from solver_plan.export.common import (attention_lost, block_config_loss, offloads_activations, offloads_optimizer, refuse_offload,
                                       refuse_schedule)
from solver_plan.export.moe_view import plan_view


def _batch_keys(v, lost: list[str]) -> dict:
    """DeepSpeed asserts train_batch_size == micro x accumulation x its data-parallel size. With a
    pipeline that size comes from PipelineModule's topology (dp); with AutoTP alone (no mpu) it is
    the world size, which counts the tp ranks sharing each micro-batch: train_batch_size is left
    for DeepSpeed to derive (micro x accumulation x world = global batch x tp)."""
    keys = {"train_micro_batch_size_per_gpu": v.micro_batch_size, "gradient_accumulation_steps": v.micro_batches}
    if v.pp == 1 and v.tp * v.cp > 1:
        lost.append(f"train_batch_size: without a pipeline topology DeepSpeed counts all {v.devices} ranks in its "
                    f"batch arithmetic, so it reports micro x accumulation x world = {v.global_batch * v.tp * v.cp} "
                    f"(the plan's global batch {v.global_batch} x {v.tp * v.cp} ranks reading each micro-batch); "
                    "left for DeepSpeed to derive")
        return keys
    return {"train_batch_size": v.global_batch, **keys}


def export_deepspeed(d: dict) -> str:
    """A hybrid plan dict as a DeepSpeed ds_config JSON (module docstring), with what DeepSpeed cannot express
    listed under `solver_plan`.
    """
    v = plan_view(d)
    if v.schedule in ("zb-v", "zb-exact"):
        refuse_schedule(v, "DeepSpeed", "its pipeline engine runs 1F1B only")
    if offloads_activations(v):
        # activation_checkpointing.cpu_checkpointing moves the checkpoints of recomputed layers to the
        # host; the plan keeps r blocks' activations there without recomputing them
        refuse_offload(v, "DeepSpeed", "its cpu_checkpointing offloads the inputs of recomputed layers, not the kept "
                       "activations of blocks that are not recomputed")
    lost: list[str] = attention_lost(v, "DeepSpeed")
    config: dict = _batch_keys(v, lost)
    config["zero_optimization"] = {"stage": v.zero_stage}
    if offloads_optimizer(v):
        if v.zero_stage < 1:
            refuse_offload(v, "DeepSpeed", "zero_optimization.offload_optimizer needs ZeRO stage >= 1; the plan has 0")
        # ZeRO-Offload: the optimizer state on the host, DeepSpeedCPUAdam stepping it (stages 1-3)
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
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
    pipeline_module = None
    if v.tp > 1 and v.pp == 1:
        config["tensor_parallel"] = {"autotp_size": v.tp}
    elif v.tp > 1:
        lost.append(f"tensor parallelism {v.tp} inside a pipeline: AutoTP does not compose with PipelineModule; build "
                    f"the model with tensor-parallel layers and PipeModelDataParallelTopology(num_pp={v.pp}, "
                    f"num_mp={v.tp}, num_dp={v.dp})")
    mode = v.strongest_recompute
    if len(set(v.recompute_modes)) > 1:
        lost.append(f"per-stage recomputation {list(v.recompute_modes)}: DeepSpeed checkpoints alike in every stage; "
                    f"exported as {mode} everywhere (memory within the plan, slower on the stages planned with less)")
    if v.pp > 1:
        # the pipeline engine reads pipeline.activation_checkpoint_interval (layers per checkpoint;
        # 0: none): 1 checkpoints every layer, DeepSpeed's only granularity
        config["pipeline"] = {"activation_checkpoint_interval": 1 if mode != "none" else 0}
        pipeline_module = {"num_stages": v.pp, "partition_method": "uniform"}
        if not v.even_stages:
            lost.append(f"uneven stages {list(v.stage_layers)}: PipelineModule partitions by 'uniform', 'parameters' "
                        "or 'type:REGEX', never by given sizes; exported as uniform")
    if mode != "none":
        config["activation_checkpointing"] = {"partition_activations": v.sequence_parallel,
                                              "contiguous_memory_optimization": False, "cpu_checkpointing": False}
        if v.pp == 1:
            lost.append(f"{mode} recomputation without a pipeline: wrap each layer with "
                        "deepspeed.checkpointing.checkpoint in the model code (ds_config alone checkpoints nothing)")
        if mode == "selective":
            lost.append("selective recomputation: DeepSpeed checkpoints whole layers (exported as full layer "
                        "checkpoints: memory within the plan, slower than planned)")
    if v.sequence_parallel:
        lost.append("Megatron-style sequence parallelism inside tensor-parallel groups has no ds_config key")
    if v.cp > 1:
        lost.append(f"context parallelism {v.cp} (ring attention over the sequence): DeepSpeed's sequence parallelism "
                    "(Ulysses, sequence_parallel_size) is an all-to-all over heads, set up in the model code")
    if v.dp_shard and v.dp_shard < v.dp * v.cp:
        lost.append(f"hybrid sharding in groups of {v.dp_shard}: ds_config shards ZeRO state over all data-parallel "
                    "ranks (ZeRO-3's MiCS, zero_optimization.mics_shard_size, shards within groups)")
    if v.partial_recompute:
        lost.append(f"partial recomputation ({list(v.recompute_blocks)} blocks per stage): DeepSpeed checkpoints every "
                    "layer (memory within the plan, slower than planned)")
    if v.schedule in ("zb-h1", "zb-h2"):
        lost.append(f"schedule {v.schedule} (zero bubble): DeepSpeed pipelines run 1F1B")
    if v.virtual_stages > 1:
        lost.append(f"interleaved schedule with {v.virtual_stages} virtual stages: DeepSpeed pipelines run 1F1B")
    if v.schedule == "gpipe":
        lost.append("schedule gpipe: DeepSpeed pipelines run 1F1B")
    lost += block_config_loss(v, "DeepSpeed AutoTP")
    section = {"model": v.model, "devices": v.devices, "dp": v.dp, "tp": v.tp, "pp": v.pp,
               "global_batch": v.global_batch, "precision": v.precision}
    if pipeline_module is not None:
        section["pipeline_module"] = pipeline_module
    if v.experts is not None:  # an expert-parallel plan: deepspeed.moe.layer.MoE's arguments (deepspeed_moe.py)
        section["moe_layer"], moe_layers = deepspeed_moe.moe_layer(v, lost)
        if moe_layers is not None:
            section["moe_layers"] = moe_layers
        lost += v.experts.notes
    section["not_expressible"] = lost
    config["solver_plan"] = section
    return json.dumps(config, indent=2) + "\n"
