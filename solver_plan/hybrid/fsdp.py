"""Fully-sharded data parallelism with pipelines, and hybrid sharding (HSDP).

Shard and replicate degrees: the R = dp x cp ranks holding the same weights (`Parallelism.replicas`)
split into R / s replicate groups of s shard ranks (`dp_shard` = s; 0 = all R, plain ZeRO / FSDP).
ZeRO shards the optimizer state (stage 1), gradients (2) and weights (3) over the s ranks of a
shard group only (the bytes: cost/model_state.py `ParameterState.sharded_bytes`, through
hybrid/memory.py's `weights_bytes` ... `optimizer_bytes` with s as the group); the gradients are reduce-scattered in the shard group, then all-reduced, 1/s of
them, across the replicate group, and the weights all-gathered in the shard group (PyTorch FSDP2
HSDP: fully_shard on a 2-D (replicate, shard) mesh; Megatron-core's distributed optimizer with
--num-distributed-optimizer-instances R / s). Ranks are tp fastest, then cp, then dp, so a shard
group of s is s tensor-parallel submeshes side by side (one node when s x tp <= devices per node,
the searched choice besides s = R: `searched_shards`) and a replicate group strides s x tp devices.

With pipelining (pp > 1) the micro-batches of a step run one after another through every stage, so
re-gathering a stage's weights and reduce-scattering its gradients every micro-batch (ZeRO-3 as
priced for pp = 1) would move m times the data; the runtimes that combine FSDP with pipelines do
not: torch.distributed.pipelining's stage (`backward_maybe_with_nosync`) keeps FSDP2 from
resharding after backward and from reducing gradients until the last micro-batch, and torchtitan
does not reshard after forward when pp > 1 (reshard_after_forward_policy "default"); Llama 3's FSDP
"does not reshard after forward" (Dubey et al. 2024, section 3.3.2). So with pp > 1, ZeRO-3 / FSDP
gathers each stage's weights once a step and reduce-scatters its gradients once a step, holding
the whole (tensor-parallel) weights and gradients during the step: the traffic and memory of ZeRO-1
with the optimizer state sharded (`state_zero`). Only FSDP2 runtimes (`RuntimeProfile.sharded_fp32_params`:
torchtitan, torchtitan-compile) run it; Megatron-core's distributed optimizer is ZeRO-1 and
DeepSpeed's pipeline engine refuses ZeRO-2/3 (`allowed`).
"""
from __future__ import annotations

from solver_plan.cluster import Cluster
from solver_plan.hybrid.comm import collective


def pipelined_fsdp(runtime) -> bool:
    """Whether the runtime runs FSDP (ZeRO-3) under a pipeline schedule: FSDP2 (module text)."""
    from solver_plan.runtime import resolve_runtime

    return resolve_runtime(runtime).sharded_fp32_params


def allowed(runtime, zero_stage: int, pp: int) -> bool:
    """ZeRO-2/3 with pp > 1 only as FSDP2's ZeRO-3 (module text)."""
    return pp == 1 or zero_stage < 2 or (zero_stage == 3 and pipelined_fsdp(runtime))


def state_zero(zero_stage: int, pp: int) -> int:
    """The ZeRO stage whose memory and traffic a plan has: ZeRO-3 with pp > 1 gathers once a step and
    keeps the weights and gradients whole during it, which is ZeRO-1's (module text)."""
    return 1 if pp > 1 and zero_stage >= 2 else zero_stage


def shard_degree(replicas: int, dp_shard: int) -> int:
    """Ranks a ZeRO shard group holds: `dp_shard`, or all dp x cp replicas (0)."""
    return dp_shard or replicas


def searched_shards(replicas: int, tp: int, devices_per_node: int, zero_stage: int) -> list[int]:
    """Shard degrees the unpinned search offers: all replicas (0), and with ZeRO one node's worth of
    tensor-parallel submeshes when the replicas span nodes (HSDP's usual shape: shards inside the
    NVLink domain, replicas across the network)."""
    node = max(1, devices_per_node // tp)
    return [0] + ([node] if zero_stage >= 1 and 1 < node < replicas and replicas % node == 0 else [])


def replicate_all_reduce_s(cluster: Cluster, nbytes: float, tp: int, shard: int, replicate: int,
                           buckets: int = 1) -> float:
    """All-reduce of a shard's `nbytes` of gradients across the replicate group: `replicate` ranks
    s x tp devices apart, so devices_per_node // (s tp) of them on a node (at least one)."""
    per_node = max(1, min(replicate, cluster.devices_per_node // (shard * tp)))
    return collective(cluster, "all_reduce", nbytes, replicate, per_node, buckets)
