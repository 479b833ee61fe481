"""Step time of a hybrid plan: pipeline schedule with its bubble, plus what is not overlapped.

    step = pipeline + data-parallel gradient sync + tied-embedding sync + optimizer step + contention

- pipeline, with T_i the time of stage i per micro-batch (forward + backward + recomputation + its
  point-to-point transfers) and m micro-batches:
  1F1B and GPipe: sum_i T_i + (m - 1) max_i T_i (fill and drain once; for equal stages
  (m + p - 1) T, Narayanan et al. 2021 section 2.2.1);
  interleaved 1F1B with v chunks: m max_i T_i + (sum_i T_i - max_i T_i) / v, for equal stages
  (m + (p - 1) / v) T (bubble (p - 1)/v, section 2.2.2; unequal stages: hybrid/stages.py), each
  micro-batch crossing v times as many stage boundaries.
- gradient sync: all-reduce of the stage's gradients (in the gradient dtype) over the dp group, in
  the runtime's buckets; ZeRO-1/2 (distributed optimizer) reduce-scatter the gradients and
  all-gather the weights (the same volume); ZeRO-3 all-gathers the weights in forward and in
  backward and reduce-scatters the gradients of every micro-batch (Rajbhandari et al. 2020,
  section 7.2: 3 x the data-parallel volume per pass) (`sync_parts`). What the runtime overlaps
  with compute is taken off (`exposed_sync_s`): Megatron-LM 2021 overlaps nothing, Megatron-core
  the gradient reduce under the last micro-batch's backward and the parameter gather under the
  next step's first forward, FSDP2 / ZeRO-3 each block's gather and reduce-scatter under its
  neighbours' compute; the term is what is left on the critical path.
- tied embedding: the first and last stage all-reduce the word-embedding gradient (p > 1).
- contention: the data-parallel communication hidden under compute slows that compute by the share
  of the device its kernels hold (hybrid/contention.py: hidden x collective CTAs / SMs).
- optimizer: Adam reads and writes each local parameter's optimizer state and weight and reads its
  gradient, a memory-bound vector kernel (`compute_time` with those HBM bytes).
Process order is Megatron's: tensor-parallel ranks adjacent, then data parallel, then pipeline, so
a dp group has min(dp, devices per node / tp) devices per node and a pipeline neighbour is on
another node once tp x dp >= devices per node.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from solver_plan.cluster import Cluster
from solver_plan.cost.model_state import ADAM_FLOPS_PER_PARAM
from solver_plan.hybrid.comm import collective, crosses_nodes
from solver_plan.hybrid.memory import MIXED_PRECISION, StateBytes
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.runtime import resolve_runtime


@dataclass(frozen=True)
class StepTerms:
    """The terms of a step (module docstring for each): pipeline, exposed data-parallel sync, tied-embedding
    sync, optimizer step, the data-parallel communication hidden under compute (reported, not in the
    total) and the compute time that hidden communication costs (contention, in the total).
    """
    pipeline_s: float
    dp_sync_s: float  # exposed: after what the runtime overlaps with compute
    embedding_sync_s: float
    optimizer_s: float
    dp_sync_hidden_s: float = 0.0  # data-parallel communication hidden under compute (not in the total)
    contention_s: float = 0.0  # compute slowed by the hidden dp communication (hybrid/contention.py)

    @property
    def total(self) -> float:
        """Step time: pipeline + exposed dp sync + embedding sync + optimizer + contention."""
        return self.pipeline_s + self.dp_sync_s + self.embedding_sync_s + self.optimizer_s + self.contention_s


def dp_per_node(cluster: Cluster, tp: int, dp: int) -> int:
    """Devices of one data-parallel group on a node under Megatron's rank order (tp ranks adjacent, then dp):
    min(dp, devices per node / tp), at least 1.
    """
    return max(1, min(dp, cluster.devices_per_node // tp))


def p2p_send_s(cluster: Cluster, spec: TransformerSpec, b: int, tp: int, dp: int, boundary: int,
               state: StateBytes = MIXED_PRECISION, runtime=None) -> float:
    """One send across the boundary between stages `boundary` and `boundary + 1` (an activation
    forward or its gradient backward): s b h values of the activation dtype / t, e s b h / t bytes
    (e = 2 in mixed precision, 4 in fp32; Megatron's scatter-gather sends each tensor-parallel
    rank's 1/t, Narayanan et al. 2021 section 4.1, as does DeepSpeed's pipeline engine with tensor
    parallelism (PartitionedTensor); a runtime without it, `Overlap.p2p_scatter_gather` False, sends
    all e s b h from every rank), between nodes when the
    two stages' first devices are on different nodes (stage i starts at device i x tp x dp)."""
    split = tp if resolve_runtime(runtime).overlap.p2p_scatter_gather else 1
    nbytes = spec.seq * b * spec.hidden * state.activations / split
    a, z = boundary * tp * dp, (boundary + 1) * tp * dp
    return collective(cluster, "p2p", nbytes, 2, 1 if crosses_nodes(cluster, a, z) else 2)


def p2p_gather_s(cluster: Cluster, spec: TransformerSpec, b: int, tp: int, state: StateBytes = MIXED_PRECISION) -> float:
    """One all-gather of a scatter-gathered pipeline tensor over the stage's t tensor-parallel ranks
    (inside a node): e s b h bytes in all, each rank contributing its 1/t (Megatron-LM 2021's
    gather_split_1d_tensor, DeepSpeed's PartitionedTensor.full(); how many a runtime runs per micro-batch
    is `Overlap.p2p_gathers_receiver` / `p2p_gathers_sender`). 0 with t = 1."""
    return collective(cluster, "all_gather", spec.seq * b * spec.hidden * state.activations, tp, min(tp, cluster.devices_per_node))


def pipeline_s(stage_times: list[float], m: int, schedule: str, v: int = 1, weight_times=None) -> float:
    """The pipeline term (module text); zero-bubble schedules need each stage's W (`weight_times`,
    hybrid/zero_bubble.py)."""
    slowest = max(stage_times)
    from solver_plan.hybrid.zero_bubble import ZERO_BUBBLE

    if schedule in ZERO_BUBBLE:
        from solver_plan.hybrid.zero_bubble import pipeline_s as zero_bubble_s

        return zero_bubble_s(stage_times, weight_times, m, schedule)
    if schedule == "interleaved" and v > 1:
        from solver_plan.hybrid.stages import interleaved_pipeline_s

        return interleaved_pipeline_s(stage_times, m, v)
    return sum(stage_times) + (m - 1) * slowest


@dataclass(frozen=True)
class SyncParts:
    """Data-parallel communication of one stage, unoverlapped: per step the gradient reduce and the
    parameter gather (ZeRO-1/2), per micro-batch (ZeRO-3) the forward gather and the backward
    gather + reduce-scatter; `pieces` = buckets (collectives issued one after another)."""
    grad_s: float = 0.0
    gather_s: float = 0.0
    forward_s: float = 0.0  # ZeRO-3, per micro-batch
    backward_s: float = 0.0  # ZeRO-3, per micro-batch: gather + reduce-scatter
    backward_gather_s: float = 0.0  # the gather part of backward_s
    pieces: int = 1


def buckets(params_per_device: float, dp: int, state: StateBytes, runtime, layers: int) -> int:
    """Number of gradient buckets: one per block (`bucket_per_layer`, FSDP units) or
    ceil(g P / bucket bytes) with the runtime's bucket size (`Overlap.bucket_size_bytes`)."""
    overlap = resolve_runtime(runtime).overlap
    if overlap.bucket_per_layer:
        return max(1, layers)
    return max(1, math.ceil(params_per_device * state.gradients / overlap.bucket_size_bytes(dp, state.gradients)))


def sync_parts(cluster: Cluster, params_per_device: float, tp: int, dp: int, zero_stage: int, state: StateBytes,
               runtime=None, layers: int = 1, replicate: int = 1) -> SyncParts:
    """Gradient sync (and ZeRO's weight gathers) of one stage in the gradient dtype (g P bytes: 2 P
    mixed, 4 P fp32) and the working weights' (w P): all-reduce of g P (ZeRO-0); reduce-scatter of
    g P + all-gather of w P (ZeRO-1/2); per micro-batch all-gather of w P in forward, all-gather +
    reduce-scatter of g P in backward (ZeRO-3, Rajbhandari et al. 2020 section 7.2); in the
    runtime's buckets (`buckets`). `dp` is the group ZeRO shards over; with hybrid sharding
    (`replicate` > 1 such groups, fsdp.py) each reduce is followed by the all-reduce of the shard's
    g P / dp across the replicate group (`fsdp.replicate_all_reduce_s`), part of the reduce."""
    from solver_plan.hybrid.fsdp import replicate_all_reduce_s

    if dp == 1 and replicate == 1:
        return SyncParts()
    per_node = dp_per_node(cluster, tp, dp)
    grads = params_per_device * state.gradients
    weights = params_per_device * state.weights
    n = buckets(params_per_device, dp, state, runtime, layers)
    across = replicate_all_reduce_s(cluster, grads / dp, tp, dp, replicate, n) if replicate > 1 else 0.0
    if zero_stage == 0 or dp == 1:
        return SyncParts(grad_s=collective(cluster, "all_reduce", grads, dp, per_node, n) + across, pieces=n)
    if zero_stage in (1, 2):
        return SyncParts(grad_s=collective(cluster, "reduce_scatter", grads, dp, per_node, n) + across,
                         gather_s=collective(cluster, "all_gather", weights, dp, per_node, n), pieces=n)
    gather = collective(cluster, "all_gather", weights, dp, per_node, n)
    return SyncParts(forward_s=gather,
                     backward_s=gather + collective(cluster, "reduce_scatter", grads, dp, per_node, n) + across,
                     backward_gather_s=gather, pieces=n)


def dp_sync_s(cluster: Cluster, params_per_device: float, tp: int, dp: int, zero_stage: int, m: int,
              state: StateBytes, runtime=None, layers: int = 1) -> float:
    """Data-parallel communication of one stage per step with nothing overlapped (`sync_parts`):
    grad + gather, or m x (forward + backward) under ZeRO-3. An upper bound on `exposed_sync_s`."""
    parts = sync_parts(cluster, params_per_device, tp, dp, zero_stage, state, runtime, layers)
    return parts.grad_s + parts.gather_s + m * (parts.forward_s + parts.backward_s)


def hidden_behind(comm_s: float, window_s: float, pieces: int) -> float:
    """What is left of `comm_s` issued in n = `pieces` equal collectives, one after another on one
    link, under a compute window of w = `window_s` seconds that produces (or, for a gather,
    consumes) the pieces evenly: piece i is ready at i w / n, so the last one ends at
    max_i (i w / n + (n - i + 1) c / n), which is w + c / n (compute-bound) or w / n + c
    (communication-bound): max(c / n, c - w (n - 1) / n) after the window. Exact for the project's
    simulator on equal layers (tests/test_hybrid_runtime.py: per-layer ring all-reduce tasks after
    each backward task)."""
    if comm_s <= 0:
        return 0.0
    n = max(1, pieces)
    return max(comm_s / n, comm_s - window_s * (n - 1) / n)


def exposed_sync_s(parts: SyncParts, m: int, forward_s: float, backward_s: float, runtime=None,
                   slack_forward_s: float = 0.0, slack_backward_s: float = 0.0) -> float:
    """Data-parallel communication of one stage left on the step's critical path, as the runtime
    overlaps it (`runtime.overlap`; `hidden_behind` for the bucket rule):
    - gradient reduce (Megatron-core --overlap-grad-reduce, PyTorch DDP, FSDP2): the buckets are
      reduced during the backward pass of the last micro-batch (`backward_s`: the stage's backward
      per micro-batch, recomputation included), one bucket after another (`hidden_behind`); stage
      i of a pipeline ends its last backward before stages i - 1 ... 0 end theirs, which gives it
      `slack_backward_s` more: max(0, hidden_behind(grad, backward) - slack);
    - parameter gather (--overlap-param-gather): under the next step's first forward of the stage,
      whose start waits `slack_forward_s` (the forwards of the stages before it):
      max(0, hidden_behind(gather, forward) - slack);
    - ZeRO-3 / FSDP with prefetch: every micro-batch, each block's gather under the previous block's
      forward, and in backward the gathers (prefetch) and the reduce-scatters (if the gradient
      reduce overlaps) under the blocks' backward: m x (hidden_behind(forward gather, forward) +
      hidden part of backward + the rest);
    without overlap, the whole of each (Megatron-LM 2021: after the backward pass). What hides
    still slows the compute it runs under (its kernels hold SMs): hybrid/contention.py prices that
    from the hidden part (the unoverlapped `dp_sync_s` less this), `StepTerms.contention_s`."""
    overlap = resolve_runtime(runtime).overlap
    n = parts.pieces
    grad = max(0.0, hidden_behind(parts.grad_s, backward_s, n) - slack_backward_s) if overlap.grad_reduce \
        else parts.grad_s
    gather = max(0.0, hidden_behind(parts.gather_s, forward_s, n) - slack_forward_s) if overlap.param_gather \
        else parts.gather_s
    if not (parts.forward_s or parts.backward_s):
        return grad + gather
    if not overlap.sharded_prefetch:
        per_microbatch = parts.forward_s + parts.backward_s
    else:
        scatter = parts.backward_s - parts.backward_gather_s
        hidden = parts.backward_gather_s + (scatter if overlap.grad_reduce else 0.0)
        per_microbatch = (hidden_behind(parts.forward_s, forward_s, n) + hidden_behind(hidden, backward_s, n)
                          + parts.backward_s - hidden)
    return grad + gather + m * per_microbatch


def embedding_sync_s(cluster: Cluster, spec: TransformerSpec, tp: int, pp: int, state: StateBytes,
                     schedule: str = "1f1b") -> float:
    """All-reduce of the tied word embedding's gradient, V h / t values of the gradient dtype (g V h / t
    bytes), between the first and last stage (none when the output projection is untied, there is
    one stage, or ZB-V puts the output layer on the first stage; Narayanan et al. 2021)."""
    from solver_plan.hybrid.zero_bubble import head_stage

    if pp == 1 or not spec.tied_embeddings or head_stage(pp, schedule) == 0:
        return 0.0
    last = (pp - 1) * (cluster.num_devices // pp)
    return collective(cluster, "all_reduce", spec.vocab * spec.hidden / tp * state.gradients, 2,
                      1 if crosses_nodes(cluster, 0, last) else 2)


def optimizer_s(cluster: Cluster, params_per_device: float, dp: int, zero_stage: int, state: StateBytes,
                runtime=None) -> float:
    """Adam over the local parameters P_l (/ dp from ZeRO-1): ADAM_FLOPS_PER_PARAM P_l vector FLOPs
    and P_l (2 (w + m + 2 o) + g) HBM bytes (read and write weights and optimizer state, read the
    gradients: one fused pass), or P_l x the runtime's own per-parameter bytes where its update is not
    one pass (`RuntimeProfile.optimizer_bytes_per_param`: an eager per-operation optimizer and gradient
    clipping's passes), priced by the cost core's roofline (`compute_time`, vector units)."""
    from solver_plan.cost.compute import compute_time

    local = params_per_device / (dp if zero_stage >= 1 else 1)
    own = resolve_runtime(runtime).optimizer_bytes_per_param
    hbm = local * (own or 2 * (state.weights + state.optimizer) + state.gradients)  # read + write state, read grads
    return compute_time(cluster, ADAM_FLOPS_PER_PARAM * local, hbm, unit="vector")
