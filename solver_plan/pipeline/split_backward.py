"""A stage's backward split into its input-gradient pass B and its weight-gradient pass W
(Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, section 2).

B_s keeps the critical path between stages (the gradient sent to stage s - 1 needs only B_s); W_s
needs B_s of the same batch and nothing else, so a schedule may run it later. Until W_s ends the
batch's stored bytes abar_s stay on the processor (the weight gradient needs the stage's inputs
and the output gradients; B frees part of them in a real runtime, which this model does not
count: an upper bound of the memory). A stage's weight-gradient share `weight_share` of its
backward time: 1/2 when B and W cost the same, the paper's F = B = W.
"""
from __future__ import annotations

from dataclasses import replace

from solver_plan.errors import InputError
from solver_plan.pipeline.allocation import Allocation
from solver_plan.pipeline.operations import Operation, PipelineOps, pipeline_operations
from solver_plan.pipeline.problem import ChainProblem

EQUAL_PASSES = 0.5  # W = B: one weight-gradient GEMM per input-gradient GEMM (the paper's F = B = W)


def release_index(ops: PipelineOps, stage: int) -> int:
    """The operation whose end frees a batch's stored bytes on `stage`: W_s where the backward is
    split, else B_s."""
    names = {op.name: i for i, op in enumerate(ops.operations)}
    return names.get(f"W{stage}", names[f"B{stage}"])


def split_operations(problem: ChainProblem, allocation: Allocation, weight_share: float = EQUAL_PASSES) -> PipelineOps:
    """The allocation's operations with each B_s of duration (1 - w) b_s and a W_s of w b_s on the
    same processor after it (same batch); every other operation and dependency unchanged."""
    if not (isinstance(weight_share, (int, float)) and 0.0 <= weight_share < 1.0):
        raise InputError(f"weight_share must be in [0, 1), got {weight_share!r}", "split backward")
    ops = pipeline_operations(problem, allocation)
    operations = list(ops.operations)
    dependencies = list(ops.dependencies)
    for i, op in enumerate(ops.operations):
        if op.kind == "B":
            operations[i] = replace(op, duration=(1.0 - weight_share) * op.duration)
            dependencies.append((i, len(operations)))
            operations.append(Operation(f"W{op.stage}", "W", op.stage, op.resource, weight_share * op.duration))
    return replace(ops, operations=tuple(operations), dependencies=tuple(dependencies))
