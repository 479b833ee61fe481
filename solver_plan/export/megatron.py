"""Megatron-LM command-line arguments (megatron/training/arguments.py, core_r0.10 and newer; an
explicit stage layout needs core_v0.13; checked by its own parse_args + validate_args at
core_v0.15.3, main and core_r0.9.0 by scripts/check_exports.py): the model's shape, sequence
length, batch arithmetic, parallelism, recomputation, precision and expert settings the plan
priced; expert-parallel plans add their expert settings (megatron_moe.py). What the flags cannot
say is a `# not expressible:` line."""
from __future__ import annotations

import shlex

from solver_plan.export import megatron_moe
from solver_plan.export.common import (attention_lost, block_config_loss, offloads_activations, offloads_optimizer, refuse_offload,
                                       refuse_schedule)
from solver_plan.export.moe_view import plan_view
from solver_plan.export.model_shape import model_shape


def _model_flags(shape, v, lost: list[str]) -> list[tuple[str, object]]:
    """--num-layers and the shape flags (GPT-2: learned positions, LayerNorm, GELU, biases, tied
    output; the LLaMA family: rotary, RMSNorm, SwiGLU, no biases, grouped-query, untied)."""
    s = shape.spec
    flags: list[tuple[str, object]] = [
        ("--num-layers", v.layers), ("--hidden-size", s.hidden), ("--ffn-hidden-size", s.ffn),
        ("--num-attention-heads", s.heads), ("--seq-length", s.seq), ("--max-position-embeddings", s.positions)]
    if s.head_dim * s.heads != s.hidden:
        flags.append(("--kv-channels", s.head_dim))
    if shape.grouped_query:
        flags += [("--group-query-attention", None), ("--num-query-groups", shape.query_groups)]
    if s.gated_mlp:
        flags.append(("--swiglu", None))
    if s.qk_norm:
        flags.append(("--qk-layernorm", None))  # Qwen3's and Gemma 3's RMS norms on q and k per head
    if s.sandwich_norms:
        lost.append("Gemma's norms after the attention and after the MLP, and its GeGLU MLP: Megatron-LM's GPT model "
                    "has neither (--swiglu trains a SwiGLU MLP of the same shape, priced alike)")
    flags.append(("--normalization", "RMSNorm" if s.rms_norm else "LayerNorm"))
    flags.append(("--position-embedding-type", "learned_absolute" if s.learned_positions else "rope"))
    if not s.tied_embeddings:
        flags.append(("--untie-embeddings-and-output-weights", None))
    if shape.biases == "none":
        flags.append(("--disable-bias-linear", None))
    elif shape.biases == "qkv":
        flags += [("--disable-bias-linear", None), ("--add-qkv-bias", None)]
    elif shape.biases == "mixed":
        lost.append("biases on some projections only: Megatron-LM has biases on all linear layers or on none "
                    "(and --add-qkv-bias)")
    if s.experts > 1:
        flags += [("--num-experts", s.experts), ("--moe-router-topk", s.top_k),
                  ("--moe-token-dispatcher-type", "alltoall")]
        if v.tp > 1:
            # the planner split each layer's experts by the tensor-parallel degree (expert
            # parallelism inside the tp group); Megatron-LM folds that as ep = tp, experts unsplit
            # (--expert-tensor-parallel-size: core_r0.10 and newer; core_r0.9 splits experts by tp)
            flags += [("--expert-model-parallel-size", v.tp), ("--expert-tensor-parallel-size", 1)]
            if not v.sequence_parallel:
                flags.append(("--sequence-parallel", None))
                lost.append("Megatron-LM needs sequence parallelism with experts and tensor parallelism: "
                            "--sequence-parallel added (it only lowers activation memory)")
        lost.append("routing: the plan assumed perfectly balanced experts (no capacity limit, no dropped tokens); "
                    "Megatron-LM's default router is dropless with an auxiliary load-balancing loss")
    return flags


def _stage_flags(v) -> list[tuple[str, object]]:
    """The plan's layers per stage (per virtual stage with an interleaved schedule): nothing when
    Megatron-LM's even split is the plan's, the first/last stage sizes when only those differ, else
    the explicit --pipeline-model-parallel-layout (core_v0.14+): virtual stages in Megatron-LM's
    order (chunk k // pp of rank k mod pp), E the embedding, t a block, L the output and loss."""
    sizes = list(v.stage_layers) if v.virtual_stages == 1 else v.virtual_stage_layers()[0]
    if len(set(sizes)) == 1:
        return [("--num-layers-per-virtual-pipeline-stage", sizes[0])] if v.virtual_stages > 1 else []
    if v.virtual_stages == 1 and len(set(sizes[1:-1])) <= 1:
        return [("--decoder-first-pipeline-num-layers", sizes[0]), ("--decoder-last-pipeline-num-layers", sizes[-1])]
    last = len(sizes) - 1
    layout = "|".join(("E" if k == 0 else "") + (f"t*{n}" if n else "") + ("L" if k == last else "")
                      for k, n in enumerate(sizes))
    return [("--pipeline-model-parallel-layout", layout)]


def _recompute_flags(v, lost: list[str]) -> list[tuple[str, object]]:
    """Megatron-LM applies one recomputation setting to every pipeline stage: a plan whose stages
    differ gets the most any stage needs (memory within the plan, stages planned with less
    recompute more than planned), and the difference is listed."""
    modes = v.recompute_modes
    mode = v.strongest_recompute
    if len(set(modes)) > 1:
        lost.append(f"per-stage recomputation {list(modes)}: Megatron-LM recomputes alike in every stage; "
                    f"exported as {mode} everywhere (memory within the plan, slower than planned on the "
                    "stages planned with less)")
    if mode == "full" and v.partial_recompute:
        # the first N blocks of every stage recomputed in full: N the most any stage planned
        blocks = max(b for m, b in zip(modes, v.recompute_blocks) if m == "full")
        if len({b for m, b in zip(modes, v.recompute_blocks) if m == "full"}) > 1:
            lost.append(f"partial recomputation of {list(v.recompute_blocks)} blocks per stage: Megatron-LM recomputes "
                        f"the first {blocks} blocks of every stage (memory within the plan)")
        return [("--recompute-granularity", "full"), ("--recompute-method", "block"),
                ("--recompute-num-layers", blocks)]
    if mode == "full":
        # every layer checkpointed on its own: the full recomputation the memory terms assume
        return [("--recompute-granularity", "full"), ("--recompute-method", "uniform"), ("--recompute-num-layers", 1)]
    if mode == "selective":
        return [("--recompute-granularity", "selective")]  # the attention core (Korthikanti et al.)
    return []


def _offload_flags(v) -> list[tuple[str, object]]:
    """Host offload as Megatron-core runs it (the plan's `offload_runtimes`): the optimizer shard on the
    host with its CPU Adam step overlapped with the copies (`--optimizer-cpu-offload`, core_v0.12+,
    which validate_args allows only with `--use-precision-aware-optimizer`, itself only with the
    distributed optimizer: default fp32 dtypes, the same numerics); r blocks' activations on the host
    (`--cpu-offloading-num-layers r`, core_v0.16+, which turns on TransformerConfig.cpu_offloading;
    TransformerConfig refuses it with pipelining or recomputation, and r must be below the layers).
    InputError for an offload these flags cannot say."""
    flags: list[tuple[str, object]] = []
    if offloads_optimizer(v):
        if v.zero_stage < 1:
            refuse_offload(v, "Megatron-LM", "--optimizer-cpu-offload needs the distributed optimizer, ZeRO >= 1; "
                           f"the plan has zero_stage {v.zero_stage}")
        flags += [("--optimizer-cpu-offload", None), ("--overlap-cpu-optimizer-d2h-h2d", None),
                  ("--use-precision-aware-optimizer", None)]
    if offloads_activations(v):
        if v.pp > 1 or v.strongest_recompute != "none":
            refuse_offload(v, "Megatron-LM", f"--cpu-offloading-num-layers refuses pipelining and recomputation; the "
                           f"plan has pp {v.pp}, recompute {v.strongest_recompute}")
        blocks = max(v.offload_layers, default=0)
        if not 1 <= blocks < v.layers:
            refuse_offload(v, "Megatron-LM", f"--cpu-offloading-num-layers takes 1 to {v.layers - 1} blocks; the plan's "
                           f"stages[].offload_layers are {list(v.offload_layers)}")
        flags.append(("--cpu-offloading-num-layers", blocks))
    return flags


def _quoted(value) -> str:
    """A flag's value for the shell; a tuple is a flag's several values (nargs)."""
    return " ".join(shlex.quote(str(x)) for x in value) if isinstance(value, tuple) else shlex.quote(str(value))


def export_megatron(d: dict) -> str:
    """A hybrid plan dict as Megatron-LM command-line arguments (module docstring), with comment lines saying
    what Megatron cannot express.
    """
    v = plan_view(d)
    if v.schedule in ("zb-v", "zb-exact"):
        refuse_schedule(v, "Megatron-LM", "Megatron-core runs 1F1B and interleaved 1F1B: no V placement, no schedule "
                        "given action by action")
    lost: list[str] = attention_lost(v, "Megatron-LM")
    shape, unreadable = (None, None) if v.experts is not None else model_shape(v.model)
    if v.experts is not None:  # an expert-parallel plan: its model and expert flags (megatron_moe.py)
        flags = megatron_moe.model_flags(v, lost)
    elif shape is not None:
        flags = _model_flags(shape, v, lost)
    else:
        flags = [("--num-layers", v.layers)]
        lost.append(f"model shape: {unreadable}; add --hidden-size, --ffn-hidden-size, --num-attention-heads, "
                    "--seq-length, --max-position-embeddings and the architecture flags by hand")
    flags += [("--tensor-model-parallel-size", v.tp), ("--pipeline-model-parallel-size", v.pp),
              ("--micro-batch-size", v.micro_batch_size), ("--global-batch-size", v.global_batch)]
    if v.cp > 1:
        flags.append(("--context-parallel-size", v.cp))
    if v.dp_shard and v.dp_shard < v.dp * v.cp:
        # hybrid sharding: the optimizer state sharded within groups of dp_shard ranks, replicated
        # across the (dp x cp) / dp_shard groups (core_v0.11+)
        flags.append(("--num-distributed-optimizer-instances", v.dp * v.cp // v.dp_shard))
    flags += _stage_flags(v)
    if v.sequence_parallel and ("--sequence-parallel", None) not in flags:
        flags.append(("--sequence-parallel", None))
    if v.experts is not None and v.strongest_recompute == "selective":
        flags += megatron_moe.recompute_flags(v, lost)
    else:
        flags += _recompute_flags(v, lost)
    if v.experts is not None:
        flags += megatron_moe.expert_flags(v, lost)
        lost += v.experts.notes
    if v.zero_stage >= 1:
        flags.append(("--use-distributed-optimizer", None))  # optimizer state sharded over dp (ZeRO-1)
    flags += _offload_flags(v)
    if v.zero_stage >= 2 and v.experts is None:  # expert-parallel plans: Megatron FSDP (megatron_moe.sharding_flags)
        lost.append(f"zero_stage {v.zero_stage}: Megatron-LM's distributed optimizer shards optimizer states only "
                    "(ZeRO-1); gradient/parameter sharding is not exported")
    # precision (--bf16, --fp16; Transformer Engine's --fp8-format hybrid = e4m3 forward, e5m2
    # gradients); fp32 is Megatron-LM's default, no flag
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
    if v.schedule.startswith("zb-"):
        lost.append(f"schedule {v.schedule} (zero bubble): Megatron-LM runs 1F1B, with the 1F1B bubble the plan's step "
                    "time did not count")
    lost += block_config_loss(v, "Megatron-LM")
    header = [f"# Megatron-LM arguments for {v.model}: {v.devices} devices = dp {v.dp} x "
              + (f"cp {v.cp} x " if v.cp > 1 else "") + f"tp {v.tp} x pp {v.pp} "
              f"(data parallelism is world size / ({'cp x ' if v.cp > 1 else ''}tp x pp): launch {v.devices} ranks)"
              + (f"; planned in {v.precision}" if v.precision else "")]
    vocab = shape.spec.vocab if shape is not None else getattr(v.experts and v.experts.model, "vocab", None)
    if vocab is not None:
        header.append(f"# vocabulary: the plan priced {vocab} tokens; it comes from your tokenizer "
                      "flags (--tokenizer-type ..., or --vocab-size with NullTokenizer)")
    if any(name == "--expert-tensor-parallel-size" for name, _ in flags):
        header.append("# needs Megatron-LM core_r0.10 or newer (--expert-tensor-parallel-size)")
    if v.experts is not None:
        header.append("# needs a Megatron-LM newer than core_r0.9 (its MoE flags; checked with core_v0.15.3 and main)")
        header.append(megatron_moe.routing_line(v))
    if any(name == "--cpu-offloading-num-layers" for name, _ in flags):
        header.append("# needs Megatron-LM core_v0.16 or newer (--cpu-offloading-num-layers: activation offload)")
    elif any(name == "--optimizer-cpu-offload" for name, _ in flags):
        header.append("# needs Megatron-LM core_v0.12 or newer (--optimizer-cpu-offload)")
    if any(name == "--moe-flex-dispatcher-backend" for name, _ in flags):
        header.append(megatron_moe.FLEX_BACKEND_NEEDS)
    if any(name == "--pipeline-model-parallel-layout" for name, _ in flags):
        header.append("# needs Megatron-LM core_v0.13 or newer (--pipeline-model-parallel-layout: the planned stages)")
    header += [f"# not expressible: {item}" for item in lost]
    arguments = [name if value is None else f"{name} {_quoted(value)}" for name, value in flags]
    return "\n".join(header) + "\n" + " \\\n".join(arguments) + "\n"
