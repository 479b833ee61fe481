"""Step time of a hybrid plan: pipeline schedule with its bubble, plus what is not overlapped.

    step = pipeline + data-parallel gradient sync + tied-embedding sync + optimizer step

- pipeline, with T_i the time of stage i per micro-batch (forward + backward + recomputation + its
  point-to-point transfers) and m micro-batches:
  1F1B and GPipe: sum_i T_i + (m - 1) max_i T_i (fill and drain once; for equal stages
  (m + p - 1) T, Narayanan et al. 2021 section 2.2.1);
  interleaved 1F1B with v chunks: (m + (p - 1) / v) max_i T_i (bubble (p - 1)/v, section 2.2.2),
  each micro-batch crossing v times as many stage boundaries.
- gradient sync: all-reduce of the stage's gradients (in the gradient dtype) over the dp group, bucketed, not
  overlapped with the backward pass (Megatron-LM 2021 does not overlap it); ZeRO-1/2 (distributed
  optimizer) reduce-scatter the gradients and all-gather the weights (the same volume); ZeRO-3
  all-gathers the weights in forward and in backward and reduce-scatters the gradients of every
  micro-batch (Rajbhandari et al. 2020, section 7.2: 3 x the data-parallel volume per pass).
- tied embedding: the first and last stage all-reduce the word-embedding gradient (p > 1).
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
from solver_plan.hybrid.comm import collective, crosses_nodes
from solver_plan.hybrid.memory import MIXED_PRECISION, StateBytes
from solver_plan.hybrid.model import TransformerSpec

BUCKET_BYTES = 40e6  # gradient-sync bucket (Megatron/DDP default order of magnitude: 25-40 MB)
ADAM_FLOPS_PER_PARAM = 12.0  # moment updates, bias correction, update: a dozen element-wise FLOPs


@dataclass(frozen=True)
class StepTerms:
    pipeline_s: float
    dp_sync_s: float
    embedding_sync_s: float
    optimizer_s: float

    @property
    def total(self) -> float:
        return self.pipeline_s + self.dp_sync_s + self.embedding_sync_s + self.optimizer_s


def dp_per_node(cluster: Cluster, tp: int, dp: int) -> int:
    return max(1, min(dp, cluster.devices_per_node // tp))


def p2p_send_s(cluster: Cluster, spec: TransformerSpec, b: int, tp: int, dp: int, boundary: int,
               state: StateBytes = MIXED_PRECISION) -> float:
    """One send across the boundary between stages `boundary` and `boundary + 1` (an activation
    forward or its gradient backward): s b h values of the activation dtype / t, e s b h / t bytes
    (e = 2 in mixed precision, 4 in fp32; Megatron's scatter-gather sends each tensor-parallel
    rank's 1/t, Narayanan et al. 2021 section 4.1), between nodes when the two stages' first devices
    are on different nodes (stage i starts at device i x tp x dp)."""
    nbytes = spec.seq * b * spec.hidden * state.activations / tp
    a, z = boundary * tp * dp, (boundary + 1) * tp * dp
    return collective(cluster, "p2p", nbytes, 2, 1 if crosses_nodes(cluster, a, z) else 2)


def pipeline_s(stage_times: list[float], m: int, schedule: str, v: int = 1) -> float:
    slowest = max(stage_times)
    if schedule == "interleaved" and v > 1:
        return (m + (len(stage_times) - 1) / v) * slowest
    return sum(stage_times) + (m - 1) * slowest


def dp_sync_s(cluster: Cluster, params_per_device: float, tp: int, dp: int, zero_stage: int, m: int,
              state: StateBytes) -> float:
    """Gradient sync (and ZeRO's weight gathers) of one stage, per step, in the gradient dtype
    (g P bytes: 2 P mixed, 4 P fp32) and the working weights' (w P): all-reduce of g P (ZeRO-0);
    reduce-scatter of g P + all-gather of w P (ZeRO-1/2); m x (2 all-gathers of w P + reduce-scatter
    of g P) (ZeRO-3, Rajbhandari et al. 2020 section 7.2); buckets of BUCKET_BYTES."""
    if dp == 1:
        return 0.0
    per_node = dp_per_node(cluster, tp, dp)
    grads = params_per_device * state.gradients
    weights = params_per_device * state.weights
    buckets = max(1, math.ceil(grads / BUCKET_BYTES))
    if zero_stage == 0:
        return collective(cluster, "all_reduce", grads, dp, per_node, buckets)
    if zero_stage in (1, 2):
        return (collective(cluster, "reduce_scatter", grads, dp, per_node, buckets)
                + collective(cluster, "all_gather", weights, dp, per_node, buckets))
    return m * (2 * collective(cluster, "all_gather", weights, dp, per_node, buckets)
                + collective(cluster, "reduce_scatter", grads, dp, per_node, buckets))


def embedding_sync_s(cluster: Cluster, spec: TransformerSpec, tp: int, pp: int, state: StateBytes) -> float:
    """All-reduce of the tied word embedding's gradient, V h / t values of the gradient dtype (g V h / t
    bytes), between the first and last stage (none when the output projection is untied or there is
    one stage; Narayanan et al. 2021)."""
    if pp == 1 or not spec.tied_embeddings:
        return 0.0
    last = (pp - 1) * (cluster.num_devices // pp)
    return collective(cluster, "all_reduce", spec.vocab * spec.hidden / tp * state.gradients, 2,
                      1 if crosses_nodes(cluster, 0, last) else 2)


def optimizer_s(cluster: Cluster, params_per_device: float, dp: int, zero_stage: int, state: StateBytes) -> float:
    """Adam over the local parameters P_l (/ dp from ZeRO-1): ADAM_FLOPS_PER_PARAM P_l vector FLOPs
    and P_l (2 (w + m + 2 o) + g) HBM bytes (read and write weights and optimizer state, read the
    gradients), priced by the cost core's roofline (`compute_time`, vector units)."""
    from solver_plan.cost.compute import compute_time

    local = params_per_device / (dp if zero_stage >= 1 else 1)
    hbm = local * (2 * (state.weights + state.optimizer) + state.gradients)  # read + write state, read grads
    return compute_time(cluster, ADAM_FLOPS_PER_PARAM * local, hbm, unit="vector")
