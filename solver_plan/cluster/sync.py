"""`GradientSync`: how a cluster's training runtime synchronises the gradients of replicated
parameters (cluster YAML key `gradient_sync`); one value read by the cost model and the simulator."""
from __future__ import annotations

import math
from dataclasses import dataclass

from solver_plan.errors import ClusterError

SYNC_SCHEMES = ("ring", "parameter_server")


@dataclass(frozen=True)
class GradientSync:
    """How the training runtime synchronises the gradients of replicated parameters (priced by
    `cost/collectives.gradient_sync_time`, simulated by `simulate/lowering.py`).

    - "ring" (default): NCCL's bucketed all-reduce, overlapped with the backward pass (PyTorch DDP,
      Horovod): 2(n-1)/n S beta per tensor, hierarchical across nodes.
    - "parameter_server": FlexFlow's runtime (Legion, SysML'19): each replicated parameter has an
      owner, the first device of its replica group; once a replica's device has finished its
      backward pass (bulk synchronous, not overlapped), it copies its gradient to the owner, which
      updates the parameter. The owner receives the copies one after the other:
      (k-1)(alpha_i + S / B_i) + (m-1)(alpha_e + S / B_e) for k replicas per node on m nodes (one
      copy per other node: a node's replicas are summed first). Updated parameters return on the
      other direction of the full-duplex links, overlapping the next copies, so they are not
      charged. Source: FlexFlow's simulator, github.com/flexflow/FlexFlow scripts/simulator.cc at
      commit b6563d5 (2019-02-07), `Conv2D::update`: xfer (intra_cnt - 1) / INTRA_NODE_BANDWIDTH +
      xfer (cross_cnt - 1) / CROSS_NODE_BANDWIDTH, added after every task of the step; its 2020
      simulator keeps the owner (first part's device) and the bulk-synchronous default
      (`search_overlap_backward_update = false`).
    `intra_node_bandwidth` / `inter_node_bandwidth` (bytes/s): the achieved rate of one such copy;
    None: the link's achieved bandwidth (1 / Cluster.g)."""
    scheme: str = "ring"
    intra_node_bandwidth: float | None = None
    inter_node_bandwidth: float | None = None

    def __post_init__(self):
        if self.scheme not in SYNC_SCHEMES:
            raise ClusterError(f"gradient sync scheme must be one of {', '.join(SYNC_SCHEMES)}, got {self.scheme!r}")
        for name in ("intra_node_bandwidth", "inter_node_bandwidth"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ClusterError(f"gradient sync {name} must be positive, got {value}")
        if self.scheme == "ring" and (self.intra_node_bandwidth or self.inter_node_bandwidth):
            raise ClusterError("gradient sync copy bandwidths apply to the parameter_server scheme only")

    @property
    def owner_based(self) -> bool:
        """Whether gradients go to one owner per shard (parameter server) instead of an all-reduce."""
        return self.scheme == "parameter_server"

    def as_yaml(self) -> dict | None:
        """The cluster YAML `gradient_sync` value that loads back to this (None: the default)."""
        if self == GradientSync():
            return None
        data: dict = {"scheme": self.scheme}
        rates = {level: float(rate) for level, rate in (("intra_node", self.intra_node_bandwidth),
                                                        ("inter_node", self.inter_node_bandwidth)) if rate is not None}
        if rates:
            data["copy_bandwidth"] = rates
        return data

