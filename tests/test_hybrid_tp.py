"""Block configurations of a tensor-parallel stage use the whole submesh and split the weights t ways
(the memory terms divide the block's parameters by t), whatever the per-operator solver prefers."""
import math

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.dims import op_layout
from solver_plan.deadline import time_budget
from solver_plan.graph.ops import OpType
from solver_plan.graph.zoo import build_model
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.stage_cost import BlockCoster, _tensor_parallel
from solver_plan.intra.build import build_config_problem

MODEL = "gpt2:layers=8,seq=128"


def test_small_block_pinned_to_tp4_uses_all_four_devices():
    """The interop engineer's case: with tp = 4 pinned, a small block is cheapest on one device (no
    collectives), but the plan counts 4 devices and divides the weights by 4: every operator must run
    on the 4 devices, and q, k, v, the MLP and the attention split their weights / heads 4 ways."""
    spec = transformer_spec(MODEL)
    profile = BlockCoster(spec, resolve_cluster("h100-4x8-ib", 16)).profile(4, 4)
    configs = dict(profile.configs)
    assert all(text.endswith("@4") for text in configs.values()), configs
    graph = build_model(spec.block_spec(4))
    for name in ("q", "k", "v", "out", "fc1", "fc2"):
        op = graph.op(f"{spec.block_scope}{'mlp' if name.startswith('fc') else 'self_attn'}/{name}")
        degrees = dict(part.split("=") for part in configs[op.name[len(spec.block_scope):]].split("@")[0].split(","))
        assert math.prod(int(degrees.get(d, 1)) for d in op_layout(op, graph).weight_dims) == 4


def test_tensor_parallel_filter_refuses_idle_devices_and_replicated_weights():
    spec = transformer_spec(MODEL)
    graph = build_model(spec.block_spec(2))
    problem = build_config_problem(graph, resolve_cluster("h100-4x8-ib", 16).first_devices(4))
    q = problem.names.index(f"{spec.block_scope}self_attn/q")
    op = graph.op(problem.names[q])
    assert op.op_type == OpType.LINEAR
    verdicts = [(len(c.devices), _tensor_parallel(op, c, graph, 4)) for c in problem.candidates[q]]
    assert not any(ok for n, ok in verdicts if n < 4)  # fewer devices: refused
    assert any(ok for n, ok in verdicts)  # Megatron's column split is kept
    assert all(_tensor_parallel(op, c, graph, 1) for c in problem.candidates[q])  # tp = 1: anything goes


def test_siblings_reading_one_tensor_share_one_input_gradient_all_reduce():
    """q, k and v read the same normalised tensor under one configuration: their input gradients are
    summed locally and all-reduced once (as Megatron's fused QKV), so the block is priced with two
    all-reduces and two redistributions fewer than the cost model's per-operator sum; nothing is
    taken back without tensor parallelism."""
    from solver_plan.hybrid.stage_cost import _restrict, _shared_input_savings
    from solver_plan.intra.solve import solve

    spec = transformer_spec("gpt2:layers=2,hidden=1024,heads=16,head_dim=64,ffn=4096,seq=1024,positions=1024")
    graph = build_model(spec.block_spec(2))
    cluster = resolve_cluster("a100-80gb-superpod", 8)
    saved = {}
    for tp in (1, 4):
        problem = _restrict(build_config_problem(graph, cluster.first_devices(tp)), graph, tp)
        result = solve(problem, "milp", deadline=time_budget(20))
        cost_model = problem.context[2]
        saved[tp], forward = _shared_input_savings(graph, problem, result.assignment, cost_model, spec.block_scope)
        configs = {problem.names[i]: problem.candidates[i][a] for i, a in enumerate(result.assignment)}
        if tp == 4 and configs["block0/self_attn/q"] == configs["block0/self_attn/k"] == configs["block0/self_attn/v"]:
            k = graph.op("block0/self_attn/k")
            one = cost_model.node(graph, k, configs[k.name]).comm_s
            assert saved[tp] >= 2 * (one - cost_model._node(graph, k, configs[k.name], (False,)).comm_s) > 0
        assert 0 <= forward <= saved[tp]
    assert saved[1] == 0.0 and saved[4] > 0.0
