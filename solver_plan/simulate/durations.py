"""Task durations, all taken from the cost model (the simulator itself computes no costs).

- A compute task (one shard, forward or backward) takes the cost model's per-device compute time
  plus the operator's own collectives (partial-sum and input-gradient all-reduces block the
  operator), split between forward and backward as the measured times say, as the runtime's
  attention kernel splits them (`CostModel.attention_seconds`: a fused kernel's backward is 2.5x its
  forward), or 1 : BACKWARD_FACTOR.
- A gradient-synchronisation task takes the cost model's ring all-reduce time of the parameter
  shard (every link of the ring is busy for the whole collective).
- A transfer of b bytes from device a to device c takes alpha + b x beta_p2p on their link level
  (`collectives.p2p_time`, the point-to-point term the cost model's redistribution uses: beta at
  the link's p2p_efficiency).
"""
from __future__ import annotations

from solver_plan.cost.collectives import p2p_time
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.model import BACKWARD_FACTOR, CostModel
from solver_plan.graph.ir import Graph, Operator
from solver_plan.graph.ops import OpType


class TaskTimes:
    """Durations of the simulator's tasks for one graph, read from `cost_model` (see the module text)."""

    def __init__(self, graph: Graph, cost_model: CostModel):
        self.graph = graph
        self.cost_model = cost_model
        self.cluster = cost_model.cluster

    def shard(self, op: Operator, cfg: ParallelConfig) -> tuple[float, float]:
        """(forward, backward) seconds of each shard of `op` under `cfg`."""
        cost = self.cost_model.node(self.graph, op, cfg)
        busy = cost.compute_s + cost.comm_s
        if op.measured is not None:
            total = op.measured.forward_s + op.measured.backward_s
            forward_share = op.measured.forward_s / total if total > 0 else 0.5
        elif op.op_type == OpType.ATTENTION:
            forward, backward = self.cost_model.attention_seconds(self.graph, op, cfg)
            forward_share = forward / (forward + backward) if forward + backward > 0 else 0.5
        else:
            forward_share = 1.0 / (1.0 + BACKWARD_FACTOR)
        return busy * forward_share, busy * (1.0 - forward_share)

    def sync(self, op: Operator, cfg: ParallelConfig) -> float:
        """Seconds of the gradient all-reduce of `op`'s parameter shard under `cfg` (the cost model's).
        """
        return self.cost_model.node(self.graph, op, cfg).sync_s

    def transfer(self, src: int, dst: int, nbytes: float) -> float:
        """Seconds to move `nbytes` from device `src` to `dst` (alpha + bytes x beta at their link
        level)."""
        return p2p_time(self.cluster, self.cluster.level(src, dst), nbytes)
