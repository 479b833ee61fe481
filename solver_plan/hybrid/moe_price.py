"""Price one expert-parallel configuration in closed form (no per-operator solve: 10^4-10^5 points
on thousands of GPUs are searched by moe_plan.py):
- every matrix of a layer (MoEModel.dense_gemms) on its tp shard, compute_time of the cost core
  (roofline with the device's efficiency curves, in the precision's compute dtype; in fp8 with the
  casts of `cost.kernels.fp8_cast_bytes` around every dense and expert GEMM); attention core
  2 s (scores + values width) FLOPs per token, halved where the runtime's kernel skips the causal
  half; backward = 2 x forward; router GEMM on each device's T/tp tokens. Under fp8 only the
  Transformer Engine linears run in fp8: the attention core, the router and the output head stay in
  the activation dtype (`Context.activation_dtype`), and the GEMMs' saved inputs take 1 byte;
- tensor parallelism with sequence parallelism: all-gather + reduce-scatter of T h e bytes around the
  attention and around the dense MLP / shared expert, forward and backward, exposed as the runtime
  overlaps them (stage_cost.tp_overlap_exposed_s);
- context parallelism cp: each rank holds T / cp of the sequence (GEMMs, activations and the MoE
  tokens / cp), its attention core / cp, and passes K and V around a ring overlapped with the
  attention (`_cp_comm_s`); dense gradients and the distributed optimizer over dp x cp;
- experts, all-to-all, etp collectives, overlap and activations: hybrid/moe.py, at the busiest rank;
  the GPU waiting for the host issuing the experts (a dropless layer's sync): hybrid/moe_host.py;
- recomputation: none; selective (the per-head q, k, v rebuilt from their GEMMs, MLA's
  up-projections for DeepSeek, and the expert MLPs: Megatron-core's --recompute-modules
  mla_up_proj / core_attn inputs and moe); full (the layer's forward again, its input kept only);
- stages: contiguous layers, the cut minimising the slowest stage under the memory limit
  (`_cut`: bisection on the slowest time with a greedy fill, each stage as many layers as fit);
  embedding on the first, final norm, output projection and loss on the last; p2p of T h e / tp;
- step = schedule.pipeline_s (1F1B: sum + (m - 1) max; interleaved v: (m + (p - 1)/v) max on the
  same cut) + exposed gradient sync of the dense parameters over dp and of the experts over edp
  (schedule.sync_parts / exposed_sync_s, each with its group's stride; under ZeRO-3 the per-micro-batch
  weight all-gathers and gradient reduce-scatters, overlapped as the runtime prefetches, as the dense
  fsdp path prices them; ZeRO-3 with pp > 1 as fsdp.state_zero says) + Adam steps;
- contention (hybrid/contention.py): the all-to-all the overlap hides slows the layer's compute by
  hidden x the dispatcher's SMs / the device's (in the layer's time, half forward, half backward), the
  hidden gradient sync the step by hidden x NCCL's CTAs / SMs (`MoEPlan.contention_s`), the hidden
  tensor-parallel communication the GEMMs (stage_cost.tp_overlap_exposed_s);
- `step_breakdown`: the step's seconds by term at the slowest stage (scripts/bench_moe.py prints it);
- memory per device of each stage: weights, gradients, optimizer (ZeRO-1 = Megatron's distributed
  optimizer: dense over dp, experts over edp; ZeRO-2 gradients, ZeRO-3 / FSDP weights too, with two
  gathered layers and FSDP2's unsharded root, `_zero3_buffer_bytes`; all through cost/model_state.py
  via hybrid/memory.py), activations x in-flight micro-batches
  (memory.in_flight_microbatches), recomputation working set, p2p and all-to-all buffers, the
  runtime's reserve (memory.runtime_reserve).
`time_bound` and `memory_floor` are the search's valid bounds of `price` over every cut.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from solver_plan.cluster import Cluster
from solver_plan.cost.collectives import collective_time
from solver_plan.cost.compute import compute_time
from solver_plan.cost.routing import parse_load
from solver_plan.errors import InputError
from solver_plan.hybrid import memory as mem
from solver_plan.hybrid import contention, moe, moe_host, schedule
from solver_plan.hybrid.moe_model import MoEModel, moe_model
from solver_plan.hybrid.moe_space import MoEPoint


@dataclass(frozen=True)
class Context:
    """What every priced point of one expert-parallel search shares: the model, cluster, global batch, memory
    limit, precision state and compute dtype, runtime profile, routing load and all-to-all overlap, with a
    cache of layer costs.
    """
    model: MoEModel
    cluster: Cluster
    global_batch: int
    memory_limit: float | None
    state: mem.StateBytes
    dtype: str  # compute dtype of the GEMMs
    precision: str
    runtime: object
    routing_load: object
    a2a_overlap: str = "none"
    activation_dtype: str = "bf16"  # what runs outside fp8: attention core, router, output head
    cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)  # layer costs by key


@dataclass(frozen=True)
class LayerCost:
    """One layer (dense or MoE) per micro-batch on one device: seconds and bytes."""
    forward_s: float
    backward_s: float
    recompute_s: float
    activation_bytes: float  # kept per micro-batch
    working_bytes: float  # while its backward recomputes
    alltoall_s: float = 0.0  # exposed, included in forward/backward
    buffer_bytes: float = 0.0  # all-to-all dispatch and combine buffers (MoE layers)
    terms: tuple[tuple[str, float], ...] = ()  # (name, forward + backward + recompute seconds): the breakdown


@dataclass(frozen=True)
class MoEStage:
    """One pipeline stage of an expert-parallel plan: its layers (how many with experts), time per micro-batch
    and its forward part, memory per device.
    """
    index: int
    first_layer: int
    layers: int
    moe_layers: int
    time_per_microbatch_s: float
    forward_s: float
    memory: mem.StageMemory

    def to_dict(self) -> dict:
        """JSON-ready dict of the stage."""
        return {"index": self.index, "first_layer": self.first_layer, "layers": self.layers,
                "moe_layers": self.moe_layers, "time_per_microbatch_s": self.time_per_microbatch_s,
                "memory": self.memory.to_dict()}


@dataclass(frozen=True)
class MoEPlan:
    """A priced expert-parallel plan (module docstring for the terms): the point, its stages, the step's terms
    (pipeline, exposed gradient sync, optimizer), model FLOPs, routing and dropped-token fraction.
    """
    model: str
    cluster: str
    devices: int
    global_batch: int
    point: MoEPoint
    stages: tuple[MoEStage, ...]
    pipeline_s: float
    dp_sync_s: float
    optimizer_s: float
    model_flops: float
    routing: str
    dropped_fraction: float
    a2a_overlap: str
    precision: str
    runtime: str
    contention_s: float = 0.0  # compute slowed by the hidden gradient sync (hybrid/contention.py)

    @property
    def step_time_s(self) -> float:
        """Predicted step time: pipeline + exposed gradient sync + optimizer step + the sync's contention."""
        return self.pipeline_s + self.dp_sync_s + self.optimizer_s + self.contention_s

    @property
    def memory_per_device_bytes(self) -> float:
        """Memory of the busiest device: the largest stage total."""
        return max(s.memory.total for s in self.stages)

    @property
    def tflops_per_device(self) -> float:
        """Achieved model TFLOP/s per device, model FLOPs / step time / devices."""
        return self.model_flops / self.step_time_s / self.devices / 1e12

    def to_dict(self) -> dict:
        """The plan JSON: `parallelism` carries dp, tp, cp, pp, ep, etp, edp, micro-batch, virtual stages,
        recompute, zero_stage, capacity; `routing` and `dropped_fraction` the routing priced."""
        return {"kind": "moe-hybrid", "schema_version": 1, "model": self.model, "cluster": self.cluster,
                "devices": self.devices, "global_batch": self.global_batch, "parallelism": self.point.to_dict(),
                "step_time_s": self.step_time_s, "pipeline_s": self.pipeline_s, "dp_sync_s": self.dp_sync_s,
                "contention_s": self.contention_s,
                "optimizer_s": self.optimizer_s, "memory_per_device_bytes": self.memory_per_device_bytes,
                "model_flops_per_step": self.model_flops, "tflops_per_device": self.tflops_per_device,
                "routing": self.routing,
                "dropped_fraction": self.dropped_fraction, "a2a_overlap": self.a2a_overlap,
                "precision": self.precision, "runtime": self.runtime,
                "stages": [s.to_dict() for s in self.stages]}


def _gemm_s(ctx: Context, rows: float, k: int, n: int, tp_split: int, dtype: str | None = None) -> float:
    """Forward seconds of x[rows, k] W[k, n] with W split tp_split ways, in `dtype` (default: the
    compute dtype)."""
    e = ctx.state.activations
    flops = 2.0 * rows * k * n / tp_split
    moved = e * (rows * k + k * n / tp_split + rows * n / tp_split)
    return compute_time(ctx.cluster, flops, moved, dtype=dtype or ctx.dtype)


def _fp8_casts_s(ctx: Context, inputs: float, outputs: float) -> tuple[float, float]:
    """(forward, backward) seconds of the casts around fp8 GEMMs with `inputs` input and `outputs`
    output elements per device (`cost.kernels.fp8_cast_bytes`, memory-bound, as hybrid/stage_cost.py
    prices them), when the GEMMs run in fp8; nothing otherwise. Each pass writes two fp8 copies
    (Megatron-core runs Transformer Engine: the GEMM's and the weight gradient's)."""
    from solver_plan.cost.compute import memory_time
    from solver_plan.cost.kernels import fp8_cast_bytes

    if ctx.dtype != "fp8" or not ctx.runtime.kernels.fp8_gemms:
        return 0.0, 0.0
    forward, backward = fp8_cast_bytes(inputs, outputs, ctx.state.activations, fp8_copies=2)
    return memory_time(ctx.cluster.device, forward), memory_time(ctx.cluster.device, backward)


def _core_s(ctx: Context, b: int, shards: int, cp: int) -> tuple[float, float]:
    """(forward, backward) seconds of the attention core of b sequences on `shards` (tp x cp) ranks,
    as the runtime's kernel runs it: `cost.attention.attention_core_seconds`, the definition the
    dense and per-operator paths use (a causal fused kernel at the device's measured efficiency for
    the kernel family and the rank's query length s / cp, backward 2.5x the forward; unfused, the
    scores' HBM passes). In the activation dtype: fp8 training keeps the attention core in 16 bits
    (Transformer Engine's fp8_dot_product_attention, Megatron-core's --fp8-dot-product-attention, is
    off by default and in none of the published recipes)."""
    from solver_plan.cost.attention import attention_core_seconds

    model, kernels = ctx.model, ctx.runtime.kernels
    flops = b * model.seq * model.attention_core_flops_per_token() / shards  # every score: the dense count
    moved = ctx.state.activations * b * model.seq * (2 * model.scores_width + 2 * model.values_width) / shards
    dtype = ctx.activation_dtype
    return attention_core_seconds(
        ctx.cluster, flops=flops, hbm_bytes=moved, dense_forward_s=compute_time(ctx.cluster, flops, moved, dtype=dtype),
        fused=kernels.flash_attention, causal_skip=kernels.causal_skip, backend=kernels.attention_backend, dtype=dtype,
        query_length=model.seq / cp, score_elements=b * model.heads * model.seq * model.seq / shards,
        element_bytes=ctx.state.activations, dropout=kernels.attention_dropout)


def _saved_gemm_input_bytes(ctx: Context) -> float:
    """Bytes per element of what the GEMMs save for backward: 1 when they run in fp8 (Transformer
    Engine keeps the fp8-cast input for the backward's fp8 dgrad / wgrad GEMMs), the activation's
    bytes otherwise."""
    return 1.0 if ctx.dtype == "fp8" and ctx.runtime.kernels.fp8_gemms else ctx.state.activations


def attention_kept_bytes(model, tokens: float, tp: int, e: float, g: float) -> float:
    """Bytes the attention half of a layer keeps for backward per micro-batch on one device (tokens =
    the rank's b s / cp, sequence-parallel over tp): e x (2 h + attention_stored) per token (the layer
    input the input norm saves, the norm output the first projections save, the module's stored q, k,
    v, context and latents: MoEModel), 4 x heads fp32 softmax statistics, less (e - g) for the GEMM
    inputs Transformer Engine saves as fp8 copies (the norm output and `attention_saved_gemm_inputs`),
    plus g x the context width under fp8 (g < e): the fused attention saves its output O in e bytes
    for its own backward (TE 2.9 FusedAttention saves q, k, v, O) while the output projection saves
    its fp8 copy of that same context, so the context is kept twice. All / tp."""
    context = model.attention_gemms[-1][0]  # the output projection's input width
    twice = g * context if g < e else 0.0
    return (e * tokens * (2 * model.hidden + model.attention_stored) / tp + 4.0 * model.heads * tokens / tp
            - (e - g) * tokens * (model.hidden + model.attention_saved_gemm_inputs) / tp + twice * tokens / tp)


def dense_mlp_kept_bytes(model, tokens: float, tp: int, e: float, g: float) -> float:
    """Bytes a dense SwiGLU MLP of width f keeps per micro-batch on one device: its pre-MLP norm's input
    e h and the norm output fc1 saves g h (Megatron's TE LayerNormLinear saves both), fc1's output
    2 f e for the SwiGLU and fc2's input g f: tokens x ((e + g) h + (2 e + g) f) / tp."""
    return tokens * ((e + g) * model.hidden + (2.0 * e + g) * model.dense_ffn) / tp


def _tp_comm_s(ctx: Context, tokens: float, tp: int) -> float:
    """All-gather + reduce-scatter of the rank's tokens x h x e bytes over tp (one sequence-parallel
    region), forward + backward."""
    if tp == 1:
        return 0.0
    nbytes = tokens * ctx.model.hidden * ctx.state.activations
    per_node = min(tp, ctx.cluster.devices_per_node)
    return 2.0 * (collective_time(ctx.cluster, "all_gather", nbytes, tp, per_node)
                  + collective_time(ctx.cluster, "reduce_scatter", nbytes, tp, per_node))


def _cp_comm_s(ctx: Context, tokens: float, tp: int, cp: int, core_fwd_s: float) -> float:
    """Exposed seconds of context parallelism's ring (Megatron's ring attention) per layer: each of
    the cp - 1 steps passes the rank's K and V (tokens x kv_width / tp elements) to the next rank
    while the attention of the block it holds runs (core / cp), forward; twice that in backward (K, V
    and their gradients): 3 (cp - 1) max(0, p2p - core_fwd / cp). The ring's hops leave the node
    once tp x cp devices exceed it."""
    if cp == 1:
        return 0.0
    nbytes = tokens * ctx.model.kv_width / tp * ctx.state.activations
    per_node = 2 if tp * cp <= ctx.cluster.devices_per_node else 1
    step = collective_time(ctx.cluster, "p2p", nbytes, 2, per_node)
    return 3.0 * (cp - 1) * max(0.0, step - core_fwd_s / cp)


def _layer_cost(ctx: Context, is_moe: bool, tp: int, b: int, ep: int, etp: int, recompute: str,
                capacity: float | None, cp: int = 1, unpaired: float = 0.0, dispatcher: str = "alltoall") -> LayerCost:
    key = (is_moe, tp, b, ep, etp, recompute, capacity, cp, unpaired, dispatcher)
    return _memo(ctx, key, lambda: _price_layer(ctx, *key))


def _memo(ctx: Context, key: tuple, compute):
    """`compute()` once per `key` of the context (the parts of a layer's cost that points share)."""
    if key not in ctx.cache:
        ctx.cache[key] = compute()
    return ctx.cache[key]


@dataclass(frozen=True)
class _DenseTerms:
    """What a layer's cost takes from its tensor-parallel side, shared by every (ep, etp, recompute,
    capacity, dispatcher, unpaired share) of the same (layer kind, tp, b, cp): forward seconds of its
    GEMMs, of the shared expert's, of the attention's and of the GEMMs selective recomputation repeats,
    the attention core, exposed tp/cp communication, fp8 casts, and the attention's kept bytes."""
    gemm_fwd: float
    shared_fwd: float
    attention_fwd: float
    redo: float
    core_fwd: float
    core_bwd: float
    comm: float
    cast_fwd: float
    cast_bwd: float
    stored: float


@dataclass(frozen=True)
class _ExpertTerms:
    """What a MoE layer's cost takes from its expert side, shared by every recomputation and unpaired
    share of the same (tp, b, cp, ep, etp, capacity, dispatcher): router, grouped GEMMs and
    permutation forward seconds (`expert_fwd` their sum), etp collectives, the raw all-to-all of the
    layer, the expert GEMMs' fp8 casts, the host's issue seconds, kept bytes without and with
    selective recomputation, and the dispatch buffers."""
    router: float
    grouped: float
    expert_fwd: float
    etp_s: float
    raw_a2a: float
    cast_fwd: float
    cast_bwd: float
    host_f: float
    host_b: float
    mlp_none: float
    mlp_selective: float
    buffers: float


def _dense_terms(ctx: Context, is_moe: bool, tp: int, b: int, cp: int) -> _DenseTerms:
    def compute() -> _DenseTerms:
        from solver_plan.hybrid.stage_cost import tp_overlap_exposed_s

        model, e = ctx.model, ctx.state.activations
        tokens = b * model.seq / cp  # rows of the rank's GEMMs (its part of the sequence)
        gemms = model.dense_gemms(is_moe)
        shared = model.shared_ffn if is_moe else 0
        gemm_fwd = sum(_gemm_s(ctx, tokens, k, n, tp) for k, n in gemms)
        shared_fwd = (sum(_gemm_s(ctx, tokens, k, n, tp) for k, n in gemms[len(model.attention_gemms):])
                      if shared else 0.0)
        core_fwd, core_bwd = _core_s(ctx, b, tp * cp, cp)
        regions = 1 + (1 if (not is_moe or shared) else 0)  # attention, and the dense MLP / shared expert
        comm = tp_overlap_exposed_s(regions * _tp_comm_s(ctx, tokens, tp), 3.0 * gemm_fwd, tp, ctx.runtime,
                                    ctx.cluster.device)
        comm += _cp_comm_s(ctx, tokens, tp, cp, core_fwd)
        cast_fwd, cast_bwd = _fp8_casts_s(ctx, tokens / tp * sum(k for k, _ in gemms),
                                          tokens / tp * sum(n for _, n in gemms))
        stored = attention_kept_bytes(model, tokens, tp, e, _saved_gemm_input_bytes(ctx))
        attention_fwd = sum(_gemm_s(ctx, tokens, k, n, tp) for k, n in model.attention_gemms)
        redo = sum(_gemm_s(ctx, tokens, k, n, tp) for k, n in model.recomputed_gemms)
        return _DenseTerms(gemm_fwd, shared_fwd, attention_fwd, redo, core_fwd, core_bwd, comm, cast_fwd, cast_bwd,
                           stored)

    return _memo(ctx, ("dense terms", is_moe, tp, b, cp), compute)


def _expert_terms(ctx: Context, tp: int, b: int, cp: int, ep: int, etp: int, capacity: float | None,
                  dispatcher: str) -> _ExpertTerms:
    def compute() -> _ExpertTerms:
        model, e = ctx.model, ctx.state.activations
        tokens = b * model.seq / cp
        shards = tp * cp  # what the MoE terms split b s tokens by
        routing = moe.Routing(ctx.routing_load, capacity)
        g = _saved_gemm_input_bytes(ctx)
        router = compute_time(ctx.cluster, 2.0 * tokens / tp * model.hidden * model.experts,  # never fp8: a torch
                              e * tokens / tp * (model.hidden + model.experts), dtype=ctx.activation_dtype)  # linear
        grouped = moe.grouped_gemm_s(ctx.cluster, model, b, shards, ep, etp, routing, ctx.dtype, e)
        expert_fwd = grouped + router + moe.permute_s(ctx.cluster, model, b, shards, ep, etp, routing, e, dispatcher)
        etp_s = moe.etp_comm_s(ctx.cluster, model, b, shards, ep, etp, routing, e)
        raw = moe.ALLTOALLS_PER_LAYER * moe.alltoall_s(ctx.cluster, model, b, shards, ep, etp, routing, e, dispatcher)
        cast_fwd, cast_bwd = _fp8_casts_s(ctx, *moe.expert_gemm_elements(model, b, shards, ep, etp, routing))
        device = ctx.cluster.device
        host_f, host_b = moe_host.expert_host_s(model, ep, moe_host.expert_recipe(ctx.dtype, device.fp8_scaling),
                                                device.host_cpu)
        return _ExpertTerms(router, grouped, expert_fwd, etp_s, raw, cast_fwd, cast_bwd, host_f, host_b,
                            moe.moe_activation_bytes(model, b, shards, ep, etp, routing, "none", e, g),
                            moe.moe_activation_bytes(model, b, shards, ep, etp, routing, "selective", e, g),
                            moe.a2a_buffer_bytes(model, b, shards, ep, etp, routing, e))

    return _memo(ctx, ("expert terms", tp, b, cp, ep, etp, capacity, dispatcher), compute)


def _price_layer(ctx: Context, is_moe: bool, tp: int, b: int, ep: int, etp: int, recompute: str,
                 capacity: float | None, cp: int, unpaired: float, dispatcher: str = "alltoall") -> LayerCost:
    """One layer's `LayerCost` from its shared parts (`_dense_terms`, `_expert_terms`, each computed
    once per context and key): what depends on the overlap, the unpaired share and recomputation is
    combined here (tests/test_moe_dispatch.py: equal, bit for bit, to pricing every part afresh)."""
    model, e = ctx.model, ctx.state.activations
    tokens = b * model.seq / cp  # rows of the rank's GEMMs (its part of the sequence)
    d = _dense_terms(ctx, is_moe, tp, b, cp)
    gemm_fwd, core_fwd, core_bwd, comm = d.gemm_fwd, d.core_fwd, d.core_bwd, d.comm
    forward = gemm_fwd + core_fwd + comm / 2.0 + d.cast_fwd
    backward = 2.0 * gemm_fwd + core_bwd + comm / 2.0 + d.cast_bwd
    stored = d.stored
    expert_fwd = a2a = 0.0
    if is_moe:
        x = _expert_terms(ctx, tp, b, cp, ep, etp, capacity, dispatcher)
        expert_fwd, etp_s, raw = x.expert_fwd, x.etp_s, x.raw_a2a
        a2a = moe.exposed_alltoall_s(raw, ctx.a2a_overlap, 3.0 * d.shared_fwd,
                                     3.0 * (gemm_fwd + expert_fwd) + core_fwd + core_bwd)
        a2a += unpaired * (raw - a2a)  # passes the overlap cannot pair keep theirs (moe.unpaired_fraction)
        # what hides still slows the compute under it: the dispatcher's kernels hold SMs (hybrid/contention.py)
        slowed = contention.slowdown_s(raw - a2a, contention.dispatch_share(ctx.cluster.device, dispatcher))
        a2a += slowed
        forward += expert_fwd + (a2a + etp_s) / 2.0 + x.cast_fwd
        backward += 2.0 * expert_fwd + (a2a + etp_s) / 2.0 + x.cast_bwd
        stall_f, stall_b = moe_host.host_stall_s(x.host_f, x.host_b, capacity is None, expert_fwd + x.cast_fwd,
                                                 forward, backward)
        forward += stall_f
        backward += stall_b
        mlp_none, mlp_selective = x.mlp_none, x.mlp_selective
    else:
        mlp_none = mlp_selective = dense_mlp_kept_bytes(model, tokens, tp, e, _saved_gemm_input_bytes(ctx))
    if recompute == "full":  # the layer input kept; one layer's activations while it recomputes
        kept, working, extra = e * tokens * model.hidden / tp, stored + mlp_none, forward
    elif recompute == "selective":  # per-head q, k, v from their GEMMs, and the experts' MLPs
        attention = e * tokens * model.attention_recomputable / tp
        kept = stored - attention + mlp_selective
        working, extra = attention + mlp_none - mlp_selective, d.redo + expert_fwd
    else:
        kept, working, extra = stored + mlp_none, 0.0, 0.0
    buffers = x.buffers if is_moe else 0.0
    attention_fwd = d.attention_fwd
    terms = {"attention GEMMs": 3.0 * attention_fwd, "dense/shared GEMMs": 3.0 * (gemm_fwd - attention_fwd),
             "attention core": core_fwd + core_bwd, "tp/cp comm": comm, "fp8 casts": d.cast_fwd + d.cast_bwd,
             "recompute": extra}
    if is_moe:
        terms.update({"router": 3.0 * x.router, "grouped GEMMs": 3.0 * x.grouped,
                      "permute/unpermute": 3.0 * (expert_fwd - x.grouped - x.router), "all-to-all": a2a - slowed,
                      "contention (all-to-all)": slowed,
                      "etp comm": etp_s, "fp8 casts": terms["fp8 casts"] + x.cast_fwd + x.cast_bwd,
                      "host issue (experts)": stall_f + stall_b})
    return LayerCost(forward, backward, extra, kept, working, a2a, buffers, tuple(terms.items()))


def _costs(ctx: Context, p: MoEPoint) -> tuple[LayerCost, LayerCost]:
    """(dense layer, MoE layer) costs of the point; under the "full" all-to-all overlap with the
    share of passes it cannot pair (`moe.unpaired_fraction`)."""
    unpaired = moe.unpaired_fraction(p.pp, p.virtual_stages, p.micro_batches) if ctx.a2a_overlap == "full" else 0.0
    args = (p.tp, p.micro_batch_size, p.ep, p.etp, p.recompute, p.capacity_factor, p.cp)
    # a dense layer has no dispatch: one cost whatever the dispatcher
    return _layer_cost(ctx, False, *args), _layer_cost(ctx, True, *args, unpaired, p.dispatcher)


def _ends_s(ctx: Context, p: MoEPoint) -> tuple[float, float]:
    """(first-stage extra, last-stage extra) per micro-batch: the embedding lookup is free; the last
    stage runs the final projection (h x V / tp) forward and backward and its fp32 loss, in the
    activation dtype (Megatron-core's output_layer is its own ColumnParallelLinear, not a Transformer
    Engine module, so fp8_autocast leaves it in 16 bits)."""
    def compute() -> tuple[float, float]:
        tokens = p.micro_batch_size * ctx.model.seq / p.cp
        return 0.0, 3.0 * _gemm_s(ctx, tokens, ctx.model.hidden, ctx.model.vocab, p.tp, ctx.activation_dtype)

    return _memo(ctx, ("ends", p.tp, p.micro_batch_size, p.cp), compute)


def _p2p_s(ctx: Context, p: MoEPoint) -> float:
    """Sends of one stage per micro-batch (activation forward + gradient backward) of T h e / tp."""
    if p.pp == 1:
        return 0.0
    per_node = 1 if p.shards * p.dp >= ctx.cluster.devices_per_node else 2

    def compute() -> float:
        nbytes = p.micro_batch_size * ctx.model.seq * ctx.model.hidden * ctx.state.activations / p.shards
        return 2.0 * collective_time(ctx.cluster, "p2p", nbytes, 2, per_node)

    return _memo(ctx, ("p2p", p.micro_batch_size, p.shards, per_node), compute)


def _stage_params(ctx: Context, p: MoEPoint, n_dense: int, n_moe: int, stage: int) -> tuple[float, float]:
    """(dense, expert) parameters per device of a stage holding n_dense dense and n_moe MoE layers."""
    model = ctx.model
    dense = (n_dense * model.dense_layer_params(False) + n_moe * model.dense_layer_params(True)) / p.tp
    if stage == 0:
        dense += model.embedding_params / p.tp
    if stage == p.pp - 1:
        dense += model.hidden + model.vocab * model.hidden / p.tp * (
            (1.0 if p.pp > 1 else 0.0) if model.tied_embeddings else 1.0)
    return dense, moe.expert_params_per_device(model, n_moe, p.ep, p.etp)


def stage_memory(ctx: Context, p: MoEPoint, n_dense: int, n_moe: int, stage: int) -> mem.StageMemory:
    """Peak bytes per device of stage `stage` holding n_dense dense and n_moe MoE layers (module
    docstring); the layers' order does not matter."""
    model, st = ctx.model, ctx.state
    dense_cost, moe_cost = _costs(ctx, p)
    dense, experts = _stage_params(ctx, p, n_dense, n_moe, stage)
    flight = mem.in_flight_microbatches(stage, p.pp, p.micro_batches, p.schedule, p.virtual_stages)
    tokens = p.micro_batch_size * model.seq / p.cp  # the rank's part of the sequence
    acts = n_dense * dense_cost.activation_bytes + n_moe * moe_cost.activation_bytes
    if stage == 0:
        acts += (st.activations + 1.0) * tokens * model.hidden / p.tp
    loss = 0.0
    if stage == p.pp - 1:
        # tokens enter split over tp (Megatron-core's sequence parallelism; moe.py), the loss's as the dense one's
        loss = mem.loss_stage_bytes(tokens, model.hidden, model.vocab, p.tp, True, st, ctx.runtime)
        acts += loss / max(flight, 1.0)
    working = max(dense_cost.working_bytes if n_dense else 0.0, moe_cost.working_bytes if n_moe else 0.0)
    hole = mem.loss_hole_bytes(tokens * model.vocab / p.tp, loss, working, ctx.runtime) if loss else 0.0
    if n_dense + n_moe:
        hole += mem.gathered_input_hole_bytes(tokens * model.hidden, p.tp, True, st, ctx.runtime)
    buffers = mem.p2p_buffer_bytes(model, p.micro_batch_size, p.shards, True, p.pp, st)  # reads seq and hidden
    if n_moe:
        buffers += moe_cost.buffer_bytes
    groups = (mem.communicators(p.tp, p.dp, p.pp, model.tied_embeddings) + (p.cp > 1) + (p.ep > 1) + (p.etp > 1)
              + (p.edp > 1))
    reserve = mem.runtime_reserve(ctx.runtime, acts * flight + working + buffers, groups)
    reserve["fragmentation"] += hole
    zero = p.state_zero
    buffers += _zero3_buffer_bytes(ctx, p, n_dense, n_moe, stage, dense, zero)
    w, g, o = moe.expert_state(experts, p.edp, zero, st)
    replicas = p.dp * p.cp  # the dense parameters' data-parallel group (Megatron shards over dp x cp)
    return mem.StageMemory(mem.weights_bytes(dense, replicas, zero, st) + w,
                           mem.gradients_bytes(dense, replicas, zero, st) + g,
                           mem.optimizer_bytes(dense, replicas, zero, st) + o,
                           acts * flight, working, buffers, **reserve)


def _zero3_buffer_bytes(ctx: Context, p: MoEPoint, n_dense: int, n_moe: int, stage: int, dense: float,
                        zero: int) -> float:
    """ZeRO-3 / FSDP's transient weights of a stage (as hybrid/memory.py prices the dense path, through
    its `zero3_gather_bytes` and `fsdp_root_bytes`): two gathered layers (the one computing and the
    prefetched next) of the largest layer's per-device weights, its dense part / tp and its local
    experts E/ep x 3 h f_e / etp; and FSDP2's unsharded root (the embedding and output projection
    on the end stages, for the runtimes whose profile says so). Nothing below ZeRO-3."""
    if zero < 3:
        return 0.0
    model, st = ctx.model, ctx.state
    layer = max((model.dense_layer_params(False) / p.tp) if n_dense else 0.0,
                (model.dense_layer_params(True) / p.tp + moe.expert_params_per_device(model, 1, p.ep, p.etp))
                if n_moe else 0.0)
    root = dense - (n_dense * model.dense_layer_params(False) + n_moe * model.dense_layer_params(True)) / p.tp
    return mem.zero3_gather_bytes(layer, zero, st) + mem.fsdp_root_bytes(root, zero, st, ctx.runtime)


def _layer_s(cost: LayerCost) -> float:
    return cost.forward_s + cost.backward_s + cost.recompute_s


def _cut(ctx: Context, p: MoEPoint, limit: float | None) -> tuple[int, ...] | None:
    """Layers per stage minimising the slowest stage with every stage within `limit`: bisection on
    the slowest time X, each stage in turn taking as many layers as keep it within X and the limit
    while leaving one for each later stage (a greedy fill is exact for contiguous min-max cuts when
    a stage's limits hold for any fewer of its layers); None when no cut fits."""
    L, pp, kinds = ctx.model.layers, p.pp, ctx.model.moe_layers
    dense_cost, moe_cost = _costs(ctx, p)
    first, last = _ends_s(ctx, p)
    p2p = _p2p_s(ctx, p)
    prefix, moes = [0.0], [0]
    for m in kinds:
        prefix.append(prefix[-1] + _layer_s(moe_cost if m else dense_cost))
        moes.append(moes[-1] + m)

    def fits(i: int, a: int, z: int, x: float) -> bool:
        t = prefix[z] - prefix[a] + (first if i == 0 else 0.0) + (last if i == pp - 1 else 0.0) + p2p
        if t > x:
            return False
        n_moe = moes[z] - moes[a]
        return limit is None or stage_memory(ctx, p, z - a - n_moe, n_moe, i).total <= limit

    def fill(x: float) -> tuple[int, ...] | None:
        counts, a = [], 0
        for i in range(pp):
            z = L if i == pp - 1 else a + 1
            if not fits(i, a, z, x):
                return None
            while i < pp - 1 and z < L - (pp - 1 - i) and fits(i, a, z + 1, x):
                z += 1
            counts.append(z - a)
            a = z
        return tuple(counts)

    hi = prefix[L] + first + last + p2p
    best = fill(hi)
    if best is None:
        return None
    lo = 0.0
    while hi - lo > 1e-9 * hi:
        mid = (lo + hi) / 2
        found = fill(mid)
        if found is None:
            lo = mid
        else:
            hi, best = mid, found
    return best


def price(ctx: Context, p: MoEPoint, limit: float | None = None, cut: tuple[int, ...] | None = None) -> MoEPlan | None:
    """Price point `p` in closed form (module docstring): stages cut by `_cut` under `limit` (or the given
    `cut`, layers per stage), their times and memory, and the step; None when no cut fits.
    """
    counts = cut or _cut(ctx, p, limit)
    if counts is None:
        return None
    dense_cost, moe_cost = _costs(ctx, p)
    first, last = _ends_s(ctx, p)
    p2p = _p2p_s(ctx, p)
    stages, a = [], 0
    sync = opt = slowed = 0.0
    slack_f = slack_b = 0.0
    for i, k in enumerate(counts):
        n_moe = sum(ctx.model.moe_layers[a:a + k])
        n_dense = k - n_moe
        extra = (first if i == 0 else 0.0) + (last if i == p.pp - 1 else 0.0)
        t = n_dense * _layer_s(dense_cost) + n_moe * _layer_s(moe_cost) + extra + p2p
        fwd = n_dense * dense_cost.forward_s + n_moe * moe_cost.forward_s + extra / 3.0
        stages.append(MoEStage(i, a, k, n_moe, t, fwd, stage_memory(ctx, p, n_dense, n_moe, i)))
        dense, experts = _stage_params(ctx, p, n_dense, n_moe, i)
        backward = t - fwd
        exposed = raw = 0.0  # dense gradients over dp, expert gradients over edp: one after the other on the links
        for params, stride, group in ((dense, p.tp, p.dp * p.cp), (experts, p.ep * p.etp, p.edp)):
            parts = schedule.sync_parts(ctx.cluster, params, stride, group, p.state_zero, ctx.state, ctx.runtime, k)
            exposed += schedule.exposed_sync_s(parts, p.micro_batches, fwd, backward, ctx.runtime, slack_f, slack_b)
            raw += parts.grad_s + parts.gather_s + p.micro_batches * (parts.forward_s + parts.backward_s)
        sync = max(sync, exposed)
        slowed = max(slowed, contention.slowdown_s(raw - exposed, contention.collective_share(ctx.cluster.device)))
        opt = max(opt, schedule.optimizer_s(ctx.cluster, dense, p.dp * p.cp, p.state_zero, ctx.state, ctx.runtime)
                  + schedule.optimizer_s(ctx.cluster, experts, p.edp, p.state_zero, ctx.state, ctx.runtime))
        slack_f += fwd
        slack_b += backward
        a += k
    pipe = schedule.pipeline_s([s.time_per_microbatch_s for s in stages], p.micro_batches, p.schedule,
                               p.virtual_stages)
    load = ctx.routing_load
    return MoEPlan(ctx.model.name, ctx.cluster.name, ctx.cluster.num_devices, ctx.global_batch, p, tuple(stages),
                   pipe, sync, opt, ctx.model.model_flops_per_step(ctx.global_batch), load.name,
                   load.dropped(p.capacity_factor), ctx.a2a_overlap, ctx.precision, ctx.runtime.name, slowed)


def time_bound(ctx: Context, p: MoEPoint) -> float:
    """A lower bound on `price`'s step time for every cut: the stage times sum to S whatever the cut
    (layers, ends, p2p per stage), the slowest is >= S / p, so 1F1B >= S + (m - 1) S / p and
    interleaved >= (m + (p - 1)/v) S / p; sync and optimizer >= 0."""
    first, last = _ends_s(ctx, p)
    dense_cost, moe_cost = _costs(ctx, p)
    n_moe = ctx.model.moe_layer_count
    total = ((ctx.model.layers - n_moe) * _layer_s(dense_cost) + n_moe * _layer_s(moe_cost) + first + last
             + p.pp * _p2p_s(ctx, p))
    if p.schedule == "interleaved":
        return (p.micro_batches + (p.pp - 1) / p.virtual_stages) * total / p.pp
    return total + (p.micro_batches - 1) * total / p.pp


def memory_floor(ctx: Context, p: MoEPoint) -> float:
    """A lower bound on the largest stage's memory for every cut: some stage holds k = ceil(L / p)
    layers; memory is affine in the numbers of dense and MoE layers, so its least over the layer
    mixes is at an end (fewest or most dense layers); stages other than the ends have their least
    at the last middle one (fewest micro-batches in flight)."""
    model = ctx.model
    k = -(-model.layers // p.pp)
    moes = model.moe_layer_count
    mixes = {min(model.layers - moes, k), max(0, k - moes)}  # dense layers among the k
    stages = sorted({0, max(0, p.pp - 2), p.pp - 1})
    return min(stage_memory(ctx, p, d, k - d, i).total for i in stages for d in mixes)


# --- front door ---------------------------------------------------------------------------------------
def make_context(model, cluster: Cluster, global_batch: int, memory_limit, routing=None, precision=None,
                 runtime=None, a2a_overlap: str = "none") -> Context:
    """`Context` of one expert-parallel search: the model read as a `MoEModel`, precision and runtime
    resolved, routing load parsed; InputError for a bad batch, precision or all-to-all overlap.
    """
    from solver_plan.hybrid.search import _memory_limit, check_global_batch, resolve_hybrid_precision
    from solver_plan.runtime import resolve_runtime

    model = moe_model(model)
    check_global_batch(global_batch)
    prec = resolve_hybrid_precision(precision, cluster)
    if a2a_overlap not in moe.A2A_OVERLAPS:
        raise InputError(f"expects one of {', '.join(moe.A2A_OVERLAPS)}, got {a2a_overlap!r}", "a2a_overlap")
    return Context(model, cluster, global_batch, _memory_limit(memory_limit, cluster), mem.precision_state(prec),
                   prec.compute.value, prec.name, resolve_runtime(runtime), parse_load(routing, model.experts),
                   a2a_overlap, prec.activations.value)


def step_breakdown(ctx: Context, plan: MoEPlan) -> dict[str, float]:
    """Seconds of a priced plan's step by term, at its slowest stage: each layer term (`LayerCost.terms`)
    x that stage's layers x the micro-batches, its output head and p2p, the pipeline bubble
    (pipeline_s - m x the slowest stage's time), the exposed gradient sync and the optimizer step;
    the values sum to `plan.step_time_s`."""
    p = plan.point
    dense_cost, moe_cost = _costs(ctx, p)
    slowest = max(plan.stages, key=lambda s: s.time_per_microbatch_s)
    out: dict[str, float] = {}
    for cost, count in ((dense_cost, slowest.layers - slowest.moe_layers), (moe_cost, slowest.moe_layers)):
        for name, seconds in cost.terms:
            out[name] = out.get(name, 0.0) + count * seconds * p.micro_batches
    first, last = _ends_s(ctx, p)
    ends = (first if slowest.index == 0 else 0.0) + (last if slowest.index == p.pp - 1 else 0.0)
    out["output head"] = ends * p.micro_batches
    out["p2p"] = _p2p_s(ctx, p) * p.micro_batches
    out["bubble"] = plan.pipeline_s - slowest.time_per_microbatch_s * p.micro_batches
    out["gradient sync"] = plan.dp_sync_s
    out["contention (gradient sync)"] = plan.contention_s
    out["optimizer"] = plan.optimizer_s
    return out
