"""Hybrid training plans (question 5): data x tensor x pipeline parallelism, micro-batches,
recomputation and ZeRO sharding in one search. Front doors: `plan_hybrid`, `evaluate`."""
from solver_plan.hybrid.plan import HybridPlan, HybridResult
from solver_plan.hybrid.search import evaluate, plan_hybrid

__all__ = ["HybridPlan", "HybridResult", "evaluate", "plan_hybrid"]
