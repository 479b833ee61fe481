"""Terms of the expert layers under expert parallelism: what differs from a dense layer when the
experts are spread over ep x etp devices, priced at the busiest expert-parallel rank.

Folding (Megatron-core MoE parallel folding, Liu et al. 2025, "MoE Parallel Folding"): a pipeline
stage's D = tp x cp x dp devices run the attention as tp x cp x dp and the expert layers as
etp x ep x edp (etp fastest, then ep; ep x etp must divide D). Tokens enter the MoE layer split
over the attention's shards = tp x cp (sequence parallelism, which Megatron requires for MoE with
tp > 1, and context parallelism), T/shards per device for T = b x s tokens per attention replica;
an etp group all-gathers its tokens, so an expert group of ep x etp devices routes
ep x etp x T/shards tokens, each to top_k experts. Below, `shards` = tp x cp. Notation: h hidden,
f_e expert width, E experts, k top-k, e bytes per activation element, w/g/o bytes per parameter of
weights, gradients and optimizer state (memory.StateBytes).

Routing (cost/routing.py): the busiest rank processes a share r of the group's copies (r = 1/ep
balanced), n = r x k x ep x etp x T/shards token copies, split over its E/ep experts as the load says.
- expert weights per device: (moe layers) x E/ep x 3 h f_e / etp; ZeRO over edp (`expert_state`);
- grouped GEMM (`grouped_gemm_s`): per local expert its GEMMs of n_j tokens at the efficiency of
  their own size (the cost core's roofline: small n_j are weight-read bound, Tutel / MegaBlocks'
  observation; within 0.39-1.17x of data/device/h100-2026-11-26/grouped-gemm.csv's torch._grouped_mm
  and 0.88-1.17x of its per-expert loop), one launch each; permutation (the dispatcher's passes:
  `permute_passes`), SwiGLU and router kernels memory-bound (`permute_s`); backward 2 x forward;
- all-to-all (`alltoall_s`): dispatch and combine, forward and backward (4 per layer), each
  sending T/shards x k x h x e bytes per device, the busiest rank receiving ep x r times that; priced
  by `collective_time("all_to_all")` on the group's shape: inside a node (NVLink; 72 GPUs in a
  GB200 NVL72 domain) while ep x etp <= devices per node, across nodes otherwise;
  That is Megatron-core's `alltoall` dispatcher (MoEAlltoAllTokenDispatcher, core_v0.15.0 and the
  core_dev_r0.15.0 commit 0d8e0714 Megatron-Bridge 25.11 runs: `permute` makes one row per (token,
  expert) pair, num_out_tokens = tokens x topk, and `all_to_all` sends input_splits of them to each
  ep rank: one copy per pair, the local rank's included). The node-deduplicating dispatchers
  (`dispatcher` "deepep": DeepEP's normal kernels, Megatron-core's `flex` dispatcher with backend
  deepep, DeepSeek's own; "hybridep": the flex dispatcher's HybridEP backend inside an NVLink domain)
  send a token once per destination node over the network, then once per destination rank over
  NVLink (DeepEP csrc/kernels internode.cu: the RDMA sender puts a token to a node when any of its
  ranks is in is_token_in_rank, the forwarders copy it to each such rank; intranode.cu one copy per
  rank), both at once in one kernel (`dedup_alltoall_s`), at the efficiency their published kernel
  tables show against that link model (`moe_kernels.py`); how many nodes and ranks a token reaches
  under uniform routing, with the group (node) limit, is `expected_units_hit`;
- etp > 1: all-gather of the tokens over etp before the experts, reduce-scatter after, forward and
  backward (`etp_comm_s`);
- overlap (`exposed_alltoall_s`): "none" (Megatron-core's default), "shared-expert" (the shared
  expert's GEMMs run while dispatch and combine are in flight: --moe-shared-expert-overlap), "full"
  (another micro-batch's compute hides them: DeepSeek's DualPipe, Megatron-core's
  --overlap-moe-expert-parallel-comm), less the passes "full" cannot pair (`unpaired_fraction`:
  the pipeline's warm-up forwards and cool-down backwards keep their all-to-all exposed);
- activations (`moe_activation_bytes`, what Megatron-core 0.15 with Transformer Engine 2.9 keeps,
  --moe-permute-fusion and the fused weighted SwiGLU as the Megatron-Bridge recipes set them): the
  pre-MLP norm's input, the router input and fp32 probabilities, the fused permutation's int32 row map (T x (2E + 1)), the
  shared expert, and per routed copy its expert input, the 3 f_e/etp wide SwiGLU tensors (fused:
  2 f_e input + f_e down input), its fp32 routing probability and its int32 place in the local
  experts' sort; with recomputation "selective" (the expert MLPs recomputed: Megatron's
  --recompute-modules moe) the expert inputs, probabilities and maps stay. Nothing of the combine:
  the probabilities multiply inside the SwiGLU (experts.py's weighted_bias_swiglu), so the
  un-permutation, the all-to-all and the chunk sort save indices only. Under fp8 the GEMMs' saved
  inputs (expert input, down-projection input) take 1 byte per element;
- host launches: hybrid/moe_host.py (the GPU waits for the host issuing the per-expert work of a
  dropless layer).
"""
from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from math import comb

from solver_plan.cluster import Cluster, LinkLevel
from solver_plan.cost.collectives import collective_time
from solver_plan.cost.compute import compute_time
from solver_plan.cost.routing import ExpertLoad
from solver_plan.errors import InputError
from solver_plan.hybrid.memory import MIXED_PRECISION, StateBytes, gradients_bytes, optimizer_bytes, weights_bytes
from solver_plan.hybrid.moe_kernels import kernel_efficiency
from solver_plan.hybrid.moe_model import MoEModel
from solver_plan.requests import A2A_OVERLAPS  # the request layer owns the choices
# token dispatchers: Megatron-core's alltoall (one copy per (token, expert) pair), DeepEP (one copy per
# (token, node) over the network, per (token, rank) over NVLink) and HybridEP (the flex dispatcher's
# backend for NVLink domains: one copy per (token, rank)), priced alike but exported apart
DISPATCHERS = ("alltoall", "deepep", "hybridep")
DEDUPLICATING = ("deepep", "hybridep")
ALLTOALLS_PER_LAYER = 4  # dispatch and combine, forward and backward


@dataclass(frozen=True)
class Routing:
    """The routing a plan is priced under: the expert load and the capacity factor (None: dropless).
    Dropless, the busiest rank processes what its experts are routed. With a capacity factor c every
    expert's buffer is padded to its capacity, c x the balanced share (GShard; Megatron-core's
    --moe-pad-expert-input-to-capacity), whatever the load: the work is c x the balanced one and
    the load only decides what is dropped (`ExpertLoad.dropped`)."""
    load: ExpertLoad
    capacity_factor: float | None = None

    def rank_share(self, ep: int) -> float:
        """Share of the group's routed copies (slots) the busiest rank processes."""
        if self.capacity_factor is not None:
            return self.capacity_factor / ep
        return self.load.rank_share(ep)

    def expert_shares(self, ep: int) -> tuple[float, ...]:
        """Shares of the busiest rank's experts."""
        if self.capacity_factor is not None:
            return (self.capacity_factor / self.load.experts,) * (self.load.experts // ep)
        return self.load.expert_shares_of_busiest_rank(ep)

    @property
    def send_factor(self) -> float:
        """What a device sends in one all-to-all relative to its routed copies (padded buffers: c)."""
        return 1.0 if self.capacity_factor is None else self.capacity_factor


def group_per_node(cluster: Cluster, stride: int, size: int) -> int:
    """Devices per node of a group of `size` devices `stride` apart (consecutive devices fill a node)."""
    return max(1, min(size, cluster.devices_per_node // stride)) if stride <= cluster.devices_per_node else 1


def check_folding(model: MoEModel, stage_devices: int, ep: int, etp: int) -> None:
    """ep divides the experts, ep x etp the stage's tp x cp x dp devices, etp the expert width."""
    if model.experts % ep:
        raise InputError(f"ep ({ep}) must divide the experts ({model.experts})", "--fix ep")
    if stage_devices % (ep * etp):
        raise InputError(f"ep x etp ({ep * etp}) must divide tp x cp x dp ({stage_devices}), the devices of a stage",
                         "--fix ep")
    if model.expert_ffn % etp:
        raise InputError(f"etp ({etp}) must divide the expert width ({model.expert_ffn})", "--fix etp")


def routed_copies(model: MoEModel, b: int, shards: int, ep: int, etp: int, routing: Routing) -> float:
    """Token copies the busiest expert rank processes per micro-batch: r x k x ep x etp x b s / shards."""
    return routing.rank_share(ep) * model.top_k * ep * etp * b * model.seq / shards


def expert_params_per_device(model: MoEModel, moe_layers: int, ep: int, etp: int) -> float:
    """moe_layers x E/ep experts x 3 h f_e / etp."""
    return moe_layers * model.expert_params / (ep * etp)


def expert_state(params: float, edp: int, zero_stage: int,
                 state: StateBytes = MIXED_PRECISION) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of the expert parameters on one device, ZeRO-sharded over
    the expert-data-parallel group (edp = tp cp dp / (ep etp) per stage), as memory.py shards the
    dense ones over dp."""
    return (weights_bytes(params, edp, zero_stage, state), gradients_bytes(params, edp, zero_stage, state),
            optimizer_bytes(params, edp, zero_stage, state))


def grouped_gemm_s(cluster: Cluster, model: MoEModel, b: int, shards: int, ep: int, etp: int,
                   routing: Routing, dtype, element_bytes: float) -> float:
    """Forward seconds of the busiest rank's experts: per local expert j with n_j copies, its two
    GEMMs (gate/up: n_j x h x 2 f_e / etp, down: n_j x f_e / etp x h), each compute_time of its FLOPs
    and of its weights and activations in e-byte elements, so a GEMM of few tokens is bound by
    reading its weights; one launch per expert and GEMM (Transformer Engine's GroupedLinear, which
    Megatron-core's --moe-grouped-gemm runs, issues one cuBLAS GEMM per local expert). An expert
    given more than the balanced n = k ep etp T / (shards E) copies runs them at the balanced GEMM's
    seconds per copy: a GEMM's seconds per row never grow with its rows (roofline), so with this
    rule the busiest rank of a skewed load is never priced below the balanced rank (its copies are
    at least the balanced rank's; no credit for the larger GEMMs' efficiency). GPU time only: the
    host's issue time is moe_host.py's."""
    device = cluster.device
    group = model.top_k * ep * etp * b * model.seq / shards  # copies routed in the group; n_j = share_j x group
    balanced = group / model.experts
    h, f = model.hidden, model.expert_ffn / etp

    def gemms_s(n: float) -> float:
        return sum(compute_time(device, 2.0 * n * k * out, element_bytes * (k * out + n * (k + out)), dtype=dtype)
                   for k, out in ((h, 2.0 * f), (f, h)))

    seconds = 0.0
    for share, count in Counter(routing.expert_shares(ep)).items():  # experts of equal load cost the same
        n = share * group
        if n > balanced:  # the tokens beyond the balanced share at the balanced GEMM's speed (no credit for size)
            seconds += count * gemms_s(balanced) * n / balanced
        elif n > 0:
            seconds += count * gemms_s(n)
    return seconds


def permute_passes(model: MoEModel, ep: int, dispatcher: str) -> int:
    """Copies of the routed tokens into another order per MoE layer forward, each reading and writing
    n h e bytes (Megatron-core core_v0.15.0, moe/token_dispatcher.py): the permutation into expert
    order and the un-permutation back (2); Megatron's alltoall dispatcher (MoEAlltoAllTokenDispatcher)
    with more than one local expert also sorts the received copies by local expert after the dispatch
    and back before the combine (dispatch_postprocess / combine_preprocess: sort_chunks_by_idxs, or a
    transpose copy when padded to capacity), because its global permutation orders them by destination
    rank: 4. The deduplicating dispatchers receive one row per token and rank and permute it once into
    local-expert order (the flex dispatcher's permute; HybridEP fuses it with its buffer copy): 2."""
    return 4 if dispatcher == "alltoall" and model.experts // ep > 1 else 2


def permute_s(cluster: Cluster, model: MoEModel, b: int, shards: int, ep: int, etp: int, routing: Routing,
              element_bytes: float, dispatcher: str = "alltoall") -> float:
    """Forward seconds of the memory-bound kernels around the experts at the busiest rank: the token
    permutations (`permute_passes`, each reads and writes n h e bytes), the SwiGLU of the n copies
    (reads 2 f_e / etp, writes f_e / etp elements each), and the router's softmax / top-k over the
    device's b s / shards tokens x E fp32 scores (read and write); one kernel each, on the roofline."""
    n = routed_copies(model, b, shards, ep, etp, routing)
    f = model.expert_ffn / etp
    kernels = ((2.0 * n * model.hidden * element_bytes,) * permute_passes(model, ep, dispatcher)
               + (3.0 * n * f * element_bytes, 8.0 * b * model.seq / shards * model.experts))
    return sum(compute_time(cluster, 0.0, moved, unit="vector") for moved in kernels)


def expert_gemm_elements(model: MoEModel, b: int, shards: int, ep: int, etp: int,
                         routing: Routing) -> tuple[float, float]:
    """(input, output) elements of the busiest rank's expert GEMMs per micro-batch: its n copies enter
    gate/up (h wide) and down (f_e / etp wide) and leave them 2 f_e / etp and h wide (what fp8 casts)."""
    n = routed_copies(model, b, shards, ep, etp, routing)
    f = model.expert_ffn / etp
    return n * (model.hidden + f), n * (2.0 * f + model.hidden)


def dispatch_bytes(model: MoEModel, b: int, shards: int, element_bytes: float) -> float:
    """Bytes one device sends in one all-to-all: its b s / shards tokens x k copies x h x e."""
    return b * model.seq / shards * model.top_k * model.hidden * element_bytes


def alltoall_s(cluster: Cluster, model: MoEModel, b: int, shards: int, ep: int, etp: int, routing: Routing,
               element_bytes: float, dispatcher: str = "alltoall") -> float:
    """One all-to-all of the expert group at its busiest rank (receiving ep x r times what it sends,
    r its routing share; balanced: as much as it sends), on the group's nodes (stride etp): pairwise
    (`collective_time("all_to_all")`) for Megatron-core's alltoall dispatcher, `dedup_alltoall_s` for
    the deduplicating ones divided by their kernels' measured efficiency (`moe_kernels.kernel_efficiency`
    at the group's ranks inside an NVLink domain, its nodes across them)."""
    if ep == 1:
        return 0.0
    skew = max(routing.send_factor, ep * routing.rank_share(ep))
    per_node = group_per_node(cluster, etp, ep)
    if dispatcher in DEDUPLICATING:  # the link model at the kernels' measured efficiency (moe_kernels.py)
        across = per_node < ep
        efficiency = kernel_efficiency(dispatcher, across, ep // per_node if across else ep)
        return dedup_alltoall_s(cluster, model, b, shards, ep, per_node, element_bytes, skew) / efficiency
    nbytes = dispatch_bytes(model, b, shards, element_bytes) * skew
    return collective_time(cluster, "all_to_all", nbytes, ep, per_node)


@lru_cache(maxsize=4096)
def expected_units_hit(experts: int, top_k: int, units: int, groups: int = 1, groups_per_token: int = 1) -> float:
    """Expected number of the `units` (ranks or nodes, each holding experts / units contiguous experts)
    one token's top_k experts reach, when each token picks groups_per_token of the `groups` equal
    contiguous expert groups uniformly and then top_k distinct experts uniformly among theirs (uniform
    routing; groups 1: plain top-k). Per unit j: P(j hit) = 1 - E_S[C(A - a_j(S), k) / C(A, k)], S the
    chosen groups (each set of them as likely), A = groups_per_token x experts / groups the experts
    to choose from, a_j(S) unit j's among them; the expectation is over which of the groups unit j
    overlaps are in S (a subset T of its q groups with probability C(groups - q, M - |T|) / C(groups, M)).
    Sum over units. Hand check: 8 experts, top-2, 2 units, no groups: 2 (1 - C(4,2)/C(8,2)) = 11/7."""
    if experts % units:
        raise InputError(f"the {experts} experts do not divide into {units} equal parts", "ep")
    per_unit, per_group, m = experts // units, experts // groups, groups_per_token
    choose = m * per_group
    total = comb(choose, top_k)
    hit = 0.0
    for j in range(units):
        lo, hi = j * per_unit, (j + 1) * per_unit
        overlaps = [min(hi, (g + 1) * per_group) - max(lo, g * per_group) for g in range(groups)]
        mine = [o for o in overlaps if o > 0]
        missed = 0.0
        for size in range(len(mine) + 1):
            ways = comb(groups - len(mine), m - size) / comb(groups, m)
            if ways == 0.0:
                continue
            for chosen in itertools.combinations(mine, size):
                missed += ways * comb(choose - sum(chosen), top_k) / total
        hit += 1.0 - missed
    return hit


def dedup_alltoall_s(cluster: Cluster, model: MoEModel, b: int, shards: int, ep: int, per_node: int,
                     element_bytes: float, skew: float = 1.0) -> float:
    """One dispatch (or combine) of a node-deduplicating dispatcher at the busiest rank, for the
    device's T = b s / shards tokens of h e bytes, the ep group on ep / per_node nodes (DeepEP's normal
    kernels, read in csrc/kernels internode.cu and intranode.cu; the DeepSeek-V3 report, sec. 3.2.2):
    - across nodes (ep > per_node, N = ep / per_node nodes): each token goes once to each other node
      holding one of its experts, over the network: R = (1 - 1/N) x expected_units_hit(E, k, N, groups)
      copies per token (the token's own node reached as often as any, by symmetry); on the receiving
      node the GPU of the sender's local index forwards it once to each rank holding its experts over
      NVLink, itself excluded: V = (1 - 1/per_node) x expected_units_hit(E, k, ep, groups) copies;
      the two run at once (RDMA senders and NVLink forwarders are warps of one kernel):
      max(T R h e beta_net, T V h e beta_nvlink) + alpha_net + alpha_nvlink;
    - inside a node (or an NVLink domain): one copy per (token, other rank reached),
      T (1 - 1/ep) expected_units_hit(E, k, ep, groups) h e beta_nvlink + alpha_nvlink.
    Megatron's alltoall sends T k h e instead, (n - 1)/n of it off the device. `skew` scales the bytes
    as `alltoall_s` does (the busiest rank's ep x r); the copies per token are the uniform routing's.
    Metadata (top-k indices and weights, 8 k bytes per token) is not counted, as for alltoall."""
    token_bytes = b * model.seq / shards * model.hidden * element_bytes * skew
    groups = (model.expert_groups, model.groups_per_token)
    ranks = expected_units_hit(model.experts, model.top_k, ep, *groups)
    alpha_i, beta_i = cluster.alpha(LinkLevel.INTRA_NODE), cluster.g(LinkLevel.INTRA_NODE)
    if per_node >= ep:
        return token_bytes * (1.0 - 1.0 / ep) * ranks * beta_i + alpha_i
    nodes = ep // per_node
    if ep % per_node:  # nodes holding unequal shares: no credit for the node dedup (each rank off the node)
        remote = (1.0 - per_node / ep) * ranks
    else:
        remote = (1.0 - 1.0 / nodes) * expected_units_hit(model.experts, model.top_k, nodes, *groups)
    forwarded = (1.0 - 1.0 / per_node) * ranks
    alpha_e, beta_e = cluster.alpha(LinkLevel.INTER_NODE), cluster.g(LinkLevel.INTER_NODE)
    return max(token_bytes * remote * beta_e, token_bytes * forwarded * beta_i) + alpha_e + alpha_i


def kernel_table_efficiency(cluster: Cluster, ep: int, per_node: int, tokens: int, hidden: int, experts: int,
                            top_k: int, groups_per_token: int, element_bytes: float, bandwidth_gb_s: float) -> float:
    """One point of a published dispatch-kernel table (moe_kernels.py's calibration): `dedup_alltoall_s`'s
    seconds for the table's shape (`tokens` of `hidden` per rank, `experts` over ep ranks on
    ep / per_node nodes, the nodes as the expert groups of which a token picks `groups_per_token`, as
    DeepEP's tests route) over the measured seconds, the table's bytes over its GB/s. The tables'
    bytes (DeepEP's and HybridEP's tests): the units a token reaches, its own included (nodes across
    nodes, ranks inside one) x tokens x hidden x element bytes."""
    nodes = ep // per_node
    model = MoEModel(name="dispatch-kernel-table", hidden=hidden, seq=tokens, vocab=1, heads=1,
                     attention_gemms=((hidden, hidden),), attention_extra_params=0, scores_width=1, values_width=1,
                     attention_stored=0, attention_recomputable=0, kv_width=1, moe_layers=(True,), dense_ffn=0,
                     experts=experts, top_k=top_k, expert_ffn=1, expert_groups=nodes,
                     groups_per_token=groups_per_token)
    priced_s = dedup_alltoall_s(cluster, model, 1, 1, ep, per_node, element_bytes)
    reached = expected_units_hit(experts, top_k, nodes if nodes > 1 else ep, nodes, groups_per_token)
    return priced_s / (tokens * hidden * element_bytes * reached / (bandwidth_gb_s * 1e9))


def etp_comm_s(cluster: Cluster, model: MoEModel, b: int, shards: int, ep: int, etp: int, routing: Routing,
               element_bytes: float) -> float:
    """Forward + backward: all-gather of the routed tokens over etp before the experts and
    reduce-scatter of their outputs after (and the converse in backward), n h e bytes each."""
    if etp == 1:
        return 0.0
    nbytes = routed_copies(model, b, shards, ep, etp, routing) * model.hidden * element_bytes
    per_node = group_per_node(cluster, 1, etp)
    one = (collective_time(cluster, "all_gather", nbytes, etp, per_node)
           + collective_time(cluster, "reduce_scatter", nbytes, etp, per_node))
    return 2.0 * one


def exposed_alltoall_s(alltoall_total_s: float, overlap: str, shared_expert_s: float, other_compute_s: float) -> float:
    """The all-to-all time left on the critical path: all of it ("none"), what the shared expert's
    forward + backward does not cover ("shared-expert"), what the layer's compute (attention, dense
    or shared MLP and experts, forward + backward) of another micro-batch does not cover ("full")."""
    if overlap not in A2A_OVERLAPS:
        raise InputError(f"expects one of {', '.join(A2A_OVERLAPS)}, got {overlap!r}", "a2a_overlap")
    if overlap == "none":
        return alltoall_total_s
    window = shared_expert_s if overlap == "shared-expert" else other_compute_s
    return max(0.0, alltoall_total_s - window)


def unpaired_fraction(pp: int, v: int, m: int) -> float:
    """Share u of a pipeline rank's chunk passes that the "full" overlap cannot pair with another
    micro-batch's pass, so that their all-to-all stays exposed (the caller adds u x the hidden part
    back). The overlap pairs the forward of one micro-batch with the backward of another, so the
    warm-up forwards and the as many cool-down backwards run alone, with their all-to-all on the
    compute path; counted on the first rank, the one with the most warm-up, out of its m v passes:
    - pp = 1 (Megatron-core core_v0.15.0 combined_1f1b_schedule_for_no_pipelining): the first
      forward and the last backward: 1 of m;
    - v > 1 (combined_1f1b_schedule_for_interleaved_pipelining, warm-up from schedules.py
      get_pp_rank_microbatches): (pp - 1) 2 + (v - 1) pp + 1 ("one extra micro-batch forward step
      before the 1f1b stages" under --overlap-moe-expert-parallel-comm) of m v;
    - pp > 1 with v = 1, which Megatron-core refuses under the overlap (TransformerConfig asserts a
      virtual pipeline size) and DeepSeek's DualPipe runs (deepseek-ai/DualPipe dualpipe.py, first
      rank: step 1's 2 (pp/2 - 1) forwards, step 2's 2, step 3's pp/2 - 1): 3 pp / 2 - 1 of m
      (odd pp: (pp - 1) 3 / 2).
    Never more than every pass."""
    if pp == 1:
        warmup = 1
    elif v > 1:
        warmup = (pp - 1) * 2 + (v - 1) * pp + 1
    else:
        warmup = 3 * (pp // 2) - 1 + pp % 2
    return min(1.0, warmup / (m * v))


def moe_activation_bytes(model: MoEModel, b: int, shards: int, ep: int, etp: int, routing: Routing, recompute: str,
                         element_bytes: float, gemm_input_bytes: float | None = None) -> float:
    """Bytes one MoE layer's MLP part keeps for backward per micro-batch on the busiest rank
    (module docstring), with e bytes per activation and g per saved GEMM input (g = e, or 1 under
    fp8: Transformer Engine's GroupedLinear saves only the column-wise fp8 copy of its input for the
    backward's wgrad, the "50% activation reduction: stores linear layer inputs in FP8" of
    Megatron-core's MoE README; MXFP8's 1/32 byte of scales not counted). Per token of the device's
    T / shards: e h pre-MLP norm input (the MoE layer's own TENorm saves it: the norm cannot fuse
    into the experts' GEMMs), e h router input (that norm's output, which the router's linear saves),
    4 E fp32 probabilities, 4 (2E + 1) for the fused permutation's int32 row map (Transformer Engine
    permutation.py's make_row_id_map, saved by permute and un-permute alike), and for a shared expert
    of width f_s its SwiGLU input e 2 f_s, its down-projection input g f_s and, when g < e, its own g h
    copy of the input. Per routed copy (n of them): g h expert input, 4 for its fp32 probability
    (the fused weighted SwiGLU saves it), 4 for its int32 place in the sort by local expert (when a
    rank holds more than one expert), and e 2 f_e / etp SwiGLU input + g f_e / etp down-projection
    input (dropped with selective recomputation of the experts). Nothing of the combine: the
    probabilities are applied in the SwiGLU, so the expert outputs, the all-to-all's output and the
    un-permuted tokens are not saved (the fused un-permutation without probabilities keeps its row
    map only). Full recomputation: none (the layer input is counted with the layer)."""
    if recompute == "full":
        return 0.0
    e = element_bytes
    g = e if gemm_input_bytes is None else gemm_input_bytes
    tokens = b * model.seq / shards
    n = routed_copies(model, b, shards, ep, etp, routing)
    f = model.expert_ffn / etp
    sort_map = 4.0 if model.experts // ep > 1 else 0.0
    routed = n * (g * model.hidden + 4.0 + sort_map) + (0.0 if recompute == "selective" else n * f * (2.0 * e + g))
    shared = model.shared_ffn * (2.0 * e + g) + (g * model.hidden if model.shared_ffn and g < e else 0.0)
    return (tokens * (2.0 * e * model.hidden + shared + 4.0 * model.experts + 4.0 * (2 * model.experts + 1))
            + routed)


def a2a_buffer_bytes(model: MoEModel, b: int, shards: int, ep: int, etp: int, routing: Routing,
                     element_bytes: float) -> float:
    """Dispatch and combine buffers of the busiest rank: 2 x n h e (permuted tokens in and out)."""
    return 2.0 * routed_copies(model, b, shards, ep, etp, routing) * model.hidden * element_bytes if ep > 1 else 0.0
