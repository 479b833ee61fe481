"""Block configurations of a tensor-parallel stage use the whole submesh and split the weights t ways
(the memory terms divide the block's parameters by t), whatever the per-operator solver prefers."""
import math

import pytest

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


def test_runtimes_split_each_weight_along_one_dimension():
    """Megatron's column- and row-parallel layers (and torch's Colwise / Rowwise plans) split a weight
    along one dimension: a 2-D split (out=2, in=2) is no configuration these runtimes run, so the
    block solve never picks one; a runtime declared `tensor_parallel="any"` may."""
    from dataclasses import replace

    from solver_plan.errors import InputError
    from solver_plan.runtime.profiles import MEGATRON_CORE

    spec = transformer_spec(MODEL)
    graph = build_model(spec.block_spec(2))
    problem = build_config_problem(graph, resolve_cluster("h100-4x8-ib", 16).first_devices(4))
    q = problem.names.index(f"{spec.block_scope}self_attn/q")
    op = graph.op(problem.names[q])
    two_d = [c for c in problem.candidates[q] if len(c.devices) == 4
             and sum(1 for d in op_layout(op, graph).weight_dims if c.degree(d) > 1) == 2]
    assert two_d, "the enumeration offers 2-D splits of q on 4 devices"
    assert all(_tensor_parallel(op, c, graph, 4) and not _tensor_parallel(op, c, graph, 4, column_row=True)
               for c in two_d)
    profile = BlockCoster(spec, resolve_cluster("h100-4x8-ib", 16)).profile(4, 2)
    for name, text in profile.configs:
        block_op = graph.op(spec.block_scope + name)
        if block_op.op_type == OpType.LINEAR:
            degrees = dict(part.split("=") for part in text.split("@")[0].split(","))
            assert sum(1 for d in op_layout(block_op, graph).weight_dims if int(degrees.get(d, 1)) > 1) == 1, text
    assert replace(MEGATRON_CORE, tensor_parallel="any").tensor_parallel == "any"
    with pytest.raises(InputError, match="tensor_parallel"):
        replace(MEGATRON_CORE, tensor_parallel="2d")


def test_partial_sums_kept_split_by_sequence_are_reduce_scattered():
    """A row-parallel linear's partial sums feeding a residual split by sequence over the same two
    devices: the runtime reduce-scatters them (sequence parallelism) where the cost model all-reduces
    and slices, so all-reduce - reduce-scatter of the output is taken back, once; nothing when the
    consumer keeps the whole tensor."""
    from types import SimpleNamespace

    from solver_plan.cost.collectives import collective_time
    from solver_plan.cost.config import ParallelConfig
    from solver_plan.cost.model import CostModel
    from solver_plan.graph import GraphBuilder
    from solver_plan.hybrid.stage_cost import _reduce_scatter_savings

    b = GraphBuilder("rs")
    x = b.input((1, 16, 32), name="x")
    with b.scope("block0"):
        b.add_(x, b.linear(x, 32, False, name="fc"), name="residual")
    graph = b.build()
    cluster = resolve_cluster("h100-4x8-ib", 2)
    cost_model = CostModel(cluster, precision="bf16")
    row = ParallelConfig((("sample", 1), ("sequence", 1), ("out", 1), ("in", 2)), (0, 1))
    by_sequence = ParallelConfig((("sample", 1), ("sequence", 2), ("feature", 1)), (0, 1))
    replicated = ParallelConfig((("sample", 1), ("sequence", 1), ("feature", 1), ("replica", 2)), (0, 1))
    expected = (collective_time(cluster, "all_reduce", 16 * 32 * 2, 2, 2)
                - collective_time(cluster, "reduce_scatter", 16 * 32 * 2, 2, 2))
    assert expected > 0
    for consumer, saved in ((by_sequence, expected), (replicated, 0.0)):
        problem = SimpleNamespace(names=("block0/fc", "block0/residual"), edges=((0, 1),),
                                  candidates=((row,), (consumer,)))
        assert _reduce_scatter_savings(graph, problem, (0, 0), cluster, cost_model, "block0/") == \
            pytest.approx(saved)
