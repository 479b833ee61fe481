"""`StrategySimulator`: a strategy's task graph kept live, re-simulated fully or by delta after one
operator's configuration changes; `simulate_strategy` for a one-off simulation."""
from __future__ import annotations

from collections.abc import Mapping

from solver_plan.cluster import Cluster
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.model import CostModel
from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph
from solver_plan.simulate.engine import TaskEngine
from solver_plan.simulate.lowering import Lowering, OpTasks
from solver_plan.simulate.timeline import Simulation, snapshot


class StrategySimulator:
    """Holds one strategy's tasks. `load` builds and runs the full simulation; `change` swaps one
    operator's configuration and runs the delta simulation (or the full one with delta=False)."""

    def __init__(self, graph: Graph, cluster: Cluster, cost_model: CostModel | None = None,
                 lowering: Lowering | None = None):
        self.graph = graph
        self.cluster = cluster
        self.lowering = lowering or Lowering(graph, cost_model or CostModel(cluster))
        self.engine = TaskEngine()
        self.strategy: dict[str, ParallelConfig] = {}
        self._ops: dict[str, OpTasks] = {}
        self._edges: dict[int, tuple[int, ...]] = {}
        self.iteration_s: float | None = 0.0  # None after unsimulated changes

    def load(self, strategy: Mapping[str, ParallelConfig]) -> float:
        """Build every task for `strategy` from scratch and simulate it fully; the iteration time."""
        missing = [name for name in self.lowering.order if name not in strategy]
        if missing:
            raise InputError(f"the strategy gives no configuration for operator {missing[0]!r}", "strategy")
        self.engine = TaskEngine()
        self.strategy = {name: strategy[name] for name in self.lowering.order}
        self._ops = {name: self.lowering.add_op(self.engine, name, self.strategy[name]) for name in self.lowering.order}
        self._edges = {i: self._add_edge(i) for i in range(len(self.lowering.edges))}
        self.iteration_s = self.engine.simulate_full()
        return self.iteration_s

    def change(self, name: str, cfg: ParallelConfig, delta: bool = True) -> float:
        """Give operator `name` configuration `cfg`; returns the new iteration time."""
        engine, lowering = self.engine, self.lowering
        incident = lowering.incident[name]
        for index in incident:
            for task in self._edges.pop(index):
                engine.remove_task(task)
        for task in self._ops.pop(name).all:
            engine.remove_task(task)
        self.strategy[name] = cfg
        self._ops[name] = lowering.add_op(engine, name, cfg)
        for index in incident:
            self._edges[index] = self._add_edge(index)
        self.iteration_s = engine.simulate_delta() if delta else engine.simulate_full()
        return self.iteration_s

    def change_many(self, changes: Mapping[str, ParallelConfig], simulate: bool = True) -> float | None:
        """Give several operators new configurations at once: their tasks and the tasks of every
        edge touching them are rebuilt (an edge between two changed operators once), the rest of the
        task graph is kept. With `simulate`, the delta simulation runs and the iteration time is
        returned; without, the changes wait for the next simulation (a rejected trial reverted
        this way costs no simulation: the engine's change records cover both)."""
        engine, lowering = self.engine, self.lowering
        unknown = [name for name in changes if name not in self.strategy]
        if unknown:
            raise InputError(f"the strategy has no operator {unknown[0]!r}", "strategy")
        names = [name for name, cfg in changes.items() if self.strategy[name] != cfg]
        edges = sorted({index for name in names for index in lowering.incident[name]})
        for index in edges:
            for task in self._edges.pop(index):
                engine.remove_task(task)
        for name in names:
            for task in self._ops.pop(name).all:
                engine.remove_task(task)
            self.strategy[name] = changes[name]
            self._ops[name] = lowering.add_op(engine, name, changes[name])
        for index in edges:
            self._edges[index] = self._add_edge(index)
        if not simulate:
            self.iteration_s = None  # unknown until the next simulation
            return None
        self.iteration_s = engine.simulate_delta()
        return self.iteration_s

    def _add_edge(self, index: int) -> tuple[int, ...]:
        edge = self.lowering.edges[index]
        return self.lowering.add_edge(self.engine, index, self.strategy[edge.src], self._ops[edge.src],
                                      self.strategy[edge.dst], self._ops[edge.dst])

    def timeline(self) -> dict[int, tuple[float, float]]:
        """(start, end) of every task by key: the same for equal strategies whatever the history."""
        engine = self.engine
        return {engine.key[t]: (engine.start[t], engine.end[t]) for t in engine.task_ids()}

    def result(self) -> Simulation:
        """The current timeline as a frozen `Simulation`."""
        return snapshot(self.engine, self.lowering)


def simulate_strategy(graph: Graph, cluster: Cluster, strategy: Mapping[str, ParallelConfig],
                      cost_model: CostModel | None = None) -> Simulation:
    """Simulate one training iteration of `graph` on `cluster` under `strategy` (op name -> config)."""
    simulator = StrategySimulator(graph, cluster, cost_model)
    simulator.load(strategy)
    return simulator.result()
