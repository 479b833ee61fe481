"""Host time of the expert layers: what the CPU spends issuing the per-expert work of Transformer
Engine's GroupedLinear (Megatron-core --moe-grouped-gemm), and when the GPU waits for it.

Mechanism, read from the runtimes' code (Transformer Engine v2.9, Megatron-core core_v0.15.0, the
versions of the NeMo 25.11 container the published rows ran):
- `transformer_engine/pytorch/module/grouped_linear.py` `_GroupedLinear`: per local expert, forward
  the input quantize (`tex.split_quantize`, one quantizer call per split) and one GEMM
  (`general_grouped_gemm` -> `te_general_grouped_gemm`, a C++ loop issuing one cuBLASLt matmul per
  expert, each creating its descriptors and running `cublasLtMatmulAlgoGetHeuristic`); backward the
  grad-output quantize, the dgrad GEMM and the wgrad GEMM per expert. Two GroupedLinears per MoE
  layer (fc1: gate/up, fc2: down).
- kernels per quantize (`csrc/quantizer.cpp`): current scaling (Hopper's FP8-CS) 3 launches
  (`nvte_compute_amax`, `nvte_compute_scale_from_amax`, `nvte_quantize_v2`); MXFP8 (Blackwell's
  FP8-MX) 1 (`nvte_quantize_v2`); the MXFP8 scale swizzles are one fused launch per grouped GEMM
  and operand (`multi_tensor_swizzle_scaling_factors`), not per expert, so not counted here; bf16
  has no quantize. Weight casts run on the first micro-batch of a step only (Megatron passes
  is_first_microbatch), amortised: not counted.
- `megatron/core/transformer/moe/token_dispatcher.py` MoEAlltoAllTokenDispatcher.preprocess:
  dropless routing needs the token counts on the host (the all-to-all's split sizes, the
  GroupedLinear's m_splits), so the host synchronises with the GPU in every MoE layer's forward
  (cuda_sync_point "before_ep_alltoall" for ep > 1, "before_finish" otherwise): the GPU queue is
  empty when the host starts issuing the experts, and the GPU runs the expert part no faster than
  the host issues it. With --moe-pad-expert-input-to-capacity (`drop_and_pad`: a capacity factor
  here) the counts are constants, there is no sync, and the host runs ahead: its time is hidden
  while the layer's GPU time exceeds it. The backward has no sync (the split sizes are kept), so
  the host's backward time is hidden behind the whole layer's backward GPU time.
- CUDA graphs in the recipes (`cuda_graph_scope` attn, moe_router, moe_preprocess) cover the parts
  before the sync, never the experts of a dropless layer (their shapes change every step): nothing
  changes here. --moe-router-dtype fp32 (the recipes' setting) keeps the router GEMM's 16-bit
  inputs and writes fp32 logits (core_v0.15.0 moe_utils.RouterGatingLinearFunction through TE's
  te_general_gemm), so the router stays a 16-bit GEMM (moe_price) and the host work is unchanged.

Per-launch host seconds, from kernel-level measurements, never fitted to end-to-end rows:
- a bf16 GEMM: 13.528 us, torch.matmul 1024^3 launched back to back on an H100 whose GPU ran it in
  5.806 us graph-timed (data/device/h100-2026-11-26/earlier-calls/3-launched-back-to-back/
  calibration.csv against the folder's calibration.csv): the host's rate set the pace;
- an fp8 GEMM: 29.320 us, torch._scaled_mm 1024 x 1024 x 256 launched back to back (4.194 us
  graph-timed; the fastest of the three host-bound fp8 cases, 29.3-31.1 us);
- another kernel (quantize, amax, scale): 5 us, the published 4-6 us a CPU spends submitting one
  kernel through the CUDA driver and runtime (susun-blog.com/blog/pegainfer-3-cuda-graph, CUDA 13.0).
These measurements are an x86 host's. A Grace host (GB200: `DeviceSpec.host_cpu` "grace") takes
HOST_CPU_FACTOR = 37.08 / 13.48 = 2.751 times as long per issued kernel: TE issue 2053's torch
Linear forward (bf16, h 2048, 8,192 tokens), 37.08 us of CPU time per call on a GB200 against 13.48 us
on an H100 DGX (Xeon Platinum 8480C) (data/device/published/host-cpu-launch.csv; the x86 figure
agrees with the 13.528 us above). The factor is measured on a bf16 GEMM's launch path and applied to
every issued kernel and to the allocation below (all of it host code of the same kind: Python,
PyTorch's dispatcher, the CUDA driver); the Grace-measured allocation converts to x86 by dividing.

Host work that is not a launch, per local expert and GroupedLinear, read from the same v2.9
`_GroupedLinear` under Megatron-core (fuse_wgrad_accumulation on; its DDP sets every parameter's
`grad_added_to_main_grad`, zero_out_wgrad off):
- priced, every recipe, backward: 1 wgrad placeholder, `handle_custom_ddp_from_mcore`'s
  `torch.empty(weight.main_grad.shape)` per expert weight (the real gradient went into main_grad), at
  HOST_ALLOC_S = 2.734 us on Grace: TE issue 2897's profile of the te.ops grouped MLP on GB200 (64
  experts, FC1 + FC2), "wgrad tensor allocations: 350 us" over the 64 x 2 per-expert wgrad
  allocations of that code (single_grouped_weight off, its default)
  (data/device/published/te-grouped-host-ops.csv); on x86 2.734 / HOST_CPU_FACTOR = 0.994 us.
- not priced, no per-op figure: split views (bf16 `torch.split`: 1 forward, 1 backward), the fp8
  quantizers' usage flags (forward: input and weight `set_usage`, 2; backward: the weight's
  `update_usage`, 1; issue 2897's 90 us is the fused op's quantizer initialisation, not this work),
  the fp8 weight-workspace lookup (1 forward), saved-tensor bookkeeping (prepare_for_saving /
  restore_from_saved: 3 tensors forward and backward, the main_grad lambdas), `clear_tensor_data` of
  the saved input (1 backward; issue 2897's 200 us covers 8 grouped buffers there, not per expert),
  and `split_quantize`'s per-split outputs (FP8-CS: C++ `at::empty` of data, transpose and scale per
  split, issue 1499's "2 x num_gemms" allocations, cheaper than a Python torch.empty and unmeasured;
  MXFP8: bulk-allocated, one Python tensor wrapper per split).
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.hybrid.moe_model import MoEModel

HOST_GEMM_S = {"bf16": 13.528e-6, "fp8": 29.320e-6}  # per issued GEMM, by GEMM dtype (docstring)
HOST_KERNEL_S = 5e-6  # per other issued kernel (docstring)
HOST_ALLOC_S = 350e-6 / 128  # per Python torch.empty on Grace: TE issue 2897, 350 us over 128 allocations (docstring)
HOST_CPU_FACTOR = {"x86": 1.0, "grace": 37.08 / 13.48}  # host seconds per issued kernel, over x86's: TE issue 2053
BACKWARD_ALLOCATIONS = 1  # per local expert and GroupedLinear: the wgrad placeholder (docstring)
GROUPED_LINEARS = 2  # per MoE layer: fc1 (gate/up) and fc2 (down)


@dataclass(frozen=True)
class ExpertLaunches:
    """Launches per local expert and GroupedLinear: GEMMs and other kernels, forward and backward."""
    forward_gemms: int
    forward_kernels: int
    backward_gemms: int
    backward_kernels: int


LAUNCHES = {  # module docstring: TE v2.9 _GroupedLinear per expert
    "bf16": ExpertLaunches(1, 0, 2, 0),  # GEMM; dgrad + wgrad
    "fp8-cs": ExpertLaunches(1, 3, 2, 3),  # amax, scale, cast + GEMM; the same for the grad, dgrad + wgrad
    "mxfp8": ExpertLaunches(1, 1, 2, 1),  # quantize + GEMM; quantize of the grad, dgrad + wgrad
}


def expert_recipe(dtype: str, fp8_scaling: str) -> str:
    """Which launch pattern the expert GEMMs follow: "bf16" outside fp8; under fp8 "mxfp8" on a device
    whose tensor cores scale in blocks (`DeviceSpec.fp8_scaling == "block"`: Blackwell, the published
    FP8-MX rows), "fp8-cs" (per-tensor current scaling, the Hopper rows' FP8-CS) elsewhere."""
    if dtype != "fp8":
        return "bf16"
    return "mxfp8" if fp8_scaling == "block" else "fp8-cs"


def expert_host_s(model: MoEModel, ep: int, recipe: str, host_cpu: str = "x86") -> tuple[float, float]:
    """(forward, backward) host seconds issuing one MoE layer's expert work per micro-batch on a
    `host_cpu` host: E/ep local experts x GROUPED_LINEARS x (GEMMs x HOST_GEMM_S + other kernels x
    HOST_KERNEL_S) (`LAUNCHES`) x HOST_CPU_FACTOR[host_cpu], the backward + BACKWARD_ALLOCATIONS x
    HOST_ALLOC_S x HOST_CPU_FACTOR[host_cpu] / HOST_CPU_FACTOR["grace"] (the wgrad placeholders,
    measured on Grace). Every local expert is issued whatever its load, so routing skew never lowers it."""
    launches = LAUNCHES[recipe]
    gemm = HOST_GEMM_S["bf16" if recipe == "bf16" else "fp8"]
    per = GROUPED_LINEARS * (model.experts // ep)
    factor = HOST_CPU_FACTOR[host_cpu]
    allocation = HOST_ALLOC_S * factor / HOST_CPU_FACTOR["grace"]
    return (per * factor * (launches.forward_gemms * gemm + launches.forward_kernels * HOST_KERNEL_S),
            per * (factor * (launches.backward_gemms * gemm + launches.backward_kernels * HOST_KERNEL_S)
                   + BACKWARD_ALLOCATIONS * allocation))


def host_stall_s(host_forward_s: float, host_backward_s: float, dropless: bool, expert_forward_gpu_s: float,
                 layer_forward_gpu_s: float, layer_backward_gpu_s: float) -> tuple[float, float]:
    """(forward, backward) seconds the GPU waits for the host in one MoE layer: dropless, the
    forward's sync leaves the expert part alone to cover the host's issue time,
    max(0, host_f - experts_f); padded to capacity (no sync) the whole layer's forward covers it,
    max(0, host_f - layer_f); the backward (never a sync) max(0, host_b - layer_b)."""
    window = expert_forward_gpu_s if dropless else layer_forward_gpu_s
    return max(0.0, host_forward_s - window), max(0.0, host_backward_s - layer_backward_gpu_s)
