"""Context parallelism (cp): the sequence of every micro-batch split over cp devices.

dp x cp x tp x pp = devices, ranks ordered tp fastest, then cp, then dp, then pp (Megatron-core's
tp-cp-dp-pp order), so a cp group spans nodes once tp x cp exceeds a node. The cp ranks of a
replica hold the same weights: gradients are reduced, and ZeRO shards, over the dp x cp ranks
(Megatron's data-parallel-with-context group), `replicas`.

Each rank keeps the activations of s / cp tokens: every sequence-proportional memory term of
memory.py with s / cp for s (`local_spec`), which is all of them under fused attention (the only
kind that runs with cp: Megatron-core's CP needs Transformer Engine's fused attention, PyTorch's
context_parallel SDPA's flash / efficient kernels), plus the key/value buffers of the exchange
(`kv_buffer_bytes`). Causal load balancing (Megatron-core and torchtitan both cut the sequence into
2 cp pieces and give rank r pieces r and 2 cp - 1 - r) gives every rank the same share of the causal
attention's work, so one rank computes 1/cp of the block: its GEMMs, norms and tensor-parallel
collectives scale with its tokens and its attention with the (query, key) pairs it owns
(`scaled_profile`: the block profile at the whole sequence, divided by cp).

Keys and values reach every rank by the runtime's method (`method`):
- "ring" (Megatron-core, NeMo: cp_comm_type p2p): cp - 1 steps, each sending the K and V piece it
  holds, 2 e (s / cp) b (kv d) / t bytes, to the next rank while attending to the current one
  (transformer_engine attention.py AttnFuncWithCPAndKVP2P); a step hides its transfer under the
  attention of one piece, 1/cp of the rank's attention; backward passes K, V and their gradients,
  twice the bytes, under the attention's backward;
- "all-gather" (Llama 3, Dubey et al. 2024 section 3.3.2: "all-gather the key and value tensors
  ... then compute attention output for the local query tensor chunk"; torchtitan's default
  context_parallel_rotate_method allgather): one all-gather of K and V, 2 e s b (kv d) / t bytes
  whole, issued before the rank attends to its own piece and waited for after it (torch's
  _templated_ring_attention: exchange_buffers at step 0, next_buffer at step 1), so it hides under
  that step, 1/cp of the rank's attention, in forward and again in backward (which gathers K and V
  anew under a step of 2.5x the forward's); the reduce-scatter of their gradients after the
  backward is not overlapped. Llama 3's waits for the gather before any attention ("the all-gather
  communication latency is exposed in the critical path"; `Overlap.cp_gather_hidden` False): nothing
  hides it.
Grouped-query attention with fewer key/value heads than cp is no constraint: the split is along the
sequence, and the exchanged bytes are those of the kv heads, or of all heads where the runtime
repeats K and V to the query heads before the attention call that context parallelism replaces
(`Kernels.kv_repeated`: torchtitan; `exchanged_width`). The ring's bookkeeping (merging each step's
partial output by its log-sum-exp, accumulating gradients in fp32) makes a rank's attention slower
than its kernels alone by the runtime's measured factors (`Kernels.cp_attention_overhead`, forward
and backward; torch's context_parallel: 1.07 and 1.04, data/device/h200-2026-11-27-pp-cp). Ulysses
(all-to-all over heads) is not in any profile here.
"""
from __future__ import annotations

from dataclasses import replace

from solver_plan.cluster import Cluster
from solver_plan.cost.kernels import FLASH_BACKWARD_RATIO
from solver_plan.hybrid.comm import collective
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.runtime.profiles import resolve_runtime

MIN_SEARCHED_CHUNK = 2048  # tokens a cp rank keeps, at least, in the unpinned search (module docs/hybrid.md)


def method(runtime) -> str:
    """The runtime's key/value exchange (`RuntimeProfile.cp_exchange`): all-gather for torchtitan
    (PyTorch context_parallel's default rotate method) and Meta's stack, the ring elsewhere."""
    return resolve_runtime(runtime).cp_exchange


def supports(runtime) -> bool:
    """Whether the runtime can run cp > 1: fused attention (module text)."""
    return resolve_runtime(runtime).kernels.flash_attention


def cp_degrees(spec: TransformerSpec, devices: int, pinned: int | None) -> list[int]:
    """cp degrees dividing `devices` (what tp leaves), with the sequence in 2 cp equal pieces (load
    balancing); unpinned, only those keeping at least MIN_SEARCHED_CHUNK tokens a rank (a shorter
    piece's attention, quadratic in its length, no longer hides its key/value transfer)."""
    if pinned is not None:
        fits = pinned == 1 or (devices % pinned == 0 and spec.seq % (2 * pinned) == 0)
        return [pinned] if fits else []
    return [c for c in range(1, devices + 1) if devices % c == 0
            and (c == 1 or (spec.seq % (2 * c) == 0 and spec.seq // c >= MIN_SEARCHED_CHUNK))]


def local_spec(spec: TransformerSpec, cp: int) -> TransformerSpec:
    """The model as one cp rank's activations see it: s / cp tokens a sequence."""
    return spec if cp == 1 else replace(spec, seq=spec.seq // cp)


def exchanged_width(spec: TransformerSpec, runtime) -> int:
    """Elements a token of K (and of V) has where the runtime's context parallelism exchanges them: kv d,
    or a d where the runtime repeats K and V to the query heads first (`Kernels.kv_repeated`)."""
    return spec.attn_width if resolve_runtime(runtime).kernels.kv_repeated else spec.kv_width


def kv_piece_bytes(spec: TransformerSpec, b: int, tp: int, cp: int, element_bytes: float, runtime=None) -> float:
    """K and V of one rank's tokens on one tensor-parallel rank: 2 e (s / cp) b w / t, w the
    `exchanged_width` (kv d; a d where K and V are repeated to the query heads)."""
    return 2.0 * element_bytes * spec.seq / cp * b * exchanged_width(spec, runtime) / tp


def kv_buffer_bytes(spec: TransformerSpec, b: int, tp: int, cp: int, element_bytes: float, runtime) -> float:
    """Memory of the exchange while one layer's attention runs: the ring's piece being used and the
    one arriving, and in backward their gradients, 4 pieces (`kv_piece_bytes`); the all-gather's
    whole K and V and, in backward, their gradients, 2 cp pieces. None for cp = 1."""
    if cp == 1:
        return 0.0
    piece = kv_piece_bytes(spec, b, tp, cp, element_bytes, runtime)
    return (2.0 * cp if method(runtime) == "all-gather" else 4.0) * piece


def exchange_s(cluster: Cluster, spec: TransformerSpec, b: int, tp: int, cp: int, element_bytes: float,
               attention_forward_s: float, runtime) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's key/value exchange left on one rank's critical
    path, per micro-batch (module text). `attention_forward_s`: the whole sequence's attention
    forward on a tp submesh (the block profile's); the rank's share is 1/cp of it, 1/cp^2 a ring
    step (and the all-gather's own piece); backward windows are twice the forward's for the ring
    (the fused kernel's backward runs 2.5x) and FLASH_BACKWARD_RATIO times for the all-gather, none where
    the runtime waits for the gather before attending (`Overlap.cp_gather_hidden` False)."""
    if cp == 1:
        return 0.0, 0.0
    per_node = max(1, min(cp, cluster.devices_per_node // tp))
    piece = kv_piece_bytes(spec, b, tp, cp, element_bytes, runtime)
    step = attention_forward_s / cp / cp
    if method(runtime) == "all-gather":
        whole = piece * cp
        gather = collective(cluster, "all_gather", whole, cp, per_node)
        if not resolve_runtime(runtime).overlap.cp_gather_hidden:
            step = 0.0  # waited for before the rank's first attention (module text)
        return (max(0.0, gather - step),
                max(0.0, gather - FLASH_BACKWARD_RATIO * step)
                + collective(cluster, "reduce_scatter", whole, cp, per_node))
    send = collective(cluster, "p2p", piece, 2, 1 if per_node < cp else 2)
    backward = collective(cluster, "p2p", 2.0 * piece, 2, 1 if per_node < cp else 2)
    return (cp - 1) * max(0.0, send - step), (cp - 1) * max(0.0, backward - 2.0 * step)


def ring_overhead_s(attention_forward_s: float, cp: int, runtime) -> tuple[float, float]:
    """(forward, backward) seconds a cp rank's attention takes beyond its kernels alone: (f - 1) A and
    (g - 1) r A, with A = `attention_forward_s` / cp the rank's share of the whole sequence's attention
    forward, r = FLASH_BACKWARD_RATIO its backward's multiple and (f, g) the runtime's measured
    `Kernels.cp_attention_overhead` (module text); none for cp = 1."""
    if cp == 1:
        return 0.0, 0.0
    forward, backward = resolve_runtime(runtime).kernels.cp_attention_overhead
    share = attention_forward_s / cp
    return (forward - 1.0) * share, (backward - 1.0) * FLASH_BACKWARD_RATIO * share


def scaled_profile(profile, cluster: Cluster, spec: TransformerSpec, cp: int, element_bytes: float, runtime):
    """The block profile of one cp rank: every time of the whole-sequence profile / cp (load-balanced
    work), plus the exposed key/value exchange (`exchange_s`) and the ring's bookkeeping
    (`ring_overhead_s`) on the block, their forward parts on its forward (full recomputation repeats
    it) and, for selective recomputation of the attention core, on the attention's forward."""
    if cp == 1:
        return profile
    forward, backward = exchange_s(cluster, spec, profile.micro_batch, profile.tp, cp, element_bytes,
                                   profile.attention_forward_s, runtime)
    ring_forward, ring_backward = ring_overhead_s(profile.attention_forward_s, cp, runtime)
    forward, backward = forward + ring_forward, backward + ring_backward
    selective = None if profile.selective_s is None else profile.selective_s / cp
    return replace(profile, block_s=profile.block_s / cp + forward + backward,
                   block_forward_s=profile.block_forward_s / cp + forward,
                   attention_forward_s=profile.attention_forward_s / cp + forward, selective_s=selective,
                   embed_s=profile.embed_s / cp, head_s=profile.head_s / cp, tp_comm_s=profile.tp_comm_s / cp,
                   recompute_skip_s=profile.recompute_skip_s / cp)
