"""torchtitan command-line overrides (torchtitan 0.3: `--module M --config F` selects a Python
config_registry function, `--section.key value` overrides it; checked with torchtitan's own
ConfigManager by scripts/check_exports.py). torchtitan 0.2.x read the same `section.key` names
from a TOML job file (`--job.config_file`), where activation checkpointing was
`activation_checkpoint.mode = "full"` instead of the `activation_checkpoint:full` subcommand.

Stages are written as `parallelism.module_fqns_per_model_part`: the plan's exact layers per stage
(and per virtual stage), the token embedding on the first and the final norm and output on the
last, so torchtitan's own split (which reserves a layer's worth for the embedding and the output)
never applies. The batch: `training.local_batch_size` is what each data-parallel rank runs per
accumulation step; with a pipeline that is micro-batch x micro-batches (the schedule cuts it into
micro-batches of `pipeline_parallel_microbatch_size`), without one it is one micro-batch, and
torchtitan accumulates global / (local x dp) of them. Expert-parallel plans add the expert-parallel
degree and the registered MoE model (torchtitan_moe.py).
"""
from __future__ import annotations

from solver_plan.export import torchtitan_moe
from solver_plan.errors import InputError
from solver_plan.export.common import WHERE, attention_lost, block_config_loss, refuse_offload
from solver_plan.export.moe_view import plan_view
from solver_plan.export.model_shape import model_shape

# torch.distributed.pipelining's get_schedule_class names; ZBVZeroBubble places part i and part
# 2 pp - 1 - i on rank i (torchtitan's _get_pp_rank_to_stage_indices_mapping, "v" style)
SCHEDULES = {"1f1b": "1F1B", "gpipe": "GPipe", "interleaved": "Interleaved1F1B", "zb-v": "ZBVZeroBubble"}
# torchtitan's llama3 config_registry functions and the model each trains (dim, layers, heads,
# kv heads, ffn, vocab): a plan for one of these shapes names it
LLAMA3_CONFIGS = {"llama3_8b": (4096, 32, 32, 8, 14336, 128256), "llama3_70b": (8192, 80, 64, 8, 28672, 128256),
                  "llama3_405b": (16384, 126, 128, 8, 53248, 128256)}
AC_SUBCOMMANDS = {"none": "none", "selective": "selective", "full": "full"}


def _module_and_config(shape, v, lost: list[str]) -> list[str]:
    """`--module llama3 --config F` when torchtitan has the plan's model, else nothing (and a line)."""
    if shape is None:
        lost.append("--module/--config: the model could not be read here; name the config_registry function "
                    "that builds it")
        return []
    s = shape.spec
    llama_like = (s.gated_mlp and s.rms_norm and not s.learned_positions and shape.biases == "none" and s.experts == 1
                  and not s.qk_norm and not s.sandwich_norms)
    key = (s.hidden, v.layers, s.heads, shape.query_groups, s.ffn, s.vocab)
    described = (f"hidden {s.hidden}, {v.layers} layers, {s.heads} heads ({shape.query_groups} key/value), "
                 f"ffn {s.ffn}, vocabulary {s.vocab}")
    if llama_like:
        for name, dims in LLAMA3_CONFIGS.items():
            if dims == key:
                return ["--module llama3", f"--config {name}"]
        lost.append(f"--config: no torchtitan llama3 config trains this shape ({described}); register a "
                    "config_registry function with it and pass --module llama3 --config <it>")
        return ["--module llama3"]
    family = "mixture-of-experts (Mixtral)" if s.experts > 1 else \
        "GPT-2 (learned positions, LayerNorm, biases)" if s.learned_positions else \
        "Gemma (sandwich norms, GeGLU)" if s.sandwich_norms else \
        "llama3 with q/k norms (Qwen3: a flavor of its qwen3 module of this shape)" if s.qk_norm else "this decoder"
    lost.append(f"--module/--config: torchtitan has no {family} model (it ships llama3, qwen3, deepseek_v3, gpt_oss, "
                f"...); register one that builds it ({described}) and pass --module/--config for it")
    return []


def _stage_parts(v, lost: list[str]) -> list[list[str]] | None:
    """Module names per model part: pp parts (one per rank) or pp x virtual parts (looped schedules,
    torchtitan assigns part i to rank i mod pp; ZBVZeroBubble parts i and 2 pp - 1 - i to rank i) with
    the planned layer counts."""
    if v.pp == 1:
        return None
    if v.virtual_stages > 1:
        sizes, planned = v.virtual_stage_layers()  # the plan's blocks per virtual stage
        if not planned and v.layers % len(sizes):
            lost.append(f"{v.layers} layers do not divide into {v.pp} x {v.virtual_stages} virtual stages; "
                        f"the parts below differ by one layer")
    else:
        sizes = list(v.stage_layers)
    names, first = [], 0
    for index, size in enumerate(sizes):
        part = [f"layers.{i}" for i in range(first, first + size)]
        if index == 0:
            part.insert(0, "tok_embeddings")
        if index == len(sizes) - 1:
            part += ["norm", "lm_head"]  # torchtitan <= 0.2 named the output projection "output"
        names.append(part)
        first += size
    return names


def _parts(parts: list[list[str]]) -> str:
    """torchtitan's form of a list of lists of names: one token per part, names comma-separated
    (its ConfigManager reads list[str] as "A,B,C")."""
    return " ".join(",".join(part) for part in parts)


def export_torchtitan(d: dict, schedule_csv: str | None = None) -> str:
    """A hybrid plan dict as torchtitan command-line overrides (module docstring), with comment lines saying
    what torchtitan cannot express. A zb-exact plan runs from its schedule CSV (schedule_csv.py), which
    the caller writes at `schedule_csv` (InputError without it).
    """
    v = plan_view(d)
    _refusals(v)
    if v.schedule == "zb-exact" and v.pp > 1 and not schedule_csv:
        raise InputError("schedule zb-exact: torchtitan runs it from a schedule CSV written beside the export; "
                         "give the export a file (--out / --export-out)", WHERE)
    lost: list[str] = attention_lost(v, "torchtitan")
    shape, _ = (None, None) if v.experts is not None else model_shape(v.model)
    args = torchtitan_moe.module_and_config(v, lost) if v.experts is not None else _module_and_config(shape, v, lost)
    # FSDP (dp_shard) shards parameters, gradients and optimizer states (ZeRO-3); DDP (dp_replicate)
    # shards nothing; torchtitan has nothing in between
    shard = v.zero_stage >= 1
    if v.zero_stage in (1, 2) and v.dp > 1:
        lost.append(f"zero_stage {v.zero_stage}: torchtitan shards with FSDP (ZeRO-3) or not at all; exported as FSDP")
    replicate, sharded = (1, v.dp) if shard else (v.dp, 1)
    if shard and v.dp_shard and v.dp_shard < v.dp * v.cp:
        # hybrid sharding (HSDP): torchtitan's FSDP group is data_parallel_shard_degree x cp ranks
        if v.dp_shard % v.cp == 0 and v.dp % (v.dp_shard // v.cp) == 0:
            sharded = v.dp_shard // v.cp
            replicate = v.dp // sharded
        else:
            lost.append(f"hybrid sharding in groups of {v.dp_shard}: torchtitan's FSDP groups are a multiple of cp "
                        f"{v.cp} dividing dp x cp; exported as FSDP over all {v.dp * v.cp} replicas")
    experts: list[tuple[str, object]] = []
    if v.experts is not None:  # an expert-parallel plan: ep, and the FSDP ranks it borrows (torchtitan_moe.py)
        experts, replicate, sharded = torchtitan_moe.expert_overrides(v, replicate, sharded, lost)
        lost += v.experts.notes
    overrides: list[tuple[str, object]] = [
        ("parallelism.data_parallel_replicate_degree", replicate),
        ("parallelism.data_parallel_shard_degree", sharded),
        ("parallelism.tensor_parallel_degree", v.tp),
        ("parallelism.enable_sequence_parallel", v.sequence_parallel),
        ("parallelism.pipeline_parallel_degree", v.pp),
        ("parallelism.context_parallel_degree", v.cp)]
    if shape is not None and shape.spec.experts > 1 and v.tp > 1:
        overrides.append(("parallelism.expert_parallel_degree", v.tp))  # the planned split of the experts
    overrides += experts
    parts = _stage_parts(v, lost)
    if parts is not None:
        if v.schedule in ("zb-h1", "zb-h2"):
            lost.append(f"schedule {v.schedule} (zero bubble, one stage per rank): torchtitan's zero-bubble schedules "
                        "are looped or V-shaped (InterleavedZeroBubble, ZBVZeroBubble); exported as 1F1B, whose "
                        "bubble the plan's step time did not count")
        if v.schedule == "zb-exact":  # _PipelineScheduleRuntime runs the CSV; its stages one a rank, in order
            overrides += [("parallelism.pipeline_parallel_schedule", "PipelineScheduleMulti"),
                          ("parallelism.pipeline_parallel_schedule_csv", schedule_csv)]
        else:
            overrides.append(("parallelism.pipeline_parallel_schedule", SCHEDULES.get(v.schedule, "1F1B")))
        overrides += [("parallelism.pipeline_parallel_microbatch_size", v.micro_batch_size),
                      ("parallelism.module_fqns_per_model_part", _parts(parts))]
        local = v.micro_batch_size * v.micro_batches
        overrides.append(("training.disable_cuda_graphs", True))  # torchtitan 0.3 refuses them with pipelines
    else:
        local = v.micro_batch_size  # torchtitan accumulates global / (local x dp) micro-batches
        if v.experts is not None and v.experts.ep > 1:  # torchtitan 0.3 refuses CUDA graphs with its all-to-all
            overrides.append(("training.disable_cuda_graphs", True))
    overrides += [("training.local_batch_size", local), ("training.global_batch_size", v.global_batch)]
    seq = shape.spec.seq if shape is not None else getattr(v.experts and v.experts.model, "seq", None)
    if seq is not None:
        overrides.append(("training.seq_len", seq))
    else:
        lost.append("training.seq_len: the model could not be read here; set it to the planned sequence length")
    # precision: torchtitan's FSDP mixed-precision policy (training.mixed_precision_param: bfloat16 or
    # float32; gradients reduced in float32); it has no fp16 policy and no tf32 switch
    if v.precision in (None, "mixed-bf16", "mixed-fp8"):
        overrides.append(("training.mixed_precision_param", "bfloat16"))
    elif v.precision in ("fp32", "tf32"):
        overrides.append(("training.mixed_precision_param", "float32"))
    elif v.precision == "mixed-fp16":
        overrides.append(("training.mixed_precision_param", "bfloat16"))
        lost.append("mixed fp16: torchtitan's mixed precision is bfloat16 (exported as bfloat16)")
    if v.precision == "mixed-fp8":
        lost.append("fp8 GEMMs: pick a config with torchtitan's float8 converter (e.g. llama3_8b's float8 variants)")
    if v.precision == "tf32":
        lost.append("tf32 matrix units: torchtitan has no switch (torch.backends.cuda.matmul.allow_tf32)")
    mode = v.strongest_recompute
    if len(set(v.recompute_modes)) > 1:
        lost.append(f"per-stage recomputation {list(v.recompute_modes)}: torchtitan applies one policy to every "
                    f"stage; exported as {mode} everywhere (memory within the plan, slower on the stages planned "
                    "with less)")
    if v.partial_recompute:
        lost.append(f"partial recomputation ({list(v.recompute_blocks)} blocks per stage): torchtitan's full policy "
                    "recomputes every block (memory within the plan, slower than planned)")
    if mode == "selective":
        priced = "the attention-core recomputation" if v.experts is None else \
            "the recomputation of the per-head q, k, v and the experts' MLPs"
        lost.append("selective recomputation: torchtitan's selective policy is per operator (it keeps matrix "
                    f"products' and attention's outputs, recomputes the rest), not {priced} the plan priced")
    if v.tp > 1 and not v.sequence_parallel:
        lost.append("tensor parallelism without sequence parallelism: exported with enable_sequence_parallel false")
    lost += block_config_loss(v, "torchtitan")
    header = [f"# torchtitan 0.3 command line for {v.model}: {v.devices} devices = dp {v.dp} x "
              + (f"cp {v.cp} x " if v.cp > 1 else "") + f"tp {v.tp} x pp {v.pp}"
              + (f"; planned in {v.precision}" if v.precision else "")]
    if v.schedule == "zb-exact" and parts is not None:
        header.append(f"# schedule zb-exact: the plan's periodic pattern unrolled for {v.micro_batches} micro-batches "
                      f"in {schedule_csv} (give its path as seen from where torchtitan runs)")
    header += [f"# not expressible: {item}" for item in lost]
    args += [_flag(key, value) for key, value in overrides]
    args.append(f"activation_checkpoint:{AC_SUBCOMMANDS[mode]}")  # a tyro subcommand: last
    return "\n".join(header) + "\n" + " \\\n".join(args) + "\n"


def _refusals(v) -> None:
    """InputError for what torchtitan 0.3 cannot run as planned: any host offload (its only
    offload, training.enable_cpu_offload, is FSDP2's CPUOffloadPolicy: parameters, gradients and
    optimizer state all on the host, the optimizer stepping there; it has no activation offload)."""
    if v.offload in ("optimizer", "both"):
        refuse_offload(v, "torchtitan 0.3", "its training.enable_cpu_offload is FSDP2's full CPU offload, the "
                       "parameters on the host too, not the planned optimizer shard alone")
    if v.offload == "activations":
        refuse_offload(v, "torchtitan 0.3", "it has no activation offload")


def _flag(key: str, value) -> str:
    """tyro's forms: `--section.key value`; a boolean is `--section.key` or `--section.no_key`."""
    if isinstance(value, bool):
        section, _, name = key.rpartition(".")
        return f"--{key}" if value else f"--{section}.no_{name}"
    return f"--{key} {value}"
