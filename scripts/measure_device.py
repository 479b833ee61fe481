"""Device measurement kit: kernel tables to calibrate on, blocks and memory to validate with.

    python scripts/measure_device.py --out DIR [--budget-s 420] [--cluster h100-4x8-ib] [--dry-run]

In one call on one GPU (under 8 minutes; `--budget-s` stops starting new cases once spent) it
measures, with CUDA events (median of `--repeats` after `--warmup` runs):
1. GEMMs per dtype (bf16, fp16, fp8 via torch._scaled_mm where the device has it, tf32) over
   square, transformer-shaped and skinny (m, n, k);
2. fused attention (F.scaled_dot_product_attention, causal, the flash / cuDNN backend) forward and
   forward+backward over sequence lengths and head counts;
3. one Llama-style block (RMSNorm, grouped-query SDPA attention with rotary-free q/k/v, SwiGLU MLP)
   and one GPT-style block (LayerNorm, SDPA attention, GeLU MLP), forward + backward at a few
   (batch, sequence, hidden), with torch.cuda.max_memory_allocated and max_memory_reserved;
4. host-device copies (pinned and pageable, both directions) and a device-to-device copy (HBM rate);
5. model state under an optimizer: one Llama-style block with fp32 parameters under bf16 autocast and
   a fused AdamW (eager PyTorch mixed precision, as FSDP2 keeps unsharded state), the memory
   allocated once the state exists against the 4 + 4 + 8 bytes per parameter the model charges, the
   step's peak, and the optimizer step's time; and AdamW on the host CPU (the rate an offloaded
   optimizer step runs at, ZeRO-Offload).
It writes to DIR:
- calibration.csv: GEMM and attention-forward rows in the calibration CSV format
  (docs/calibration-csv.md), for `solver-plan calibrate --csv DIR/calibration.csv --cluster BASE`;
- attention-backward.csv: forward and forward+backward times per case, and their ratio (the cost
  model assumes 2.5x for a flash backward: cost/kernels.py FLASH_BACKWARD_RATIO);
- blocks.csv: block times and peak memory, with the memory the hybrid model predicts for the same
  block (solver_plan/hybrid/memory.py, runtime torchtitan: eager PyTorch, SDPA flash attention, unfused
  SwiGLU; torchtitan-compile for the `compiled` table's blocks, whose `mode` column says compile or
  compile-fp8: torch.compile'd, and with torchao's float8 Linears) and how each figure was measured;
- copies.csv: host-device and device-to-device copy rates;
- optimizer.csv: model-state bytes measured and predicted, optimizer step times on GPU and CPU;
- meta.json: device, versions, what was skipped and why.
Calibrate on the kernel tables only; validate on blocks.csv and on published runs, never the
other way round.

`--dry-run` needs no GPU and no torch: it builds the same plan of measurements and writes every
file, with times and memory from the project's own cost model for `--cluster` (marked `dry-run` in
each row's `how` column and in meta.json), so the plan, the writers and the CSV format are tested on
CPU (tests/test_measure_device.py). Never feed a dry run's CSV to calibrate.
"""
from __future__ import annotations

import argparse
import csv
import gc
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GEMM_DTYPES = ("bf16", "fp16", "fp8", "tf32")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp8": 1, "tf32": 4}


@dataclass(frozen=True)
class GemmCase:
    m: int
    n: int
    k: int
    dtype: str

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    def shape(self) -> str:
        return f"m={self.m} n={self.n} k={self.k}"


@dataclass(frozen=True)
class AttentionCase:
    batch: int
    heads: int
    seq: int
    head_dim: int = 128
    dtype: str = "bf16"
    backend: str = "default"  # torch's SDPA choice, or "flash" / "cudnn" / "efficient" forced

    @property
    def forward_flops(self) -> float:  # causal: half of 4 b a s^2 d
        return 2.0 * self.batch * self.heads * self.seq * self.seq * self.head_dim

    def shape(self) -> str:
        return f"batch={self.batch} heads={self.heads} seq={self.seq} head_dim={self.head_dim} causal=1"


@dataclass(frozen=True)
class BlockCase:
    style: str  # "llama" or "gpt"
    batch: int
    seq: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    dtype: str = "bf16"
    gqa: str = "repeat"  # "repeat": k, v repeated to every head before SDPA (torchtitan's repeat_kv); "native": enable_gqa
    # activation checkpointing as torchtitan applies it per block: "none", "selective" (its op policy:
    # save SDPA's outputs and every other aten.mm output), "full" (keep the input only)
    ac: str = "none"
    # "eager"; "compile": the checkpointed block torch.compile(fullgraph=True) as torchtitan's apply_compile
    # does; "compile-fp8": its Linears first converted by torchao's convert_to_float8_training (dynamic
    # tensorwise scaling, torchtitan's float8 converter), then compiled (titan style only)
    mode: str = "eager"


@dataclass(frozen=True)
class ModelCase:
    """A whole decoder as torchtitan writes it (eager): token embedding, `layers` Llama-style blocks,
    RMSNorm, untied output projection, F.cross_entropy on the fp32 logits; one GPU, bf16 weights."""
    layers: int
    batch: int
    seq: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int

    @property
    def block(self) -> BlockCase:
        return BlockCase("llama", self.batch, self.seq, self.hidden, self.heads, self.kv_heads, self.ffn)


@dataclass(frozen=True)
class FsdpCase:
    """The whole decoder of `model` as torchtitan trains it with FSDP2 on one rank (world size 1):
    fp32 parameters, fully_shard per block and on the root, MixedPrecisionPolicy(bf16, reduce fp32),
    AdamW; the all-gather, reduce-scatter buffers and the root's unsharded parameters are FSDP2's own."""
    model: ModelCase


@dataclass(frozen=True)
class GroupedCase:
    """E experts' GEMMs of one layer on one rank: [tokens, k] x [k, n] each (MoE expert MLPs)."""
    experts: int
    tokens: int
    k: int
    n: int

    @property
    def flops(self) -> float:
        return 2.0 * self.experts * self.tokens * self.k * self.n


@dataclass(frozen=True)
class OptimizerCase:
    where: str  # "gpu": a block's fused AdamW step with its measured state; "cpu": AdamW over `params` host floats
    params: int = 0  # cpu: parameters stepped; gpu: 0 (the block's own count)
    block: BlockCase | None = None


@dataclass(frozen=True)
class CopyCase:
    direction: str  # "h2d", "d2h" or "d2d"
    pinned: bool
    nbytes: int


def plan_cases(quick: bool = False) -> dict[str, list]:
    """Every case of one run, cheapest first within each table (a spent budget drops the tail)."""
    sizes = [1024, 2048, 4096, 8192] if not quick else [1024, 4096]
    gemms = [GemmCase(s, s, s, d) for d in GEMM_DTYPES for s in sizes]
    # transformer-shaped: tokens x hidden x {qkv, mlp} at 8B and 70B widths, and narrow (tp-split) ones
    shaped = [(8192, 6144, 4096), (8192, 28672, 4096), (8192, 4096, 14336), (8192, 10240, 8192),
              (16384, 8192, 3584), (4096, 512, 4096), (4096, 4096, 512), (1024, 1024, 256)]
    gemms += [GemmCase(m, n, k, d) for d in ("bf16", "fp8") for m, n, k in (shaped if not quick else shaped[:2])]
    if not quick:  # tensor-parallel slices (tp 2-8) of 8B-70B blocks' GEMMs at 4K-8K tokens: 2-200 GFLOP
        split = {(t, n // tp, k) for t in (4096, 8192) for n, k in ((6144, 4096), (28672, 4096), (10240, 8192),
                                                                   (57344, 8192)) for tp in (2, 4, 8)}
        split |= {(t, n, k // tp) for t in (4096, 8192) for n, k in ((4096, 14336), (8192, 28672), (8192, 8192))
                  for tp in (2, 4, 8)}
        split |= {(2048, 2048, 2048), (3072, 3072, 3072), (6144, 6144, 6144), (2048, 4096, 4096), (1024, 4096, 4096)}
        gemms += [GemmCase(m, n, k, "bf16") for m, n, k in sorted(split)]
    attention = [AttentionCase(max(1, 16384 // s), a, s) for s in ([1024, 2048, 4096, 8192] if not quick else [2048])
                 for a in ([16, 32, 64] if not quick else [32])]
    if not quick:  # the kernels behind each runtime's attention, and a narrower head
        attention += [AttentionCase(max(1, 16384 // s), 32, s, backend=b) for s in (2048, 8192)
                      for b in ("flash", "cudnn", "efficient")]
        attention += [AttentionCase(4, 64, 4096, head_dim=64)]
        attention += [AttentionCase(1, 32, s) for s in (16384, 32768)]  # long context (one rank's share under cp)
        attention += [AttentionCase(1, 8, s, backend="flash") for s in (512, 1024, 4096, 16384)]
    blocks = [BlockCase("llama", 1, 4096, 4096, 32, 8, 14336), BlockCase("llama", 2, 2048, 4096, 32, 8, 14336),
              BlockCase("llama", 1, 8192, 4096, 32, 8, 14336),
              BlockCase("gpt", 4, 2048, 2048, 16, 16, 8192), BlockCase("gpt", 1, 2048, 6144, 48, 48, 24576),
              BlockCase("llama", 1, 4096, 4096, 32, 8, 14336, gqa="native")]
    # torchtitan's own block structure (separate wq, wk, wv, wo, w1, w3, w2: the op policy counts matmuls)
    blocks += [BlockCase("titan", 1, 8192, 4096, 32, 8, 14336, ac=ac) for ac in ("none", "selective", "full")]
    blocks += [BlockCase("titan", 2, 4096, 4096, 32, 8, 14336, ac="selective")]
    # torchtitan's blocks compiled (training.compile) and in float8 (torchao): the 8B rows' micro-batch
    # (2 x 8192, op-level selective checkpointing) and a 70B block under full checkpointing
    compiled = [BlockCase("titan", 2, 8192, 4096, 32, 8, 14336, ac="selective", mode=m)
                for m in ("eager", "compile", "compile-fp8")]
    compiled += [BlockCase("titan", 1, 8192, 8192, 64, 8, 28672, ac="full", mode=m) for m in ("compile", "compile-fp8")]
    copies = [CopyCase(d, p, n) for d in ("h2d", "d2h") for p in (True, False) for n in (1 << 20, 1 << 26, 1 << 30)]
    copies += [CopyCase("d2d", False, n) for n in (1 << 26, 1 << 30)]
    optimizer = [OptimizerCase("gpu", block=blocks[0]), OptimizerCase("gpu", block=blocks[4]),
                 OptimizerCase("cpu", params=1 << 24), OptimizerCase("cpu", params=1 << 27)]
    if quick:
        blocks, copies, optimizer = [blocks[0], blocks[3]], copies[:4] + copies[-1:], optimizer[:1] + optimizer[2:3]
        compiled = compiled[1:2]
    # MoE expert GEMMs per rank: Qwen3-30B-A3B (h 2048, expert ffn 768, 16 local experts), DeepSeek-V3
    # (h 7168, expert ffn 2048, 8 local experts), Mixtral-8x7B (h 4096, ffn 14336, 2 local experts);
    # gate+up fused (n = 2 f) and down (k = f)
    grouped = [GroupedCase(e, t, k, n) for e, tokens, shapes in (
        (16, (128, 512, 2048), ((2048, 1536), (768, 2048))),
        (8, (512, 2048, 8192), ((7168, 4096), (2048, 7168))),
        (2, (4096, 16384), ((4096, 28672), (14336, 4096)))) for t in tokens for k, n in shapes]
    if quick:
        grouped = grouped[:2]
    models = [ModelCase(2, 1, 8192, 4096, 32, 8, 14336, 128256), ModelCase(2, 2, 4096, 4096, 32, 8, 14336, 32000)]
    fsdp = [FsdpCase(ModelCase(4, 1, 8192, 4096, 32, 8, 14336, 128256)), FsdpCase(ModelCase(4, 2, 4096, 4096, 32, 8, 14336, 32000))]
    if quick:
        models, fsdp = models[1:], fsdp[1:]
    return {"gemm": gemms, "attention": attention, "block": blocks, "copy": copies, "optimizer": optimizer,
            "grouped": grouped, "model": models, "fsdp": fsdp, "compiled": compiled}


# --- predictions (dry run, and the predicted column of blocks.csv) ---------------------------
def _cost_device(cluster_name: str):
    from solver_plan.cluster import resolve_cluster
    return resolve_cluster(cluster_name)


def predicted_gemm_s(cluster, case: GemmCase) -> float:
    from solver_plan.cost.compute import compute_time
    nbytes = DTYPE_BYTES[case.dtype] * (case.m * case.k + case.k * case.n) + 2 * case.m * case.n
    dtype = case.dtype if cluster.device.supports(case.dtype) else "bf16"
    return compute_time(cluster, case.flops, nbytes, unit="matrix", dtype=dtype)


def predicted_attention_s(cluster, case: AttentionCase) -> tuple[float, float]:
    """(forward, forward + backward) of a causal fused attention (cost/kernels.py factors)."""
    from solver_plan.cost.compute import compute_time
    from solver_plan.cost.kernels import attention_kernel_factors
    full = 2.0 * case.forward_flops  # the dense count the factors are relative to
    nbytes = 4 * case.batch * case.seq * case.heads * case.head_dim * 2
    one = compute_time(cluster, full, nbytes, unit="matrix", dtype=case.dtype)
    forward, backward = attention_kernel_factors(True, True)
    return forward * one, (forward + backward) * one


def block_spec(case: BlockCase):
    """The hybrid model's spec of the block `make_block` builds: Llama-style without biases, RMS
    norms, SwiGLU, grouped-query attention; GPT-style with biases, LayerNorms, GeLU."""
    from solver_plan.hybrid.model import TransformerSpec
    llama = case.style in ("llama", "titan")
    return TransformerSpec(f"{case.style}-block", layers=1, hidden=case.hidden, ffn=case.ffn, heads=case.heads,
                           head_dim=case.hidden // case.heads, seq=case.seq, vocab=32000, positions=case.seq,
                           gated_mlp=llama, kv_heads=case.kv_heads if llama else 0, qkv_bias=not llama,
                           out_bias=not llama, mlp_bias=not llama, rms_norm=llama, learned_positions=not llama)


def predicted_block_bytes(case: BlockCase) -> float:
    """What torch.cuda.max_memory_allocated should show for one block's forward + backward in bf16
    with no optimizer (hybrid/memory.py terms, runtime torchtitan = eager PyTorch with SDPA flash
    attention): weights w P + gradients g P, the block's kept activations, the backward working set
    (flash dQ accumulator), the input and its gradient (2 x 2 s b h), and the GEMM workspace."""
    from solver_plan.hybrid import memory as mem
    from solver_plan.runtime import resolve_runtime
    spec = block_spec(case)
    runtime = resolve_runtime(block_runtime(case))
    params = spec.block_params
    acts = mem.layer_activation_bytes(spec, case.batch, 1, case.ac, False, runtime=runtime)
    working = mem.recompute_working_bytes(spec, case.batch, 1, case.ac, False, runtime=runtime)
    io = 2 * 2.0 * case.seq * case.batch * case.hidden
    return 2.0 * params + 2.0 * params + acts + working + io + runtime.memory.workspace


def predicted_kept_bytes(case: BlockCase) -> float:
    """What the forward leaves allocated: the block's kept activations (hybrid/memory.py,
    runtime torchtitan), which count the block's input (allocated before the forward), less that
    input, plus the block's output (2 s b h, the same size)."""
    from solver_plan.hybrid import memory as mem
    from solver_plan.runtime import resolve_runtime
    return mem.layer_activation_bytes(block_spec(case), case.batch, 1, case.ac, False,
                                      runtime=resolve_runtime(block_runtime(case)))


def block_runtime(case: BlockCase) -> str:
    """The runtime profile of a block's mode: torchtitan (eager) or torchtitan-compile (compiled, with or
    without float8: its GEMMs' dtype is the precision's, `block_precision`)."""
    return "torchtitan" if case.mode == "eager" else "torchtitan-compile"


def block_precision(case: BlockCase) -> str:
    """The precision a block's GEMMs run in: fp8 under compile-fp8, else bf16."""
    return "fp8" if case.mode.endswith("fp8") else "bf16"


def model_spec(case: ModelCase):
    from dataclasses import replace
    return replace(block_spec(case.block), name="llama-model", layers=case.layers, vocab=case.vocab,
                   tied_embeddings=False)


def model_memory(case: ModelCase):
    """hybrid/memory.py stage_memory of the whole decoder as one stage (p = t = dp = 1, one micro-batch)
    under the torchtitan runtime, bf16 weights and gradients, no optimizer."""
    from dataclasses import replace

    from solver_plan.cost.model_state import ParameterState
    from solver_plan.hybrid import memory as mem
    from solver_plan.runtime import resolve_runtime
    state = mem.StateBytes(ParameterState(weights=2.0, gradients=2.0), activations=2.0)  # no optimizer
    # the kit keeps the gradients allocated between steps (zero_grad(set_to_none=False)), as a runtime
    # with a persistent gradient buffer does; torchtitan itself drops them (its FSDP2 case measures that)
    runtime = replace(resolve_runtime("torchtitan"), gradients_freed=False)
    return mem.stage_memory(model_spec(case), layers=case.layers, stage=0, pp=1, tp=1, dp=1, micro_batch=case.batch,
                            micro_batches=1, recompute="none", sequence_parallel=False, zero_stage=0,
                            schedule="1f1b", state=state, runtime=runtime)


def predicted_model_terms(case: ModelCase) -> dict[str, float]:
    """What torch.cuda.max_memory_allocated should show for one forward + backward of the whole
    decoder (`model_memory`), by term: weights and gradients, activations (the blocks', the
    embedding's output, the loss's logits), the backward working set beyond the loss's peak, the GEMM
    workspaces."""
    m = model_memory(case)
    return {"state": m.weights + m.gradients, "activations": m.activations, "working": m.recompute_working,
            "buffers": m.buffers, "workspace": m.workspace}


def fsdp_memory(case: FsdpCase, dp: int = 1):
    """stage_memory of the one stage (p = t = 1, one micro-batch) with ZeRO-3 over `dp` ranks under the
    torchtitan runtime and its state (runtime_state: fp32 sharded parameters, fp32 gradients, Adam
    moments)."""
    from solver_plan.hybrid import memory as mem
    from solver_plan.runtime import resolve_runtime
    state = mem.runtime_state(mem.MIXED_PRECISION, resolve_runtime("torchtitan"))
    return mem.stage_memory(model_spec(case.model), layers=case.model.layers, stage=0, pp=1, tp=1, dp=dp,
                            micro_batch=case.model.batch, micro_batches=1, recompute="none",
                            sequence_parallel=False, zero_stage=3, schedule="1f1b", state=state,
                            runtime="torchtitan")


def predicted_fsdp_terms(case: FsdpCase) -> dict[str, float]:
    """`fsdp_memory` on one rank, by term."""
    m = fsdp_memory(case)
    return {"weights": m.weights, "gradients": m.gradients, "optimizer": m.optimizer, "activations": m.activations,
            "working": m.recompute_working, "buffers": m.buffers, "workspace": m.workspace}


def clean_start(torch) -> int:
    """Bytes still allocated when a case starts, after freeing what earlier cases left: their
    reference cycles first (FSDP2's hooks and modules form one, which `empty_cache` alone cannot
    free), then the allocator's cached blocks. Without the collection an earlier case's fp32
    parameters stayed alive and inflated the next case's reserved peak, which is process-wide."""
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return torch.cuda.memory_allocated()


def measure_fsdp(torch, timer: Timer, case: FsdpCase) -> tuple[float, int, int, int, int]:
    """(step seconds, peak allocated, peak reserved, allocated with state before the step, allocated at
    the loss less before), counted from before the model was built; a one-rank NCCL group."""
    import os

    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        dist.init_process_group("nccl", rank=0, world_size=1)
    residual = clean_start(torch)
    mc = case.model
    model = make_model(torch, mc).float()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
    loss_of = decoder_loss(torch, model, mc)

    def step():
        loss_of().backward()
        opt.step()
        opt.zero_grad()
    step()
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() - residual
    loss = loss_of()
    torch.cuda.synchronize()
    at_loss = torch.cuda.memory_allocated() - residual - base
    loss.backward()
    del loss
    opt.step()
    opt.zero_grad()
    torch.cuda.synchronize()
    peak, reserved = torch.cuda.max_memory_allocated() - residual, torch.cuda.max_memory_reserved()
    seconds = timer.median_s(step)
    return seconds, peak, reserved, base, at_loss


def decoder_loss(torch, model, case: ModelCase):
    """The loss of one random batch as torchtitan's train step computes it: F.cross_entropy on the
    fp32 logits, the bf16 prediction dropped before backward (`del pred`)."""
    import torch.nn.functional as F
    tokens = torch.randint(0, case.vocab, (case.batch, case.seq), device="cuda")
    labels = torch.randint(0, case.vocab, (case.batch * case.seq,), device="cuda")

    def loss_of():
        pred = model(tokens)
        return F.cross_entropy(pred.flatten(0, 1).float(), labels)
    return loss_of


def make_model(torch, case: ModelCase):
    import torch.nn as nn

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(case.vocab, case.hidden)
            self.blocks = nn.ModuleList(make_block(torch, case.block) for _ in range(case.layers))
            self.norm = nn.RMSNorm(case.hidden) if hasattr(nn, "RMSNorm") else nn.LayerNorm(case.hidden)
            self.output = nn.Linear(case.hidden, case.vocab, bias=False)

        def forward(self, tokens):
            x = self.embed(tokens)
            for block in self.blocks:
                x = block(x)
            return self.output(self.norm(x))
    return Decoder().to(device="cuda", dtype=torch.bfloat16)


def measure_model(torch, timer: Timer, case: ModelCase) -> tuple[float, int, int, int, int]:
    """(forward + backward seconds, peak allocated, peak reserved, allocated before the step, allocated
    at the loss before backward less before), counted from what was allocated before the model was
    built. The loss as torchtitan's train step computes it: F.cross_entropy(pred.flatten(0, 1).float(),
    labels), `del pred` before backward."""
    residual = clean_start(torch)
    model = make_model(torch, case)
    loss_of = decoder_loss(torch, model, case)

    def step():
        model.zero_grad(set_to_none=False)
        loss_of().backward()
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() - residual
    model.zero_grad(set_to_none=False)
    loss = loss_of()
    torch.cuda.synchronize()
    at_loss = torch.cuda.memory_allocated() - residual - base
    loss.backward()
    del loss
    torch.cuda.synchronize()
    peak, reserved = torch.cuda.max_memory_allocated() - residual, torch.cuda.max_memory_reserved()
    seconds = timer.median_s(step)
    return seconds, peak, reserved, base, at_loss


def predicted_block_s(cluster, case: BlockCase) -> float:
    """Forward + backward of one block from GEMM FLOPs at the device's curve (dry run only: the real
    comparison is `solver-plan hybrid` on the same shapes)."""
    from solver_plan.cost.compute import compute_time
    spec = block_spec(case)
    tokens = case.batch * case.seq
    gemm = 2.0 * tokens * spec.block_params
    attention = predicted_attention_s(cluster, AttentionCase(case.batch, case.heads, case.seq,
                                                             case.hidden // case.heads))[1]
    return 3.0 * compute_time(cluster, gemm, 0.0, unit="matrix", dtype=case.dtype) + attention


def predicted_copy_s(cluster, case: CopyCase) -> float:
    if case.direction == "d2d":  # read + write at the device's memory bandwidth
        return 2.0 * case.nbytes / cluster.device.hbm_bandwidth
    pcie = 25e9 if case.pinned else 10e9  # PCIe gen5 x16 ~ 50 GB/s peak: placeholders for the dry run
    return case.nbytes / pcie


def optimizer_params(case: OptimizerCase) -> int:
    return case.params if case.where == "cpu" else int(block_spec(case.block).block_params)


def predicted_state_bytes(case: OptimizerCase) -> float:
    """Model state of fp32 parameters trained under bf16 autocast with Adam, as the hybrid model
    counts it (cost/model_state.py, fp32 Adam): weights 4 + gradients 4 + two fp32 moments 8 = 16
    bytes per parameter (no separate master copy: the parameter is the master)."""
    from solver_plan.cost.model_state import state_per_parameter
    from solver_plan.cost.precision import TrainingPrecision
    return state_per_parameter(TrainingPrecision.fp32(), "adam").total * optimizer_params(case)


def predicted_optimizer_s(cluster, case: OptimizerCase) -> float:
    """Dry run only: Adam reads and writes ~16 B + reads 4 B of gradient per parameter at the memory
    bandwidth (GPU) or ~10 GB/s (a host placeholder)."""
    rate = cluster.device.hbm_bandwidth if case.where == "gpu" else 10e9
    return 28.0 * optimizer_params(case) / rate


# --- measurement with torch ------------------------------------------------------------------
class Timer:
    def __init__(self, torch, warmup: int, repeats: int):
        self.torch, self.warmup, self.repeats = torch, warmup, repeats

    def median_s(self, fn, back_to_back: bool = False, graphed: bool = False) -> float:
        """Median seconds of one call of fn. `back_to_back`: a kernel shorter than 1 ms is timed as
        k calls queued between the two events (k so the group lasts ~1 ms), divided by k, as a
        training step queues its kernels; one call between events would time the launch latency.
        `graphed` (with back_to_back): the k calls are captured in a CUDA graph and replayed, so the
        GPU never waits for Python's launches (a tiny eager GEMM is launch-bound at ~10-20 us): the
        kernel's own time, to which the cost model adds its launch overhead; falls back to plain
        back-to-back launches where capture fails."""
        torch = self.torch
        for _ in range(self.warmup):
            fn()
        torch.cuda.synchronize()
        inner = 1
        if back_to_back:
            one = self._once(fn, 1)
            inner = max(1, min(1000, math.ceil(1e-3 / max(one, 1e-7))))
        if back_to_back and graphed:
            try:
                graph = torch.cuda.CUDAGraph()
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    fn()  # warm-up on the side stream, as capture requires
                torch.cuda.current_stream().wait_stream(stream)
                with torch.cuda.graph(graph):
                    for _ in range(inner):
                        fn()
                graph.replay()
                torch.cuda.synchronize()
                seconds = statistics.median(self._once(graph.replay, 1) for _ in range(self.repeats)) / inner
                del graph
                return seconds
            except Exception:  # noqa: BLE001 (capture unsupported for this kernel: time it launched)
                torch.cuda.synchronize()
        return statistics.median(self._once(fn, inner) for _ in range(self.repeats))

    def _once(self, fn, inner: int) -> float:
        torch = self.torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / inner


def measure_gemm(torch, timer: Timer, case: GemmCase) -> float | None:
    dev = "cuda"
    if case.dtype == "fp8":
        if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
            return None
        if torch.cuda.get_device_capability() < (8, 9):
            return None
        a = torch.randn(case.m, case.k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(case.n, case.k, device=dev).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=dev)
        return timer.median_s(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
                              back_to_back=True, graphed=True)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32}[case.dtype]
    torch.backends.cuda.matmul.allow_tf32 = case.dtype == "tf32"
    a = torch.randn(case.m, case.k, device=dev, dtype=dtype)
    b = torch.randn(case.k, case.n, device=dev, dtype=dtype)
    return timer.median_s(lambda: torch.matmul(a, b), back_to_back=True, graphed=True)


def measure_grouped(torch, timer: Timer, case: "GroupedCase") -> tuple[float, float]:
    """(grouped kernel seconds, per-expert loop seconds) of E GEMMs [tokens, k] x [k, n] in bf16: one
    torch._grouped_mm over all experts (the grouped kernel torchtitan's MoE calls; cuBLAS / CUTLASS
    grouped GEMM) and, for comparison, one torch.matmul per expert; NaN where torch lacks the kernel."""
    dev, dtype = "cuda", torch.bfloat16
    a = torch.randn(case.experts * case.tokens, case.k, device=dev, dtype=dtype)
    w = torch.randn(case.experts, case.n, case.k, device=dev, dtype=dtype).transpose(-2, -1)  # [E, k, n], column-major
    offsets = torch.arange(1, case.experts + 1, device=dev, dtype=torch.int32) * case.tokens
    grouped = float("nan")
    if hasattr(torch, "_grouped_mm"):
        try:
            grouped = timer.median_s(lambda: torch._grouped_mm(a, w, offs=offsets), back_to_back=True, graphed=True)
        except Exception:  # noqa: BLE001 (kernel missing for this device / shape: the loop still measures)
            torch.cuda.synchronize()
    pieces = a.split(case.tokens)

    def loop():
        for i in range(case.experts):
            torch.matmul(pieces[i], w[i])
    return grouped, timer.median_s(loop, back_to_back=True, graphed=True)


def measure_attention(torch, timer: Timer, case: AttentionCase) -> tuple[float, float]:
    import torch.nn.functional as F
    shape = (case.batch, case.heads, case.seq, case.head_dim)
    import contextlib
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    if case.backend == "default":
        chosen = contextlib.nullcontext
    else:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                   "efficient": SDPBackend.EFFICIENT_ATTENTION}[case.backend]
        chosen = lambda: sdpa_kernel(backend)  # noqa: E731
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    def forward_only():
        with chosen():
            F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def both():
        with chosen():
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)
    return timer.median_s(forward_only, back_to_back=True), timer.median_s(both, back_to_back=True)


def make_block(torch, case: BlockCase):
    import torch.nn as nn
    import torch.nn.functional as F
    h, a, kv, f = case.hidden, case.heads, case.kv_heads, case.ffn
    d = h // a

    if case.style == "titan":
        return make_titan_block(torch, case)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            llama = case.style == "llama"
            norm = (lambda: nn.RMSNorm(h)) if llama and hasattr(nn, "RMSNorm") else (lambda: nn.LayerNorm(h))
            self.n1, self.n2 = norm(), norm()
            self.qkv = nn.Linear(h, (a + 2 * kv) * d, bias=not llama)
            self.proj = nn.Linear(a * d, h, bias=not llama)
            if llama:
                self.up = nn.Linear(h, 2 * f, bias=False)  # gate and up in one GEMM
            else:
                self.up = nn.Linear(h, f)
            self.down = nn.Linear(f, h, bias=not llama)
            self.llama = llama

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.n1(x)).split([a * d, kv * d, kv * d], dim=-1)
            q = q.view(b, s, a, d).transpose(1, 2)
            k = k.view(b, s, kv, d).transpose(1, 2)
            v = v.view(b, s, kv, d).transpose(1, 2)
            if case.gqa == "native" and kv != a:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            else:
                k, v = k.repeat_interleave(a // kv, dim=1), v.repeat_interleave(a // kv, dim=1)
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            y = y.transpose(1, 2).reshape(b, s, a * d)
            x = x + self.proj(y)
            z = self.up(self.n2(x))
            if self.llama:
                gate, up = z.chunk(2, dim=-1)
                z = F.silu(gate) * up
            else:
                z = F.gelu(z)
            return x + self.down(z)
    return Block().to(device="cuda", dtype=torch.bfloat16)


def make_titan_block(torch, case: BlockCase, device: str = "cuda"):
    """torchtitan's TransformerBlock without rotary embeddings: RMSNorm, separate wq/wk/wv/wo, repeat_kv,
    causal SDPA, w2(F.silu(w1(x)) * w3(x)); checkpointed as `case.ac` says (torchtitan _apply_ac);
    float8 and compiled as `case.mode` says."""
    import torch.nn as nn
    import torch.nn.functional as F
    h, a, kv, f = case.hidden, case.heads, case.kv_heads, case.ffn
    d = h // a

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(h), nn.RMSNorm(h)
            self.wq, self.wk = nn.Linear(h, a * d, bias=False), nn.Linear(h, kv * d, bias=False)
            self.wv, self.wo = nn.Linear(h, kv * d, bias=False), nn.Linear(a * d, h, bias=False)
            self.w1, self.w3 = nn.Linear(h, f, bias=False), nn.Linear(h, f, bias=False)
            self.w2 = nn.Linear(f, h, bias=False)

        def forward(self, x):
            b, s, _ = x.shape
            y = self.attention_norm(x)
            q = self.wq(y).view(b, s, a, d).transpose(1, 2)
            k = self.wk(y).view(b, s, kv, d).repeat_interleave(a // kv, dim=2).transpose(1, 2)
            v = self.wv(y).view(b, s, kv, d).repeat_interleave(a // kv, dim=2).transpose(1, 2)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, a * d)
            x = x + self.wo(o)
            z = self.ffn_norm(x)
            return x + self.w2(F.silu(self.w1(z)) * self.w3(z))

    return checkpoint_block(torch, Inner(), case, device)


def checkpoint_block(torch, inner, case: BlockCase, device: str = "cuda"):
    """`inner` (a block taking and returning the hidden states) checkpointed as `case.ac` says (torchtitan
    _apply_ac: none, op-level selective, full), in bf16 on `device`, float8 and compiled as `case.mode`
    says (torchtitan's float8 converter, then its apply_compile)."""
    import torch.nn as nn

    class Checkpointed(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            from torch.utils.checkpoint import checkpoint
            if case.ac == "none":
                return self.inner(x)
            if case.ac == "full":
                return checkpoint(self.inner, x, use_reentrant=False)
            from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
            ops = torch.ops.aten
            save = {ops.mm.default} | {getattr(ops, name).default for name in (
                "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                "_scaled_dot_product_cudnn_attention") if hasattr(ops, name)}
            counts = {"forward": 0, "recompute": 0}

            def policy(ctx, op, *args, **kwargs):
                mode = "recompute" if ctx.is_recompute else "forward"
                if op == ops.mm.default:
                    counts[mode] += 1
                keep = op in save and not (op == ops.mm.default and counts[mode] % 2 == 0)
                return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE

            def contexts():
                counts.update(forward=0, recompute=0)  # a fresh count per block call, as torchtitan's meta
                return create_selective_checkpoint_contexts(policy)
            if case.mode != "eager":  # dynamo takes a partial, not a closure; it runs the policy when tracing
                import functools
                counts.update(forward=0, recompute=0)
                return checkpoint(self.inner, x, use_reentrant=False,
                                  context_fn=functools.partial(create_selective_checkpoint_contexts, policy))
            return checkpoint(self.inner, x, use_reentrant=False, context_fn=contexts)
    block = Checkpointed().to(device=device, dtype=torch.bfloat16)
    if case.mode == "compile-fp8":
        from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        convert_to_float8_training(block.inner, config=Float8LinearConfig())
    return torch.compile(block, fullgraph=True) if case.mode.startswith("compile") else block


def measure_block(torch, timer: Timer, case: BlockCase, build=None) -> tuple[float, int, int, int, int]:
    """(forward + backward seconds, peak allocated, peak reserved, allocated before the step, allocated
    after the forward less before: the activations kept for the backward plus the output). Allocations
    are counted from what was allocated before the block was built (anything an earlier case left
    behind, e.g. a CUDA graph's pool, is not the block's). `build()`: the block, where it is not
    `make_block`'s (scripts/time_torchtitan_block.py: torchtitan's own)."""
    residual = clean_start(torch)
    block = make_block(torch, case) if build is None else build()
    x = torch.randn(case.batch, case.seq, case.hidden, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    def step():
        block.zero_grad(set_to_none=False)
        block(x).sum().backward()
    step()  # gradients allocated once, as in training
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated() - residual
    block.zero_grad(set_to_none=False)
    y = block(x)
    torch.cuda.synchronize()
    kept = torch.cuda.memory_allocated() - residual - base
    y.sum().backward()
    del y
    torch.cuda.synchronize()
    peak, reserved = torch.cuda.max_memory_allocated() - residual, torch.cuda.max_memory_reserved()
    seconds = timer.median_s(step)
    return seconds, peak, reserved, base, kept


def measure_optimizer(torch, timer: Timer, case: OptimizerCase) -> tuple[float, int, int, int]:
    """(optimizer step seconds, allocated with state, peak over forward + backward + step, reserved).
    GPU: the block in fp32 under bf16 autocast with torch.optim.AdamW(fused=True), after two steps
    (state allocated); CPU: AdamW(foreach=True) over `params` host floats, wall clock, memory zeros."""
    if case.where == "cpu":
        param = torch.nn.Parameter(torch.randn(case.params))
        param.grad = torch.randn(case.params)
        opt = torch.optim.AdamW([param], lr=1e-4, foreach=True)
        opt.step()
        times = []
        for _ in range(max(3, timer.repeats // 2)):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times), 0, 0, 0
    residual = clean_start(torch)  # left by earlier cases: not this block's
    block = make_block(torch, case.block).float()
    b = case.block
    x = torch.randn(b.batch, b.seq, b.hidden, device="cuda", dtype=torch.float32, requires_grad=True)
    opt = torch.optim.AdamW(block.parameters(), lr=1e-4, fused=True)

    def train_step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = block(x).float().sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=False)
    train_step()
    train_step()
    torch.cuda.synchronize()
    x.grad = None
    with_state = torch.cuda.memory_allocated() - residual - x.numel() * 4
    torch.cuda.reset_peak_memory_stats()
    train_step()
    torch.cuda.synchronize()
    peak, reserved = torch.cuda.max_memory_allocated() - residual, torch.cuda.max_memory_reserved()
    seconds = timer.median_s(opt.step)
    return seconds, int(with_state), int(peak), int(reserved)


def measure_copy(torch, timer: Timer, case: CopyCase) -> float:
    if case.direction == "d2d":
        src = torch.empty(case.nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        return timer.median_s(lambda: dst.copy_(src), back_to_back=True)
    host = torch.empty(case.nbytes, dtype=torch.uint8, pin_memory=case.pinned)
    device = torch.empty(case.nbytes, dtype=torch.uint8, device="cuda")
    if case.direction == "h2d":
        return timer.median_s(lambda: device.copy_(host, non_blocking=case.pinned))
    return timer.median_s(lambda: host.copy_(device, non_blocking=case.pinned))


# --- run and write ---------------------------------------------------------------------------
def run(args) -> dict:
    cases = plan_cases(args.quick)
    if args.tables != "all":
        unknown = set(args.tables.split(",")) - set(cases)
        if unknown:
            raise SystemExit(f"--tables: unknown table(s) {sorted(unknown)}; choose from {sorted(cases)}")
        cases = {k: (v if k in args.tables.split(",") else []) for k, v in cases.items()}
    cluster = _cost_device(args.cluster)
    torch = None
    if not args.dry_run:
        import torch  # noqa: F811  (the real run needs it; the dry run must not)
        if not torch.cuda.is_available():
            raise SystemExit("no CUDA device: use --dry-run to check the plan and the writers on CPU")
    timer = Timer(torch, args.warmup, args.repeats) if torch else None
    how = "dry-run: the cost model's prediction, not a measurement" if args.dry_run else \
        f"CUDA events, median of {args.repeats} after {args.warmup} warm-up runs"
    started = time.perf_counter()
    skipped: list[str] = []
    out = {name: [] for name in cases}

    def budget_left() -> bool:
        return time.perf_counter() - started < args.budget_s

    def attempt(kind: str, case, measure):
        """One real measurement; a failure (out of memory, a kernel torch lacks) is recorded in
        meta.json's `skipped` and the run goes on: the kit gets one call on a lent device."""
        try:
            return measure()
        except Exception as exc:  # noqa: BLE001 (any failure of one case must not lose the others)
            skipped.append(f"{kind} {case}: failed: {type(exc).__name__}: {str(exc)[:200]}")
            if torch is not None:
                gc.collect()
                torch.cuda.empty_cache()
            return None

    def predicted_grouped(case):
        from solver_plan.cost.compute import compute_time
        one = compute_time(cluster, 2.0 * case.tokens * case.k * case.n, 0.0, unit="matrix", dtype="bf16")
        return case.experts * one, case.experts * one

    def predicted_memory(terms):
        total = sum(terms.values())
        return 0.0, total, total, 0, 0

    def predicted_block(case):
        predicted = predicted_block_bytes(case)
        return predicted_block_s(cluster, case), predicted, predicted, 0, predicted_kept_bytes(case)

    def predicted_optimizer(case):
        state = predicted_state_bytes(case) if case.where == "gpu" else 0
        return predicted_optimizer_s(cluster, case), state, state, state

    # per table, in measuring order: (the dry run's figures, the measurement) of one case
    tables = {
        "gemm": (lambda c: predicted_gemm_s(cluster, c), lambda c: measure_gemm(torch, timer, c) or "unsupported"),
        "attention": (lambda c: predicted_attention_s(cluster, c), lambda c: measure_attention(torch, timer, c)),
        "block": (predicted_block, lambda c: measure_block(torch, timer, c)),
        "compiled": (predicted_block, lambda c: measure_block(torch, timer, c)),
        "copy": (lambda c: predicted_copy_s(cluster, c), lambda c: measure_copy(torch, timer, c)),
        "fsdp": (lambda c: predicted_memory(predicted_fsdp_terms(c)), lambda c: measure_fsdp(torch, timer, c)),
        "model": (lambda c: predicted_memory(predicted_model_terms(c)), lambda c: measure_model(torch, timer, c)),
        "grouped": (predicted_grouped, lambda c: measure_grouped(torch, timer, c)),
        "optimizer": (predicted_optimizer, lambda c: measure_optimizer(torch, timer, c)),
    }
    for table, (predict, measure) in tables.items():
        for case in cases[table]:
            if not budget_left():
                skipped.append(f"{table} {case}: budget spent")
                continue
            result = predict(case) if args.dry_run else attempt(table, case, lambda: measure(case))
            if result is None:
                continue
            if isinstance(result, str):  # "unsupported": the device or torch lacks the kernel
                skipped.append(f"{table} {case}: no such kernel on this device / torch")
                continue
            out[table].append((case, *result) if isinstance(result, tuple) else (case, result))
    if os.environ.get("PYTORCH_CUDA_ALLOC_CONF"):  # the caching allocator's mode changes the reserved figures
        how += f"; PYTORCH_CUDA_ALLOC_CONF={os.environ['PYTORCH_CUDA_ALLOC_CONF']}"
    meta = {"dry_run": args.dry_run, "how": how, "cluster_for_predictions": args.cluster,
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
            "elapsed_s": time.perf_counter() - started, "budget_s": args.budget_s, "skipped": skipped,
            "planned": {k: len(v) for k, v in cases.items()}, "written": {k: len(v) for k, v in out.items()}}
    if torch is not None:
        meta.update(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                    capability=list(torch.cuda.get_device_capability()),
                    total_memory_bytes=torch.cuda.get_device_properties(0).total_memory)
    write_all(Path(args.out), out, meta, how)
    return meta


def _write_memory_table(path: Path, rows, terms_of, model_of, time_column: str, how: str) -> None:
    """A whole decoder's measured memory against the model's terms (model-memory.csv, fsdp-memory.csv):
    one row per case, `terms_of(case)` the predicted bytes by term, `model_of(case)` its ModelCase."""
    terms = list(terms_of(rows[0][0])) if rows else []  # the model's term names, from the first case
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["layers", "batch", "seq", "hidden", "ffn", "vocab", time_column, "peak_allocated_bytes",
                    "peak_reserved_bytes", "allocated_before_bytes", "allocated_at_loss_bytes", "predicted_allocated_bytes",
                    "allocated_error"] + [f"predicted_{t}_bytes" for t in terms] + ["how"])
        for case, seconds, peak, reserved, base, at_loss in rows:
            predicted = terms_of(case)
            total = sum(predicted.values())
            mc = model_of(case)
            w.writerow([mc.layers, mc.batch, mc.seq, mc.hidden, mc.ffn, mc.vocab, f"{seconds * 1e3:.3f}",
                        int(peak), int(reserved), int(base), int(at_loss), int(round(total)),
                        f"{total / peak - 1:+.3f}" if peak else ""] + [int(round(predicted[t])) for t in terms] + [how])


def write_all(out_dir: Path, out: dict, meta: dict, how: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / "calibration.csv", "w", newline="") as f:
        f.write(f"# scripts/measure_device.py: {how}\n")
        w = csv.writer(f)
        w.writerow(["op", "shape", "dtype", "time_us", "group"])
        for case, seconds in out["gemm"]:
            w.writerow(["matmul", case.shape(), case.dtype, f"{seconds * 1e6:.3f}", f"gemm-{case.dtype}"])
        for case, forward, _ in out["attention"]:
            if case.backend != "default" or case.head_dim != 128:
                continue  # calibration keys attention by shape: one row per shape, torch's own choice
            w.writerow(["attention", case.shape(), case.dtype, f"{forward * 1e6:.3f}", "attention"])
    with open(out_dir / "attention-backward.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["batch", "heads", "seq", "head_dim", "dtype", "backend", "forward_us", "forward_backward_us",
                    "backward_over_forward", "forward_tflops", "how"])
        for case, forward, both in out["attention"]:
            w.writerow([case.batch, case.heads, case.seq, case.head_dim, case.dtype, case.backend,
                        f"{forward * 1e6:.3f}",
                        f"{both * 1e6:.3f}", f"{(both - forward) / forward:.3f}",
                        f"{case.forward_flops / forward / 1e12:.1f}", how])
    with open(out_dir / "blocks.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["style", "batch", "seq", "hidden", "heads", "kv_heads", "ffn", "dtype", "forward_backward_ms",
                    "peak_allocated_bytes", "peak_reserved_bytes", "allocated_before_bytes",
                    "predicted_allocated_bytes", "allocated_error", "gqa", "ac", "kept_after_forward_bytes",
                    "predicted_kept_bytes", "kept_error", "mode", "how"])
        for case, seconds, peak, reserved, base, kept in out["block"] + out["compiled"]:
            predicted = predicted_block_bytes(case)
            predicted_kept = predicted_kept_bytes(case)
            w.writerow([case.style, case.batch, case.seq, case.hidden, case.heads, case.kv_heads, case.ffn, case.dtype,
                        f"{seconds * 1e3:.3f}", int(peak), int(reserved), int(base), int(round(predicted)),
                        f"{predicted / peak - 1:+.3f}" if peak else "", case.gqa, case.ac, int(kept),
                        int(round(predicted_kept)), f"{predicted_kept / kept - 1:+.3f}" if kept else "", case.mode,
                        how + "; memory: torch.cuda.max_memory_allocated / max_memory_reserved after "
                              "reset_peak_memory_stats, over one forward + backward with gradients already "
                              "allocated (no optimizer state)"])
    with open(out_dir / "copies.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["direction", "pinned", "bytes", "time_us", "gb_per_s", "how"])
        for case, seconds in out["copy"]:
            w.writerow([case.direction, int(case.pinned), case.nbytes, f"{seconds * 1e6:.3f}",
                        f"{case.nbytes / seconds / 1e9:.2f}", how])
    _write_memory_table(out_dir / "model-memory.csv", out["model"], predicted_model_terms, lambda c: c,
                        "forward_backward_ms", how + "; a whole eager decoder (embedding, Llama-style blocks, RMSNorm, "
                        "untied output, F.cross_entropy on fp32 logits), bf16 weights, gradients allocated, no "
                        "optimizer; allocations counted from before the model was built")
    _write_memory_table(out_dir / "fsdp-memory.csv", out["fsdp"], predicted_fsdp_terms, lambda c: c.model,
                        "step_ms", how + "; FSDP2 fully_shard per block and root on a one-rank NCCL group, fp32 "
                        "parameters, MixedPrecisionPolicy(bf16, reduce fp32), AdamW(foreach); peak over forward + "
                        "backward + optimizer step after two steps; allocations counted from before the model was "
                        "built, each case started after gc.collect() and empty_cache() (reserved is process-wide)")
    with open(out_dir / "grouped-gemm.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["experts", "tokens_per_expert", "k", "n", "dtype", "grouped_us", "grouped_fraction_of_bf16_peak",
                    "loop_us", "loop_fraction_of_bf16_peak", "gflop_per_expert", "how"])
        bf16 = 989e12  # the H100's and H200's dense bf16 peak: the fractions are for those devices
        for case, grouped, loop in out["grouped"]:
            def fraction(seconds):
                return "" if not seconds == seconds else f"{case.flops / seconds / bf16:.3f}"
            w.writerow([case.experts, case.tokens, case.k, case.n, "bf16",
                        "" if not grouped == grouped else f"{grouped * 1e6:.3f}", fraction(grouped),
                        f"{loop * 1e6:.3f}", fraction(loop), f"{case.flops / case.experts / 1e9:.3f}",
                        how + "; grouped: torch._grouped_mm over all experts (CUDA graph of back-to-back calls); "
                              "loop: one torch.matmul per expert; fractions of a 989 TFLOPS bf16 peak (H100/H200)"])
    with open(out_dir / "optimizer.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["where", "block", "params", "step_ms", "ns_per_param", "state_allocated_bytes",
                    "predicted_state_bytes", "state_error", "peak_allocated_bytes", "peak_reserved_bytes", "how"])
        for case, seconds, with_state, peak, reserved in out["optimizer"]:
            params = optimizer_params(case)
            gpu = case.where == "gpu"
            predicted = predicted_state_bytes(case) if gpu else 0
            block = (f"{case.block.style} b={case.block.batch} s={case.block.seq} h={case.block.hidden}"
                     if gpu else "")
            w.writerow([case.where, block, params, f"{seconds * 1e3:.3f}", f"{seconds / params * 1e9:.4f}",
                        int(with_state), int(round(predicted)),
                        f"{predicted / with_state - 1:+.3f}" if gpu and with_state else "", int(peak), int(reserved),
                        how + ("; gpu: fp32 block under bf16 autocast, AdamW(fused=True), state measured as "
                               "torch.cuda.memory_allocated after two steps less the input, peak over one "
                               "forward + backward + step" if gpu else "; cpu: AdamW(foreach=True), wall clock")])
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="folder for calibration.csv, blocks.csv, ...")
    parser.add_argument("--dry-run", action="store_true", help="no GPU, no torch: cost-model figures, same files")
    parser.add_argument("--cluster", default="h100-4x8-ib", help="preset whose cost model fills a dry run")
    parser.add_argument("--budget-s", type=float, default=420.0, help="stop starting cases after this (default 420)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="a few cases of each kind (smoke test)")
    parser.add_argument("--tables", default="all",
                        help="comma-separated tables to measure (gemm, attention, block, compiled, copy, optimizer, grouped, "
                             "model, fsdp; default all); the others' files are written empty")
    parser.add_argument("--alloc-conf", default=None,
                        help="PYTORCH_CUDA_ALLOC_CONF for this call, set before torch is imported (e.g. "
                             "expandable_segments:True, as torchtitan's launcher sets it); recorded in meta.json "
                             "and the how column")
    args = parser.parse_args(argv)
    if args.alloc_conf is not None:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = args.alloc_conf
    if not (math.isfinite(args.budget_s) and args.budget_s > 0) or args.warmup < 0 or args.repeats < 1:
        parser.error("--budget-s must be positive, --warmup >= 0, --repeats >= 1")
    meta = run(args)
    print(json.dumps({k: meta[k] for k in ("dry_run", "elapsed_s", "planned", "written")}, indent=None))
    for line in meta["skipped"]:
        print("skipped:", line)
    print(f"wrote {args.out}/calibration.csv, attention-backward.csv, blocks.csv, copies.csv, optimizer.csv, "
          "grouped-gemm.csv, model-memory.csv, fsdp-memory.csv, meta.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
