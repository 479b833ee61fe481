"""What the MCMC search minimises: the simulated iteration time (delta simulation per proposal) or
the sum cost model of the `ConfigProblem`. Both apply one change at a time and can undo it."""
from __future__ import annotations

from solver_plan.intra.problem import ConfigProblem
from solver_plan.simulate.simulator import StrategySimulator


class SumObjective:
    """problem.objective, updated incrementally from the changed node's cost and incident edges."""

    def __init__(self, problem: ConfigProblem):
        self.problem = problem
        self.adjacency = problem.neighbours()
        self.assignment: list[int] = []
        self.cost = 0.0
        self._undo: tuple[int, int, float] | None = None

    def load(self, assignment) -> float:
        """Start from `assignment`; its sum cost."""
        self.assignment = list(assignment)
        self.cost = self.problem.objective(self.assignment)
        return self.cost

    def _local(self, node: int, choice: int) -> float:
        p, a = self.problem, self.assignment
        total = float(p.node_costs[node][choice])
        for edge, other, is_source in self.adjacency[node]:
            matrix = p.edge_costs[edge]
            total += float(matrix[choice, a[other]] if is_source else matrix[a[other], choice])
        return total

    def change(self, node: int, choice: int) -> float:
        """Give `node` candidate `choice` (undoable once); the new sum cost, updated from the node's
        terms only."""
        old = self.assignment[node]
        self._undo = (node, old, self.cost)
        self.cost += self._local(node, choice) - self._local(node, old)
        self.assignment[node] = choice
        return self.cost

    def undo(self) -> None:
        """Undo the last `change`."""
        node, old, cost = self._undo
        self.assignment[node], self.cost = old, cost


class SimulatedObjective:
    """Iteration time of the strategy, by the execution simulator: on each change the delta
    simulation, or with delta=False the full one (task graph rebuilt and simulated from scratch)."""

    def __init__(self, problem: ConfigProblem, graph, cluster, cost_model, delta: bool = True):
        self.problem = problem
        self.delta = delta
        self.simulator = StrategySimulator(graph, cluster, cost_model)
        self.assignment: list[int] = []
        self.cost = 0.0
        self._undo: tuple[int, int, float] | None = None

    def load(self, assignment) -> float:
        """Start from `assignment`; its simulated iteration time (full simulation)."""
        self.assignment = list(assignment)
        p = self.problem
        self.cost = self.simulator.load({p.names[i]: p.candidates[i][c] for i, c in enumerate(assignment)})
        return self.cost

    def change(self, node: int, choice: int) -> float:
        """Give `node` candidate `choice` (undoable once); the new iteration time, by delta simulation
        unless built with `delta=False`."""
        old = self.assignment[node]
        self._undo = (node, old, self.cost)
        self.assignment[node] = choice
        self.cost = self._apply(node, choice)
        return self.cost

    def undo(self) -> None:
        """Undo the last `change` (re-simulating the old choice)."""
        node, old, cost = self._undo
        self.assignment[node] = old
        self._apply(node, old)
        self.cost = cost

    def _apply(self, node: int, choice: int) -> float:
        name, cfg = self.problem.names[node], self.problem.candidates[node][choice]
        if self.delta:
            return self.simulator.change(name, cfg)
        strategy = dict(self.simulator.strategy)
        strategy[name] = cfg
        return self.simulator.load(strategy)


def simulatable(problem: ConfigProblem) -> bool:
    """Whether the problem carries the graph, cluster and cost model it was built from, one node
    per operator (a simplified problem merges nodes and cannot be simulated directly)."""
    if problem.context is None:
        return False
    graph = problem.context[0]
    return len(problem.names) == len(graph) and all(m == (n,) for n, m in zip(problem.names, problem.members)) \
        and set(problem.names) == set(graph.topological_order)
