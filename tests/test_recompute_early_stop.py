"""Full recomputation under an early-stopping checkpoint (torch.utils.checkpoint non-reentrant, torch >= 2.1):
the block's tail after its last tensor saved for backward is not recomputed (hybrid/stage_cost.py
recompute_tail_s, Kernels.recompute_early_stop), by hand on a GPT-2 and a Llama block; a reentrant runtime
(megatron-core) repeats the whole forward."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.activations import saves_input, saves_own_output
from solver_plan.graph.resolve import resolve_model
from solver_plan.hybrid.evaluate import Context, layer_s, price
from solver_plan.hybrid.memory import runtime_state, state_bytes
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.stage_cost import BlockCoster, recompute_tail_s
from solver_plan.runtime import RUNTIMES

CLUSTER = resolve_cluster("h100-4x8-ib", 8)
GPT = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=1024,positions=1024,vocab=32000"
LLAMA = "data/published/models/llama-3.1-8b.json:seq=1024"  # meta-llama/Llama-3.1-8B's config.json


def _block(model):
    spec = transformer_spec(model)
    graph = resolve_model(spec.block_spec(1))
    return spec, graph, [n for n in graph.topological_order if n.startswith(spec.block_scope)]


def test_the_tail_is_the_last_projection_and_the_residual_add():
    """Each operator's forward seconds set to a distinct power of two: the tail's sum names exactly which
    operators it counts (GPT-2: fc2 and the residual add; Llama: down_proj and the residual add)."""
    for model, last in ((GPT, "mlp/fc2"), (LLAMA, "mlp/down_proj")):
        spec, graph, names = _block(model)
        seconds = {name: 2.0 ** i for i, name in enumerate(names)}
        tail = recompute_tail_s(graph, spec.block_scope, seconds)
        assert names[-2].endswith(last) and names[-1].endswith("mlp/residual")
        assert tail == seconds[names[-2]] + seconds[names[-1]]


def test_which_operators_save_for_backward():
    spec, graph, names = _block(LLAMA)
    saving = {name.split("/", 1)[1]: saves_input(graph.op(name)) or saves_own_output(graph.op(name))
              for name in names}
    assert not saving["self_attn/residual"] and not saving["mlp/residual"]  # additions pass the gradient through
    assert saving["mlp/gated"] and saving["mlp/act_sigmoid"] and saving["self_attn/attention"]
    assert all(saving[n] for n in saving if n.endswith(("_proj", "layernorm")))


@pytest.mark.parametrize("model", [GPT, LLAMA])
def test_full_recomputation_repeats_the_forward_less_the_tail_only_where_the_runtime_stops_early(model):
    spec = transformer_spec(model)
    titan, core = RUNTIMES["torchtitan"], RUNTIMES["megatron-core"]
    assert titan.kernels.recompute_early_stop and not core.kernels.recompute_early_stop
    stopping = BlockCoster(spec, CLUSTER, runtime=titan).profile(1, 1)
    whole = BlockCoster(spec, CLUSTER, runtime=core).profile(1, 1)
    assert whole.recompute_skip_s == 0.0 and whole.full_recompute_s == whole.block_forward_s
    assert 0.0 < stopping.recompute_skip_s < stopping.block_forward_s
    par = Parallelism(8, 1, 1, 1, 2, recompute="full", zero_stage=1)
    assert layer_s(par, stopping)[1] == pytest.approx(stopping.block_forward_s - stopping.recompute_skip_s)
    ctx = Context(spec, CLUSTER, 16, None, runtime_state(state_bytes(CLUSTER.device), titan), runtime=titan)
    plan = price(ctx, par, stopping, None, layers=(spec.layers,))
    assert plan.stages[0].recompute_s == pytest.approx(spec.layers * stopping.full_recompute_s)
