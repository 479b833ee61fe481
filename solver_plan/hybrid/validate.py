"""Independent checker of a HybridPlan: structure, memory and step time re-derived from the plan.

Shares with the search only the memory term functions (memory.py, with the model state per
parameter of cost/model_state.py), the collective model (comm.py) and the runtime profiles' facts
(solver_plan/runtime, bucket sizes included); the stage sums, the schedule
formulas, the parameter placement, the runtime's reserve, the sync volumes, bucket counts and what the
runtime overlaps are written again here from their definitions, so a slip in the search's
bookkeeping shows up as a disagreement. Returns a list of problems (empty = valid).
"""
from __future__ import annotations

import math
from dataclasses import replace

from solver_plan.cluster import Cluster
from solver_plan.cost.model_state import ADAM_FLOPS_PER_PARAM
from solver_plan.hybrid import memory as mem
from solver_plan.hybrid.comm import collective
from solver_plan.hybrid.context_parallel import method as cp_method
from solver_plan.hybrid.memory import precision_state, runtime_state
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.plan import HybridPlan

RTOL = 1e-6


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12)


def _params(spec, stage, tp, pp) -> float:
    n = stage.layers * spec.block_params
    if stage.index == 0:
        n += (spec.vocab + (spec.positions if spec.learned_positions else 0)) * spec.hidden
    out = n / tp
    if stage.head:  # placement checked against the schedule in validate_plan
        norm = spec.hidden * (1 if spec.rms_norm else 2)
        # untied: the output projection lives here; tied: a copy of the word embedding unless this
        # stage holds the embedding itself (one stage, or ZB-V's V returning to the first rank)
        out += norm + (spec.vocab * spec.hidden / tp if (stage.index > 0 or not spec.tied_embeddings) else 0)
    return out


def _chunk_params(spec, stage, tp, pp) -> tuple[float, ...]:
    """Parameters of each interleaved chunk of `stage` (`stage.chunks` blocks each): its blocks / tp, the
    embedding on the first stage's chunk 0, the rest of what the stage holds besides its blocks (final
    norm, output projection or the tied copy) on the head stage's last chunk."""
    blocks = [k * spec.block_params / tp for k in stage.chunks]
    embedding = ((spec.vocab + (spec.positions if spec.learned_positions else 0)) * spec.hidden / tp
                 if stage.index == 0 else 0.0)
    blocks[0] += embedding
    blocks[-1] += _params(spec, stage, tp, pp) - stage.layers * spec.block_params / tp - embedding
    return tuple(blocks)


def plan_precision(plan: HybridPlan, cluster: Cluster):
    """The `TrainingPrecision` the plan says it was priced in (its `precision` name: mixed-bf16 ->
    bf16, fp32, ...), or the device's default for a plan without one."""
    from solver_plan.cost.precision import resolve_precision

    name = plan.precision
    return resolve_precision(None if name is None else name.removeprefix("mixed-"), cluster.device)


def validate_plan(plan: HybridPlan, cluster: Cluster, enforce_memory: bool = True) -> list[str]:
    """Problems found re-deriving a hybrid plan from its model and cluster: precision and runtime support,
    degrees against devices and batch, stage layers, placement and chunks, recomputation, each stage's
    memory (and with `enforce_memory` the limit), and the step's pipeline, sync, p2p and embedding terms;
    empty when it is consistent.
    """
    problems: list[str] = []
    spec = transformer_spec(plan.model)
    q = plan.parallelism
    from solver_plan.errors import InputError
    try:
        precision = plan_precision(plan, cluster)
    except InputError:
        return [f"precision {plan.precision!r} does not name a training precision"]
    if plan.precision is not None and precision.name != plan.precision:
        problems.append(f"precision {plan.precision!r} does not name a training precision")
    if not cluster.device.supports(precision.compute):
        problems.append(f"precision {precision.name}: {cluster.device.name} has no {precision.compute.value} units")
    from solver_plan.runtime import RUNTIMES, DEFAULT_RUNTIME
    if plan.runtime is not None and plan.runtime not in RUNTIMES:
        return problems + [f"runtime {plan.runtime!r} is not a known runtime profile"]
    runtime = RUNTIMES.get(plan.runtime, DEFAULT_RUNTIME)
    st = runtime_state(precision_state(precision), runtime)  # fp32 gradients; FSDP2's fp32 shard is the master
    if precision.compute.value == "fp8" and not runtime.kernels.fp8_gemms:
        problems.append(f"precision {precision.name}: runtime {runtime.name} has no fp8 GEMMs")
    rep = q.dp * q.cp  # ranks holding the same weights: dp replicas x cp sequence pieces
    if rep * q.tp * q.pp != cluster.num_devices:
        problems.append(f"dp x cp x tp x pp = {rep * q.tp * q.pp}, cluster has {cluster.num_devices} devices")
    if q.cp > 1 and spec.seq % (2 * q.cp):
        problems.append(f"cp {q.cp}: the sequence of {spec.seq} tokens does not split into 2 cp pieces")
    if q.cp > 1 and not runtime.kernels.flash_attention:
        problems.append(f"cp {q.cp}: runtime {runtime.name} has no fused attention")
    if q.attention and q.attention not in runtime.attention_kernels:
        problems.append(f"attention kernel {q.attention!r}: runtime {runtime.name} runs "
                        f"{', '.join(runtime.attention_kernels) or 'no fused attention kernel'}")
    # ZeRO shards over a group of `shard` of the rep ranks (hybrid sharding: `replicate` groups); with a
    # pipeline, ZeRO-3 is FSDP2's, gathered once a step: the memory and traffic of ZeRO-1
    shard = q.dp_shard or rep
    replicate = rep // shard
    zero = 1 if q.pp > 1 and q.zero_stage >= 2 else q.zero_stage
    if q.pp > 1 and (q.zero_stage == 2 or (q.zero_stage == 3 and not runtime.sharded_fp32_params)):
        problems.append(f"ZeRO-{q.zero_stage} with pp {q.pp} under runtime {runtime.name}")
    if rep % shard or (q.dp_shard and q.zero_stage == 0):
        problems.append(f"shard group {q.dp_shard} does not divide dp x cp = {rep} or has nothing to shard")
    if q.dp * q.micro_batch_size * q.micro_batches != plan.global_batch:
        problems.append("dp x micro-batch x micro-batches differs from the global batch")
    if q.tp > cluster.devices_per_node:
        problems.append(f"tp {q.tp} spans nodes")
    # stages: contiguous, every block once, ends hold embedding and head, devices disjoint
    expected_first, device = 0, 0
    head_index = 0 if q.schedule == "zb-v" else q.pp - 1  # ZB-V: the V ends on the first rank, with the loss
    for i, s in enumerate(plan.stages):
        if s.index != i or s.first_layer != expected_first or s.layers < 1:
            problems.append(f"stage {i}: layers [{s.first_layer}, +{s.layers}) not contiguous from {expected_first}")
        if s.embedding != (i == 0) or s.head != (i == head_index):
            problems.append(f"stage {i}: embedding/head placement wrong")
        if s.first_device != device or s.tp != q.tp or s.replicas != rep:
            problems.append(f"stage {i}: devices do not follow the tp, dp, pp order")
        expected_first += s.layers
        device += s.tp * s.replicas
    if expected_first != spec.layers:
        problems.append(f"stages hold {expected_first} blocks, the model has {spec.layers}")
    for s in plan.stages:  # interleaved: v chunks of floor or ceil(k / v) >= 1 blocks, the larger ones last
        v = q.virtual_stages if q.schedule in ("interleaved", "zb-v") else 1
        if q.schedule == "zb-v" and v != 2:
            problems.append(f"zb-v with {v} chunks per rank (a V has 2)")
        chunks = list(s.chunks) if s.chunks else [s.layers]
        if (len(chunks) != v or sum(chunks) != s.layers or min(chunks) < 1 or max(chunks) - min(chunks) > 1
                or chunks != sorted(chunks)):
            problems.append(f"stage {s.index}: chunks {chunks} are not {v} near-equal non-empty parts of "
                            f"its {s.layers} blocks")
    # recomputation: the plan's mode on every stage, or with "per-stage" each stage's own, which must
    # be the least (none < selective < full) that fits the limit
    order = ("none", "selective", "full")
    for s in plan.stages:
        if q.recompute != "per-stage" and s.recompute != q.recompute:
            problems.append(f"stage {s.index}: recompute {s.recompute!r}, the plan's is {q.recompute!r}")
        if q.recompute == "per-stage" and s.recompute not in order:
            problems.append(f"stage {s.index}: recompute {s.recompute!r} is not a stage mode")
    host_activations: dict[int, float] = {}  # activation offload: bytes each stage keeps on the host
    # the exact zero-bubble pattern (zb-exact): operations, their order and the micro-batches each stage holds
    exact_flight: dict[int, int] = {}
    exact_pipeline = _exact_pattern(plan, problems, exact_flight) if q.schedule == "zb-exact" else None
    # memory, term by term
    for s in plan.stages:
        params = _params(spec, s, q.tp, q.pp)
        flight = mem.in_flight_microbatches(s.index, q.pp, q.micro_batches, q.schedule, q.virtual_stages)
        if q.schedule == "zb-exact":  # the pattern's own count, re-derived from its F and W times
            flight = float(min(exact_flight.get(s.index, 1), q.micro_batches))
        b, t, sp = q.micro_batch_size, q.tp, q.sequence_parallel
        pipelined = q.pp > 1 and q.zero_stage >= 2  # FSDP under a pipeline: ZeRO-1's memory, FSDP2's pools
        gathered = mem.gathered_block_bytes(spec, t, st, runtime)  # a block as FSDP gathers it (fp8 all-gather)

        # communicators the device joins: dp, tp, both pipeline neighbours, the tied-embedding pair
        groups = (int(shard > 1) + int(replicate > 1) + int(q.tp > 1) + (2 if q.pp > 1 else 0)
                  + int(q.pp > 1 and spec.tied_embeddings and head_index > 0) + int(q.cp > 1))
        # with cp a rank keeps s / cp tokens of every activation, and the exchange's K and V pieces,
        # 2 e (s / cp) b (kv d) / t each (a d where the runtime repeats K and V to the query heads
        # first): 4 for the ring (in use and arriving, and their gradients), 2 cp for the all-gather
        # (whole K, V and their gradients)
        tokens = replace(spec, seq=spec.seq // q.cp)
        width = tokens.attn_width if runtime.kernels.kv_repeated else tokens.kv_width
        piece = 2 * st.activations * tokens.seq * b * width / t
        kv = 0.0 if q.cp == 1 else piece * (2 * q.cp if cp_method(runtime) == "all-gather" else 4)

        held = s.layers * flight
        if q.schedule == "interleaved" and s.chunks:  # the warm-up's chunk forwards, p per chunk in turn
            warmup = (q.virtual_stages - 1) * q.pp + 2 * (q.pp - s.index - 1) + 1
            held = sum(s.chunks[(j // q.pp) % q.virtual_stages]
                       for j in range(min(warmup, q.micro_batches * q.virtual_stages)))

        def stage_total(mode: str, recomputed: int | None = None, offloaded: int = s.offload_layers) -> float:
            # partial recomputation: `recomputed` blocks keep full's input only, the others everything
            per_block = mem.layer_activation_bytes(tokens, b, t, mode, sp, st, runtime)
            if recomputed is not None:
                per_block = (recomputed * per_block + (s.layers - recomputed)
                             * mem.layer_activation_bytes(tokens, b, t, "none", sp, st, runtime)) / s.layers
            acts = held * per_block
            if offloaded:  # activation offload: the others' and one block in transit stay, r blocks' go to the host
                acts = flight * (s.layers - offloaded + 1) * per_block
                if offloaded == s.offload_layers:
                    host_activations[s.index] = flight * offloaded * per_block
            if s.embedding:
                acts += mem.embedding_activation_bytes(tokens, b, t, sp, st) * flight
            loss = mem.logits_activation_bytes(tokens, b, t, sp, st, runtime) if s.head else 0.0
            acts += loss
            # the loss's peak and a block's backward transients are never live together
            working = mem.recompute_working_bytes(tokens, b, t, mode, sp, st, runtime)
            hole = mem.loss_hole_bytes(tokens.seq * b * tokens.vocab / t, loss, working, runtime) if s.head else 0.0
            if s.layers:
                hole += mem.gathered_input_hole_bytes(tokens.seq * b * tokens.hidden, t, sp, st, runtime)
            working = max(0.0, working - loss)
            dynamic = (acts + working
                       + mem.pipeline_buffer_bytes(tokens, b, t, sp, q.pp, q.micro_batches, flight, s.index == 0,
                                                   s.head, q.virtual_stages, st, runtime) + kv
                       + mem.zero3_gather_bytes(spec.block_params / t, zero, st, gathered)
                       # FSDP2's root unit (what the stage holds besides its blocks) stays unsharded
                       + mem.fsdp_root_bytes(params - s.layers * spec.block_params / t, zero, st, runtime))
            reserve = runtime.memory
            all_gradients = mem.gradients_bytes(params, shard, zero, st)
            gradients = mem.gradients_at_peak(all_gradients, acts + working, q.micro_batches, runtime)
            if (pipelined and runtime.chunk_gradients_reduced and q.schedule == "interleaved" and len(s.chunks) > 1
                    and q.micro_batches > 1 and q.offload in ("none", "optimizer")):
                # each chunk's unsharded gradients live from its first backward to its own last one
                embedded = mem.embedding_activation_bytes(tokens, b, t, sp, st) if s.embedding else 0.0
                gradients = mem.chunk_gradients_at_peak(
                    tuple(mem.gradients_bytes(n, shard, zero, st) for n in _chunk_params(spec, s, q.tp, q.pp)),
                    tuple(k * per_block + (embedded if j == 0 else 0.0) for j, k in enumerate(s.chunks)),
                    acts, q.micro_batches, q.pp)
            pools = mem.stage_pool_bytes(params - s.layers * spec.block_params / t, spec.block_params / t,
                                         params, shard, zero, all_gradients, gradients, pipelined, st, runtime,
                                         gathered)
            # optimizer offload: the optimizer state lives in host memory (checked below), not here
            device_optimizer = (0.0 if q.offload in ("optimizer", "both")
                                else mem.optimizer_bytes(params, shard, zero, st))
            return (mem.stage_weights_bytes(spec, params, s.layers, t, shard, zero, pipelined, st, runtime)
                    + gradients
                    + device_optimizer + dynamic * (1 + reserve.fragmentation) + pools + hole
                    + reserve.workspace + reserve.cuda_context + groups * reserve.nccl_per_communicator)

        mode = s.recompute if s.recompute in order else q.recompute
        partial = s.recompute_blocks is not None
        if partial and (mode != "full" or not 1 <= s.recompute_blocks < s.layers or q.recompute != "per-stage"
                        or q.schedule not in ("1f1b", "gpipe")):
            problems.append(f"stage {s.index}: {s.recompute_blocks} of {s.layers} blocks recomputed in {mode!r}")
            partial = False
        total = stage_total(mode, s.recompute_blocks if partial else None)
        if s.offload_layers:  # activation offload: pp 1, no recomputation, 1 <= r < k, the fewest r that fits
            if (q.offload not in ("activations", "both") or q.pp > 1 or mode != "none"
                    or not 1 <= s.offload_layers < s.layers):
                problems.append(f"stage {s.index}: {s.offload_layers} blocks' activations offloaded under "
                                f"offload {q.offload!r}, pp {q.pp}, recompute {mode!r}")
            elif (enforce_memory and plan.memory_limit is not None
                  and stage_total(mode, None, s.offload_layers - 1) <= plan.memory_limit * (1 + RTOL)):
                problems.append(f"stage {s.index}: {s.offload_layers} blocks' activations offloaded where "
                                f"{s.offload_layers - 1} fit")
        elif q.offload in ("activations", "both"):
            problems.append(f"stage {s.index}: offload {q.offload!r} with no activations offloaded")
        if q.recompute == "per-stage" and enforce_memory and plan.memory_limit is not None and mode in order:
            fits = plan.memory_limit * (1 + RTOL)
            # the fastest fitting option: nothing lighter (none < selective < full) fits, a partial stage
            # recomputes the fewest blocks that fit, and a fully recomputed one could not do with fewer
            lighter = [r for r in order[:order.index(mode) if not partial else 1] if stage_total(r) <= fits]
            if lighter:
                problems.append(f"stage {s.index}: recompute {mode!r} where {lighter[0]!r} fits")
            fewer = (s.recompute_blocks if partial else s.layers) - 1
            if (mode == "full" and q.schedule in ("1f1b", "gpipe") and fewer >= 1
                    and stage_total("full", fewer) <= fits):
                problems.append(f"stage {s.index}: recomputes {fewer + 1} blocks where {fewer} fit")
        if not _close(total, s.memory.total):
            problems.append(f"stage {s.index}: memory {s.memory.total:.6g} B, re-derived {total:.6g} B")
        if enforce_memory and plan.memory_limit is not None and total > plan.memory_limit * (1 + RTOL):
            problems.append(f"stage {s.index}: {total:.6g} B over the limit {plan.memory_limit:.6g} B")
    # optimizer offload: each device's shard of optimizer state and of its gradients in host memory,
    # (m + 2 o + g) P / shard bytes, all the devices of a node together within its host memory
    if q.offload != "none":
        optimizer_too = q.offload in ("optimizer", "both")
        runners = ("megatron-core", "nemo") + (("deepspeed",) if q.offload == "optimizer" else ())
        if cluster.host is None or (optimizer_too and q.zero_stage == 0) or runtime.name not in runners:
            problems.append(f"offload {q.offload} without a host section, ZeRO or a runtime that runs it "
                            f"({runtime.name})")
        for s in plan.stages:
            host = (_params(spec, s, q.tp, q.pp) / shard * (st.optimizer + st.gradients) if optimizer_too else 0.0)
            host += host_activations.get(s.index, 0.0)
            if cluster.host is not None and s.offload_layers:  # copies down in forward, up in backward
                copy = host_activations.get(s.index, 0.0) / cluster.host.device_bandwidth
                compute = s.block_s + s.recompute_s + s.extra_s
                exposed = max(0.0, copy - s.forward_s) + max(0.0, copy - (compute - s.forward_s))
                if not _close(exposed, s.offload_s):
                    problems.append(f"stage {s.index}: offload copies {s.offload_s:.6g} s, re-derived {exposed:.6g} s")
            elif s.offload_s:
                problems.append(f"stage {s.index}: offload copies without offloaded activations")
            if not _close(host, s.memory.host):
                problems.append(f"stage {s.index}: host memory {s.memory.host:.6g} B, re-derived {host:.6g} B")
            if cluster.host is not None and host * cluster.devices_per_node > cluster.host.memory_per_node * (1 + RTOL):
                problems.append(f"stage {s.index}: {cluster.devices_per_node} devices' offloaded state "
                                f"{host * cluster.devices_per_node:.6g} B exceeds the node's host memory")
    elif any(s.memory.host or s.offload_layers or s.offload_s for s in plan.stages):
        problems.append("host memory without offload")
    # step time
    times = [s.block_s + s.recompute_s + s.extra_s + s.p2p_s + s.offload_s for s in plan.stages]
    if q.schedule == "interleaved":  # the slowest stage m times, the fill and drain through the others in chunks
        pipeline = max(times) * q.micro_batches + (sum(times) - max(times)) / q.virtual_stages
    elif q.schedule in ("zb-h1", "zb-h2", "zb-v"):  # the fill and drain less the W work moved into them (2 W or 3 W
        # a stage); ZB-V's fill and drain pass half-stage chunks, so half of that
        moved = (2.0 if q.schedule == "zb-h1" else 3.0) * (q.pp - 1) / q.pp * sum(s.weight_grad_s for s in plan.stages)
        half = 0.5 if q.schedule == "zb-v" else 1.0
        pipeline = max(times) * q.micro_batches + max(0.0, sum(times) - max(times) - moved) * half
        # one micro-batch alone: F and B through every stage, then stage 0's (chunk's) W
        alone = sum(t - s.weight_grad_s for t, s in zip(times, plan.stages)) + half * plan.stages[0].weight_grad_s
        pipeline = max(pipeline, alone)
        for s in plan.stages:
            if not -RTOL <= s.weight_grad_s <= (s.block_s + s.extra_s - s.forward_s) * (1 + RTOL):
                problems.append(f"stage {s.index}: W {s.weight_grad_s:.6g} s outside [0, its backward]")
        if q.recompute == "per-stage":
            problems.append("zero-bubble schedule with per-stage recomputation")
    elif q.schedule == "zb-exact":
        pipeline = exact_pipeline if exact_pipeline is not None else math.nan
    else:  # fill + drain pass every stage once, the steady state repeats the slowest m - 1 times
        pipeline = sum(times) + max(times) * (q.micro_batches - 1)
    if not _close(pipeline, plan.terms.pipeline_s):
        problems.append(f"pipeline {plan.terms.pipeline_s:.6g} s, re-derived {pipeline:.6g} s")
    sync, hidden = _dp_sync(plan, cluster, spec, st, runtime)
    if not _close(sync, plan.terms.dp_sync_s):
        problems.append(f"dp sync {plan.terms.dp_sync_s:.6g} s, re-derived {sync:.6g} s")
    if not _close(hidden, plan.terms.dp_sync_hidden_s):
        problems.append(f"dp sync hidden {plan.terms.dp_sync_hidden_s:.6g} s, re-derived {hidden:.6g} s")
    for s in plan.stages:
        if not -RTOL <= s.forward_s <= (s.block_s + s.recompute_s + s.extra_s) * (1 + RTOL):
            problems.append(f"stage {s.index}: forward {s.forward_s:.6g} s outside [0, its compute]")
    # pipeline transfers: each stage sends its activation on and its gradient back, s b h values of
    # the activation dtype / t per micro-batch (v times with v chunks), between nodes where the stages' first
    # devices are on different nodes
    for s in plan.stages:
        p2p = 0.0
        for a, z in ((s.index - 1, s.index), (s.index, s.index + 1)):
            if 0 <= a and z < q.pp:
                inter = cluster.node_of(a * q.tp * rep) != cluster.node_of(z * q.tp * rep)
                split = q.tp if runtime.overlap.p2p_scatter_gather else 1  # each rank sends 1/t, or all of it
                p2p += collective(cluster, "p2p", spec.seq // q.cp * q.micro_batch_size * spec.hidden * st.activations
                                  / split,
                                  2,
                                  1 if inter else 2)
        # scatter-gather's all-gathers of the whole activation over the stage's t ranks (inside a node)
        gathers = ((runtime.overlap.p2p_gathers_receiver if s.index > 0 else 0)
                   + (runtime.overlap.p2p_gathers_sender if s.index < q.pp - 1 else 0))
        if q.tp > 1 and runtime.overlap.p2p_scatter_gather and gathers:
            p2p += gathers * collective(cluster, "all_gather", spec.seq // q.cp * q.micro_batch_size * spec.hidden
                                        * st.activations, q.tp, min(q.tp, cluster.devices_per_node))
        if runtime.overlap.pp_p2p and q.schedule == "interleaved":  # posted asynchronously, under compute
            p2p = 0.0
        if not _close(p2p * q.virtual_stages, s.p2p_s):
            problems.append(f"stage {s.index}: p2p {s.p2p_s:.6g} s, re-derived {p2p * q.virtual_stages:.6g} s")
    # tied word embedding: first and last stage all-reduce its gradient shard
    embedding = 0.0
    if q.pp > 1 and spec.tied_embeddings and head_index > 0:
        inter = cluster.node_of(0) != cluster.node_of((q.pp - 1) * q.tp * rep)
        embedding = collective(cluster, "all_reduce", spec.vocab * spec.hidden / q.tp * st.gradients, 2,
                               1 if inter else 2)
    if not _close(embedding, plan.terms.embedding_sync_s):
        problems.append(f"embedding sync {plan.terms.embedding_sync_s:.6g} s, re-derived {embedding:.6g} s")
    # Adam: a memory-bound kernel over the local (ZeRO-sharded) parameters of the largest stage, moving the
    # runtime's own bytes per parameter where it declares them (an eager optimizer, gradient clipping)
    from solver_plan.cost.compute import compute_time
    optimizer = 0.0
    for s in plan.stages:
        local = _params(spec, s, q.tp, q.pp) / (shard if zero >= 1 else 1)
        hbm = local * (runtime.optimizer_bytes_per_param or st.model.optimizer_step_bytes)
        step = compute_time(cluster, ADAM_FLOPS_PER_PARAM * local, hbm, unit="vector")
        if q.offload in ("optimizer", "both") and cluster.host is not None:
            # offloaded: gradients down, the host's Adam, weights up, one bucket after another in a
            # three-stage pipeline: the first bucket passes all three, each further one the slowest
            link, pieces = cluster.host.device_bandwidth, 1
            grads = _params(spec, s, q.tp, q.pp) * st.gradients
            pieces = max(1, s.layers) if runtime.overlap.bucket_per_layer else max(
                1, math.ceil(grads / runtime.overlap.bucket_size_bytes(shard, st.gradients)))
            legs = (local * st.gradients / link, local * cluster.host.optimizer_s_per_param, local * st.weights / link)
            step = sum(legs) / pieces + (pieces - 1) * max(legs) / pieces
        optimizer = max(optimizer, step)
    if not _close(optimizer, plan.terms.optimizer_s):
        problems.append(f"optimizer {plan.terms.optimizer_s:.6g} s, re-derived {optimizer:.6g} s")
    # contention: the hidden dp communication's kernels hold collective_ctas of the device's SMs
    slowed = hidden * cluster.device.collective_ctas / cluster.device.sm_count if cluster.device.sm_count else 0.0
    if not _close(slowed, plan.terms.contention_s):
        problems.append(f"contention {plan.terms.contention_s:.6g} s, re-derived {slowed:.6g} s")
    total = pipeline + sync + embedding + optimizer + slowed
    if not _close(total, plan.step_time_s):
        problems.append(f"step time {plan.step_time_s:.6g} s, re-derived {total:.6g} s")
    kv = (spec.kv_heads or spec.heads) * spec.head_dim
    mlp = (3 if spec.gated_mlp else 2) * spec.hidden * spec.ffn
    if spec.experts > 1:  # a token passes top_k experts and the router
        mlp = spec.top_k * mlp + spec.hidden * spec.experts
    flops = 3 * plan.global_batch * (spec.layers * (2 * spec.seq * (2 * spec.hidden * spec.attn_width
                                                                   + 2 * spec.hidden * kv + mlp)
                                                    + 4 * spec.seq ** 2 * spec.attn_width)
                                     + 2 * spec.seq * spec.hidden * spec.vocab)
    if not _close(flops, plan.model_flops_per_step):
        problems.append(f"model FLOPs {plan.model_flops_per_step:.6g}, re-derived {flops:.6g}")
    return problems


def _dp_sync(plan: HybridPlan, cluster: Cluster, spec, st, runtime) -> tuple[float, float]:
    """(exposed, hidden) data-parallel sync, from the definitions: per stage the collectives of its
    parameters in the runtime's buckets; what the runtime overlaps hides under the stage's backward
    (gradient reduce) or forward (parameter gather) of one micro-batch, plus, in a pipeline, the
    backward (forward) of the stages before it, except the last (first) bucket; ZeRO-3 with
    prefetch hides each micro-batch's gathers (and reduce-scatters when the reduce overlaps) under
    that micro-batch's compute, except one bucket of each."""
    q, o = plan.parallelism, runtime.overlap
    # the cp ranks of a replica reduce their gradients together with the dp replicas, in shard groups of
    # dp; with hybrid sharding the shard's gradients are then all-reduced across the `replicate` groups
    dp = q.dp_shard or q.dp * q.cp
    replicate = q.dp * q.cp // dp
    zero = 1 if q.pp > 1 and q.zero_stage >= 2 else q.zero_stage  # FSDP with a pipeline: once a step
    if dp == 1 and replicate == 1:
        return 0.0, 0.0
    per_node = max(1, min(dp, cluster.devices_per_node // q.tp))
    across_per_node = max(1, min(replicate, cluster.devices_per_node // (dp * q.tp)))
    exposed = raw = 0.0
    before_forward = before_backward = 0.0
    for s in plan.stages:
        params = _params(spec, s, q.tp, q.pp)
        grads, weights = params * st.gradients, params * st.weights
        if o.bucket_per_layer:
            n = max(1, s.layers)
        else:
            n = max(1, math.ceil(grads / o.bucket_size_bytes(dp, st.gradients)))
        forward = s.forward_s
        backward = s.block_s + s.recompute_s + s.extra_s - s.forward_s

        def left(c: float, window: float, slack: float = 0.0) -> float:
            # n equal buckets, piece i ready i window / n into the window, sent one after another
            return max(0.0, max(c / n, c - window * (n - 1) / n) - slack) if c > 0 else 0.0

        across = collective(cluster, "all_reduce", grads / dp, replicate, across_per_node, n)
        if zero == 0:
            reduce = collective(cluster, "all_reduce", grads, dp, per_node, n) + across
            stage_raw = reduce
            stage = left(reduce, backward, before_backward) if o.grad_reduce else reduce
        elif zero < 3:
            reduce = collective(cluster, "reduce_scatter", grads, dp, per_node, n) + across
            gather = collective(cluster, "all_gather", weights, dp, per_node, n)
            stage_raw = reduce + gather
            stage = ((left(reduce, backward, before_backward) if o.grad_reduce else reduce)
                     + (left(gather, forward, before_forward) if o.param_gather else gather))
        else:
            gather = collective(cluster, "all_gather", weights, dp, per_node, n)
            scatter = collective(cluster, "reduce_scatter", grads, dp, per_node, n) + across
            stage_raw = q.micro_batches * (2 * gather + scatter)
            if o.sharded_prefetch:
                under_backward = gather + (scatter if o.grad_reduce else 0.0)
                stage = q.micro_batches * (left(gather, forward) + left(under_backward, backward)
                                           + (0.0 if o.grad_reduce else scatter))
            else:
                stage = stage_raw
        exposed, raw = max(exposed, stage), max(raw, stage_raw)
        before_forward += forward
        before_backward += backward
    return exposed, raw - exposed


def _exact_pattern(plan: HybridPlan, problems: list[str], flight: dict[int, int]) -> float | None:
    """Check a zb-exact plan's periodic pattern from its definitions and return its pipeline term for m
    micro-batches (None when it cannot be checked): each stage runs F (its forward and half its
    transfers), B and W (the rest of its time per micro-batch, W at most its weight-gradient part, in
    the pattern's weight share) once a period T, without two of them overlapping (modulo T); on
    micro-batch j an operation with start t and shift h starts at (j + h) T + t, after its
    predecessors (F down the stages, B back up, W after B); a stage holds a micro-batch from its F's
    start to its W's end, so ceil(lifetime / T) of them at its peak (into `flight`). The step runs m
    micro-batches in each stage's periodic order, every operation as early as it can start: the
    longest path through those orders and the dependencies, relaxed until it no longer changes."""
    x, q = plan.exact_schedule, plan.parallelism
    if x is None:
        problems.append("schedule zb-exact without its pattern")
        return None
    T, pp, eps = x.period_s, q.pp, RTOL * max(x.period_s, 1e-12)
    ops = {(kind, stage): (t, d, h) for _, kind, stage, t, d, h in x.operations}
    if len(ops) != 3 * pp or len(x.operations) != 3 * pp or any((k, i) not in ops for k in "FBW" for i in range(pp)):
        problems.append(f"zb-exact pattern: {len(x.operations)} operations, not F, B and W of each of {pp} stages")
        return None
    for s in plan.stages:
        (tf, f, hf), (tb, b, hb), (tw, w, hw) = (ops[k, s.index] for k in "FBW")
        if not (_close(f, s.forward_s + s.p2p_s / 2) and _close(f + b + w, s.time_per_microbatch_s)):
            problems.append(f"stage {s.index}: zb-exact F {f:.6g} s, B + W {b + w:.6g} s differ from its times")
        if w > s.weight_grad_s * (1 + RTOL) + 1e-15 or not _close(w, x.weight_share * (b + w)):
            problems.append(f"stage {s.index}: zb-exact W {w:.6g} s is not the weight share of its backward")
        spans = sorted((t % T, t % T + d) for t, d in ((tf, f), (tb, b), (tw, w)))
        if any(t < -eps or t > T + eps for t in (tf, tb, tw)) or min(hf, hb, hw) < 0 or any(
                a[1] > z[0] + eps for a, z in zip(spans, spans[1:])) or spans[-1][1] > spans[0][0] + T + eps:
            problems.append(f"stage {s.index}: zb-exact operations overlap or leave [0, T)")
        lifetime = (hw * T + tw + w) - (hf * T + tf)
        flight[s.index] = max(1, math.ceil(lifetime / T - 1e-9))
        if flight[s.index] != x.in_flight[s.index]:
            problems.append(f"stage {s.index}: zb-exact holds {flight[s.index]} micro-batches, the plan says "
                            f"{x.in_flight[s.index]}")
    after = [(("F", i), ("F", i + 1)) for i in range(pp - 1)] + [(("F", pp - 1), ("B", pp - 1))]
    after += [(("B", i + 1), ("B", i)) for i in range(pp - 1)] + [(("B", i), ("W", i)) for i in range(pp)]
    at = {key: ops[key][2] * T + ops[key][0] for key in ops}  # micro-batch 0's periodic start
    for a, z in after:
        if at[z] < at[a] + ops[a][1] - eps:
            problems.append(f"zb-exact: {z[0]}{z[1]} starts before {a[0]}{a[1]} ends")
    m = q.micro_batches
    order = {i: sorted(((j * T + at[k, i], k, j) for k in "FBW" for j in range(m))) for i in range(pp)}
    start = {(k, i, j): 0.0 for i in range(pp) for k in "FBW" for j in range(m)}
    for _ in range(3 * pp * m + 1):  # longest path by relaxation: at most one pass per operation
        changed = False
        for i, seq in order.items():
            for (_, k, j), (_, k2, j2) in zip(seq, seq[1:]):
                ready = start[k, i, j] + ops[k, i][1]
                if start[k2, i, j2] < ready - eps:
                    start[k2, i, j2], changed = ready, True
        for (ka, ia), (kz, iz) in after:
            for j in range(m):
                ready = start[ka, ia, j] + ops[ka, ia][1]
                if start[kz, iz, j] < ready - eps:
                    start[kz, iz, j], changed = ready, True
        if not changed:
            break
    return max(start[k, i, j] + ops[k, i][1] for (k, i, j) in start)
