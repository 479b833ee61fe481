"""A hybrid plan's pipeline executed: its stage allocation and schedule run with
torch.distributed.pipelining on pp gloo CPU processes give one process's loss and gradients
(solver_plan/export/pipeline_run.py)."""
from __future__ import annotations

import pytest

import json

from test_export import hybrid_plan
from solver_plan.resources import REPO_ROOT

# the hybrid planner's own plan: GPT-2 (8 layers) on 8 devices, pp 2 with 4 virtual stages each,
# 2 micro-batches of 16, full recomputation (tests/fixtures/plans)
PLANNED = json.loads((REPO_ROOT / "tests" / "fixtures" / "plans" / "hybrid-gpt2-full.json").read_text())
# the hybrid planner's zero-bubble plans (8 layers, pp 4, 32 micro-batches): ZB-V (torch's
# ScheduleZBVZeroBubble, two chunks a rank in a V) and zb-exact (its periodic pattern unrolled into the
# schedule CSV the torchtitan export writes, run by torch's _PipelineScheduleRuntime)
ZBV = json.loads((REPO_ROOT / "tests" / "fixtures" / "plans" / "hybrid-gpt2-zbv.json").read_text())
ZB_EXACT = json.loads((REPO_ROOT / "tests" / "fixtures" / "plans" / "hybrid-gpt2-zbexact.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize("plan", [
    hybrid_plan(dp=1, tp=1, pp=2, micro=2, micro_batches=4, layers=(3, 5)),  # uneven 1F1B
    hybrid_plan(dp=1, tp=1, pp=2, micro=1, micro_batches=4, layers=(4, 4), v=2, schedule="interleaved"),
    PLANNED, ZBV, ZB_EXACT,
], ids=["1f1b-uneven", "interleaved", "planned-interleaved", "planned-zb-v", "planned-zb-exact-csv"])
def test_pipeline_plan_runs_on_gloo_processes(plan):
    pytest.importorskip("torch")
    from solver_plan.export.pipeline_run import run_pipeline_plan
    result = run_pipeline_plan(plan)
    layers = sum(s["num_layers"] for s in plan["stages"])
    # every parameter got its gradient on exactly one rank: embedding, 6 per block, norm and head (2 each)
    assert result["parameters_with_gradients"] == 1 + 6 * layers + 4
    assert result["loss_error"] < 1e-12 and result["grad_error"] < 1e-12  # float64
