"""Memory per device of a hybrid plan: one function per term, each with its formula and source.

Units are bytes per device. Notation (Korthikanti et al. 2022, "Reducing Activation Recomputation
in Large Transformer Models", section 4): s sequence, b micro-batch, h hidden, a heads, t tensor
parallel degree, p pipeline degree, m micro-batches, v virtual stages; the attention width a x d
and the MLP width f are kept general (for a d = h, f = 4h the formulas are the paper's).
The search, the validator and the baselines all call these functions.
"""
from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, replace

from solver_plan.cost.model_state import ParameterState, state_per_parameter
from solver_plan.cost.precision import TrainingPrecision, default_for
from solver_plan.errors import InputError
from solver_plan.hybrid.context_parallel import kv_buffer_bytes
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.hybrid.stages import chunk_layers, held_layers
from solver_plan.hybrid.zero_bubble import ZERO_BUBBLE, head_stage, in_flight as zero_bubble_in_flight
from solver_plan.runtime.profiles import resolve_runtime

UNIFORM_RECOMPUTE = ("none", "selective", "full")  # least to most recomputation (and time)
# "per-stage": each stage uses the least recomputation that fits its own memory (evaluate.py)
RECOMPUTE_MODES = UNIFORM_RECOMPUTE + ("per-stage",)
# zero-bubble: hybrid/zero_bubble.py; zb-exact: the exact periodic schedule (hybrid/exact_zb.py)
SCHEDULES = ("1f1b", "interleaved", "gpipe", "zb-h1", "zb-h2", "zb-v", "zb-exact")


def _kernels(runtime):
    return resolve_runtime(runtime).kernels


@dataclass(frozen=True)
class StateBytes:
    """One training precision (`cost.precision.TrainingPrecision`) as the memory and communication
    terms use it: per parameter the model state (`model`, the model-state module's
    `cost.model_state.ParameterState`: working weights, gradients and optimizer state = master copy
    + moments, sharded by ZeRO in `weights_bytes` ... `optimizer_bytes`), per activation element
    `activations` bytes (the dtype of the tensors between operators).
    `MIXED_PRECISION` is mixed-precision Adam (Rajbhandari et al. 2020, ZeRO, section 3.1:
    2 + 2 + 12 = 16) with 16-bit activations (Korthikanti et al. 2022), the default of every term.
    `compute`: bytes of an element of the GEMMs' input dtype (fp8 1, bf16 2, fp32/tf32 4; None: the
    working weights' dtype), what a runtime that gathers weights already cast keeps of them
    (`fp8_gather_saving`)."""
    model: ParameterState
    activations: float
    compute: float | None = None
    # the model's weights, gradients and optimizer state (master copy + moments), copied as fields:
    # the search reads them in its inner loop
    weights: float = field(init=False, repr=False, compare=False)
    gradients: float = field(init=False, repr=False, compare=False)
    optimizer: float = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.model, ParameterState):
            raise InputError(f"expected a cost.model_state.ParameterState, got {self.model!r}", "StateBytes.model")
        if isinstance(self.activations, bool) or not isinstance(self.activations, (int, float)) \
                or not self.activations > 0:
            raise InputError(f"must be positive, got {self.activations!r}", "StateBytes.activations")
        if self.compute is not None and (isinstance(self.compute, bool) or not isinstance(self.compute, (int, float))
                                         or not self.compute > 0):
            raise InputError(f"must be positive or None, got {self.compute!r}", "StateBytes.compute")
        for name in ("weights", "gradients", "optimizer"):
            object.__setattr__(self, name, getattr(self.model, name))

    @property
    def activation_scale(self) -> float:
        """Factor from Korthikanti's 16-bit activation counts to this precision's: activations / 2."""
        return self.activations / 2.0


def precision_state(precision) -> StateBytes:
    """The `StateBytes` of a `TrainingPrecision` with Adam (`cost.model_state`, one rule for every
    planner): weights w, gradients g, optimizer m + 2 o: mixed bf16/fp16/fp8 2 + 2 + (4 + 8),
    fp32/tf32 4 + 4 + (0 + 8); activations in the precision's activation dtype (2 mixed, 4 fp32;
    fp8 keeps bf16 activations, Transformer Engine); `compute` the GEMMs' dtype (fp8 1)."""
    return StateBytes(state_per_parameter(precision, "adam"), float(precision.activations.bytes),
                      float(precision.compute.bytes))


MIXED_PRECISION = precision_state(TrainingPrecision.mixed())


def runtime_state(state: StateBytes, runtime) -> StateBytes:
    """The bytes per parameter as `runtime` keeps them in mixed precision
    (`ParameterState.for_runtime`): fp32 gradients (`fp32_gradients`: Megatron's main_grad,
    2 + 4 + 12 = 18 bytes per parameter, its distrib_optimizer.md table; FSDP2's fp32 reduce), and
    for FSDP2 (`sharded_fp32_params`) the fp32 sharded parameter doubling as the master copy
    (2 + 4 + 10 = 16: the 2 bytes of working weights are what the all-gather moves). Unchanged in
    fp32 training."""
    runtime = resolve_runtime(runtime)
    model = state.model.for_runtime(fp32_gradients=runtime.fp32_gradients,
                                    sharded_fp32_params=runtime.sharded_fp32_params)
    return state if model is state.model else replace(state, model=model)


def state_bytes(device=None, precision=None) -> StateBytes:
    """Bytes of `precision` (a `TrainingPrecision`), or of the one the cost core picks for `device`
    (`cost.precision.default_for`: mixed bf16/fp16 = 2 + 2 + 4 + 8, plain fp32 = 4 + 4 + 0 + 8);
    mixed precision (ZeRO's 2 + 2 + 12) without either."""
    if precision is None:
        precision = default_for(device) if device is not None else TrainingPrecision.mixed()
    return precision_state(precision)


# --- model state (Rajbhandari et al. 2020, figure 1: ZeRO stages 1, 2, 3; cost/model_state.py) ---
def weights_bytes(params: float, dp: int, zero_stage: int, state: StateBytes = MIXED_PRECISION) -> float:
    """Working weights of `params` parameters (already divided by t): w P (mixed precision 2 P,
    fp32 4 P), sharded over the dp replicas by ZeRO-3 (P_os+g+p): w P / dp."""
    return state.model.sharded_bytes("weights", params, zero_stage, dp)


def gradients_bytes(params: float, dp: int, zero_stage: int, state: StateBytes = MIXED_PRECISION) -> float:
    """Gradients in the gradient dtype: g P (mixed 2 P, fp32 4 P), sharded by ZeRO-2 and -3
    (P_os+g): g P / dp."""
    return state.model.sharded_bytes("gradients", params, zero_stage, dp)


def optimizer_bytes(params: float, dp: int, zero_stage: int, state: StateBytes = MIXED_PRECISION) -> float:
    """fp32 master weights (mixed precision only) and two fp32 Adam moments: (m + 2 o) P = 12 P
    mixed, 8 P fp32 (ZeRO section 3.1), sharded by ZeRO-1 and above (P_os; Megatron's distributed
    optimizer is the same): (m + 2 o) P / dp."""
    return state.model.sharded_bytes("optimizer", params, zero_stage, dp)


# --- activations (Korthikanti et al. 2022, section 4.1-4.3, table 2) --------------------------
# Korthikanti's counts are bytes of 16-bit training: each activation element 2 bytes, each dropout
# mask element 1 byte. In another activation dtype of e bytes the elements take e/2 times as many
# bytes and the masks (uint8 in PyTorch whatever the dtype) stay 1 byte per element: the terms
# below are written as (2-byte elements) x e/2 + masks.
def layer_activation_bytes(spec: TransformerSpec, b: int, t: int, recompute: str, sequence_parallel: bool,
                           state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """Activations one transformer layer keeps for backward, per micro-batch (Korthikanti's counts,
    16-bit elements scaled by e/2, `state.activation_scale`; masks 1 byte):
    - none, no parallelism: s b h (34 + 5 a s / h); the general form is
      s b (10 h + 2 (a d + 2 kv d) + 2 a d + mlp) + 5 a s^2 b (layer-norm inputs 4sbh, attention and MLP
      inputs 4sbh, dropout masks 2sbh; Q (2 s b a d), K and V (2 s b kv d each: grouped-query attention
      stores the kv_heads-wide tensors), projection input 2 s b a d; MLP: GeLU input and second
      matrix input 4 s b f; gated (Megatron's fused SwiGLU keeps its 2f-wide input and the down
      projection's input) 6 s b f; experts: top_k x that, plus the top_k dispatched copies 2 top_k s b h;
      scores 5 a s^2 b: softmax output 2, its dropout mask 1, dropout output 2);
    - tensor parallel t: s b h (10 + 24/t + 5 a s/(h t)): the 10 s b h outside the t-split regions stays;
    - tensor + sequence parallel: s b h (34/t + 5 a s/(h t)): everything is split;
    - selective recomputation drops the 5 a s^2 b term (softmax, its dropout, scores: recomputed);
    - full recomputation keeps only the layer input, 2 s b h (2 s b h / t with sequence parallel);
    - sandwich norms (Gemma) add their inputs, 4 s b h with the replicated part; q/k norms (Qwen3,
      Gemma 3) theirs, 2 s b (a d + kv d) with the split part (the norms' outputs are the Q and K
      counted above).
    In an e-byte activation dtype: the 2-byte parts x e/2, so 10 s b h -> (8 e/2 + 2) s b h and
    5 a s^2 b -> (4 e/2 + 1) a s^2 b (fp32: 18 s b h and 9 a s^2 b); the rest x e/2.
    As `runtime` (a `RuntimeProfile`; None: megatron-core) runs the block:
    - the scores are `cost.kernels.attention_scores(...).kept_bytes` (the per-operator cost model's
      definition): 5 a s^2 b unfused with dropout, 2 a s^2 b without, nothing for fused attention,
      which keeps instead its fp32 log-sum-exp, 4 a s b bytes (FlashAttention's backward input);
    - a gated MLP without a fused SwiGLU kernel (torchtitan's eager w2(silu(w1 x) * w3 x)) keeps
      the gate, up, silu and product tensors, 8 s b f instead of 6 s b f;
    - with sequence parallelism under a runtime whose column-parallel GEMMs save the input they
      all-gathered (`Kernels.sp_saves_gathered_inputs`: torch DTensor's ColwiseParallel), the
      attention's and the MLP's inputs are kept whole, not split: + x 4 s b h (1 - 1/t) (no
      recomputation, or Megatron-style selective; full and op-level selective recompute them)."""
    from solver_plan.cost.kernels import attention_scores

    kernels = _kernels(runtime)
    s, h, a = spec.seq, spec.hidden, spec.heads
    x = state.activation_scale
    if recompute == "full":
        return x * 2.0 * s * b * h / (t if sequence_parallel else 1)
    # Gemma's sandwich norms keep their inputs too: the attention's and the MLP's outputs, 4 s b h
    replicated = (x * (12.0 if spec.sandwich_norms else 8.0) + 2.0) * s * b * h
    mlp = (6.0 if kernels.fused_swiglu else 8.0) * s * b * spec.ffn if spec.gated_mlp else 4.0 * s * b * spec.ffn
    if spec.experts > 1:
        mlp = spec.top_k * (mlp + 2.0 * s * b * h)
    # q/k norms (Qwen3, Gemma 3) keep their inputs, the q and k projections' outputs: 2 s b (a d + kv d)
    qk = 2.0 * s * b * (spec.attn_width + spec.kv_width) if spec.qk_norm else 0.0
    split = x * (2.0 * s * b * (spec.attn_width + 2 * spec.kv_width) + 2.0 * s * b * spec.attn_width + mlp + qk)
    if recompute == "selective" and kernels.selective_policy == "every-other-matmul":
        return op_selective_bytes(spec, b, t, sequence_parallel, state, kernels)
    if kernels.flash_attention:
        scores = 4.0 * a * s * b  # log-sum-exp, fp32, kept in every mode but full
    elif recompute == "none":
        scores = attention_scores(a * s * s * b, state.activations, False, kernels.attention_dropout).kept_bytes
    else:
        scores = 0.0
    if sequence_parallel:
        gathered = x * 4.0 * s * b * h * (1.0 - 1.0 / t) if kernels.sp_saves_gathered_inputs else 0.0
        return (replicated + split + scores) / t + gathered
    return replicated + (split + scores) / t


def matmul_output_widths(spec: TransformerSpec) -> tuple[float, ...]:
    """Output widths (per token) of a decoder block's matmuls in the order the block calls them:
    q, k, v, output projection, then the MLP: gated w1 (gate), w3 (up), w2 (down) (torchtitan
    FeedForward.forward, w2(F.silu(w1(x)) * w3(x)): Python evaluates w1 before w3), else up, down.
    An MoE block's MLP widths count top_k times (each token passes top_k experts)."""
    h, k = spec.hidden, max(1, spec.top_k if spec.experts > 1 else 1)
    mlp = (spec.ffn * k, spec.ffn * k, h * k) if spec.gated_mlp else (spec.ffn * k, h * k)
    return (spec.attn_width, spec.kv_width, spec.kv_width, h) + mlp


def op_selective_bytes(spec: TransformerSpec, b: int, t: int, sequence_parallel: bool, state: StateBytes,
                       kernels) -> float:
    """What torchtitan's op-level selective checkpointing keeps of a layer (`selective_policy`
    "every-other-matmul"): the layer input (e s b h, / t with sequence parallelism), the attention
    output (e s b a d / t) with its fp32 log-sum-exp (4 a s b / t), and the odd-numbered matmul
    outputs in call order (`matmul_output_widths`), e s b (w1 + w3 + w5 + ...) / t: the policy counts
    aten.mm calls within one block and recomputes those whose count is even (torchtitan
    parallelize_llama.py _custom_policy: `meta[mm_count_key] % 2 == 0` -> PREFER_RECOMPUTE, a fresh
    `meta` per block in selective_checkpointing_context_fn). A Llama block keeps q, v, gate and down:
    e s b (a d + kv d + f + h) / t; a plain MLP keeps q, v, up: e s b (a d + kv d + f) / t. The norms,
    activations and residuals are recomputed."""
    s, h, e = spec.seq, spec.hidden, state.activations
    saved = sum(matmul_output_widths(spec)[0::2])
    return (e * s * b * h / (t if sequence_parallel else 1)
            + (e * s * b * spec.attn_width + 4.0 * spec.heads * s * b + e * s * b * saved) / t)


def recompute_working_bytes(spec: TransformerSpec, b: int, t: int, recompute: str, sequence_parallel: bool,
                            state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """Extra memory while one layer runs its backward (Korthikanti et al. 2022, 4.2): full
    recomputation rematerialises one whole layer's activations (the `none` amount of one layer);
    selective, the attention scores of one layer (`attention_scores(...).kept_bytes` / t: 5 a s^2 b / t
    in 16-bit with dropout; nothing with fused attention); none, nothing. With fused attention
    (`runtime`), plus the kernel's backward temporaries: FlashAttention-2 accumulates dQ in fp32,
    4 s b (a d) / t bytes (flash_attn's dq_accum), or the MLP's backward transients
    (`mlp_backward_bytes`), whichever is larger (the MLP's backward runs first, the attention's after it,
    so they never coexist). With sequence parallelism, plus the all-gathered
    (whole-sequence) inputs of the attention's and the MLP's column-parallel GEMMs, which backward
    gathers again: 2 e s b h (Korthikanti et al. 2022, section 4.2.2), in every mode, unless the
    runtime keeps them from the forward (`Kernels.sp_saves_gathered_inputs`: then they are in the
    layer's activations, kept or rematerialised, and backward gathers nothing again).
    Full recomputation under a runtime whose fusions are torch.compile's (`Kernels.fusions_compiled`)
    is priced with the unfused kernels (`unfused_runtime`): the compiled block's backward graph
    rematerialises the block and was measured to hold no less than the eager block's backward."""
    from solver_plan.cost.kernels import attention_scores

    if recompute == "full" and _kernels(runtime).fusions_compiled:
        runtime = unfused_runtime(runtime)
    kernels = _kernels(runtime)
    flash = 4.0 * spec.seq * b * spec.attn_width / t if kernels.flash_attention else 0.0
    flash = max(flash, mlp_backward_bytes(spec, b, t, sequence_parallel, state, runtime))
    if sequence_parallel and t > 1 and not kernels.sp_saves_gathered_inputs:
        # the two column-parallel GEMMs' all-gathered inputs, whole (Korthikanti 4.2.2)
        flash += 2.0 * state.activations * spec.seq * b * spec.hidden
    if recompute == "full":
        return layer_activation_bytes(spec, b, t, "none", sequence_parallel, state, runtime) + flash
    if recompute == "selective" and kernels.selective_policy == "every-other-matmul":  # one layer's dropped tensors
        return flash + max(0.0, layer_activation_bytes(spec, b, t, "none", sequence_parallel, state, runtime)
                           - op_selective_bytes(spec, b, t, sequence_parallel, state, kernels))
    if recompute == "selective":
        scores = spec.heads * spec.seq * spec.seq * b / t
        return flash + attention_scores(scores, state.activations, kernels.flash_attention,
                                        kernels.attention_dropout).kept_bytes
    return flash


def unfused_runtime(runtime):
    """`runtime` with torch.compile's fusions off (fused_swiglu, fused_norm_rope): its eager kernels,
    for the working set of a compiled block's backward under full recomputation. H200, 4 Llama 3.1 405B
    blocks under TP 8 (data/device/h200-2026-11-27-compile-fp8): peak 23.00 GiB allocated compiled,
    22.56 eager, where the fused kernels' smaller working set would price 0.48 GiB less than eager."""
    return _unfused(resolve_runtime(runtime))


@functools.lru_cache(maxsize=None)
def _unfused(profile):
    """`unfused_runtime` of a resolved profile, built once per profile (it is asked per stage and point)."""
    kernels = replace(profile.kernels, fused_swiglu=False, fused_norm_rope=False, fusions_compiled=False)
    return replace(profile, kernels=kernels)


def mlp_backward_bytes(spec: TransformerSpec, b: int, t: int, sequence_parallel: bool,
                       state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """Memory the MLP's backward adds on top of the kept activations, at its peak (e bytes per element):
    at the output projection's backward, the gradient of its input, e s b f / t, while the incoming
    gradient e s b h (/ t with sequence parallelism) is alive, plus, unless the runtime's weight-gradient
    GEMMs accumulate straight into the gradient buffer (`Kernels.wgrad_fused`, Megatron's
    gradient_accumulation_fusion), the new weight gradient e h f / t before it is added to (or reduced
    from) the parameter's gradient; an unfused gated MLP (eager SiLU x up) then holds the gradients of
    both halves while the product's is alive, 2 e s b f / t net of what it frees, if that is larger.
    Measured on an H100 (data/device/h100-2026-11-26/blocks.csv: eager PyTorch blocks, gradients
    accumulated into existing .grad): the peak less the kept activations is these terms within 0.1% on
    all five blocks (Llama-style 4096/14336 at 4K and 8K tokens, GPT-style 2048/8192 and 6144/24576)."""
    kernels = _kernels(runtime)
    e, f = state.activations, spec.ffn / t
    tokens = spec.seq * b
    incoming = tokens * spec.hidden / (t if sequence_parallel and t > 1 else 1)
    wgrad = 0.0 if kernels.wgrad_fused else spec.hidden * f
    peak = e * (tokens * f + incoming + wgrad)
    if spec.gated_mlp and not kernels.fused_swiglu:
        peak = max(peak, 2.0 * e * tokens * f)
    return peak


def embedding_activation_bytes(spec: TransformerSpec, b: int, t: int, sequence_parallel: bool,
                               state: StateBytes = MIXED_PRECISION) -> float:
    """First stage: embedding output and its dropout mask, s b h (2 + 1) bytes in 16-bit, s b h (e + 1)
    in an e-byte dtype (Korthikanti et al. 2022, eq. 4; / t with sequence parallelism, else whole)."""
    return (state.activations + 1.0) * spec.seq * b * spec.hidden / (t if sequence_parallel else 1)


def logits_activation_bytes(spec: TransformerSpec, b: int, t: int, sequence_parallel: bool,
                            state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """Last stage of a dense transformer: `loss_stage_bytes` of its s b tokens."""
    return loss_stage_bytes(spec.seq * b, spec.hidden, spec.vocab, t, sequence_parallel, state, runtime)


def loss_stage_bytes(tokens: float, hidden: int, vocab: int, t: int, sequence_parallel: bool,
                     state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """What the last stage keeps for its `tokens` (s b; a mixture of experts' s b / cp): the final
    layer-norm input and the output projection's input, 2 e s b h (4 s b h in 16-bit; / t with
    sequence parallelism, except the output projection's input under a runtime whose
    column-parallel GEMM saves the whole all-gathered input, `Kernels.sp_saves_gathered_inputs`:
    torchtitan's output layer is ColwiseParallel(input_layouts=Shard(1)), e s b h + e s b h / t),
    plus the logits in fp32 for the (vocabulary-parallel) cross entropy, 4 s b V / t, in every
    precision (Korthikanti et al. 2022, 4.3): in general the runtime's bytes per logit at the loss's
    peak (`Kernels.loss_bytes_per_logit`: Megatron 4, eager PyTorch F.cross_entropy on fp32 logits 12,
    a fused cross-entropy kernel 2); with the vocabulary split over t > 1, the runtime's vocabulary-parallel
    loss's if it has its own (`Kernels.loss_parallel_bytes_per_logit`: torch loss_parallel 16)."""
    kernels = _kernels(runtime)
    logits = kernels.loss_bytes_per_logit
    if t > 1 and kernels.loss_parallel_bytes_per_logit is not None:
        logits = kernels.loss_parallel_bytes_per_logit
    split = t if sequence_parallel else 1
    projection_input = 1 if sequence_parallel and kernels.sp_saves_gathered_inputs else split
    return (state.activations * tokens * hidden * (1.0 / split + 1.0 / projection_input)
            + logits * tokens * vocab / t)


def loss_hole_bytes(logits: float, loss: float, working: float, runtime=None) -> float:
    """Reserved-but-unallocated bytes the loss adds to a last stage's peak, for `logits` logit elements
    per device (s b V / t), the loss's bytes `loss` at its peak and the backward working set `working`
    that never coexists with it: a hole H = `Kernels.loss_hole_bytes_per_logit` x logits at the loss's
    peak, so the reserved peak is max(working, loss + H) where the allocated one is max(working, loss).
    Measured (data/device/h200-2026-11-27-alloc/traces-expandable, every event of PyTorch's caching
    allocator): torchtitan's loss F.cross_entropy(pred.float()) frees the bf16 prediction (2 B a logit)
    and its fp32 cast (4) before backward; the backward's first fp32 tensor takes the cast's place, the
    second does not fit the 2 B left and extends the segment, so the prediction's bytes stay a hole until
    the loss's tensors are freed (the eager decoders, FSDP2 at world sizes 1 and 8, loss_parallel)."""
    hole = _kernels(runtime).loss_hole_bytes_per_logit * logits
    return max(working, loss + hole) - max(working, loss)


def gathered_input_hole_bytes(elements: float, t: int, sequence_parallel: bool, state: StateBytes = MIXED_PRECISION,
                              runtime=None) -> float:
    """Reserved-but-unallocated bytes a stage of blocks under tensor and sequence parallelism (t > 1)
    adds to its peak: `MemoryReserve.gathered_input_holes` x e x `elements` (s b h, a whole sequence's
    block input). Measured (data/device/h200-2026-11-27-alloc/traces-expandable: tp-head-70b,
    tp-head-405b, tp-stage-1f1b, rank 0 of torchtitan's TP 8 on a fake process group): one freed
    whole-sequence tensor of e s b h bytes, DTensor's all-gather of a sequence-sharded input, stays a
    hole between live blocks at the peak (2.147 GB of 2.147; 1.141 and 0.990 of 1.074)."""
    if t <= 1 or not sequence_parallel:
        return 0.0
    return resolve_runtime(runtime).memory.gathered_input_holes * state.activations * elements


# --- micro-batches in flight (Narayanan et al. 2021 sections 2.2.1-2.2.2; Korthikanti 4.2.3) ---
def in_flight_microbatches(stage: int, pp: int, m: int, schedule: str, v: int = 1) -> float:
    """Micro-batches whose activations stage `stage` (0-based) holds at its peak, in units of the
    stage's whole layer range:
    - gpipe: all m;
    - 1f1b: min(p - i, m) (stage i runs p - i forwards before its first backward);
    - interleaved with v chunks: Megatron's warm-up of 2 (p - i - 1) + (v - 1) p chunk passes plus
      one, each 1/v of the stage: ((v - 1) p + 2 (p - i - 1) + 1) / v, at most m; for stage 0 this is
      p (1 + (p - 1)/(p v)), the figure of Korthikanti et al. 2022 section 4.2.3;
    - zero-bubble: p (ZB-H1, ZB-V) or 2p - 1 (ZB-H2) on every stage, at most m (zero_bubble.in_flight);
    - zb-exact: 1, the least of any schedule (the exact pattern's counts are passed to stage_memory)."""
    if schedule == "gpipe":
        return float(m)
    if schedule == "zb-exact":  # the pattern's own counts are given to stage_memory (`in_flight`); alone, the
        return 1.0  # least any schedule holds (floors and cuts)
    if schedule in ZERO_BUBBLE:
        return zero_bubble_in_flight(pp, m, schedule)
    if schedule == "interleaved" and v > 1:
        return min(float(m), ((v - 1) * pp + 2 * (pp - stage - 1) + 1) / v)
    return float(min(pp - stage, m))


def held_blocks(layers: int, stage: int, pp: int, m: int, schedule: str, v: int = 1) -> float:
    """Block-micro-batches of activations stage `stage` holds at its peak: `layers` x
    `in_flight_microbatches`, except under the interleaved schedule, where the chunks of a stage
    whose blocks v does not divide differ by one block and the warm-up's chunk passes are counted
    one by one (stages.held_layers; the same figure when v divides `layers`)."""
    if schedule == "interleaved" and v > 1:
        return held_layers(layers, stage, pp, m, v)
    return layers * in_flight_microbatches(stage, pp, m, schedule, v)


# --- buffers -------------------------------------------------------------------------------
def p2p_buffer_bytes(spec: TransformerSpec, b: int, t: int, sequence_parallel: bool, pp: int,
                     state: StateBytes = MIXED_PRECISION) -> float:
    """Send and receive buffers of pipeline activations and their gradients: 4 x e s b h bytes
    (e = 2 in 16-bit; / t with sequence parallel, as Megatron's scatter-gather optimisation sends
    1/t); none for p = 1."""
    if pp == 1:
        return 0.0
    return 4.0 * state.activations * spec.seq * b * spec.hidden / (t if sequence_parallel else 1)


def pipeline_buffer_bytes(spec: TransformerSpec, b: int, t: int, sequence_parallel: bool, pp: int,
                          micro_batches: int, in_flight: float, first: bool, last: bool, virtual_stages: int = 1,
                          state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """A device's pipeline buffers as `runtime` keeps them: `p2p_buffer_bytes` (a few reused
    buffers, Megatron), or, under a runtime that keeps them per micro-batch
    (`MemoryReserve.pipeline_buffers_per_microbatch`: torch.distributed.pipelining's stage, torch
    1963fc8 stage.py; read in torch 2.6.0's, branched from main on 2024-12-13), with x = e s b h
    (/ t with sequence parallelism) the stage boundary tensor, m micro-batches, f = `in_flight` of
    them held (per chunk) and v chunks per device, at the last backward that still finds f in flight
    (the end of the steady phase, when all m forwards are done and m - f backwards):
    - each chunk with a previous stage (v, less one on the first device) allocates m activation
      receive buffers (_prepare_forward_infra, requires_grad leaves); the f in flight are the first
      block's saved input, already in the activations, so (m - f) x each; and autograd accumulates
      each finished micro-batch's input gradient into its buffer's .grad (stage_backward reads
      val.grad; stage_backward_input sets inp.grad), which only clear_runtime_states drops at the
      next step: (m - f) x more, 2 (m - f) x each;
    - each chunk with a next stage (v, less one on the last device) allocates m gradient receive
      buffers (_prepare_backward_infra) and keeps every micro-batch's output in output_chunks
      (forward_one_chunk appends it on every stage; clear_runtime_states empties it at the next
      step), all m forwards done: 2 m x each;
    - the last chunk's outputs are the logits, e s b V / t each, m of them (the loss's fp32 tensors,
      `logits_activation_bytes`, are copies of them): m e s b V / t.
    None for p = 1."""
    if pp == 1 or not resolve_runtime(runtime).memory.pipeline_buffers_per_microbatch:
        return p2p_buffer_bytes(spec, b, t, sequence_parallel, pp, state)
    x = state.activations * spec.seq * b * spec.hidden / (t if sequence_parallel else 1)
    m, v = float(micro_batches), virtual_stages
    f = min(float(in_flight), m)
    receiving, sending = v - (1 if first else 0), v - (1 if last else 0)
    logits = m * state.activations * spec.seq * b * spec.vocab / t if last else 0.0
    return receiving * 2.0 * (m - f) * x + sending * 2.0 * m * x + logits


def zero3_gather_bytes(layer_params: float, zero_stage: int, state: StateBytes = MIXED_PRECISION,
                       layer_bytes: float | None = None) -> float:
    """ZeRO-3 gathers each layer's full (t-sharded) weights before use and prefetches the next: two
    layers of working weights, 2 w P_layer (Rajbhandari et al. 2020, section 7: constant-size gather
    buffers); 2 x `layer_bytes` where a gathered layer is not w P_layer (`gathered_block_bytes`)."""
    if zero_stage < 3:
        return 0.0
    return 2.0 * (state.weights * layer_params if layer_bytes is None else layer_bytes)


def fp8_gather_saving(spec: TransformerSpec, t: int, state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """Bytes one gathered (unsharded) block holds less on a rank when FSDP all-gathers the fp8 casts of
    its Linear weights instead of the working weights: (w - c) P_lin / t, with P_lin = the block's
    weight matrices (`TransformerSpec.block_matrix_params`, h (a d + 2 kv d) + a d h + E k h f: k MLP
    matrices, E experts; the norms, biases and an MoE router stay in w: Float8Linear keeps its bias in
    high precision), w the working
    weights' bytes (2) and c the GEMMs' (`StateBytes.compute`, fp8: 1): on a Llama 3.1 405B block at
    t = 8, 3.187e9 / 8 bytes (0.37 GiB).
    Only under a runtime that does so (`RuntimeProfile.fp8_weight_gather`: torchao float8's
    WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather all-gathers the fp8 data and
    fsdp_post_all_gather makes the unsharded parameter a Float8Tensor of it, torchao 0.8.0 float8/
    fsdp_utils.py; torchtitan float8.enable_fsdp_float8_all_gather) and only when the GEMMs run in a
    dtype narrower than the weights (c < w); the embeddings, norms and output projection stay in w
    (torchtitan's float8.py converts every nn.Linear but "output"). 0 otherwise."""
    if not resolve_runtime(runtime).fp8_weight_gather or state.compute is None or state.compute >= state.weights:
        return 0.0
    return (state.weights - state.compute) * spec.block_matrix_params / t


def gathered_block_bytes(spec: TransformerSpec, t: int, state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """Bytes of one block's weights on a rank once FSDP (ZeRO-3) has gathered them: w P_block / t, less
    `fp8_gather_saving` (c P_lin / t + w (P_block - P_lin) / t under fp8 all-gather)."""
    return state.weights * spec.block_params / t - fp8_gather_saving(spec, t, state, runtime)


def fsdp_root_bytes(root_params: float, zero_stage: int, state: StateBytes = MIXED_PRECISION,
                    runtime=None) -> float:
    """FSDP2 keeps the root module's parameters unsharded from the start of forward to the end of
    backward: w P_root bytes (bf16: 2 P_root), P_root = the parameters outside the per-block units
    (embeddings, final norm, output projection; / t). torchtitan wraps every block in its own
    fully_shard and the whole model in the root one (parallelize_llama.py apply_fsdp), and FSDP2's
    root state sets `post_forward_mesh_info = None` ("For the root, do not reshard after forward
    since for training, the parameters would be freed and all-gathered immediately",
    torch/distributed/_composable/fsdp/_fsdp_state.py FSDPState._lazy_init; the fully_shard docs:
    reshard_after_forward None -> False for the root). Only runtimes whose profile says so
    (`RuntimeProfile.fsdp_root_unsharded`), with ZeRO-3; nothing otherwise."""
    if zero_stage < 3 or not resolve_runtime(runtime).fsdp_root_unsharded:
        return 0.0
    return state.weights * root_params


def stream_pool_bytes(root_params: float, layer_params: float, gradients: float, gradients_live: float,
                      zero_stage: int, state: StateBytes = MIXED_PRECISION, runtime=None,
                      layer_bytes: float | None = None, gather_pool: bool = True) -> float:
    """Reserved bytes of FSDP2's side-stream allocator pools that the allocated peak does not count.

    PyTorch's caching allocator hands a freed block only to later allocations on the stream it was
    allocated on (c10/cuda/CUDACachingAllocator.cpp: Block.stream; with expandable segments one
    growing segment per (stream, pool)), so max_memory_reserved is the sum of each stream's own peak,
    not the peak of their sum. FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py):
    - reduce-scatter stream: `reduce_output`, the sharded gradients in the reduce dtype, which stay
      as the parameters' .grad until zero_grad frees them to that pool: the whole `gradients`
      (g P / dp), less `gradients_live`, the part the allocated peak already holds;
    - all-gather copy-in stream: `all_gather_output`, a unit's unsharded parameters in the
      all-gather dtype, held (AllGatherState) until the next unit's all-gather is issued: two units
      at once, the largest pair being the root (`root_params`: the stage's parameters outside its
      blocks, `fsdp_root_bytes`) with the first block: w (max(P_root, P_layer) + P_layer); with a block
      gathered in `layer_bytes` B instead (`gathered_block_bytes`: fp8 all-gather), max(w P_root, B) + B;
      `gather_pool` False: none (a one-rank shard group, below).
    ZeRO-3 under a runtime whose profile says so (`MemoryReserve.fsdp_stream_pools`); 0 otherwise.
    Measured (data/device/h200-2026-11-27-alloc/traces-expandable, allocator traces of the kit's FSDP2
    decoder): the reduce-scatter stream's pool is 4 B x P / dp at world sizes 1 (7.70 GB) and 8 (0.965
    GB, a fake 8-rank group); the all-gather outputs have their own stream's pool at world size 8 (2.81
    GB mapped against 2.54 priced) but are allocated on the compute stream at world size 1."""
    if zero_stage < 3 or not resolve_runtime(runtime).memory.fsdp_stream_pools:
        return 0.0
    block = state.weights * layer_params if layer_bytes is None else layer_bytes
    gathered = max(state.weights * root_params, block) + block if gather_pool else 0.0
    return max(0.0, gradients - gradients_live) + gathered


def stage_pool_bytes(root_params: float, layer_params: float, params: float, dp: int, zero_stage: int,
                     gradients: float, gradients_live: float, pipelined_fsdp: bool = False,
                     state: StateBytes = MIXED_PRECISION, runtime=None, layer_bytes: float | None = None) -> float:
    """`stream_pool_bytes` of a stage as its plan runs it. Without a pipeline the caller's `gradients`
    (the stage's, in `zero_stage`'s sharding) and `gradients_live`. With FSDP under a pipeline
    (`pipelined_fsdp`: ZeRO-3 with pp > 1, which `fsdp.state_zero` prices as ZeRO-1 so the stage's
    `zero_stage` is 1 here) the side-stream pools are still FSDP2's: the reduce-scatter pool holds the
    sharded gradients `reduce_output`, g P / dp (`gradients_bytes` at ZeRO-3, fp32 under FSDP2), which
    the last micro-batch's reduce-scatter leaves as .grad until zero_grad; none of them is in the
    allocated peak, whose gradients are the unsharded fp32 accumulation
    (torch/distributed/fsdp/_fully_shard/_fsdp_param.py FSDPParam.to_accumulated_grad_if_needed:
    `unsharded_accumulated_grad`, a different tensor on the compute stream), so `gradients_live` is 0;
    and the all-gather pool holds two units' `all_gather_output` as without a pipeline (the first
    micro-batch's forward gathers every unit, one prefetched ahead: reshard_after_forward=False under
    PP, torchtitan 9dec370 parallelize_llama.py apply_fsdp). `layer_bytes`: a gathered block's bytes
    when not w P_layer (`stream_pool_bytes`)."""
    if pipelined_fsdp:
        return stream_pool_bytes(root_params, layer_params, gradients_bytes(params, dp, 3, state), 0.0, 3,
                                 state, runtime, layer_bytes, gather_pool=dp > 1)
    return stream_pool_bytes(root_params, layer_params, gradients, gradients_live, zero_stage, state, runtime,
                             layer_bytes, gather_pool=dp > 1)


@dataclass(frozen=True)
class StageMemory:
    """Peak bytes on one device of a pipeline stage, by term."""
    weights: float
    gradients: float
    optimizer: float
    activations: float
    recompute_working: float
    buffers: float
    workspace: float = 0.0  # GEMM workspaces (in the allocator)
    fragmentation: float = 0.0  # the caching allocator's reserved-but-unallocated memory (+ side-stream pools)
    cuda_context: float = 0.0  # outside the allocator
    nccl: float = 0.0  # outside the allocator
    host: float = 0.0  # in host memory, not on the device (optimizer offload: hybrid/offload.py)

    @property
    def allocated(self) -> float:
        """What torch.cuda.max_memory_allocated would report at the peak."""
        return (self.weights + self.gradients + self.optimizer + self.activations + self.recompute_working
                + self.buffers + self.workspace)

    @property
    def reserved(self) -> float:
        """What torch.cuda.max_memory_reserved would report: allocated + fragmentation."""
        return self.allocated + self.fragmentation

    @property
    def total(self) -> float:
        """The process's device memory (nvidia-smi): reserved + CUDA context + NCCL buffers."""
        return self.reserved + self.cuda_context + self.nccl

    def to_dict(self) -> dict:
        """JSON-ready dict of the stage's memory terms in whole bytes, with allocated, reserved and total."""
        return {**{k: int(round(v)) for k, v in asdict(self).items()}, "allocated": int(round(self.allocated)),
                "reserved": int(round(self.reserved)), "total": int(round(self.total))}


def stage_params(spec: TransformerSpec, layers: int, first: bool, last: bool, t: int, pp: int) -> float:
    """Parameters on one device of a stage: its blocks / t, the embeddings / t on the first stage, the
    final norm and the output projection on the last: an untied one / t (vocabulary-parallel), or,
    tied and on another stage than the embedding (p > 1, not ZB-V's first stage that holds both), a
    copy of the word embedding / t (Megatron keeps one there for the output projection and
    all-reduces its gradient with the first stage's)."""
    params = layers * spec.block_params / t
    if first:
        params += spec.embedding_params / t
    if last:
        params += spec.norm_params + spec.vocab * spec.hidden / t * (
            (0.0 if first else 1.0) if spec.tied_embeddings else 1.0)
    return params


def communicators(tp: int, dp: int, pp: int, tied_embeddings: bool, cp: int = 1, replicate: int = 1) -> int:
    """NCCL communicators a device of the plan joins: its data-parallel group (dp > 1; with context
    parallelism the dp x cp group), its tensor-parallel group (tp > 1), its two pipeline neighbours
    (pp > 1; Megatron and torch both make one communicator per send/receive pair), the
    tied-embedding group of the end stages (pp > 1, tied), its context-parallel group (cp > 1) and,
    with hybrid sharding, its replicate group (`replicate` > 1; `dp` is then the shard group)."""
    return (dp > 1) + (tp > 1) + 2 * (pp > 1) + (pp > 1 and tied_embeddings) + (cp > 1) + (replicate > 1)


def runtime_reserve(runtime, dynamic_bytes: float, communicator_count: int) -> dict[str, float]:
    """The runtime's memory beyond the model's tensors (`runtime.profiles.MemoryReserve`): GEMM
    workspace, fragmentation = the profile's fraction of the memory that changes during a step
    (`dynamic_bytes`: activations, backward working set, buffers), the CUDA context, and NCCL
    buffers per communicator."""
    reserve = resolve_runtime(runtime).memory
    return {"workspace": reserve.workspace, "fragmentation": reserve.fragmentation * dynamic_bytes,
            "cuda_context": reserve.cuda_context, "nccl": reserve.nccl_per_communicator * communicator_count}


def stage_memory(spec: TransformerSpec, *, layers: int, stage: int, pp: int, tp: int, dp: int, micro_batch: int,
                 micro_batches: int, recompute: str, sequence_parallel: bool, zero_stage: int, schedule: str,
                 virtual_stages: int = 1, state: StateBytes = MIXED_PRECISION, runtime=None,
                 cp: int = 1, replicate: int = 1, recompute_layers: int | None = None,
                 in_flight: float | None = None, offload: str = "none",
                 offload_layers: int | None = None, pipelined_fsdp: bool = False) -> StageMemory:
    """Sum of the terms above for stage `stage` holding `layers` blocks, as `runtime` (None:
    megatron-core) runs them, with its reserve (`runtime_reserve`). With context parallelism `spec`
    is one rank's (s / cp tokens, context_parallel.local_spec) and `dp` the dp x cp ranks sharing
    the weights; the key/value exchange's buffers (context_parallel.kv_buffer_bytes, of the whole
    sequence's spec: s / cp x cp tokens) join the buffers. With hybrid sharding (fsdp.py) `dp` is
    the shard group and `replicate` the number of such groups. Partial recomputation (`recompute`
    "full" with `recompute_layers` r < `layers`, Megatron's --recompute-method block
    --recompute-num-layers r): r blocks keep full recomputation's input only, the other k - r all
    their activations, and the backward working set is full recomputation's (one rematerialised
    block); 1F1B and GPipe only (every block holds the same micro-batches). `in_flight`: the
    micro-batches the stage holds at its peak when the schedule's pattern gives them (zb-exact:
    hybrid/exact_zb.py), instead of `in_flight_microbatches`. `offload` "optimizer" (or "both"): the
    optimizer state in host memory (`StageMemory.host`, offload.host_bytes), none of it on the device;
    "activations" (or "both", pp 1): the kept activations of `offload_layers` r of the blocks on the
    host (default: all but one, the least device memory), the device keeping the others and one in
    transit (offload.device_blocks). `pipelined_fsdp`: the plan is FSDP (ZeRO-3) under a pipeline,
    priced as `zero_stage` 1 (fsdp.state_zero) but with FSDP2's side-stream pools (`stage_pool_bytes`)."""

    runtime = resolve_runtime(runtime)  # once: every term below reads the profile
    first, last = stage == 0, stage == head_stage(pp, schedule)
    params = stage_params(spec, layers, first, last, tp, pp)
    b, t, sp = micro_batch, tp, sequence_parallel
    flight = in_flight_microbatches(stage, pp, micro_batches, schedule, virtual_stages) if in_flight is None \
        else float(in_flight)
    per_block = layer_activation_bytes(spec, b, t, recompute, sp, state, runtime)
    if recompute == "full" and recompute_layers is not None and recompute_layers < layers:
        kept = layer_activation_bytes(spec, b, t, "none", sp, state, runtime)
        per_block = (recompute_layers * per_block + (layers - recompute_layers) * kept) / layers
    acts = (held_blocks(layers, stage, pp, micro_batches, schedule, virtual_stages) if in_flight is None
            else layers * flight) * per_block
    host = 0.0
    if offload in ("activations", "both") and layers:
        from solver_plan.hybrid.offload import device_blocks

        r = max(0, layers - 1) if offload_layers is None else offload_layers
        acts, host = flight * device_blocks(layers, r) * per_block, flight * r * per_block
    if first:
        acts += embedding_activation_bytes(spec, b, t, sp, state) * flight
    loss = logits_activation_bytes(spec, b, t, sp, state, runtime) if last else 0.0
    acts += loss  # logits live one micro-batch
    working = recompute_working_bytes(spec, b, t, recompute, sp, state, runtime) if layers else 0.0
    hole = loss_hole_bytes(spec.seq * b * spec.vocab / t, loss, working, runtime) if last else 0.0
    if layers:
        hole += gathered_input_hole_bytes(spec.seq * b * spec.hidden, t, sp, state, runtime)
    # the loss's peak and a block's backward transients never coexist: the logits and their gradient
    # are freed before the last block's backward starts, so the last stage adds the larger of the two
    # (measured: a whole eager decoder's peak is at the loss, data/device/h100-2026-11-26/model-memory.csv)
    working = max(0.0, working - loss)
    gathered = gathered_block_bytes(spec, t, state, runtime)  # one block as FSDP gathers it
    buffers = (pipeline_buffer_bytes(spec, b, t, sp, pp, micro_batches, flight, first, last, virtual_stages, state,
                                     runtime)
               + zero3_gather_bytes(spec.block_params / t, zero_stage, state, gathered))
    buffers += fsdp_root_bytes(params - layers * spec.block_params / t, zero_stage, state, runtime)
    if cp > 1 and layers:  # kv_piece_bytes of the whole sequence's spec: seq = cp x the rank's
        from dataclasses import replace
        buffers += kv_buffer_bytes(replace(spec, seq=spec.seq * cp), b, t, cp, state.activations, runtime)
    reserve = runtime_reserve(runtime, acts + working + buffers,
                              communicators(tp, dp, pp, spec.tied_embeddings and head_stage(pp, schedule) > 0,
                                            cp, replicate))
    all_gradients = gradients_bytes(params, dp, zero_stage, state)
    gradients = gradients_at_peak(all_gradients, acts + working, micro_batches, runtime)
    if (pipelined_fsdp and runtime.chunk_gradients_reduced and schedule == "interleaved" and virtual_stages > 1
            and micro_batches > 1 and layers >= virtual_stages and offload in ("none", "optimizer")):
        chunks = chunk_layers(layers, virtual_stages)
        ends = [(first and j == 0, last and j == virtual_stages - 1) for j in range(virtual_stages)]
        gradients = chunk_gradients_at_peak(
            tuple(gradients_bytes(stage_params(spec, k, f, e, tp, pp), dp, zero_stage, state)
                  for k, (f, e) in zip(chunks, ends)),
            tuple(k * per_block + (embedding_activation_bytes(spec, b, t, sp, state) if f else 0.0)
                  for k, (f, _) in zip(chunks, ends)),
            acts, micro_batches, pp)
    reserve["fragmentation"] += hole + stage_pool_bytes(
        params - layers * spec.block_params / t, spec.block_params / t, params, dp, zero_stage, all_gradients,
        gradients, pipelined_fsdp, state, runtime, gathered)
    optimizer = optimizer_bytes(params, dp, zero_stage, state)
    if offload in ("optimizer", "both"):
        from solver_plan.hybrid.offload import host_bytes

        optimizer, host = 0.0, host + host_bytes(params / (dp if zero_stage >= 1 else 1), state)
    weights = stage_weights_bytes(spec, params, layers, t, dp, zero_stage, pipelined_fsdp, state, runtime)
    return StageMemory(weights, gradients, optimizer, acts, working, buffers, **reserve, host=host)


def stage_weights_bytes(spec: TransformerSpec, params: float, layers: float, t: int, dp: int, zero_stage: int,
                        pipelined_fsdp: bool = False, state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """The working weights of a stage of `params` parameters (/ t) holding `layers` blocks:
    `weights_bytes`, except that FSDP under a pipeline (`pipelined_fsdp`: priced as ZeRO-1, the weights
    whole, since torchtitan 9dec370 apply_fsdp passes reshard_after_forward=False under PP and torch
    pipelining's backward_maybe_with_nosync set_reshard_after_backward(False) until the last
    micro-batch) keeps each block as FSDP gathered it: `layers` x `fp8_gather_saving` less under fp8
    all-gather."""
    weights = weights_bytes(params, dp, zero_stage, state)
    if pipelined_fsdp:
        weights -= layers * fp8_gather_saving(spec, t, state, runtime)
    return weights


def chunk_gradients_at_peak(chunk_gradients: tuple[float, ...], chunk_activations: tuple[float, ...],
                            peak_activations: float, micro_batches: int, pp: int) -> float:
    """The gradient bytes to add at the peak of a device whose v chunks run torch's interleaved 1F1B
    under FSDP (`RuntimeProfile.chunk_gradients_reduced`: each chunk's gradients are reduced, and its
    unsharded fp32 accumulation freed, at that chunk's own m-th backward), from each chunk's gradient
    bytes G_j, its kept activations per micro-batch A_j (its blocks', and the embedding's on the first
    device's chunk 0) and the activations H at the schedule's peak (the warm-up's, `held_blocks`).
    With one round of micro-batches (m < 2p: torch's number_of_rounds = max(1, m // p) is 1) a chunk
    runs its m backwards in one run, the last chunk first (ScheduleInterleaved1F1B backward_stage_index),
    and at most m of them fall in the steady phase (its warm-up is at least (v - 1) m chunk forwards), so:
    at the first backward the device holds H and G_{v-1}; when chunk c < v - 1 starts its backwards every
    forward is done and the later chunks are through, leaving m (A_0 + ... + A_c) and G_c. The peak of
    activations plus gradients is max(H + G_{v-1}, max_c m (A_0 + ... + A_c) + G_c); this returns it
    less H. With two or more rounds every chunk's first backward precedes every chunk's last: sum_j G_j,
    as for one chunk (1F1B). Sources: torch 2.6.0 pipelining schedules.py PipelineScheduleMulti
    (last_backward counted per stage), stage.py backward_maybe_with_nosync (run_post_backward on the
    chunk's FSDP root), fsdp/_fully_shard/_fsdp_param_group.py post_backward (unsharded_accumulated_grad
    handed to the reduce-scatter and set to None); profiles.py's chunk_gradients_reduced source."""
    v = len(chunk_gradients)
    if v < 2 or micro_batches >= 2 * pp:
        return float(sum(chunk_gradients))
    peak, held = peak_activations + chunk_gradients[-1], 0.0
    for c in range(v - 1):
        held += micro_batches * chunk_activations[c]
        peak = max(peak, held + chunk_gradients[c])
    return peak - peak_activations


def gradients_at_peak(gradients: float, activations: float, micro_batches: int, runtime=None) -> float:
    """The gradient bytes to add at a stage's peak. A runtime that drops the gradients after each
    step (`RuntimeProfile.gradients_freed`) running one micro-batch per step has two candidate peaks:
    the start of the backward (activations, no gradients yet) and its end (all gradients, activations
    gone), so it adds max(0, gradients - activations) to the first; with gradient accumulation
    (m > 1), or a persistent gradient buffer, the gradients are there at every peak. Measured with
    FSDP2 on one H100 (data/device/h100-2026-11-26/fsdp-memory.csv): a whole decoder's peak
    allocation is its fp32 parameters and Adam moments plus the activations, without gradients."""
    if micro_batches == 1 and resolve_runtime(runtime).gradients_freed:
        return max(0.0, gradients - activations)
    return gradients
