"""Pipelined model parallelism: chain problems, stage allocation and periodic schedules.

Front door: `plan_pipeline(problem, planner="madpipe", schedule="exact")` -> `PipelineResult`.
Allocation planners (registry kind "pipeline"): pipedream, madpipe, exact-joint. Schedulers (kind
"schedule"): 1f1b*, exact. Every pattern goes through `validate` (unrolling).
"""
from solver_plan.pipeline.allocation import Allocation, AllocationResult, Stage
from solver_plan.pipeline.api import PipelineResult, plan_pipeline
from solver_plan.pipeline.pattern import PeriodicPattern
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.validate import Validation, validate

__all__ = ["Allocation", "AllocationResult", "ChainProblem", "PeriodicPattern", "PipelineResult", "Stage",
           "Validation", "plan_pipeline", "validate"]
