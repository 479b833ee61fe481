"""Parallel configurations per operator type and the symbolic (SMSG) cost model."""
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.dims import Dimension, OpLayout, op_dimensions, op_layout
from solver_plan.cost.enumerate import data_parallel_config, enumerate_configs, single_device_config
from solver_plan.cost.model import CostModel, EdgeCost, NodeCost

__all__ = ["CostModel", "Dimension", "EdgeCost", "NodeCost", "OpLayout", "ParallelConfig",
           "data_parallel_config", "enumerate_configs", "op_dimensions", "op_layout",
           "single_device_config"]
