"""A per-operator plan re-priced from the graph and the cluster: the validator's independent cost check.

Planners see only a `ConfigProblem`'s arrays, and the plan's reported cost comes from them (the
problem's own objective function, `ConfigProblem.objective`). `price_plan` does not read them: it
prices each operator's chosen configuration (`CostModel.node`: compute, the operator's
collectives, gradient sync, memory) and each graph tensor's redistribution between its producer's
and consumer's configurations (`CostModel.edge_matrices` on one pair at a time, tensor by tensor where the
problem merged the tensors between two operators into one matrix) on a fresh cost model with the
same settings (`CostModel.fresh`: nothing memoised while the problem was built is reused). A
wrong array entry, a wrong merge or decode, or a wrong objective function then shows up as a
disagreement with the reported cost (intra/validate.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.model import CostModel
from solver_plan.graph.ir import Graph


@dataclass(frozen=True)
class PlanPrice:
    """What a plan costs, priced afresh: seconds in operators and in redistribution between them,
    and the bytes on every device."""
    operators_s: float
    redistribution_s: float
    device_memory: np.ndarray  # (devices,) bytes

    @property
    def total_s(self) -> float:
        """The sum objective: every operator's time plus every redistribution's."""
        return self.operators_s + self.redistribution_s


def price_plan(graph: Graph, cost_model: CostModel, configs: Mapping[str, ParallelConfig]) -> PlanPrice:
    """Price the plan `configs` (operator name -> chosen configuration, every operator of `graph`)
    with a fresh copy of `cost_model` (module text)."""
    model = cost_model.fresh()
    memory = np.zeros(cost_model.cluster.num_devices)
    operators = 0.0
    on_devices: dict[tuple[int, ...], float] = {}  # bytes per device set, each added to its devices once
    for name in graph.topological_order:
        cfg = configs[name]
        cost = model.node(graph, graph.op(name), cfg)
        operators += cost.seconds
        on_devices[cfg.devices] = on_devices.get(cfg.devices, 0.0) + cost.memory_bytes
    for devices, amount in on_devices.items():  # a configuration's devices are distinct
        memory[np.asarray(devices, dtype=np.int64)] += amount
    # one pair per edge, memoised on the fresh model by the edge's signature (as `model.node` is):
    # a model's repeated blocks price each pair once (gpt3-175B's 1,543 edges: 0.4 s -> 0.02 s)
    redistribution = sum(float(model.edge_matrices(graph, edge, (configs[edge.src],), (configs[edge.dst],))[1][0, 0])
                         for edge in graph.edges)
    return PlanPrice(operators, float(redistribution), memory)
