"""Named training runtimes: the facts about a software stack that change a plan's time and memory.

A `RuntimeProfile` says which kernels the runtime runs (`Kernels`: fused attention, fused SwiGLU,
fused cross entropy, fp8 GEMMs), which communication it overlaps with compute and in which buckets
(`Overlap`), and which memory it takes beyond the model's tensors (`MemoryReserve`). Every fact is
read from the runtime's code or documentation and named with its source in `sources`; none is
fitted to an end-to-end throughput. The hybrid planner prices a plan with one profile
(`solver-plan hybrid --runtime NAME`, job option `runtime`, recorded in the plan JSON):

- megatron-core (default): Megatron-LM with Megatron-core and Transformer Engine, 2024-25;
- megatron-2021: Megatron-LM as Narayanan et al. 2021 and Korthikanti et al. 2022 ran it (the
  validation set of docs/hybrid-accuracy.md);
- deepspeed: Megatron-DeepSpeed with ZeRO as run in 2022 (MT-NLG, BLOOM);
- torchtitan: PyTorch-native FSDP2 + tensor/pipeline parallelism (torchtitan, 2024-25), eager;
- torchtitan-compile: the same with torch.compile on each block;
- torchtitan-compile-fp8-gather: torchtitan-compile whose FSDP all-gathers fp8 block weights (float8
  all-gather, as torchtitan's Llama 3 405B preset runs);
- llama3-meta: Meta's Llama 3 stack as Dubey et al. 2024 section 3.3 describe it (torchtitan's kernels,
  asynchronous pipeline sends, stage inputs and outputs freed, K/V all-gather of the kv heads);
- nemo: NVIDIA NeMo 2 performance recipes (Megatron-core with TP communication overlap);
- llm-foundry: MosaicML LLM Foundry's MPT on Composer 0.17 with PyTorch FSDP1 (data parallelism only), its
  yamls' 2022 Triton flash attention; llm-foundry-flash: the same with FlashAttention-2 (attn_impl flash).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from solver_plan.errors import InputError
from solver_plan.units import GIB, MIB

# NCCL's buffers for one communicator the process joins: each ring/tree channel keeps a connection
# to its send and receive peer (2), with a buffer per protocol: Simple NCCL_BUFFSIZE = 4 MiB,
# LL128 about 4.5 MiB, LL 0.25 MiB (NCCL docs, "Environment variables": NCCL_BUFFSIZE default
# 4194304; src/include/comm.h DEFAULT_LL128_BUFFSIZE), over 16 channels (NCCL's usual count on an
# 8-GPU NVSwitch node with 8 NICs; NCCL_MAX_NCHANNELS caps it). 2 x 16 x 8.75 MiB = 280 MiB.
NCCL_BYTES_PER_COMMUNICATOR = 2 * 16 * 8.75 * MIB
MODEL_PARALLEL_DIMENSIONS = ("tp", "pp", "cp")  # what RuntimeProfile.dimensions names
# Left free of the device's memory when the limit is the device's (`--memory-limit device`): a
# planning margin for what no term models (allocator spikes, a data loader's pinned staging,
# profiler buffers), so that plans do not fill HBM to 99%. A policy, not a runtime fact.
DEFAULT_MEMORY_MARGIN = 0.05


@dataclass(frozen=True)
class Kernels:
    """Which fused kernels the runtime runs for a decoder block."""
    flash_attention: bool  # fused attention: no s^2 scores in HBM (FlashAttention / cuDNN fused attention)
    attention_dropout: bool  # dropout on the attention probabilities (unfused attention: 1-byte mask, extra passes)
    causal_skip: bool  # the fused kernel skips the masked half of the s x s tiles (causal)
    fused_swiglu: bool  # gated MLP: one fused SiLU x up kernel keeping its 2f-wide input only
    fused_cross_entropy: bool  # logits kept in the activation dtype, no fp32 copy
    fp8_gemms: bool  # fp8 GEMMs with per-tensor scaling (Transformer Engine, torchao float8)
    # fused attention kernel family, a key of the device's `attention_efficiency` table ("" when unfused):
    # "flash2" (FlashAttention-2, PyTorch SDPA's flash backend), "cudnn" (cuDNN / FlashAttention-3 class)
    attention_backend: str = ""
    # the other fused kernel families the runtime runs when its configuration asks for them (LLM Foundry's
    # attn_impl, Megatron-core's --attention-backend), each a key of the device's `attention_efficiency`:
    # the hybrid search chooses among these and attention_backend, its default (`RuntimeProfile.with_attention`;
    # `--fix attention=NAME` pins one). () where the runtime offers no other or none is sourced
    attention_offered: tuple[str, ...] = ()
    # how the runtime is told to run each of its kernel families, default and offered: (kernel, setting),
    # e.g. ("flash2", "model.attn_config.attn_impl: flash"); every offered kernel has one (what the plan
    # table and the exports tell the user to set)
    attention_settings: tuple[tuple[str, str], ...] = ()
    fused_norm_rope: bool = True  # RMSNorm / LayerNorm and rotary embeddings as fused kernels (not eager fp32 ops)
    # bytes per logit element held at the loss's peak (the start of backward): Megatron's
    # vocab-parallel cross entropy keeps fp32 logits and works in place (Korthikanti et al. 2022: 4);
    # eager F.cross_entropy(logits.float()) holds the fp32 log-softmax, its gradient and the input
    # gradient (12); a fused cross-entropy kernel, the activation dtype's (2)
    loss_bytes_per_logit: float = 4.0
    # ... with the vocabulary split over t > 1 tensor-parallel ranks, if the runtime then runs another
    # loss (torch's loss_parallel): None keeps loss_bytes_per_logit
    loss_parallel_bytes_per_logit: float | None = None
    # bytes per logit the caching allocator leaves mapped but unused at the loss's peak: a loss that casts
    # the 16-bit prediction to fp32 and drops the prediction before backward leaves a hole of its bytes (2)
    # that the backward's fp32 tensors (4 bytes a logit) cannot fill (hybrid/memory.py loss_hole_bytes);
    # 0 where no such hole was measured (fused or in-place losses)
    loss_hole_bytes_per_logit: float = 0.0
    # the runtime's loss kernels where its code was read: (forward kernels, backward kernels), each kernel's
    # HBM bytes per logit (cost/model.py loss_seconds: one launch and one memory-bound pass each); an
    # unfused loss makes several passes over an fp32 copy of the logits. () keeps the graph's roofline (the
    # loss operator reads its logits and writes a scalar)
    loss_kernel_bytes_per_logit: tuple[tuple[float, ...], ...] = ()
    # what "selective" recomputation recomputes: "attention" (Megatron: the attention core, Korthikanti
    # et al. 2022 section 5) or "every-other-matmul" (torchtitan's op-level selective checkpointing:
    # saves every second matmul output and the attention output, recomputes the rest)
    selective_policy: str = "attention"
    # weight-gradient GEMMs accumulate straight into the (fp32) gradient buffer (Megatron's
    # gradient_accumulation_fusion): no separate new weight gradient during the backward
    wgrad_fused: bool = False
    # with sequence parallelism, a column-parallel GEMM saves for backward the input it all-gathered
    # (whole sequence, e s b h) instead of its own 1/t shard (which Megatron keeps and gathers again in
    # backward): torch DTensor's ColwiseParallel redistributes Shard(1) -> Replicate before the matmul,
    # and autograd keeps the matmul's actual input (hybrid/memory.py)
    sp_saves_gathered_inputs: bool = False
    # without wgrad_fused, each micro-batch's new weight gradient is added into the accumulated gradient
    # by a separate memory-bound kernel (autograd's AccumulateGrad: param.grad += new, in place; the
    # first micro-batch's is assigned): read both, write one, g bytes each, per parameter and micro-batch
    # after the first (hybrid/stage_cost.grad_accumulate_s). Only runtimes whose accumulation is known to
    # work so set it; FSDP2 accumulates the 1/dp shard after its reduce-scatter (negligible, not priced)
    grad_accumulation_add: bool = False
    # HBM bytes per parameter of a block that the runtime moves on the device, every micro-batch whose
    # gradients it reduces, to prepare the block's unsharded gradient for the reduction (FSDP1: gather the
    # per-parameter gradients into the flat gradient, cast it to the reduce dtype, pre-divide it in place;
    # hybrid/stage_cost.grad_reduce_prep_s); 0 where none is declared
    grad_reduce_prep_bytes: float = 0.0
    # keys and values repeated to the query heads before the attention call (torchtitan's repeat_kv ahead
    # of F.scaled_dot_product_attention): a context-parallel exchange around that call moves and holds
    # heads x d elements a token, not kv_heads x d (hybrid/context_parallel.py exchanged_width)
    kv_repeated: bool = False
    # full recomputation stops at the block's last tensor saved for backward (torch.utils.checkpoint's
    # non-reentrant checkpoint, early stop on by default): the operator that saves it is not run again, nor
    # anything after it (a pre-norm block's last projection and residual add); hybrid/stage_cost.py
    # recompute_skip_s. False: the whole forward is repeated (Megatron's and DeepSpeed's reentrant checkpoint)
    recompute_early_stop: bool = False
    # the fusions (fused_swiglu, fused_norm_rope) come from torch.compile of each block: they lower what a
    # block keeps for backward, not the working set of its compiled backward under full recomputation,
    # which rematerialises the block inside one graph; hybrid/memory.py recompute_working_bytes prices
    # that working set with the unfused kernels (measured: data/device/h200-2026-11-27-compile-fp8)
    fusions_compiled: bool = False
    # (forward, backward) time of a context-parallel rank's attention over the same rank's kernels
    # called alone: the runtime's ring bookkeeping (partial outputs merged by their log-sum-exp,
    # gradients accumulated in fp32); (1, 1) where not measured (hybrid/context_parallel.py)
    cp_attention_overhead: tuple[float, float] = (1.0, 1.0)
    # HBM bytes per logit element that the runtime's training loop moves every micro-batch outside the
    # loss, on the last stage: Composer updates its train metrics after each micro-batch's backward, and
    # each of LLM Foundry's two (LanguageCrossEntropy, LanguagePerplexity) runs an eager cross entropy on
    # the bf16 logits under autocast, which casts them to fp32 (read 2, write 4) and takes a fp32
    # log-softmax (read 4, write 4): 2 x 14 = 28 (hybrid/stage_cost.train_metric_s); 0 for none
    metric_bytes_per_logit: float = 0.0


@dataclass(frozen=True)
class Overlap:
    """Which communication runs under compute, and its bucketing.

    `bucket_elements` and `bucket_elements_per_dp`: a gradient bucket holds max(bucket_elements,
    bucket_elements_per_dp x dp) parameters; `bucket_per_layer`: one bucket per transformer block
    (FSDP units); `bucket_bytes`: a fixed size in bytes instead (Megatron-LM 2021)."""
    grad_reduce: bool  # data-parallel gradient all-reduce / reduce-scatter during the backward pass
    param_gather: bool  # distributed optimizer / ZeRO-1,2: parameter all-gather during the next forward
    sharded_prefetch: bool  # ZeRO-3 / FSDP: a block's parameter all-gather prefetched under the previous block
    tp_comm: bool  # tensor-parallel all-gather / reduce-scatter pipelined with the GEMMs (userbuffers)
    pp_p2p: bool  # pipeline sends and receives under compute (interleaved schedule only)
    # each tensor-parallel rank sends 1/t of a pipeline activation and the next stage all-gathers it
    # (Megatron's scatter-gather, Narayanan et al. 2021 section 4.1); False: every rank sends all of it
    p2p_scatter_gather: bool = True
    # ... and the all-gathers (over the stage's t ranks, of the whole e s b h activation) that scatter-gather
    # costs per micro-batch and stage boundary, on the critical path: on the stage that receives the
    # activation (it gathers the activation), and on the stage that sent it (it gathers the gradient it
    # gets back, and, DeepSpeed, its own output, whose data it freed after sending)
    p2p_gathers_receiver: int = 0
    p2p_gathers_sender: int = 0
    bucket_elements: float = 0.0
    bucket_elements_per_dp: float = 0.0
    bucket_per_layer: bool = False
    bucket_bytes: float = 0.0
    # context parallelism by all-gather (`RuntimeProfile.cp_exchange`): the gather of K and V runs under the
    # rank's attention to its own piece (torch's context_parallel); False: waited for before any attention
    # (hybrid/context_parallel.py exchange_s)
    cp_gather_hidden: bool = True

    def bucket_size_bytes(self, dp: int, bytes_per_element: float) -> float:
        """Bytes of one gradient bucket (0: one bucket per block, `bucket_per_layer`)."""
        if self.bucket_bytes:
            return self.bucket_bytes
        return max(self.bucket_elements, self.bucket_elements_per_dp * dp) * bytes_per_element


@dataclass(frozen=True)
class MemoryReserve:
    """Memory a process takes beyond the model's tensors.

    - `cuda_context`: CUDA context, cuBLAS/cuDNN handles and loaded kernels (outside PyTorch's
      allocator: nvidia-smi sees it, torch.cuda.max_memory_reserved does not);
    - `nccl_per_communicator`: NCCL's buffers per communicator joined (outside the allocator);
    - `workspace`: GEMM workspaces in the allocator (cuBLAS / Transformer Engine);
    - `fragmentation`: the caching allocator's reserved-but-unallocated share of the memory that
      changes during a step (activations, recomputation working set, buffers);
    - `fsdp_stream_pools`: FSDP2 allocates on side streams, whose memory the caching allocator keeps
      apart from the compute stream's (hybrid/memory.py stream_pool_bytes);
    - `pipeline_buffers_per_microbatch`: the pipeline runtime keeps a receive buffer per micro-batch
      and each micro-batch's stage output until its backward (torch.distributed.pipelining's stage;
      hybrid/memory.py pipeline_buffer_bytes) instead of a few reused send/receive buffers;
    - `gathered_input_holes`: with tensor and sequence parallelism, how many whole-sequence gathered
      block inputs (e s b h each) the allocator leaves mapped but unused at the peak
      (hybrid/memory.py gathered_input_hole_bytes)."""
    cuda_context: float
    nccl_per_communicator: float
    workspace: float
    fragmentation: float
    fsdp_stream_pools: bool = False
    pipeline_buffers_per_microbatch: bool = False
    gathered_input_holes: float = 0.0


@dataclass(frozen=True)
class RuntimeProfile:
    """What a training runtime (e.g. Megatron, DeepSpeed, FSDP2) does that the cost model must follow: the
    kernels it runs, which communication it overlaps, the memory it reserves, how it stores gradients and
    parameters in mixed precision, and the sources each fact comes from.
    """
    name: str
    summary: str
    kernels: Kernels
    overlap: Overlap
    memory: MemoryReserve
    sources: tuple[tuple[str, str], ...] = field(default=())  # (fact, file / flag / document)
    # In 16-bit mixed precision: gradients kept and reduced in fp32 (4 bytes per parameter instead of 2)
    fp32_gradients: bool = False
    # ... and the sharded parameter itself is the fp32 master (FSDP2 mixed precision): no separate
    # 16-bit copy at rest, so the optimizer state holds 2 bytes less per parameter
    sharded_fp32_params: bool = False
    # FSDP2 (fully_shard): the root unit (embeddings, final norm, output) stays unsharded through
    # forward and backward (hybrid/memory.py fsdp_root_bytes)
    fsdp_root_unsharded: bool = False
    # optimizer.zero_grad() drops the gradients after each step (set_to_none, PyTorch's default since
    # 2.0) instead of keeping a persistent gradient buffer (Megatron's main_grad, DeepSpeed's contiguous
    # gradients): with one micro-batch per step they appear during the backward as the activations go
    # (hybrid/memory.py stage_memory)
    gradients_freed: bool = False
    # FSDP all-gathers the fp8 casts of the blocks' Linear weights when the GEMMs run in fp8 (torchao
    # float8 with torchtitan's float8.enable_fsdp_float8_all_gather): a gathered block holds them at
    # 1 byte a parameter, not the working weights' 2 (hybrid/memory.py fp8_gather_saving)
    fp8_weight_gather: bool = False
    # FSDP under an interleaved pipeline reduces each chunk's gradients at that chunk's own last backward,
    # freeing its unsharded (fp32) accumulation before the next chunk's backwards start when one round
    # of micro-batches runs the chunks one after another (torch.distributed.pipelining's
    # backward_maybe_with_nosync per stage; hybrid/memory.py chunk_gradients_at_peak)
    chunk_gradients_reduced: bool = False
    # how the runtime splits a block's weight matrices over the tensor-parallel group: "column-row"
    # (each matrix along one dimension: Megatron's ColumnParallelLinear / RowParallelLinear, torch's
    # ColwiseParallel / RowwiseParallel) or "any" (whatever the per-operator solver picks, 2-D splits
    # included: only a runtime executing per-operator plans, e.g. DTensor, runs those)
    tensor_parallel: str = "column-row"
    # how context parallelism brings every rank the keys and values (hybrid/context_parallel.py): "ring"
    # (cp - 1 point-to-point steps under the attention: Megatron-core / Transformer Engine p2p) or
    # "all-gather" (one all-gather of K and V: torch's context_parallel default, Llama 3's)
    cp_exchange: str = "ring"
    # The model-parallel dimensions the runtime runs, of "tp", "pp" and "cp" (None: every one the planner
    # prices), and the ZeRO stages (None: 0-3): the hybrid search offers no plan outside them unless the
    # user pins it (hybrid/search.py _runnable), so what it recommends is what the runtime can run
    dimensions: tuple[str, ...] | None = None
    zero_stages: tuple[int, ...] | None = None
    # HBM bytes per local parameter of the runtime's per-step update where it is not one fused pass:
    # an optimizer written as one eager kernel per operation, and gradient clipping's passes over the
    # gradients (hybrid/schedule.optimizer_s); 0: the fused count, read and write weights and optimizer
    # state, read the gradients
    optimizer_bytes_per_param: float = 0.0
    # the layers a configuration given without a layer split runs per pipeline stage (what `evaluate`
    # prices for a pinned plan; hybrid/stages.py default_split): "planned", the planner's cut (the
    # export writes it); "torchtitan", its generate_split_points of d4c86e375 (the first virtual stage
    # L // (p v) layers, the next ones one more while L mod (p v) lasts, the last the rest)
    default_stage_split: str = "planned"

    def __post_init__(self):
        if self.tensor_parallel not in ("column-row", "any"):
            raise InputError(f"tensor_parallel must be column-row or any, got {self.tensor_parallel!r}",
                             "tensor_parallel")
        if self.default_stage_split not in ("planned", "torchtitan"):
            raise InputError(f"default_stage_split must be planned or torchtitan, got {self.default_stage_split!r}",
                             "default_stage_split")
        if self.cp_exchange not in ("ring", "all-gather"):
            raise InputError(f"cp_exchange must be ring or all-gather, got {self.cp_exchange!r}", "cp_exchange")
        if self.dimensions is not None and not set(self.dimensions) <= set(MODEL_PARALLEL_DIMENSIONS):
            raise InputError(f"dimensions must be among {', '.join(MODEL_PARALLEL_DIMENSIONS)}, got "
                             f"{self.dimensions!r}", "dimensions")
        if self.zero_stages is not None and not (self.zero_stages and set(self.zero_stages) <= {0, 1, 2, 3}):
            raise InputError(f"zero_stages must be some of 0-3, got {self.zero_stages!r}", "zero_stages")
        loss = self.kernels.loss_kernel_bytes_per_logit
        if loss and not (len(loss) == 2 and all(phase and all(x >= 0 for x in phase) for phase in loss)):
            raise InputError(f"loss_kernel_bytes_per_logit must be () or (forward, backward) kernels' bytes >= 0, "
                             f"got {loss!r}", "loss_kernel_bytes_per_logit")
        offered = self.kernels.attention_offered
        if not (all(isinstance(k, str) and k for k in offered) and len(set(offered)) == len(offered)
                and self.kernels.attention_backend not in offered and (not offered or self.kernels.flash_attention)):
            raise InputError(f"attention_offered must be distinct fused kernel families other than attention_backend "
                             f"{self.kernels.attention_backend!r}, got {offered!r}", "attention_offered")
        settings = dict(self.kernels.attention_settings)
        if not (set(settings) <= set(self.attention_kernels) and set(offered) <= set(settings)):
            raise InputError(f"attention_settings must say how to run each offered kernel {offered!r} and name no "
                             f"other than {self.attention_kernels!r}, got {tuple(settings)!r}", "attention_settings")
        for name, value in (("optimizer_bytes_per_param", self.optimizer_bytes_per_param),
                            ("metric_bytes_per_logit", self.kernels.metric_bytes_per_logit)):
            if not value >= 0:
                raise InputError(f"{name} must be >= 0, got {value!r}", name)

    @property
    def attention_kernels(self) -> tuple[str, ...]:
        """The fused attention kernel families the runtime can run, its default first ("" alone: unfused)."""
        return (self.kernels.attention_backend,) + self.kernels.attention_offered

    def attention_setting(self, kernel: str) -> str:
        """What tells the runtime to run `kernel` ("" where no setting is recorded: its default)."""
        return dict(self.kernels.attention_settings).get(kernel, "")

    def with_attention(self, kernel: str) -> "RuntimeProfile":
        """The same runtime configured to run the attention kernel family `kernel` (one of
        `attention_kernels`; "" or the default: this profile). Only the kernel changes: the runtime's
        name, memory and overlap stay, so a plan priced with it is validated against the named profile."""
        if kernel in ("", self.kernels.attention_backend):
            return self
        if kernel not in self.kernels.attention_offered:
            runs = (f"the attention kernels {', '.join(self.attention_kernels)}" if self.kernels.flash_attention
                    else "no fused attention kernel (its attention is unfused)")
            raise InputError(f"runtime {self.name} runs {runs}, not {kernel!r}", "--fix attention")
        others = tuple(k for k in self.attention_kernels if k != kernel)
        return replace(self, kernels=replace(self.kernels, attention_backend=kernel, attention_offered=others))

    def runs_layout(self, degrees: dict[str, int], zero_stage: int | None) -> bool:
        """Whether the runtime runs a plan of these model-parallel `degrees` ("tp", "pp", "cp": degree)
        and ZeRO stage (None: not asked): every dimension above 1 among `dimensions`, the stage among
        `zero_stages`."""
        if self.dimensions is not None and any(d > 1 and name not in self.dimensions for name, d in degrees.items()):
            return False
        return self.zero_stages is None or zero_stage is None or zero_stage in self.zero_stages

    def to_dict(self) -> dict:
        """JSON-ready dict of the profile's name, kernels, overlap and memory reserve."""
        from dataclasses import asdict

        return {"name": self.name, "kernels": asdict(self.kernels), "overlap": asdict(self.overlap),
                "memory": asdict(self.memory)}


# Megatron's vocabulary-parallel cross entropy on the fp32 cast of the logits, the same passes in
# Megatron-LM of 2021 (megatron/mpu/cross_entropy.py at 9da6e975de, 2021-12; GPTModel casts with .float()
# unless --fp16-lm-cross-entropy), in Megatron-DeepSpeed (its copy of mpu) and in megatron-core's unfused
# path (megatron/core/tensor_parallel/cross_entropy.py at 937571cf): forward .float() (read 2, write 4),
# max (read 4), subtract in place (8), exp in place (8), sum (4), divide in place (8); backward
# grad_input.mul_ (8) and the cast back (read 4, write 2); the per-token gathers are not counted
VOCAB_PARALLEL_CROSS_ENTROPY_BYTES = ((6.0, 4.0, 8.0, 8.0, 4.0, 8.0), (8.0, 6.0))

MEGATRON_CORE = RuntimeProfile(
    "megatron-core", "Megatron-LM with Megatron-core and Transformer Engine (2024-25), pretrain_gpt.py",
    Kernels(flash_attention=True, attention_dropout=False, causal_skip=True, fused_swiglu=True,
            fused_cross_entropy=False, fp8_gemms=True, attention_backend="cudnn", wgrad_fused=True,
            loss_kernel_bytes_per_logit=VOCAB_PARALLEL_CROSS_ENTROPY_BYTES),
    Overlap(grad_reduce=True, param_gather=True, sharded_prefetch=False, tp_comm=False, pp_p2p=True,
            bucket_elements=40e6, bucket_elements_per_dp=1e6),
    MemoryReserve(cuda_context=0.5 * GIB, nccl_per_communicator=NCCL_BYTES_PER_COMMUNICATOR, workspace=64 * MIB,
                  fragmentation=0.05),
    sources=(
        ("attention_backend", "Transformer Engine DotProductAttention picks cuDNN fused attention (FusedAttention) on "
                              "Hopper by default, flash-attn otherwise (NVTE_FUSED_ATTN / NVTE_FLASH_ATTN)"),
        ("fused_norm_rope", "TE fused LayerNorm/RMSNorm (LayerNormLinear) and fused RoPE (--apply-rope-fusion, "
                            "default on)"),
        ("flash_attention", "megatron/core/transformer/custom_layers/transformer_engine.py TEDotProductAttention "
                            "(--transformer-impl transformer_engine, the default; TE picks the flash or cuDNN fused backend)"),
        ("attention_dropout", "fused kernels apply dropout inside the kernel (no mask in HBM); Llama-style recipes "
                              "set --attention-dropout 0"),
        ("causal_skip", "Dao 2023, FlashAttention-2, section 3.1: causal masking skips blocks above the diagonal"),
        ("fused_swiglu", "megatron/core/fusions/fused_bias_swiglu.py (--swiglu, bias_swiglu_fusion default True)"),
        ("wgrad_fused", "TransformerConfig.gradient_accumulation_fusion (default on; --no-gradient-accumulation-fusion "
                        "turns it off): TE / fused_weight_gradient_mlp_cuda wgrad GEMMs add into param.main_grad"),
        ("fused_cross_entropy", "--cross-entropy-loss-fusion (TransformerConfig.cross_entropy_loss_fusion default False)"),
        ("fp8_gemms", "--fp8-format hybrid with Transformer Engine (te.fp8_autocast)"),
        ("grad_reduce", "--overlap-grad-reduce (DistributedDataParallelConfig.overlap_grad_reduce), in every "
                        "Megatron-core example script with --use-distributed-optimizer"),
        ("param_gather", "--overlap-param-gather (all-gather of updated parameters in the next forward's pre-hooks)"),
        ("bucket", "megatron/core/distributed/distributed_data_parallel_config.py: bucket_size default "
                   "max(40000000, 1000000 x dp_size) parameters"),
        ("pp_p2p", "megatron/core/pipeline_parallel/schedules.py forward_backward_pipelining_with_interleaving "
                   "(config.overlap_p2p_comm; --no-overlap-p2p-communication turns it off)"),
        ("tp_comm", "--tp-comm-overlap is off by default (needs Transformer Engine userbuffers)"),
        ("tensor_parallel", "megatron/core/tensor_parallel/layers.py ColumnParallelLinear (linear_qkv, linear_fc1) and "
                            "RowParallelLinear (linear_proj, linear_fc2): each weight split along one dimension "
                            "(Shoeybi et al. 2019, section 3)"),
        ("cuda_context", "CUDA 12 lazy module loading (CUDA_MODULE_LOADING=LAZY, PyTorch's default since 2.0)"),
        ("workspace", "Transformer Engine get_workspace(): 32 MiB cuBLAS workspace on Hopper; PyTorch's cuBLAS "
                      "workspace :4096:8 = 32 MiB"),
        ("fp32_gradients", "megatron/training/arguments.py: with --bf16, accumulate_allreduce_grads_in_fp32 is set "
                           "(fp32 main_grad buffers, reduced in fp32); docs/source/distrib_optimizer.md: bf16 params "
                           "with fp32 grads take 18 bytes per parameter, 6 + 12/d with the distributed optimizer"),
        ("loss_kernel_bytes_per_logit", "megatron/core/tensor_parallel/cross_entropy.py (937571cf, 2024-07; the "
                                        "unfused path, --cross-entropy-loss-fusion off by default): forward "
                                        ".float() (read 2, write 4), max (read 4), subtract in place (8), exp in "
                                        "place (8), sum (4), divide in place (8); backward grad_input.mul_ (8) "
                                        "and the cast back to the bf16 logits' gradient (read 4, write 2); the "
                                        "per-token gathers and the scalar loss are not counted"),
    ), fp32_gradients=True)

# Megatron-LM's own H100 scaling runs (README "Training Speed and Scalability", 937571cf, 2024-07): megatron-core
# with every overlap flag on, tensor-parallel communication included (Transformer Engine userbuffers).
MEGATRON_CORE_TP_OVERLAP = replace(
    MEGATRON_CORE, name="megatron-core-tp-overlap",
    summary="Megatron-core with --tp-comm-overlap (Transformer Engine userbuffers) besides the data-parallel and "
            "pipeline overlap",
    overlap=replace(MEGATRON_CORE.overlap, tp_comm=True),
    sources=(
        ("tp_comm", "NVIDIA/Megatron-LM README.md (937571cf, 2024-07-15), Training Speed and Scalability: 'We perform "
                    "fine-grained overlapping of data-parallel (--overlap-grad-reduce --overlap-param-gather), "
                    "tensor-parallel (--tp-comm-overlap) and pipeline-parallel communication (enabled by default) "
                    "with computation'; --tp-comm-overlap needs sequence parallelism (megatron/training/"
                    "arguments.py)"),
        ("rest", "as megatron-core"),
    ))

MEGATRON_2021 = RuntimeProfile(
    "megatron-2021", "Megatron-LM of Narayanan et al. 2021 and Korthikanti et al. 2022 (no flash attention)",
    Kernels(flash_attention=False, attention_dropout=True, causal_skip=False, fused_swiglu=True,
            fused_cross_entropy=False, fp8_gemms=False, wgrad_fused=True,
            loss_kernel_bytes_per_logit=VOCAB_PARALLEL_CROSS_ENTROPY_BYTES),
    Overlap(grad_reduce=False, param_gather=False, sharded_prefetch=False, tp_comm=False, pp_p2p=False,
            bucket_bytes=40e6, p2p_gathers_receiver=1, p2p_gathers_sender=1),
    MemoryReserve(cuda_context=1.0 * GIB, nccl_per_communicator=NCCL_BYTES_PER_COMMUNICATOR, workspace=0.0,
                  fragmentation=0.05),
    dimensions=("tp", "pp"), zero_stages=(0, 1),
    sources=(
        ("loss_kernel_bytes_per_logit", "megatron/mpu/cross_entropy.py and model/gpt_model.py at 9da6e975de "
                                        "(2021-12): VOCAB_PARALLEL_CROSS_ENTROPY_BYTES"),
        ("dimensions", "tensor and pipeline parallelism: context parallelism entered Megatron-LM in 2023 "
                       "(80590f9894, 2023-08-09, 'create processor group for context parallelism')"),
        ("zero_stages", "0, or 1 with the distributed optimizer (Float16DistributedOptimizer, 329fe5820f "
                        "2022-02-10; megatron/optimizer/distrib_optimizer.py, 28b63ec78b 2022-03-09): no "
                        "sharded gradients or parameters in the Megatron-LM of 2021-22"),
        ("flash_attention", "megatron/model/transformer.py CoreAttention (2021-22): baddbmm scores, "
                            "FusedScaleMaskSoftmax, attention_dropout, bmm; flash attention came in 2023 (--use-flash-attn)"),
        ("attention_dropout", "megatron/arguments.py --attention-dropout default 0.1; Korthikanti et al. 2022 "
                              "section 4.1 counts its 5 a s^2 b bytes"),
        ("wgrad_fused", "megatron/arguments.py --no-gradient-accumulation-fusion (fusion on by default since 2021, "
                        "APEX fused_weight_gradient_mlp_cuda into main_grad)"),
        ("grad_reduce", "DDP=local in examples/sc21/run_table_1.sh: Megatron's DistributedDataParallel "
                        "all-reduces after the backward pass (allreduce_gradients)"),
        ("pp_p2p", "megatron/p2p_communication.py: blocking batch_isend_irecv + wait; scatter-gather of the "
                   "activation across tensor-parallel ranks (--scatter-gather-tensors-in-pipeline, default on)"),
        ("p2p_gathers", "megatron/p2p_communication.py _communicate (2021): with scatter_gather_tensors_in_pipeline "
                        "each received tensor, the activation on the next stage and its gradient back on the "
                        "previous one, is mpu.gather_split_1d_tensor'd (an all-gather over the tensor-parallel "
                        "group) before use: one per micro-batch and boundary on each side"),
        ("bucket", "40 MB buckets (the hybrid model's earlier fixed figure; PyTorch DDP 25 MiB)"),
        ("tensor_parallel", "megatron/mpu/layers.py ColumnParallelLinear / RowParallelLinear (2021-22)"),
        ("cuda_context", "CUDA 11 without lazy loading: about 1 GiB of context and kernels"),
    ))

DEEPSPEED = RuntimeProfile(
    "deepspeed", "Megatron-DeepSpeed with ZeRO (2022: MT-NLG, BLOOM), unfused attention, fp16/bf16",
    Kernels(flash_attention=False, attention_dropout=True, causal_skip=False, fused_swiglu=False,
            fused_cross_entropy=False, fp8_gemms=False, grad_accumulation_add=True,
            loss_kernel_bytes_per_logit=VOCAB_PARALLEL_CROSS_ENTROPY_BYTES),
    Overlap(grad_reduce=False, param_gather=False, sharded_prefetch=True, tp_comm=False, pp_p2p=False,
            bucket_elements=5e8, p2p_scatter_gather=True, p2p_gathers_receiver=1, p2p_gathers_sender=2),
    MemoryReserve(cuda_context=1.0 * GIB, nccl_per_communicator=NCCL_BYTES_PER_COMMUNICATOR, workspace=0.0,
                  fragmentation=0.10),
    dimensions=("tp", "pp"),
    sources=(
        ("loss_kernel_bytes_per_logit", "Megatron-DeepSpeed's copy of Megatron's mpu cross entropy: "
                                        "VOCAB_PARALLEL_CROSS_ENTROPY_BYTES"),
        ("dimensions", "tensor and pipeline parallelism (Megatron's mpu and DeepSpeed's PipelineModule, 2022); "
                       "no context parallelism (DeepSpeed-Ulysses' head all-to-all came in 2023 and is not the "
                       "ring / all-gather context parallelism priced here)"),
        ("flash_attention", "Megatron-DeepSpeed megatron/model/transformer.py CoreAttention (2022); "
                            "--use-flash-attn only from 2023"),
        ("grad_reduce", "DeepSpeed config zero_optimization.overlap_comm: default false for stages 1 and 2 "
                        "(deepspeed/runtime/zero/config.py overlap_comm_valid: true only for stage 3); the pipeline "
                        "engine reduces after the whole schedule: deepspeed/runtime/pipe/schedule.py TrainSchedule "
                        "appends ReduceTiedGrads, ReduceGrads, OptimizerStep to the last step only, and "
                        "pipe/engine.py _exec_reduce_grads calls allreduce_gradients(bucket_size="
                        "MEMORY_OPT_ALLREDUCE_SIZE = 5e8) (DeepSpeed 0457bb1, 2021-09): not overlapped"),
        ("sharded_prefetch", "ZeRO-3 prefetch: stage3_prefetch_bucket_size (deepspeed/runtime/zero/config.py)"),
        ("p2p_scatter_gather", "deepspeed/runtime/pipe/engine.py: is_pipe_partitioned = is_model_parallel (and "
                               "is_grad_partitioned, 2020-22 releases); _exec_forward_pass wraps the stage's output in "
                               "PartitionedTensor over the slice-parallel (tensor-parallel) group, so each rank sends "
                               "its 1/t, and the receiver's part_input.full() all-gathers it (the earlier entry here, "
                               "'every rank sends its whole tensor', read _exec_send_activations without that step)"),
        ("p2p_gathers", "deepspeed/runtime/pipe/engine.py (3293cf72a, 2022-01): _exec_forward_pass rebuilds the "
                        "received input with part_input.full() (all-gather over the slice-parallel group) on every "
                        "stage but the first, and after sending sets first_output.data = torch.zeros(1) ('Clear the "
                        "large output data'); _exec_backward_pass then all-gathers the output back "
                        "(part_output.full()) and the received gradient (part_grad.full()) on every stage but the "
                        "last: 1 gather on the receiving side, 2 on the sending side, all on the compute stream; "
                        "p2p.py send/recv are blocking (async_op 'Doesnt support async_op true') and the "
                        "TrainSchedule issues them before each step's compute, so none overlaps"),
        ("grad_accumulation_add", "Megatron-DeepSpeed megatron/mpu/layers.py (fd8dd9c0, 2022-01): no "
                                  "gradient_accumulation_fusion (ColumnParallelLinearWithAsyncAllreduce returns "
                                  "grad_weight to autograd), so torch's AccumulateGrad "
                                  "(torch/csrc/autograd/functions/accumulate_grad.h: variable_grad += new_grad) adds "
                                  "every micro-batch's weight gradient into param.grad (fp16/bf16); DeepSpeed's "
                                  "FP16_Optimizer.zero_grad sets the gradients to None after the step, so the "
                                  "first micro-batch's is assigned, not added"),
        ("bucket", "zero_optimization.reduce_bucket_size and allgather_bucket_size default 5e8 elements"),
        ("tensor_parallel", "Megatron-DeepSpeed megatron/mpu/layers.py: Megatron's ColumnParallelLinear / "
                            "RowParallelLinear"),
        ("fragmentation", "DeepSpeed docs note memory fragmentation (contiguous_gradients exists to reduce it); "
                          "assumed 10%, to be replaced by a measurement (scripts/measure_device.py)"),
    ))

# DeepSpeed's BF16_Optimizer (bf16.enabled, ZeRO stage 0: "bf16 must use z0! it implements its own zero
# stage 1 equivalent"), written for BigScience's BLOOM in 2022 and merged into DeepSpeed (0.6): the pipeline
# engine and kernels of `deepspeed`, but gradients accumulated and reduced in an fp32 buffer of the whole
# model (not sharded), the master weights and Adam moments sharded over data parallelism (ZeRO-1).
DEEPSPEED_BF16 = replace(
    DEEPSPEED, name="deepspeed-bf16",
    summary="Megatron-DeepSpeed with DeepSpeed's BF16_Optimizer (2022-: BLOOM): fp32 gradient buffer, ZeRO-1 "
            "master and moments, unfused attention",
    fp32_gradients=True, zero_stages=(1,),
    sources=(
        ("fp32_gradients", "bigscience-workshop/bigscience train/tr11-176B-ml/README.md (00327f8), Deepspeed config: "
                           "\"The new BF16_Optimizer accumulates grads in fp32. It doesn't shard the static fp32 "
                           "buffer it reuses, which consumes 4 bytes * params of additional memory\"; DeepSpeed "
                           "deepspeed/runtime/bf16_optimizer.py (2022): fp32_groups_gradients_flat = "
                           "torch.zeros_like(the flat fp32 copy of the whole group), get_grads_for_reduction returns "
                           "it (the data-parallel reduction moves fp32)"),
        ("zero_stages", "the same README: 'ZERO_STAGE=0 # important: bf16 must use z0! it implements its own zero "
                        "stage 1 equivalent' (the optimizer's param_groups hold this rank's partition of the fp32 "
                        "copy): ZeRO-1 in this model's terms"),
        ("grad_accumulation_add", "bf16_optimizer.py backward: clear_lp_grads() then loss.backward(), then "
                                  "update_hp_grads adds each bf16 gradient into the fp32 buffer (2 + 4 + 4 bytes a "
                                  "parameter every micro-batch); priced as deepspeed's bf16 add (3 x 2 bytes, all "
                                  "but the first micro-batch): under by 4 bytes a parameter and micro-batch"),
        ("rest", "as deepspeed (the pipeline engine, p2p gathers, unoverlapped gradient reduction, kernels)"),
    ))

TORCHTITAN = RuntimeProfile(
    "torchtitan", "torchtitan: FSDP2 (fully_shard per block) + tensor / pipeline parallel, SDPA flash attention",
    Kernels(flash_attention=True, attention_dropout=False, causal_skip=True, fused_swiglu=False,
            fused_cross_entropy=False, fp8_gemms=True, attention_backend="flash2", fused_norm_rope=False,
            loss_bytes_per_logit=12.0, loss_parallel_bytes_per_logit=16.0, loss_hole_bytes_per_logit=2.0,
            selective_policy="every-other-matmul", sp_saves_gathered_inputs=True, kv_repeated=True,
            cp_attention_overhead=(1.07, 1.04), recompute_early_stop=True,
            loss_kernel_bytes_per_logit=((6.0, 16.0), (4.0, 16.0, 6.0))),
    Overlap(grad_reduce=True, param_gather=True, sharded_prefetch=True, tp_comm=False, pp_p2p=False,
            bucket_per_layer=True),
    MemoryReserve(cuda_context=0.5 * GIB, nccl_per_communicator=NCCL_BYTES_PER_COMMUNICATOR, workspace=64 * MIB,
                  fragmentation=0.0, fsdp_stream_pools=True, pipeline_buffers_per_microbatch=True,
                  gathered_input_holes=1.0),
    cp_exchange="all-gather", zero_stages=(0, 2, 3), default_stage_split="torchtitan",
    sources=(
        ("default_stage_split", "torchtitan parallelisms/pipelining_utils.py generate_split_points (d4c86e375, "
                                "2025-01, the commit of docs/performance.md's 405B tables): with no "
                                "pipeline_parallel_split_points, total stages p v (v = 2 for its multi-stage "
                                "schedules), base L // (p v), the first stage base, the middle ones base + 1 "
                                "while L mod (p v) lasts, the last the rest"),
        ("zero_stages", "0, 2, 3: torchtitan's data parallelism is DDP (data_parallel_replicate_degree alone), FSDP2 "
                        "(data_parallel_shard_degree; fully_shard per block) or both (HSDP); its "
                        "fsdp_reshard_after_forward 'never' keeps the gathered weights through backward (ZeRO-2's "
                        "traffic); nothing shards the optimizer state alone (no ZeRO-1); with pp > 1 its FSDP is "
                        "priced as ZeRO-1's traffic and memory (hybrid/fsdp.py state_zero)"),
        ("cp_exchange", "torchtitan job config context_parallel_rotate_method, default \"allgather\" (torch's "
                        "context_parallel _RotateMethod.ALL_GATHER)"),
        ("flash_attention", "torchtitan/models/llama/model.py: F.scaled_dot_product_attention(is_causal=True) "
                            "(flash / cuDNN backend on H100)"),
        ("fused_swiglu", "torchtitan FeedForward: w2(F.silu(w1(x)) * w3(x)) in eager mode (torch.compile optional)"),
        ("fp8_gemms", "torchtitan float8 training (torchao.float8, --float8.enable_fsdp_float8_all_gather)"),
        ("kv_repeated", "torchtitan/models/llama/model.py Attention.forward (9dec370): keys = repeat_kv(xk, n_rep), "
                        "values = repeat_kv(xv, n_rep), then F.scaled_dot_product_attention, the call torch's "
                        "context_parallel replaces"),
        ("recompute_early_stop", "torchtitan 9dec370 parallelisms/parallelize_llama.py _apply_ac_to_transformer_block: "
                                 "full AC is ptd_checkpoint_wrapper(module, preserve_rng_state=False), torch's "
                                 "checkpoint_wrapper whose default CheckpointImpl.NO_REENTRANT calls "
                                 "torch.utils.checkpoint.checkpoint(use_reentrant=False); torch/utils/checkpoint.py (read "
                                 "in torch 2.6.0): _enable_checkpoint_early_stop = True (the default since pytorch PR "
                                 "96866, 2023-03), and _recomputation_hook.pack_hook raises _StopRecomputationError once "
                                 "the recomputation has packed as many tensors as the forward saved; autograd packs an "
                                 "operator's inputs (SavedVariable) before it runs its kernel, so the block's last "
                                 "saving operator (w2, the down projection) and what follows it (the residual add, the "
                                 "row-parallel reduction) are not recomputed. Under torch.compile the partitioner "
                                 "recomputes only what the backward reads, which excludes the same tail"),
        ("cp_attention_overhead", "measured: scripts/time_context_parallel.py on one H200, torch 2.11 "
                                  "(data/device/h200-2026-11-27-pp-cp/cp): rank 0 of torch's context_parallel on "
                                  "a fake 2-8 rank group, flash backend, 32,768 tokens a rank, Llama 3 8B heads, "
                                  "against the same rank's kernels called alone: forward 1.067-1.069, backward "
                                  "1.039-1.044 (cuDNN backend 1.10-1.11 and 1.05-1.07)"),
        ("attention_backend", "PyTorch SDPA tries its flash backend first: the bundled FlashAttention-2 "
                              "(torch 2.2+, aten/src/ATen/native/transformers/cuda/flash_attn)"),
        ("fused_norm_rope", "torchtitan/models/llama/model.py (eager): RMSNorm in fp32 (x.float(), pow, mean, rsqrt, "
                            "type_as, * weight) and apply_rotary_emb on view_as_complex(x.float())"),
        ("loss_bytes_per_logit", "torchtitan train.py loss_fn: F.cross_entropy(pred.flatten(0, 1).float(), labels)"),
        ("loss_kernel_bytes_per_logit", "that loss's kernels, eager: forward the fp32 cast (read 2, write 4) and "
                                        "log_softmax over a 128K row (PyTorch's cunn_SoftMaxForward: max, sum of exp "
                                        "and the write pass each read the fp32 row: 12, write 4; nll_loss reads one "
                                        "logit a row); backward nll_loss's zeros (4), log_softmax's backward (the "
                                        "gradient read for its sum, then gradient and output read, input gradient "
                                        "written: 16) and the cast back (read 4, write 2): 22 + 26 = 48 bytes a logit. "
                                        "Measured on an H200 (scripts/time_loss.py, data/device/h200-2026-11-27-"
                                        "compile-fp8/loss): 28 + 27 at its copy rate, 54-55 a logit at 8K-16K x 128K "
                                        "and 8K x 32K, 51 at 32K x 16K (the reductions read below a copy's rate); "
                                        "under loss_parallel the local logits' kernels are priced alike"),
        ("loss_parallel_bytes_per_logit", "with tensor parallelism torchtitan runs the loss under loss_parallel() "
                                          "(training.disable_loss_parallel default false); its backward, torch "
                                          "distributed/tensor/parallel/loss.py _nll_loss_and_log_softmax_backward, "
                                          "returns (grad_input + torch.exp(x)) * grad_output: the saved fp32 "
                                          "log-probabilities x, zeros_like(x), exp(x) and their sum live at once (16)"),
        ("loss_hole_bytes_per_logit", "measured: PyTorch's allocator traces on one H200 under expandable segments "
                                      "(data/device/h200-2026-11-27-alloc/traces-expandable: decoder-128k, "
                                      "decoder-32k, fsdp-128k, fsdp8-128k, loss-parallel): the bf16 prediction and "
                                      "its fp32 cast are freed before backward, the backward's first fp32 tensor "
                                      "takes the cast's place and the second, which does not fit the prediction's "
                                      "2 bytes a logit left below it, extends the segment: reserved exceeds "
                                      "allocated by the prediction's bytes at the loss's peak (2.101 GB of 2.101 "
                                      "at 8192 x 128256 logits; 0.524 of 0.524 at 8192 x 32000; under "
                                      "loss_parallel 1.07 GB at 32768 x 16032 local logits, 2.04 a logit)"),
        ("sp_saves_gathered_inputs", "torchtitan parallelize_llama.py apply_tp: \"output\": ColwiseParallel("
                                     "input_layouts=Shard(1), ...), and PrepareModuleInput(Shard(1) -> Replicate) before "
                                     "attention and feed_forward; torch/distributed/tensor/parallel/style.py "
                                     "ColwiseParallel._prepare_input_fn redistributes the sequence-sharded input to "
                                     "Replicate (all-gather) and the DTensor matmul saves that whole input for the weight "
                                     "gradient (Megatron's LinearWithGradAccumulationAndAsyncCommunication saves the shard "
                                     "and all-gathers it again in backward)"),
        ("selective_policy", "torchtitan parallelize_llama.py _apply_ac selective_ac_option='op' (the llama3 "
                             "configs' default): _save_list of mm (every second one), SDPA and reduce-scatter"),
        ("grad_reduce", "FSDP2 fully_shard: reduce-scatter of each block's gradients on a separate stream during "
                        "backward"),
        ("sharded_prefetch", "FSDP2: implicit forward prefetch and backward prefetch of the next block's all-gather "
                             "(torch.distributed._composable.fsdp, reshard_after_forward=True)"),
        ("bucket", "torchtitan parallelize_llama: fully_shard on every TransformerBlock (one FSDP unit per block)"),
        ("fragmentation", "torchtitan run_train.sh sets PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: each "
                          "(stream, pool) pair maps physical pages (20 MiB for the large pool) into one growing "
                          "virtual segment whose free blocks merge with their neighbours (c10/cuda/"
                          "CUDACachingAllocator.cpp ExpandableSegment), so no share of the compute stream's memory "
                          "is priced beyond the side-stream pools; holes that stay between live blocks are not "
                          "modelled (a lower bound)"),
        ("gathered_input_holes", "measured: allocator traces of rank 0 of torchtitan's TP 8 with sequence "
                                 "parallelism on a fake 8-rank group, one H200 under expandable segments "
                                 "(data/device/h200-2026-11-27-alloc/traces-expandable): at the peak one freed "
                                 "whole-sequence tensor of e s b h bytes stays a hole between live blocks (2.147 GB "
                                 "of 2.147 in tp-head-70b, 1.141 of 1.074 in tp-head-405b, 0.990 of 1.074 in "
                                 "tp-stage-1f1b): DTensor's all-gather of a sequence-sharded input (Shard(1) -> "
                                 "Replicate) allocates the whole sequence, which is freed under full "
                                 "recomputation and not reused by the larger tensors allocated after it"),
        ("fsdp_stream_pools", "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: foreach_all_gather allocates "
                              "all_gather_output (the unit's unsharded bf16 parameters) on all_gather_copy_in_stream; "
                              "foreach_reduce allocates reduce_output on reduce_scatter_stream and, with reduce dtype "
                              "= parameter dtype (fp32), makes the sharded gradients views of it; the caching "
                              "allocator serves a block only to allocations of the stream it was allocated on "
                              "(Block.stream), so both pools stay reserved beside the compute stream's"),
        ("pipeline_buffers_per_microbatch",
         "torch/distributed/pipelining/stage.py (torch 1963fc8, the torchtitan 9dec370 runs): "
         "_prepare_forward_infra and _prepare_backward_infra allocate one activation and one gradient receive "
         "buffer per micro-batch (_make_tensor_from_meta), live for the whole step (pytorch issue 136380, "
         "2024-09: 'allocate N buffers when we are using an N microbatch schedule'); forward_one_chunk keeps "
         "each micro-batch's output in fwd_cache until its backward and, on the last stage, in output_chunks "
         "until the next step's clear_runtime_states"),
        ("workspace", "two 32 MiB cuBLAS workspaces: PyTorch keys them by handle and stream, and the backward runs "
                      "on the autograd engine's thread with its own handle (measured: an eager block's allocation "
                      "before the step is weights + grads + input + 65 MiB, data/device/h100-2026-11-26/blocks.csv)"),
        ("tp_comm", "experimental.enable_async_tensor_parallel default false"),
        ("tensor_parallel", "torchtitan parallelize_llama.py apply_tp: ColwiseParallel for wq, wk, wv, w1, w3, "
                            "RowwiseParallel for wo and w2, SequenceParallel for the norms"),
        ("fp32_gradients", "torchtitan parallelize_llama.py apply_fsdp: MixedPrecisionPolicy(param_dtype=bfloat16, "
                           "reduce_dtype=float32) (training.mixed_precision_reduce default float32)"),
        ("sharded_fp32_params", "FSDP2 keeps the sharded parameters in fp32 and all-gathers bf16 casts of them"),
        ("fsdp_root_unsharded", "parallelize_llama.py apply_fsdp: fully_shard per block, then fully_shard(model) (the "
                                "root: embeddings, norm, output); FSDP2 FSDPState._lazy_init sets the root's "
                                "post_forward_mesh_info = None: not resharded after forward"),
        ("gradients_freed", "torchtitan train.py: optimizers.zero_grad() (torch.optim set_to_none=True); measured "
                            "with FSDP2 on one H100: the allocation before a step is fp32 parameters + Adam moments, "
                            "12 B/param, no gradients (data/device/h100-2026-11-26/fsdp-memory.csv)"),
        ("chunk_gradients_reduced",
         "torch 2.6.0 (branched 2024-12-13, ten days before the runs' 1963fc8) distributed/pipelining/schedules.py "
         "PipelineScheduleMulti._step_microbatches: backward_one_chunk(last_backward=backward_counter[stage_index] "
         "== n_microbatches), counted per stage (chunk); stage.py backward_maybe_with_nosync: on a chunk's "
         "last backward run_post_backward(self.submod) sets requires_gradient_sync and calls every "
         "FSDPParamGroup.post_backward of that chunk's FSDP root (torchtitan wraps each model chunk in its own "
         "fully_shard, parallelize_llama.py of 9dec370), which hands unsharded_accumulated_grad to "
         "foreach_reduce and sets it to None (fsdp/_fully_shard/_fsdp_param_group.py), and foreach_reduce drops "
         "the last reference once it is copied into the reduce-scatter input (unsharded_grads.clear()); "
         "ScheduleInterleaved1F1B runs number_of_rounds = max(1, m // pp) rounds, each chunk's backwards of a "
         "round in one run, the last local chunk first (backward_stage_index)"),
    ), fp32_gradients=True, sharded_fp32_params=True, fsdp_root_unsharded=True, gradients_freed=True,
    chunk_gradients_reduced=True)

TORCHTITAN_COMPILE = replace(
    TORCHTITAN, name="torchtitan-compile", summary="torchtitan with torch.compile on each block (training.compile = true)",
    kernels=replace(TORCHTITAN.kernels, fused_swiglu=True, fused_norm_rope=True, fusions_compiled=True),
    sources=(
        ("fused_norm_rope", "torch.compile (Inductor) fuses the element-wise chains of RMSNorm, rotary embedding and "
                            "SiLU x up into generated kernels"),
        ("fusions_compiled", "measured on an H200 (data/device/h200-2026-11-27-compile-fp8, torch 2.11): 4 Llama 3.1 "
                             "405B blocks under TP 8 and full activation checkpointing, each compiled, peak 23.00 "
                             "GiB allocated against 22.56 eager: the compiled backward holds no less"),
        ("loss_bytes_per_logit", "torchtitan parallelize_llama.py apply_compile compiles each TransformerBlock only: "
                                 "the output layer and the loss stay eager (12, as torchtitan)"),
        ("rest", "as torchtitan"),
    ))

TORCHTITAN_FP8_GATHER = replace(
    TORCHTITAN_COMPILE, name="torchtitan-compile-fp8-gather",
    summary="torchtitan-compile with float8.enable_fsdp_float8_all_gather = true (FSDP gathers fp8 block weights)",
    fp8_weight_gather=True,
    sources=(
        ("fp8_weight_gather",
         "torchtitan 9dec370 train_configs/llama3_405b.toml: enable_float8_linear, enable_fsdp_float8_all_gather and "
         "precompute_float8_dynamic_scale_for_fsdp = true (config_manager.py: false by default; the 8B and 70B "
         "presets enable no float8); torchtitan/float8.py converts every nn.Linear but \"output\" to Float8Linear "
         "(module_filter_fn) and enables the fp8 all-gather only with FSDP (dp_shard_enabled); torchao 0.8.0 "
         "(eab345c) float8/fsdp_utils.py WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather all-gathers "
         "float8_tensor._data (1 byte) and fsdp_post_all_gather makes the unsharded parameter a Float8Tensor of "
         "that gathered data, so FSDP2 holds no bf16 copy; float8_linear.py cast_weight_to_float8_t then uses it "
         "as is (tensor_already_casted_to_fp8)"),
        ("rest", "as torchtitan-compile"),
    ))

# Meta's own stack is not published as code: every fact that differs from torchtitan's is quoted from Dubey et
# al. 2024 (arXiv 2407.21783) section 3.3.2 (pipeline parallelism improvements, context parallelism, network-aware
# parallelism configuration, numerical stability); the rest (kernels, allocator, FSDP mechanics) is torchtitan's,
# the nearest published code.
LLAMA3_META = replace(
    TORCHTITAN, name="llama3-meta",
    summary="Meta's Llama 3 training stack as Dubey et al. 2024 describe it (section 3.3): FSDP without "
            "resharding after forward, TP, interleaved PP with asynchronous point-to-point and stage inputs and "
            "outputs freed, CP by all-gather of the grouped-query K and V; torchtitan's kernels",
    kernels=replace(TORCHTITAN.kernels, kv_repeated=False, cp_attention_overhead=(1.0, 1.0)),
    overlap=replace(TORCHTITAN.overlap, pp_p2p=True, cp_gather_hidden=False),
    memory=replace(TORCHTITAN.memory, pipeline_buffers_per_microbatch=False), chunk_gradients_reduced=False,
    default_stage_split="planned",
    sources=(
        ("default_stage_split", "planned: Meta's stack has no published default; the paper states its own split "
                                "(section 3.3.2: \"reduce one Transformer layer each from the first and the last "
                                "stages\"), which the planner's cut finds for 405B (7, 8 x 14, 7 on 16 stages)"),
        ("cp_gather_hidden", "False: Dubey et al. 2024 section 3.3.2, context parallelism: \"we first all-gather "
                             "the key (K) and value (V) tensors, and then compute attention output for the local "
                             "query (Q) tensor chunk. Although the all-gather communication latency is exposed in "
                             "the critical path, we still adopt this approach\" (unlike existing implementations "
                             "\"that overlap communication and computation in a ring-like structure\"); whether "
                             "the backward gathers K and V again is not stated: priced as torchtitan's (it does), "
                             "exposed too"),
        ("pp_p2p", "Dubey et al. 2024 section 3.3.2, pipeline parallelism improvements: \"we adopt asynchronous "
                   "point-to-point communication in PP, which considerably speeds up training\", with the "
                   "interleaved schedule (\"we use an interleaved schedule (Narayanan et al., 2021) with V pipeline "
                   "stages on one pipeline rank\") whose N contiguous micro-batches are tunable \"to hide "
                   "point-to-point communication\": the sends and receives run under compute, as Megatron-core's "
                   "overlap_p2p_comm (hybrid/evaluate.py p2p_overlapped)"),
        ("pipeline_buffers_per_microbatch",
         "False: Dubey et al. 2024 section 3.3.2: \"based on detailed memory allocation profiling, we proactively "
         "deallocate tensors that will not be used for future computation, including the input and output tensors "
         "of each pipeline stage\", and \"We enable TORCH_NCCL_AVOID_RECORD_STREAMS to reduce memory usage from "
         "asynchronous point-to-point communication\": a few reused send/receive buffers (hybrid/memory.py "
         "p2p_buffer_bytes), not torch.distributed.pipelining's per-micro-batch buffers and kept outputs"),
        ("chunk_gradients_reduced",
         "False: when Meta's stack reduces each chunk's gradients is not stated (Dubey et al. 2024 section "
         "3.3.2), so every chunk's gradients are priced as held together, the larger figure"),
        ("grad_reduce", "Dubey et al. 2024 section 3.3.2: DP (FSDP) \"can tolerate longer network latency by "
                        "asynchronously prefetching sharded model weights and reducing gradients\" (as torchtitan)"),
        ("fp32_gradients", "Dubey et al. 2024 section 3.3.2, numerical stability: \"we use FP32 gradient "
                           "accumulation during backward computation over multiple micro-batches and also "
                           "reduce-scatter gradients in FP32\" (as torchtitan)"),
        ("cp_exchange", "Dubey et al. 2024 section 3.3.2: \"our CP implementation adopts an all-gather based "
                        "method\" (as torchtitan)"),
        ("kv_repeated", "Dubey et al. 2024 (arXiv 2407.21783) section 3.3.2, context parallelism: \"we first "
                        "all-gather the key (K) and value (V) tensors\" and chose that over a ring because \"with "
                        "grouped query attention (GQA), the K and V tensors are much smaller than Q\": the exchange "
                        "moves the 8 key/value heads, not K and V repeated to the query heads (torchtitan's)"),
        ("cp_attention_overhead", "not measured for Meta's stack: 1 (torch's context_parallel's measured factors "
                                  "are torchtitan's)"),
        ("rest", "as torchtitan: the PyTorch FSDP / TP / PP stack the paper's section 3.3 describes (its FSDP "
                 "\"does not reshard after forward\", as torchtitan under PP); the paper names no kernels and "
                 "no activation layout, so the blocks' kernels and saved tensors are torchtitan's (eager)"),
    ))

NEMO = replace(
    MEGATRON_CORE, name="nemo",
    summary="NVIDIA NeMo 2 performance recipes (Megatron-core, Transformer Engine, TP communication overlap)",
    kernels=replace(MEGATRON_CORE.kernels, fused_cross_entropy=True, loss_bytes_per_logit=2.0,
                    loss_kernel_bytes_per_logit=()),
    overlap=replace(MEGATRON_CORE.overlap, tp_comm=True),
    sources=(
        ("tp_comm", "nemo/collections/llm/recipes (performance mode): tp_comm_overlap=True with "
                    "MegatronCommOverlapCallback (Transformer Engine userbuffers)"),
        ("fused_cross_entropy", "nemo/collections/llm/gpt/model/base.py GPTConfig.cross_entropy_loss_fusion = True"),
        ("loss_kernel_bytes_per_logit", "the fused loss's passes were not counted: the graph's roofline"),
        ("grad_reduce", "MegatronCommOverlapCallback: overlap_grad_reduce, overlap_param_gather with the "
                        "distributed optimizer"),
        ("rest", "as megatron-core"),
    ))

# LLM Foundry as its H100 benchmarks ran it (scripts/train/benchmarking/README.md of mosaicml/llm-foundry
# 5e85bd62d, 2024-01-06: setup.py pins mosaicml (Composer) >=0.17.2,<0.18 and torch 2.1.0; the gpu-flash2
# extra installs flash-attn 2.4.2). Composer wraps every MPTBlock in its own FSDP1 unit and the model in the
# root unit, as torchtitan does with FSDP2, so the overlap rules are torchtitan's; the kernels and the
# allocator set-up are MPT's and differ (see `sources`). FSDP1 differs from FSDP2 where it matters here:
# flat parameters per unit, one process group for all-gathers and reduce-scatters (they queue behind each
# other), backward prefetch BACKWARD_POST (the next unit's all-gather issued after the current unit's
# gradients) instead of FSDP2's prefetch before the unit's backward, and no expandable segments.
LLM_FOUNDRY = replace(
    TORCHTITAN, name="llm-foundry",
    summary="MosaicML LLM Foundry MPT on Composer 0.17 + PyTorch FSDP1 (one unit per block), triton flash "
            "attention, fused cross entropy; data parallelism only",
    kernels=Kernels(flash_attention=True, attention_dropout=False, causal_skip=True, fused_swiglu=False,
                    fused_cross_entropy=True, fp8_gemms=False, attention_backend="triton2022", fused_norm_rope=True,
                    loss_bytes_per_logit=2.0, metric_bytes_per_logit=28.0, grad_reduce_prep_bytes=18.0,
                    recompute_early_stop=True, attention_offered=("flash2",),
                    attention_settings=(("triton2022", "model.attn_config.attn_impl: triton"),
                                        ("flash2", "model.attn_config.attn_impl: flash"))),
    memory=MemoryReserve(cuda_context=0.5 * GIB, nccl_per_communicator=NCCL_BYTES_PER_COMMUNICATOR,
                         workspace=64 * MIB, fragmentation=0.05),
    cp_exchange="ring", dimensions=(), zero_stages=(0, 2, 3), optimizer_bytes_per_param=92.0,
    default_stage_split="planned",
    chunk_gradients_reduced=False,  # no pipeline (dimensions ())
    sources=(
        ("flash_attention", "llm-foundry 5e85bd62d scripts/train/yamls/pretrain/mpt-*.yaml attn_config.attn_impl: "
                            "triton, and submit_benchmarks.py --attn_impl default 'triton' (the benchmark sweep "
                            "sweep.sh sets none): llmfoundry/models/layers/attention.py triton_flash_attn_fn calls "
                            "llmfoundry/models/layers/flash_attn_triton.py flash_attn_func, FlashAttention's "
                            "algorithm in Triton (no s x s scores in HBM)"),
        ("causal_skip", "flash_attn_triton.py _fwd_kernel: end_n = min((start_m + 1) BLOCK_M, seqlen_k) when "
                        "IS_CAUSAL; _bwd_kernel_one_col_block: begin_m from start_n when IS_CAUSAL"),
        ("attention_backend", "triton2022: the yamls' and submit_benchmarks.py's attn_impl triton runs "
                              "llmfoundry/models/layers/flash_attn_triton.py ('Copied from .../flash-attention/.../"
                              "flash_attn_triton.py', imports switched to triton_pre_mlir; setup.py installs "
                              "triton-pre-mlir from vchiley/triton branch triton_pre_mlir_sm90), the kernel that "
                              "FlashAttention-2's release chart times as 'FlashAttention Triton' at 0.42-0.51 of "
                              "FlashAttention-2 on an A100 (data/device/published/flashattention2-fwd-bwd.csv; "
                              "the device tables' triton2022 curves). The large-scale benchmarks' sweep.py runs "
                              "attn_impl flash for 1b-7b and 70b: the llm-foundry-flash profile"),
        ("attention_offered", "flash2: the same stack with attn_config.attn_impl: flash runs flash_attn_fn, "
                              "flash-attn's FlashAttention-2 (llmfoundry/models/layers/attention.py at 5e85bd62d; "
                              "setup.py's gpu-flash2 extra installs flash-attn 2.4.2, the extra submit_benchmarks.py "
                              "installs for every run): a yaml key the planner may set (llm-foundry-flash prices it "
                              "alike)"),
        ("attention_dropout", "configuration_mpt.py attn_config attn_pdrop default 0; triton_flash_attn_fn raises "
                              "'Dropout not implemented for attn_impl: triton'"),
        ("fused_norm_rope", "submit_benchmarks.py mod_parameters sets model.norm_type = 'low_precision_layernorm' "
                            "(also configuration_mpt.py's default): llmfoundry/models/layers/norm.py LPLayerNorm "
                            "runs F.layer_norm on the bf16 input with autocast off, one kernel; learned position "
                            "embeddings (learned_pos_emb default True), no rotary"),
        ("fused_swiglu", "no gated MLP: ffn_type mptmlp, up_proj -> GELU -> down_proj (llmfoundry/models/layers/ffn.py)"),
        ("fused_cross_entropy", "modeling_mpt.py ComposerMPTCausalLM: loss_fn default 'fused_crossentropy' = "
                                "flash_attn.losses.cross_entropy.CrossEntropyLoss (flash-attn 2.4.2, Triton) on "
                                "the bf16 logits (tied wte(out, True) under autocast), no fp32 copy: its gradient "
                                "in the logits' dtype (2 B/logit)"),
        ("loss_bytes_per_logit", "2: flash-attn 2.4.2 flash_attn/losses/cross_entropy.py (Triton) saves the bf16 "
                                 "logits and the row log-sum-exp and writes the gradient in the logits' dtype "
                                 "(the fused kernel's figure, as nemo's)"),
        ("fp8_gemms", "the H100 BF16 table runs precision amp_bf16 (amp_fp8 needs Transformer Engine layers)"),
        ("recompute_early_stop", "scripts/train/yamls/pretrain/mpt-*.yaml (which submit_benchmarks.py loads): "
                                 "fsdp_config.activation_checkpointing_reentrant: false; Composer v0.17.2 "
                                 "composer/trainer/dist_strategy.py prepare_fsdp_module wraps each block in "
                                 "checkpoint_wrapper(m, checkpoint_impl=CheckpointImpl.NO_REENTRANT), torch 2.1's "
                                 "non-reentrant torch.utils.checkpoint, whose early stop is on by default (pytorch PR "
                                 "96866, 2023-03): MPT's last saving operator, ffn.down_proj, and the residual add "
                                 "after it are not recomputed"),
        ("metric_bytes_per_logit", "28: Composer v0.17.2 (7e0e40a) composer/trainer/trainer.py _train_microbatch: after "
                                   "each micro-batch's backward, with state.train_metrics non-empty, "
                                   "_eval_train_metrics runs eval_forward(batch, outputs) (the cached logits, no new "
                                   "forward) and update_metric for each train metric under the precision context "
                                   "(autocast bf16); llm-foundry 5e85bd62d modeling_mpt.py ComposerMPTCausalLM: "
                                   "train_metrics [LanguageCrossEntropy(), LanguagePerplexity()] unless "
                                   "use_train_metrics is false (no benchmark yaml sets it); composer/metrics/nlp.py "
                                   "LanguageCrossEntropy.update: torch.nn.CrossEntropyLoss(reduction='sum') on "
                                   "logits.view(-1, V) (LanguagePerplexity subclasses it), which autocast runs in "
                                   "fp32: a fp32 copy of the bf16 logits (read 2, write 4 bytes) and its fp32 "
                                   "log-softmax (read 4, write 4), twice"),
        ("optimizer_bytes_per_param", "92 = 80 + 12. scripts/train/yamls/pretrain/mpt-*.yaml: optimizer "
                                      "decoupled_adamw, weight_decay 0.0, algorithms.gradient_clipping norm 1.0. "
                                      "Composer v0.17.2 composer/optim/decoupled_weight_decay.py DecoupledAdamW.adamw: "
                                      "a Python loop over the parameters, one eager kernel per operation on the fp32 "
                                      "shard: exp_avg.mul_ (read 4, write 4), .add_(grad) (8 + 4), exp_avg_sq.mul_ "
                                      "(4 + 4), .addcmul_(grad, grad) (8 + 4), exp_avg_sq.sqrt() (4 + 4), / "
                                      "sqrt(bias_correction2) (4 + 4), .add_(eps) (4 + 4), param.addcdiv_(exp_avg, "
                                      "denom) (12 + 4): 80 bytes (the step counter is a device tensor read with "
                                      ".item() per parameter: a host sync each, not priced). Gradient clipping: "
                                      "composer/algorithms/gradient_clipping/gradient_clipping.py calls the root FSDP "
                                      "module's clip_grad_norm_ at AFTER_TRAIN_BATCH; torch FSDP1 clip_grad_norm_ "
                                      "(fully_sharded_data_parallel.py, read at pytorch 005df1d67) takes the fp32 norm "
                                      "of each local gradient (read 4), all-reduces it and multiplies every gradient by "
                                      "the clamped coefficient unconditionally, 'avoids the host-device sync' (read "
                                      "4, write 4): 12 bytes"),
        ("fp32_gradients", "Composer v0.17.2 (7e0e40a) composer/trainer/mosaic_fsdp_utils.py get_mixed_precision: "
                           "mixed_precision 'DEFAULT' (dist_strategy.py default, the table's MP Mode) -> "
                           "param_dtype = bf16 (amp_bf16), reduce_dtype = float32, buffer_dtype = bf16"),
        ("sharded_fp32_params", "torch 2.1 FSDP1 MixedPrecision: the FlatParameter's local shard stays fp32 and "
                                "is the optimizer's parameter; the bf16 _mp_shard cast for the all-gather is freed "
                                "after it (flat_param.py _free_low_precision_sharded_param)"),
        ("fsdp_root_unsharded", "torch 2.1 torch/distributed/fsdp/_runtime_utils.py _post_forward_reshard: 'Do "
                                "not free the root's parameters in the post-forward for FULL_SHARD' (not "
                                "state._is_root); the root unit holds wte, wpe and norm_f (Composer wraps the "
                                "model, MPT's fsdp_wrap_fn each MPTBlock)"),
        ("gradients_freed", "Composer v0.17.2 composer/trainer/trainer.py _train_microbatches: "
                            "optimizer.zero_grad(set_to_none=True) before each batch"),
        ("grad_reduce", "FSDP1 reduce-scatters each unit's gradients in its post-backward hook on the "
                        "post-backward stream; Composer applies no_sync only to DDP (trainer.py "
                        "_train_microbatch: sync_context is nullcontext for FSDP), so every micro-batch reduces"),
        ("sharded_prefetch", "Composer dist_strategy.py set_fsdp_default: backward_prefetch 'BACKWARD_POST', "
                             "forward_prefetch False, limit_all_gathers True (sweep.py, the 128-512 GPU runs: "
                             "BACKWARD_PRE, forward_prefetch true); FSDP1 issues each unit's all-gather from the "
                             "CPU ahead of the GPU (limit_all_gathers keeps two in flight) and in backward "
                             "prefetches the next unit after (POST) or before (PRE) the current unit's gradients: "
                             "one flag here, under the previous block in both passes"),
        ("param_gather", "SHARD_GRAD_OP (ZeRO-2): FSDP1 all-gathers each unit's parameters in its forward "
                         "pre-hook, issued ahead as under FULL_SHARD, and keeps them through backward "
                         "(RESHARD_AFTER_FORWARD_HANDLE_STRATEGIES holds FULL_SHARD and HYBRID_SHARD only)"),
        ("bucket", "modeling_mpt.py MPTPreTrainedModel.fsdp_wrap_fn: isinstance(module, MPTBlock) (one FSDP unit "
                   "per block); activation_checkpointing_fn the same (full recomputation of the block)"),
        ("grad_reduce_prep_bytes", "18 = 4 + 6 + 8, every micro-batch (Composer reduces every micro-batch under "
                                   "FSDP, see grad_reduce), on the post-backward stream. torch FSDP1 (flat_param.py "
                                   "_get_unflat_views: the original parameters are torch.split views of the unit's "
                                   "flat parameter, so autograd's SplitBackward concatenates their bf16 gradients into "
                                   "the flat gradient: read 2, write 2); _runtime_utils.py _post_backward_hook: "
                                   "flat_param.grad.to(handle._reduce_dtype) when the gradient's dtype is not the "
                                   "reduce dtype (bf16 -> fp32 under Composer's DEFAULT: read 2, write 4); "
                                   "_reduce_grad: _div_if_needed(padded_unsharded_grad, "
                                   "state._gradient_predivide_factor) before reduce_scatter_tensor (in place, fp32: "
                                   "read 4, write 4; the factor exceeds 1 from 2 ranks). The 1/dp shard's "
                                   "post-divide and accumulation are not counted (1/dp of these bytes)"),
        ("grad_accumulation_add", "FSDP1 adds each micro-batch's reduced gradient into the 1/dp shard "
                                  "(_accumulate_sharded_gradient): negligible, not priced"),
        ("fragmentation", "PyTorch's caching allocator without expandable segments (Composer sets no "
                          "PYTORCH_CUDA_ALLOC_CONF): megatron-core's 5% share, not measured for FSDP1"),
        ("fsdp_stream_pools", "FSDP1 also allocates on side streams (unsharded flat parameters on the unshard "
                              "stream, sharded gradients on the post-backward stream), but hybrid/memory.py "
                              "stream_pool_bytes is FSDP2's measured layout: not priced (a lower bound)"),
        ("cp_exchange", "Composer 0.17 runs no context, tensor or pipeline parallelism (FSDP only)"),
        ("dimensions", "none: Composer v0.17.2's parallelism is DDP or FSDP1 over all ranks (composer/trainer/"
                       "dist_strategy.py prepare_ddp_module, prepare_fsdp_module); no tensor, pipeline or context "
                       "parallel module (tensor parallelism entered Composer in 0.21)"),
        ("zero_stages", "0, 2, 3: Composer v0.17.2 composer/trainer/mosaic_fsdp_utils.py SHARDING_MAP: NO_SHARD "
                        "(0), SHARD_GRAD_OP (2), FULL_SHARD (3), with torch >= 2.1 HYBRID_SHARD and "
                        "_HYBRID_SHARD_ZERO2 (the same stages within a shard group): no ZeRO-1"),
        ("workspace", "as torchtitan: two 32 MiB cuBLAS workspaces (eager PyTorch, autograd's own thread)"),
        ("cuda_context", "torch 2.1.0 on CUDA 12.1 with lazy module loading (PyTorch's default), as megatron-core"),
        ("rest", "as torchtitan: FSDP unit per block, reduce-scatter under backward"),
    ))

# LLM Foundry with attn_impl flash: the large-scale benchmark table's 1b, 3b, 7b and 70b rows (sweep.py), and any
# MPT run that installs the gpu-flash2 extra and sets it
LLM_FOUNDRY_FLASH = replace(
    LLM_FOUNDRY, name="llm-foundry-flash",
    summary="llm-foundry with attn_impl flash: FlashAttention-2 (flash-attn 2.4.2) instead of the 2022 Triton kernel",
    kernels=replace(LLM_FOUNDRY.kernels, attention_backend="flash2", attention_offered=("triton2022",)),
    sources=(
        ("attention_backend", "flash2: llm-foundry 5e85bd62d llmfoundry/models/layers/attention.py flash_attn_fn "
                              "calls flash-attn's flash_attn_varlen_func (setup.py gpu-flash2: flash-attn 2.4.2) "
                              "when attn_impl is flash; scripts/train/benchmarking/sweep.py sets it for 1b, 3b, 7b "
                              "and 70b (triton for 13b and 30b)"),
        ("attention_offered", "triton2022: attn_impl triton, the 2022 Triton kernel (as llm-foundry)"),
        ("rest", "as llm-foundry"),
    ))

RUNTIMES: dict[str, RuntimeProfile] = {p.name: p for p in (MEGATRON_CORE, MEGATRON_CORE_TP_OVERLAP, MEGATRON_2021, DEEPSPEED, DEEPSPEED_BF16,
                                                              TORCHTITAN,
                                                              TORCHTITAN_COMPILE, TORCHTITAN_FP8_GATHER, LLAMA3_META,
                                                              NEMO, LLM_FOUNDRY, LLM_FOUNDRY_FLASH)}
DEFAULT_RUNTIME = MEGATRON_CORE


def runtime_names() -> list[str]:
    """Names of the known runtime profiles, in registry order."""
    return list(RUNTIMES)


def resolve_runtime(value, where: str = "--runtime") -> RuntimeProfile:
    """A `RuntimeProfile` from a name (None: the default, megatron-core) or a profile; InputError
    naming `where` otherwise."""
    if value is None:
        return DEFAULT_RUNTIME
    if isinstance(value, RuntimeProfile):
        return value
    if isinstance(value, str) and value.strip().lower() in RUNTIMES:
        return RUNTIMES[value.strip().lower()]
    raise InputError(f"unknown runtime {value!r}; known: {', '.join(RUNTIMES)}", where)
