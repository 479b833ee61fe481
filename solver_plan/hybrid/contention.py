"""Contention: communication hidden under compute slows that compute.

A collective the runtime overlaps with compute runs as kernels on the same device: each of its CTAs
holds one SM while the collective runs, so the compute kernels under it run on the rest. With c the
seconds the overlapped communication runs under compute (its hidden part: what the overlap rules of
hybrid/schedule.py, stage_cost.tp_overlap_exposed_s and moe.exposed_alltoall_s take off the critical
path) and k of the device's S SMs held by its kernels, compute-bound work under it advances at
(S - k) / S of its rate for c seconds, so it ends

    slowdown_s = c x k / S

later (first order: the compute window is at least c, as the overlap rules hide no more than the
window). The SMs a communication kernel holds, by who launches it:
- NCCL collectives (data-parallel all-reduce, reduce-scatter, all-gather; ZeRO-3 / FSDP prefetch; the
  "alltoall" MoE dispatcher): one CTA per channel, `DeviceSpec.collective_ctas` from NCCL_DEBUG logs of
  the device's usual topology (data/hardware/devices.yaml, with the logs cited there);
- Transformer Engine userbuffers (tensor-parallel overlap, `Overlap.tp_comm`): TE's initialize_ub
  defaults (transformer_engine/pytorch/module/base.py get_default_config: num_sm 1 for the
  "ring_exchange" method, which Megatron / NeMo use for the all-gathers before qkv / fc1 and their
  dgrad counterparts, copy engines doing the transfer (use_ce); 16 for "pipeline" and "bulk", the
  reduce-scatters after proj / fc2 and the backward's bulk all-gathers): the all-gathers and
  reduce-scatters move the same bytes, so the time-weighted mean (1 + 16) / 2;
- DeepEP (the "deepep" dispatcher): Buffer.num_sms = 20 (deepseek-ai/DeepEP deep_ep/buffer.py; Megatron-core
  moe_deepep_num_sms 20; DeepSeek-V3 report section 3.2.2: 20 of the H800's 132 SMs);
- HybridEP (the "hybridep" dispatcher): 32, what the published runs set (Megatron-Bridge v0.2.1
  set_common_perf_overrides moe_hybridep_num_sms 32, recorded in hybrid/moe_kernels.py, whose kernel
  efficiencies were measured at 32 SMs).
A device whose SM count is not known (`DeviceSpec.sm_count` 0), or whose collective CTAs are not
(`collective_ctas` 0, for NCCL's kernels), gets no contention: the term is 0, never a guess.

Not modelled: pipeline and context-parallel point-to-point transfers hidden under compute (megatron-core's
interleaved p2p, the cp ring): a send to one peer over the network runs NCCL_NCHANNELS_PER_NET_PEER
CTAs (default 2, NCCL environment documentation; "2 p2p channels per peer" in NVIDIA/nccl issue 1189's
log), 2 / 132 = 1.5% of an H100 under transfers that are themselves small; HBM bandwidth the communication kernels take from memory-bound kernels (element-wise,
the optimizer) and wave quantization of a GEMM whose grid no longer fits one wave (NVIDIA developer
forum thread 337991: a 132-CTA GEMM under a 24-CTA all-gather on an H100 took about twice as long).
Check against a measurement of the compute itself (not an end-to-end row): "Characterizing
Compute-Communication Overlap in GPU-Accelerated Distributed Deep Learning: Performance and Power
Implications" (arXiv 2507.03114, 2025) times GPT / Llama compute with and without concurrent
collectives on 4 A100s, H100s, MI250s and MI210s: a mean 18.9% slower (at most 40%); this rule gives
24 / 108 = 22% (A100, NCCL on NVSwitch) and 16-24 / 132 = 12-18% (H100) for compute wholly under a
collective.

Used by the dense path (hybrid/evaluate.py's data-parallel sync into `StepTerms.contention_s`,
stage_cost.tp_overlap_exposed_s) and the MoE path (hybrid/moe_price.py: data-parallel sync, all-to-all,
tensor-parallel overlap). The per-operator simulator (solver_plan/simulate) does not model it; its
agreement test with the closed forms (tests/test_hybrid_runtime.py) runs a device without an SM count.
"""
from __future__ import annotations

TE_USERBUFFERS_SMS = (1 + 16) / 2  # module docstring: ring_exchange all-gathers 1 SM, pipeline / bulk 16
DISPATCH_SMS = {"deepep": 20, "hybridep": 32}  # module docstring; "alltoall" runs NCCL's kernels


def sm_share(device, sms: float) -> float:
    """k / S: the share of the device's S SMs (`sm_count`) that kernels holding k SMs take, at most 1;
    0 when S is not known or k is 0."""
    if device.sm_count <= 0 or sms <= 0:
        return 0.0
    return min(1.0, sms / device.sm_count)


def collective_share(device) -> float:
    """Share of the device a NCCL collective holds: collective_ctas / sm_count (0 when either is not known)."""
    return sm_share(device, device.collective_ctas)


def tp_overlap_share(device) -> float:
    """Share of the device Transformer Engine's userbuffers kernels hold: TE_USERBUFFERS_SMS / sm_count."""
    return sm_share(device, TE_USERBUFFERS_SMS)


def dispatch_share(device, dispatcher: str) -> float:
    """Share of the device a MoE token dispatcher's kernels hold: DISPATCH_SMS / sm_count for DeepEP and
    HybridEP, NCCL's collective CTAs for the "alltoall" dispatcher."""
    if dispatcher in DISPATCH_SMS:
        return sm_share(device, DISPATCH_SMS[dispatcher])
    return collective_share(device)


def slowdown_s(hidden_s: float, share: float) -> float:
    """Seconds the compute under `hidden_s` seconds of overlapped communication loses: hidden x share
    (module docstring), 0 for nothing hidden."""
    return max(0.0, hidden_s) * share
