"""A planner run on a merged chain reports a lower bound of the chain the user gave."""
from solver_plan.cluster import resolve_cluster
from solver_plan.pipeline.api import EXACT_JOINT_LAYERS, plan_pipeline
from solver_plan.pipeline.sources import build_chain_problem


def test_exact_joint_bound_never_exceeds_a_full_chain_plan():
    problem = build_chain_problem("gpt2:layers=30,batch=2", resolve_cluster("v100x8-nvlink"), 8, memory=8e9)
    assert problem.layers > EXACT_JOINT_LAYERS  # the front door merges layers for exact-joint
    joint = plan_pipeline(problem, "exact-joint", "exact", time_limit=4)
    dp = plan_pipeline(problem, "pipedream", "1f1b*", time_limit=4)
    assert joint.lower_bound_s is not None and dp.period_s is not None
    assert joint.lower_bound_s <= dp.period_s * (1 + 1e-9)
    replaced = [note for note in joint.notes if "the full chain's load bound" in note]
    if replaced:  # the merged chain's bound was larger: the full chain's load bound stands in
        assert joint.lower_bound_s == problem.load_bound
    assert any("merged layers" in note for note in joint.notes)

