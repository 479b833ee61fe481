"""Allocator traces on one GPU: every allocation and free of a few training steps, to check an
allocator simulation against (the mechanism behind reserved-but-unallocated memory).

    python scripts/trace_allocator.py --out DIR [--alloc-conf expandable_segments:True] [--dry-run]

For each case it records PyTorch's allocator history (torch.cuda.memory._record_memory_history)
from an empty allocator (after gc.collect() and empty_cache()) through building the model and two
training steps, and writes
- `<case>.csv.gz`: one row per allocator event of the caching allocator's trace (action: alloc,
  free_requested, free_completed, segment_map, segment_unmap, segment_alloc, segment_free; address,
  size, stream; `where`: the innermost Python frame of this kit or torch.nn / torch.autograd that
  asked, empty for the autograd engine's C++ thread);
- `summary.json`: per case the peak allocated and reserved bytes of the second step
  (torch.cuda.max_memory_allocated / max_memory_reserved after reset_peak_memory_stats) and of the
  first (`first_step_*`: building the case and its first step, compilation included), the number of
  events, the allocator setting, device and versions.

Cases (the kit's builders, scripts/measure_device.py):
- `decoder-128k`, `decoder-32k`: the kit's eager whole decoder (model-memory.csv's cases);
- `fsdp-128k`: the kit's FSDP2 one-rank decoder (fsdp-memory.csv's first case);
- `stage-1f1b`: one pipeline stage as torchtitan runs stage 0 of pp stages under 1F1B: `layers`
  torchtitan blocks with full activation checkpointing, fp32 parameters under bf16 autocast (fp32
  gradients accumulated over the micro-batches, as FSDP2 accumulates unsharded fp32 gradients while
  gradient sync is off), one receive buffer per micro-batch for its input and one for its output's
  gradient allocated at the step's start (torch.distributed.pipelining's per-micro-batch buffers),
  each micro-batch's output kept until its backward; forwards and backwards in 1F1B order
  (`stage-1f1b-deep`: 8 blocks, 16 micro-batches);
- on torch's fake process group (torch.testing's FakeStore, backend "fake": collectives move no data,
  every buffer is allocated as on a real rank), rank 0 of: `fsdp8-128k` (the FSDP2 decoder over 8
  ranks), `loss-parallel` (torchtitan's loss under loss_parallel, TP 8), `tp-stage-1f1b` (torchtitan's
  TP 8 with sequence parallelism, 405B's block shapes, a first stage under 1F1B), `tp-head-70b` and
  `tp-head-405b` (a last stage: blocks, final norm, output layer with Shard(-1) logits, loss_parallel),
  `fsdp-tp-stage-1f1b` (FSDP2 x TP x PP as torchtitan runs 405B: rank 0 of a fake (dp 8, tp 8) mesh,
  the tp-stage-1f1b blocks in fp32 under fully_shard(reshard_after_forward=False) with bf16 compute
  and fp32 reduction, gradient sync off until the last micro-batch, AdamW; `-32k`: micro-batches of one
  32,768-token sequence, the same tokens as 4 of 8,192; `-compile`: each block compiled as torchtitan's
  training.compile does; `-compile-fp8`: also torchao's float8 Linears, TP styles and fp8 all-gather, as
  torchtitan's 405B preset runs), and the same stage run by
  torch.distributed.pipelining's own PipelineStage and schedule on a fake (pp 8, dp 8, tp 8) mesh:
  `torch-1f1b` (Schedule1F1B, stage 0) and `torch-interleaved` (ScheduleInterleaved1F1B, 2 chunks of 2
  blocks, stages 0 and 8 of 16).
`replay` gives a trace's peaks (all streams and per stream): tests/test_allocator_traces.py checks
the memory model's reserved-memory terms against them.
`--dry-run` writes the files from a synthetic trace (no torch) so the writers are tested on CPU.
"""
from __future__ import annotations

import argparse
import csv
import gc
import gzip
import json
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
import measure_device as kit  # noqa: E402  (the kit's builders and cases, a script beside this one)

EVENT_COLUMNS = ("seq", "action", "addr", "size", "stream", "where")
KEPT_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_map", "segment_unmap", "segment_alloc",
                "segment_free")


@dataclass(frozen=True)
class StageCase:
    """Stage 0 of `pp` stages under 1F1B (`micro_batches` micro-batches, min(pp, micro_batches) in
    flight), `layers` torchtitan blocks of `shapes` under full activation checkpointing. With `tp` = 1:
    fp32 parameters under bf16 autocast, one GPU. With `tp` > 1: rank 0 of a `tp`-way tensor-parallel
    group (sequence parallel, torchtitan's apply_tp plan) on a fake process group (torch.testing's
    FakeStore, backend "fake": collectives move no data, every buffer is allocated as on a real rank),
    bf16 parameters and gradients."""
    layers: int
    pp: int
    micro_batches: int
    shapes: kit.BlockCase  # the block's shapes (its style and checkpointing are the case's own)
    tp: int = 1


@dataclass(frozen=True)
class LossParallelCase:
    """The loss as torchtitan computes it under tensor parallelism (loss_parallel, the output layer
    ColwiseParallel with Shard(-1) logits), rank 0 of a fake `tp`-way group: F.cross_entropy on the
    fp32 cast of the vocabulary-sharded bf16 logits, the prediction dropped before backward."""
    tokens: int
    hidden: int
    vocab: int
    tp: int


@dataclass(frozen=True)
class ShardedFsdpCase:
    """The kit's FSDP2 decoder (`case`, a measure_device.FsdpCase) sharded over `world` ranks of a fake
    process group, rank 0: its all-gather and reduce-scatter buffers as on a real rank."""
    case: object
    world: int


@dataclass(frozen=True)
class TensorParallelHeadCase:
    """The last pipeline stage (or a whole model without pipelining) as rank 0 of torchtitan's `tp`-way
    tensor parallelism on a fake process group: `layers` blocks under full activation checkpointing,
    the final RMSNorm (SequenceParallel), the output projection ColwiseParallel(input_layouts=Shard(1),
    output_layouts=Shard(-1)) and the loss under loss_parallel, one micro-batch, bf16 parameters."""
    layers: int
    tp: int
    shapes: kit.BlockCase  # the block's shapes (its style and checkpointing are the case's own)
    vocab: int


@dataclass(frozen=True)
class PipelinedFsdpCase:
    """A pipeline stage as torchtitan runs FSDP2 x TP x PP (`stage`: a StageCase with tp > 1), rank 0 of
    a fake (`dp`, tp) mesh: every block its own fully_shard over the dp dimension and the stage module
    the root, all with reshard_after_forward=False (torchtitan 9dec370 apply_fsdp under PP), fp32
    parameters with MixedPrecisionPolicy(bf16, reduce fp32); torch.distributed.pipelining's FSDP
    protocol (stage.py backward_maybe_with_nosync): every backward but the step's last with
    requires_gradient_sync, is_last_backward and reshard_after_backward False, so the unsharded fp32
    gradients accumulate; then AdamW's step and zero_grad.
    `compiled` and `float8`: as torchtitan 9dec370's llama3_405b.toml runs it (training.compile,
    float8.enable_float8_linear, enable_fsdp_float8_all_gather, precompute_float8_dynamic_scale_for_fsdp):
    the blocks' Linears converted by torchao's convert_to_float8_training before tensor parallelism
    with Float8ColwiseParallel / Float8RowwiseParallel / PrepareFloat8ModuleInput, each block compiled
    after activation checkpointing and before fully_shard, and the fp8 scales precomputed after the
    optimizer step. Async TP is left out: its symmetric memory needs real peers."""
    stage: StageCase
    dp: int
    compiled: bool = False  # each block torch.compile(fullgraph=True) after TP and AC, before FSDP
    float8: bool = False  # torchao Float8Linear (dynamic scaling), its float8 TP styles, fp8 all-gather


@dataclass(frozen=True)
class TorchScheduleCase:
    """`PipelinedFsdpCase`'s stage run by torch.distributed.pipelining itself: PipelineStage and
    Schedule1F1B (`virtual_stages` 1: one stage of `layers` blocks, stage 0 of pp) or
    ScheduleInterleaved1F1B (v > 1: v chunks of layers / v blocks, stages 0, pp, ... of v pp), rank 0 of
    a fake (pp, dp, tp) mesh; each chunk its own FSDP2 root, as torchtitan wraps model chunks. The
    schedule's own buffers and FSDP protocol, not the emulation's."""
    fsdp: PipelinedFsdpCase
    virtual_stages: int = 1


LLAMA_8B_BLOCK = kit.BlockCase("titan", batch=1, seq=8192, hidden=4096, heads=32, kv_heads=8, ffn=14336, ac="full")
LLAMA_405B_BLOCK = kit.BlockCase("titan", batch=4, seq=8192, hidden=16384, heads=128, kv_heads=8, ffn=53248,
                                 ac="full")


def plan_cases():
    decoder_128k = kit.ModelCase(2, 1, 8192, 4096, 32, 8, 14336, 128256)
    decoder_32k = kit.ModelCase(2, 2, 4096, 4096, 32, 8, 14336, 32000)
    return {
        "decoder-128k": decoder_128k,
        "decoder-32k": decoder_32k,
        "fsdp-128k": kit.FsdpCase(kit.ModelCase(4, 1, 8192, 4096, 32, 8, 14336, 128256)),
        "stage-1f1b": StageCase(layers=4, pp=4, micro_batches=8, shapes=LLAMA_8B_BLOCK),
        "fsdp8-128k": ShardedFsdpCase(kit.FsdpCase(kit.ModelCase(4, 1, 8192, 4096, 32, 8, 14336, 128256)), 8),
        "loss-parallel": LossParallelCase(tokens=4 * 8192, hidden=16384, vocab=128256, tp=8),
        "tp-stage-1f1b": StageCase(layers=4, pp=8, micro_batches=8, shapes=LLAMA_405B_BLOCK, tp=8),
        "tp-head-70b": TensorParallelHeadCase(layers=4, tp=8, shapes=kit.BlockCase("titan", 16, 8192, 8192, 64, 8, 28672,
                                                                                  ac="full"), vocab=128256),
        "tp-head-405b": TensorParallelHeadCase(layers=4, tp=8, shapes=LLAMA_405B_BLOCK, vocab=128256),
        "stage-1f1b-deep": StageCase(layers=8, pp=8, micro_batches=16, shapes=LLAMA_8B_BLOCK),
        "fsdp-tp-stage-1f1b": PipelinedFsdpCase(StageCase(layers=4, pp=8, micro_batches=8, shapes=LLAMA_405B_BLOCK,
                                                          tp=8), dp=8),
        "fsdp-tp-stage-1f1b-32k": PipelinedFsdpCase(StageCase(layers=4, pp=8, micro_batches=8, tp=8,
                                                              shapes=replace(LLAMA_405B_BLOCK, batch=1, seq=32768)),
                                                    dp=8),
        "fsdp-tp-stage-1f1b-compile": PipelinedFsdpCase(StageCase(layers=4, pp=8, micro_batches=8,
                                                                  shapes=LLAMA_405B_BLOCK, tp=8), dp=8, compiled=True),
        "fsdp-tp-stage-1f1b-compile-fp8": PipelinedFsdpCase(StageCase(layers=4, pp=8, micro_batches=8,
                                                                      shapes=LLAMA_405B_BLOCK, tp=8), dp=8,
                                                            compiled=True, float8=True),
        "fsdp-tp-stage-1f1b-32k-compile-fp8": PipelinedFsdpCase(
            StageCase(layers=4, pp=8, micro_batches=8, tp=8, shapes=replace(LLAMA_405B_BLOCK, batch=1, seq=32768)),
            dp=8, compiled=True, float8=True),
        "torch-1f1b": TorchScheduleCase(PipelinedFsdpCase(StageCase(layers=4, pp=8, micro_batches=8,
                                                                    shapes=LLAMA_405B_BLOCK, tp=8), dp=8)),
        "torch-interleaved": TorchScheduleCase(PipelinedFsdpCase(StageCase(layers=4, pp=8, micro_batches=8,
                                                                           shapes=LLAMA_405B_BLOCK, tp=8), dp=8),
                                               virtual_stages=2),
    }


def one_f_one_b(pp: int, micro_batches: int, stage: int = 0) -> list[tuple[str, int]]:
    """The order of ('F', i) and ('B', i) stage `stage` of `pp` runs under 1F1B."""
    warmup = min(pp - stage, micro_batches)
    order, f, b = [], 0, 0
    for _ in range(warmup):
        order.append(("F", f))
        f += 1
    while b < micro_batches:
        order.append(("B", b))
        b += 1
        if f < micro_batches:
            order.append(("F", f))
            f += 1
    return order


def _where(frames) -> str:
    for frame in frames or ():
        name = str(frame.get("filename", ""))
        if name.endswith(("trace_allocator.py", "measure_device.py")) or "/torch/nn/" in name \
                or "/torch/autograd/" in name or "/torch/utils/checkpoint" in name or "/fsdp/" in name \
                or "/torch/optim/" in name:
            return f"{Path(name).name}:{frame.get('line')}:{frame.get('name')}"
    return ""


def events_of(snapshot) -> list[dict]:
    trace = snapshot["device_traces"][0] if snapshot.get("device_traces") else []
    rows = []
    for i, event in enumerate(trace):
        if event.get("action") not in KEPT_ACTIONS:
            continue
        rows.append({"seq": i, "action": event["action"], "addr": int(event.get("addr", 0)),
                     "size": int(event.get("size", 0)), "stream": int(event.get("stream", 0)),
                     "where": _where(event.get("frames"))})
    return rows


@dataclass(frozen=True)
class Replay:
    """Peaks of a trace replayed event by event: bytes allocated and bytes mapped (reserved), over all
    streams together and per stream (each stream's own maxima)."""
    allocated: int
    mapped: int
    streams: dict


def replay(rows) -> Replay:
    """Replays allocator events (`events_of` rows or read_events): an alloc adds its size to its stream,
    a free_completed takes it off, segment_map / segment_alloc add mapped bytes, segment_unmap /
    segment_free take them off."""
    live: dict[int, tuple[int, int]] = {}
    allocated: dict[int, int] = {}
    mapped: dict[int, int] = {}
    peaks: dict[int, list[int]] = {}
    total_allocated = total_mapped = peak_allocated = peak_mapped = 0
    for row in rows:
        action, addr, size, stream = row["action"], int(row["addr"]), int(row["size"]), int(row["stream"])
        if action == "alloc":
            live[addr] = (size, stream)
            allocated[stream] = allocated.get(stream, 0) + size
            total_allocated += size
        elif action == "free_completed" and addr in live:
            size, stream = live.pop(addr)
            allocated[stream] -= size
            total_allocated -= size
        elif action in ("segment_map", "segment_alloc"):
            mapped[stream] = mapped.get(stream, 0) + size
            total_mapped += size
        elif action in ("segment_unmap", "segment_free"):
            mapped[stream] = mapped.get(stream, 0) - size
            total_mapped -= size
        peak = peaks.setdefault(stream, [0, 0])
        peak[0], peak[1] = max(peak[0], allocated.get(stream, 0)), max(peak[1], mapped.get(stream, 0))
        peak_allocated, peak_mapped = max(peak_allocated, total_allocated), max(peak_mapped, total_mapped)
    return Replay(peak_allocated, peak_mapped, {k: tuple(v) for k, v in peaks.items()})


def predicted_memory(name: str):
    """(allocated, reserved) bytes hybrid/memory.py predicts for trace case `name`, or None where no
    stage of the model matches it (loss-parallel is the loss alone; the stage-1f1b cases train fp32
    parameters under autocast, whose cast weights the model does not price). The TP last stages have
    no pipeline receive buffers: the model's (`StageMemory.buffers` of a last stage) are taken off."""
    case = plan_cases()[name]
    if isinstance(case, kit.ModelCase):
        m = kit.model_memory(case)
    elif isinstance(case, kit.FsdpCase):
        m = kit.fsdp_memory(case)
    elif isinstance(case, ShardedFsdpCase):
        m = kit.fsdp_memory(case.case, dp=case.world)
    elif isinstance(case, StageCase) and case.tp > 1:  # a first stage's micro-batches in flight, no embedding
        m = tensor_parallel_memory(case.shapes, case.tp, case.layers, stage=1, pp=case.pp,
                                   micro_batches=case.micro_batches, in_flight=min(case.pp, case.micro_batches))
    elif isinstance(case, TensorParallelHeadCase):
        m = tensor_parallel_memory(case.shapes, case.tp, case.layers, stage=1, pp=2, micro_batches=1,
                                   vocab=case.vocab)
        return m.allocated - m.buffers, m.reserved - m.buffers
    elif isinstance(case, PipelinedFsdpCase):
        m = pipelined_fsdp_memory(case)
    elif isinstance(case, TorchScheduleCase):
        m = pipelined_fsdp_memory(case.fsdp, case.virtual_stages)
    else:
        return None
    return m.allocated, m.reserved


def tensor_parallel_memory(shapes, tp: int, layers: int, stage: int, pp: int, micro_batches: int,
                           in_flight=None, vocab: int = 128256):
    """stage_memory of torchtitan blocks of `shapes` under TP `tp` with sequence parallelism and full
    recomputation, bf16 parameters and gradients, no optimizer (the traces' tensor-parallel cases)."""
    from solver_plan.cost.model_state import ParameterState
    from solver_plan.hybrid import memory as mem
    spec = replace(kit.block_spec(shapes), layers=layers, vocab=vocab, tied_embeddings=False)
    state = mem.StateBytes(ParameterState(weights=2.0, gradients=2.0), activations=2.0)
    return mem.stage_memory(spec, layers=layers, stage=stage, pp=pp, tp=tp, dp=1, micro_batch=shapes.batch,
                            micro_batches=micro_batches, recompute="full", sequence_parallel=True, zero_stage=0,
                            schedule="1f1b", state=state, runtime="torchtitan", in_flight=in_flight)


def pipelined_fsdp_memory(case: PipelinedFsdpCase, virtual_stages: int = 1):
    """stage_memory of the case as the hybrid planner prices FSDP under a pipeline (hybrid/evaluate.py
    memory_of: ZeRO-3 priced as fsdp.state_zero's 1 with `pipelined_fsdp`), torchtitan's runtime and
    state (fp32 sharded parameters, fp32 gradients, Adam moments): a stage without embedding or output
    layer (stage 1: its receive buffers are those of micro-batches not in flight, none when all m are)
    holding the first stage's micro-batches in flight under 1F1B, or under the interleaved schedule
    with `virtual_stages` chunks (all m x v chunk passes for m = p: the same block-micro-batches).
    The runtime profile is the one the published runs of the case's settings name: torchtitan,
    torchtitan-compile, or torchtitan-compile-fp8-gather (fp8 GEMMs) for a compiled float8 case."""
    from solver_plan.cost.precision import TrainingPrecision
    from solver_plan.hybrid import memory as mem
    from solver_plan.runtime import resolve_runtime
    st = case.stage
    spec = replace(kit.block_spec(st.shapes), layers=st.layers, tied_embeddings=False)
    runtime = ("torchtitan-compile-fp8-gather" if case.float8 else "torchtitan-compile") if case.compiled \
        else "torchtitan"
    if case.float8 and not case.compiled:
        raise ValueError("no runtime profile prices float8 without torch.compile")
    base = mem.precision_state(TrainingPrecision.mixed("fp8")) if case.float8 else mem.MIXED_PRECISION
    state = mem.runtime_state(base, resolve_runtime(runtime))
    schedule = "1f1b" if virtual_stages == 1 else "interleaved"
    return mem.stage_memory(spec, layers=st.layers, stage=1, pp=st.pp, tp=st.tp, dp=case.dp,
                            micro_batch=st.shapes.batch, micro_batches=st.micro_batches, recompute="full",
                            sequence_parallel=True, zero_stage=1, schedule=schedule,
                            virtual_stages=virtual_stages, state=state, runtime=runtime,
                            in_flight=min(st.pp, st.micro_batches), pipelined_fsdp=True)


def read_events(path: Path) -> list[dict]:
    """The rows `write_events` wrote."""
    with gzip.open(path, "rt", newline="") as f:
        return list(csv.DictReader(f))


def write_events(path: Path, rows: list[dict]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with gzip.open(tmp, "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=EVENT_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def run_case(torch, name, case) -> tuple[dict, list[dict]]:
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    before = torch.cuda.memory_allocated()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=2_000_000)
    if isinstance(case, TorchScheduleCase):
        step = torch_schedule_step(torch, case, "cuda")
    elif isinstance(case, PipelinedFsdpCase):
        step = pipelined_fsdp_step(torch, case, "cuda")
    elif isinstance(case, StageCase):
        step = stage_step(torch, case) if case.tp == 1 else tp_stage_step(torch, case, "cuda")
    elif isinstance(case, ShardedFsdpCase):
        step = fsdp_step(torch, kit, case.case, world=case.world)
    elif isinstance(case, LossParallelCase):
        step = loss_parallel_step(torch, case, "cuda")
    elif isinstance(case, TensorParallelHeadCase):
        step = tp_head_step(torch, case, "cuda")
    elif isinstance(case, kit.FsdpCase):
        step = fsdp_step(torch, kit, case)
    else:
        step = decoder_step(torch, kit, case)
    step()
    torch.cuda.synchronize()
    # the first step's (compilation, lazy state) peaks: a run's reported high-water mark includes them
    first = {"first_step_peak_allocated_bytes": torch.cuda.max_memory_allocated(),
             "first_step_peak_reserved_bytes": torch.cuda.max_memory_reserved()}
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    peak, reserved = torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    rows = events_of(snapshot)
    del step
    gc.collect()
    return {"peak_allocated_bytes": peak, "peak_reserved_bytes": reserved, "allocated_before_bytes": before,
            "events": len(rows), **first}, rows


def decoder_step(torch, kit, case):
    model = kit.make_model(torch, case)
    loss_of = kit.decoder_loss(torch, model, case)

    def step():
        model.zero_grad(set_to_none=False)
        loss_of().backward()
    return step


def fsdp_step(torch, kit, case, world: int = 1):
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    mesh = None
    if world > 1:
        mesh = fake_mesh(torch, world, "cuda")
    elif not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1)
    model = kit.make_model(torch, case.model).float()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy, mesh=mesh)
    fully_shard(model, mp_policy=policy, mesh=mesh)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    loss_of = kit.decoder_loss(torch, model, case.model)

    def step():
        loss_of().backward()
        opt.step()
        opt.zero_grad()
    return step


def run_one_f_one_b(torch, blocks, shape, pp: int, micro_batches: int, device: str, autocast: bool,
                    before_backward=None):
    """One step of a first stage under 1F1B: a receive buffer per micro-batch for its input and one for
    its output's gradient allocated at the start (torch.distributed.pipelining's), each output kept
    until its backward, the parameters' gradients accumulated over the micro-batches.
    `before_backward(last)`: called before each backward, `last` True for the step's last one (the
    pipelined FSDP protocol); without it the gradients are dropped at the start."""
    import contextlib
    if before_backward is None:
        for p in blocks.parameters():
            p.grad = None
    done = 0
    inputs = [torch.randn(shape, device=device, dtype=torch.bfloat16) for _ in range(micro_batches)]
    grads_in = [torch.empty(shape, device=device, dtype=torch.bfloat16) for _ in range(micro_batches)]
    outputs = {}
    for kind, i in one_f_one_b(pp, micro_batches):
        if kind == "F":
            scope = torch.autocast(device, dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
            with scope:
                outputs[i] = blocks(inputs[i].requires_grad_(True))
        else:
            out = outputs.pop(i)
            grad = grads_in[i].normal_()
            done += 1
            if before_backward is not None:
                before_backward(done == micro_batches)
            out.backward(grad if grad.dtype == out.dtype else grad.to(out.dtype))
            inputs[i].grad = None


def stage_step(torch, case: StageCase):
    import torch.nn as nn
    sh = case.shapes
    blocks = nn.Sequential(*(kit.make_titan_block(torch, sh) for _ in range(case.layers))).float()
    return lambda: run_one_f_one_b(torch, blocks, (sh.batch, sh.seq, sh.hidden), case.pp, case.micro_batches,
                                   "cuda", autocast=True)


def fake_mesh(torch, tp: int, device: str, dp: int = 1, pp: int = 1):
    """A `tp`-rank device mesh on torch's fake process group (rank 0; collectives move no data); with
    `dp` > 1 a (dp, tp) mesh named ("dp", "tp"), tp fastest; with `pp` > 1 a (pp, dp, tp) one."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if dist.is_initialized():
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=tp * dp * pp)
    if pp > 1:
        return init_device_mesh(device, (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    if dp == 1:
        return init_device_mesh(device, (tp,))
    return init_device_mesh(device, (dp, tp), mesh_dim_names=("dp", "tp"))


def loss_parallel_step(torch, case: LossParallelCase, device: str):
    import torch.nn.functional as F
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import loss_parallel
    mesh = fake_mesh(torch, case.tp, device)
    x = torch.randn(case.tokens, case.hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(case.vocab // case.tp, case.hidden, device=device, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, case.vocab, (case.tokens,), device=device)

    def step():
        x.grad, w.grad = None, None
        pred = DTensor.from_local(x @ w.t(), mesh, [Shard(-1)])
        with loss_parallel():
            loss = F.cross_entropy(pred.float(), labels)
            del pred
            loss.backward()
    return step


def make_tp_block(torch, case, mesh, device: str, dtype=None, float8: bool = False):
    """torchtitan's TransformerBlock (no rotary embedding) parallelised as its apply_tp does, under full
    activation checkpointing; parameters in `dtype` (default bf16). `float8`: its Linears converted to
    torchao's Float8Linear first (fp8 all-gather under FSDP) and its float8 TP styles, as apply_tp does
    with enable_float8."""
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel, parallelize_module)
    from torch.utils.checkpoint import checkpoint
    h, a, kv, f = case.hidden, case.heads, case.kv_heads, case.ffn
    d = h // a

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.wq, self.wk = nn.Linear(h, a * d, bias=False), nn.Linear(h, kv * d, bias=False)
            self.wv, self.wo = nn.Linear(h, kv * d, bias=False), nn.Linear(a * d, h, bias=False)

        def forward(self, x):
            b, s = x.shape[0], x.shape[1]
            q = self.wq(x).view(b, s, -1, d)
            k, v = self.wk(x).view(b, s, -1, d), self.wv(x).view(b, s, -1, d)
            rep = q.shape[2] // k.shape[2]
            k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                               is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    class FeedForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.w1, self.w3 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
            self.w2 = nn.Linear(f, h, bias=False)

        def forward(self, x):
            return self.w2(F.silu(self.w1(x)) * self.w3(x))

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(h), nn.RMSNorm(h)
            self.attention, self.feed_forward = Attention(), FeedForward()

        def forward(self, x):
            x = x + self.attention(self.attention_norm(x))
            return x + self.feed_forward(self.ffn_norm(x))

    inner = Inner().to(device=device, dtype=dtype or torch.bfloat16)
    colwise, rowwise, prepare_input = ColwiseParallel, RowwiseParallel, PrepareModuleInput
    if float8:
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        from torchao.float8.float8_tensor_parallel import (Float8ColwiseParallel, Float8RowwiseParallel,
                                                           PrepareFloat8ModuleInput)
        convert_to_float8_training(inner, config=Float8LinearConfig(enable_fsdp_float8_all_gather=True))
        colwise, rowwise, prepare_input = Float8ColwiseParallel, Float8RowwiseParallel, PrepareFloat8ModuleInput
    parallelize_module(inner, mesh, {
        "attention_norm": SequenceParallel(),
        "attention": prepare_input(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "attention.wq": colwise(), "attention.wk": colwise(), "attention.wv": colwise(),
        "attention.wo": rowwise(output_layouts=Shard(1)),
        "ffn_norm": SequenceParallel(),
        "feed_forward": prepare_input(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
        "feed_forward.w1": colwise(), "feed_forward.w3": colwise(),
        "feed_forward.w2": rowwise(output_layouts=Shard(1)),
    })

    class Checkpointed(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return checkpoint(self.inner, x, use_reentrant=False)
    return Checkpointed()


def tp_stage_step(torch, case: StageCase, device: str):
    import torch.nn as nn
    mesh = fake_mesh(torch, case.tp, device)
    sh = case.shapes
    blocks = nn.Sequential(*(make_tp_block(torch, sh, mesh, device) for _ in range(case.layers)))
    shape = (sh.batch, sh.seq // case.tp, sh.hidden)  # sequence-parallel: the block's input is a shard
    return lambda: run_one_f_one_b(torch, blocks, shape, case.pp, case.micro_batches, device, autocast=False)


def pipelined_fsdp_blocks(torch, shapes, layers: int, mesh, device: str, compiled: bool = False,
                          float8: bool = False):
    """`layers` TP blocks (`make_tp_block` on mesh["tp"]) in fp32, each its own fully_shard over
    mesh["dp"] and their Sequential the root, as torchtitan 9dec370's apply_fsdp wraps a pipeline
    stage: reshard_after_forward=False, bf16 compute, fp32 reduction; `compiled`: each block
    torch.compile(fullgraph=True) before fully_shard (its apply_compile)."""
    import torch.nn as nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    made = (make_tp_block(torch, shapes, mesh["tp"], device, dtype=torch.float32, float8=float8)
            for _ in range(layers))
    blocks = nn.Sequential(*(torch.compile(b, fullgraph=True) if compiled else b for b in made))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in blocks:
        fully_shard(block, mesh=mesh["dp"], mp_policy=policy, reshard_after_forward=False)
    fully_shard(blocks, mesh=mesh["dp"], mp_policy=policy, reshard_after_forward=False)
    return blocks


def pipelined_fsdp_step(torch, case: PipelinedFsdpCase, device: str):
    st, sh = case.stage, case.stage.shapes
    mesh = fake_mesh(torch, st.tp, device, dp=case.dp)
    blocks = pipelined_fsdp_blocks(torch, sh, st.layers, mesh, device, compiled=case.compiled, float8=case.float8)
    opt = torch.optim.AdamW(blocks.parameters(), lr=1e-4, foreach=True)

    def before_backward(last: bool):  # torch.distributed.pipelining's backward_maybe_with_nosync
        blocks.set_is_last_backward(last)
        blocks.set_requires_gradient_sync(last)
        blocks.set_reshard_after_backward(last)

    def step():
        run_one_f_one_b(torch, blocks, (sh.batch, sh.seq // st.tp, sh.hidden), st.pp, st.micro_batches, device,
                        autocast=False, before_backward=before_backward)
        opt.step()
        opt.zero_grad()
        if case.float8:  # torchtitan's precompute_float8_dynamic_scale_for_fsdp, after the optimizer
            from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp
            precompute_float8_dynamic_scale_for_fsdp(blocks)
    return step


def torch_schedule_step(torch, case: TorchScheduleCase, device: str):
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B
    st, sh, v = case.fsdp.stage, case.fsdp.stage.shapes, case.virtual_stages
    mesh = fake_mesh(torch, st.tp, device, dp=case.fsdp.dp, pp=st.pp)
    local = (sh.batch, sh.seq // st.tp, sh.hidden)  # a micro-batch's sequence-parallel shard
    chunks, stages = [], []
    for j in range(v):  # torchtitan wraps each model chunk on its own
        chunk = pipelined_fsdp_blocks(torch, sh, st.layers // v, mesh, device)
        meta = torch.empty(local, device=device, dtype=torch.bfloat16)
        output = torch.empty(local, device=device, dtype=torch.bfloat16, requires_grad=True)  # its gradient comes back
        chunks.append(chunk)
        stages.append(PipelineStage(chunk, j * st.pp, v * st.pp, torch.device(device), input_args=(meta,),
                                    output_args=(output,), group=mesh["pp"].get_group()))
    # a loss function makes the schedule run backward (only the last stage, not this rank's, calls it)
    loss = lambda output, target: output.float().sum()  # noqa: E731
    schedule = (Schedule1F1B(stages[0], n_microbatches=st.micro_batches, loss_fn=loss) if v == 1
                else ScheduleInterleaved1F1B(stages, n_microbatches=st.micro_batches, loss_fn=loss))
    opt = torch.optim.AdamW([p for c in chunks for p in c.parameters()], lr=1e-4, foreach=True)
    batch = torch.randn((sh.batch * st.micro_batches, *local[1:]), device=device, dtype=torch.bfloat16)

    def step():
        schedule.step(batch)
        if any(p.grad is None for c in chunks for p in c.parameters()):
            raise RuntimeError("the schedule ran no backward: a parameter has no gradient")
        opt.step()
        opt.zero_grad()
    return step


def tp_head_step(torch, case: TensorParallelHeadCase, device: str):
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, SequenceParallel, loss_parallel,
                                                   parallelize_module)
    mesh = fake_mesh(torch, case.tp, device)
    sh = case.shapes

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.Sequential(*(make_tp_block(torch, sh, mesh, device) for _ in range(case.layers)))
            self.norm = nn.RMSNorm(sh.hidden).to(device=device, dtype=torch.bfloat16)
            self.output = nn.Linear(sh.hidden, case.vocab, bias=False).to(device=device, dtype=torch.bfloat16)

        def forward(self, x):
            return self.output(self.norm(self.blocks(x)))
    head = Head()
    parallelize_module(head, mesh, {
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)})
    shape = (sh.batch, sh.seq // case.tp, sh.hidden)
    labels = torch.randint(0, case.vocab, (sh.batch * sh.seq,), device=device)

    def step():
        for p in head.parameters():
            p.grad = None
        x = torch.randn(shape, device=device, dtype=torch.bfloat16, requires_grad=True)
        pred = head(x)
        with loss_parallel():
            loss = F.cross_entropy(pred.flatten(0, 1).float(), labels)
            del pred  # torchtitan's train step drops the prediction before backward
            loss.backward()
    return step


def dry_rows() -> list[dict]:
    """A synthetic trace in the recorded format: one segment mapped, two blocks allocated and freed."""
    mib = 1 << 20
    return [{"seq": 0, "action": "segment_map", "addr": 0, "size": 20 * mib, "stream": 0, "where": ""},
            {"seq": 1, "action": "alloc", "addr": 0, "size": 4 * mib, "stream": 0, "where": "dry"},
            {"seq": 2, "action": "alloc", "addr": 4 * mib, "size": 8 * mib, "stream": 0, "where": "dry"},
            {"seq": 3, "action": "free_requested", "addr": 0, "size": 4 * mib, "stream": 0, "where": "dry"},
            {"seq": 4, "action": "free_completed", "addr": 0, "size": 4 * mib, "stream": 0, "where": "dry"}]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--alloc-conf", default="expandable_segments:True",
                        help="PYTORCH_CUDA_ALLOC_CONF, set before torch is imported (default expandable_segments:True, "
                             "as torchtitan's launcher sets it)")
    parser.add_argument("--cases", default="all", help="comma-separated case names (default all)")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = plan_cases()
    if args.cases != "all":
        wanted = args.cases.split(",")
        unknown = [c for c in wanted if c not in cases]
        if unknown:
            parser.error(f"unknown case(s) {unknown}; known: {sorted(cases)}")
        cases = {k: v for k, v in cases.items() if k in wanted}
    summary: dict = {"alloc_conf": args.alloc_conf, "dry_run": args.dry_run, "cases": {}}
    if args.dry_run:
        for name in cases:
            rows = dry_rows()
            write_events(out / f"{name}.csv.gz", rows)
            summary["cases"][name] = {"peak_allocated_bytes": 12 << 20, "peak_reserved_bytes": 20 << 20,
                                      "allocated_before_bytes": 0, "events": len(rows)}
    else:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = args.alloc_conf
        import torch
        summary.update(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda)
        for name, case in cases.items():
            try:
                figures, rows = run_case(torch, name, case)
            except Exception as exc:  # one failing case must not lose the others' traces
                summary["cases"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                print(name, "failed:", exc, flush=True)
                continue
            write_events(out / f"{name}.csv.gz", rows)
            summary["cases"][name] = figures
            print(name, json.dumps(figures), flush=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
