"""Parallel configurations per operator type and the cost model: precision, compute, collectives."""
from solver_plan.cost.collectives import collective_time, gradient_sync_time
from solver_plan.cost.compute import compute_time, matmul_time
from solver_plan.cost.config import REPLICA, ParallelConfig
from solver_plan.cost.dims import Dimension, OpLayout, op_dimensions, op_layout
from solver_plan.cost.enumerate import data_parallel_config, enumerate_configs, single_device_config
from solver_plan.cost.model import CostModel, EdgeCost, NodeCost
from solver_plan.cost.precision import Precision, TrainingPrecision, default_for

__all__ = ["REPLICA", "CostModel", "Dimension", "EdgeCost", "NodeCost", "OpLayout", "ParallelConfig", "Precision",
           "TrainingPrecision", "collective_time", "compute_time", "data_parallel_config", "default_for",
           "enumerate_configs", "gradient_sync_time", "matmul_time", "op_dimensions", "op_layout",
           "single_device_config"]
