"""Graph IR, builder, model zoo and importers."""
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Edge, Graph, Measured, Operator, Tensor
from solver_plan.graph.ops import OpType

__all__ = ["Edge", "Graph", "GraphBuilder", "Measured", "Operator", "OpType", "Tensor"]
