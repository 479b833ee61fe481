"""Chains from the three inputs (profiles, zoo graphs, pipeline blocks), and the slow oracle test."""
import random

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.pipeline.chain import LayerChain
from solver_plan.data import data_dir
from solver_plan.pipeline.api import plan_pipeline
from solver_plan.pipeline.memory import pipedream_rule
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.sources import chain_from_blocks, chain_from_model
from solver_plan.result import Status

BLOCKS = data_dir() / "pipeline-blocks"


def _cost_model_total(graph, cluster, precision):
    """forward + backward seconds of every operator as `plan` prices it on one device."""
    from solver_plan.cost.enumerate import single_device_config
    from solver_plan.cost.model import CostModel
    model = CostModel(cluster, precision=precision)
    return sum(model.node(graph, graph.op(n), single_device_config(graph.op(n), graph)).compute_s
               for n in graph.topological_order)


@pytest.mark.parametrize("precision, element", [("fp32", 4), ("fp16", 2)])
def test_zoo_chain_times_come_from_the_cost_model(precision, element):
    """Layer times are the cost model's (roofline, the precision's compute dtype), not FLOPs x peak;
    weights and activations are in the precision's dtypes."""
    cluster = resolve_cluster("v100x8-nvlink")
    chain = chain_from_model("resnet50:batch=2,image=64", cluster, precision=precision)
    from solver_plan.graph.zoo import build_model
    graph = build_model("resnet50:batch=2,image=64")
    total = sum(chain.forward_s) + sum(chain.backward_s)
    assert total == pytest.approx(_cost_model_total(graph, cluster, precision))
    assert total > 3 * graph.total_flops * cluster.w  # below peak: efficiencies and memory bound
    assert sum(chain.backward_s) == pytest.approx(2 * sum(chain.forward_s))
    assert sum(chain.weight_bytes) == pytest.approx(element * graph.total_params)
    assert chain.input_bytes == 2 * 3 * 64 * 64 * element
    assert any(f"precision {'fp32' if element == 4 else 'mixed-fp16'}" in n for n in chain.notes)


def test_zoo_chain_auto_precision_is_the_devices_default():
    cluster = resolve_cluster("a100x8-80gb")
    auto = chain_from_model("gpt2:layers=2", cluster)
    bf16 = chain_from_model("gpt2:layers=2", cluster, precision="bf16")
    fp32 = chain_from_model("gpt2:layers=2", cluster, precision="fp32")
    assert auto == bf16 and sum(fp32.forward_s) > sum(bf16.forward_s)
    with pytest.raises(InputError, match="fp8"):
        chain_from_model("gpt2:layers=2", cluster, precision="fp8")  # A100 has no fp8 units


@pytest.mark.skipif(not BLOCKS.is_dir(), reason="no pipeline-blocks data")
def test_pipeline_blocks():
    chain = chain_from_blocks(BLOCKS / "zb1-5.json", blocks=8)
    assert len(chain) == 8 and chain.forward_s[0] == pytest.approx(11.57e-3)
    assert chain.backward_s[0] == pytest.approx((13.30 + 10.23) * 1e-3)
    assert chain.weight_bytes[0] == pytest.approx(243.11 * 2 ** 20)
    problem = ChainProblem(chain, 4, 16e9, 12e9)
    assert problem.stored(0, 0) == pytest.approx(364.5 * 2 ** 20)
    with pytest.raises(InputError, match="no per-block measurements"):
        chain_from_blocks(BLOCKS / "llama3-8.json")


def test_unknown_model_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such"):
        chain_from_model(str(tmp_path / "missing.json"), resolve_cluster("v100x8-nvlink"))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(3))
def test_oracle_on_12_layers_4_processors(seed):
    rng = random.Random(seed)
    L = 12
    chain = LayerChain.simple("r", [rng.randint(1, 4) for _ in range(L)], [rng.randint(1, 6) for _ in range(L)],
                              [rng.randint(0, 3) for _ in range(L)], [rng.randint(1, 3) for _ in range(L)], 2)
    # the instance this oracle was built on: PipeDream's 3 x W model state (with the fp32-Adam
    # default of 4 x W the 60-byte limit binds harder and exact-joint no longer proves within 120 s)
    problem = ChainProblem(chain, 4, 60.0, 1.0, pipedream_rule())
    joint = plan_pipeline(problem, "exact-joint", planner_options={"tick": 1.0}, time_limit=120)
    mad = plan_pipeline(problem, "madpipe", "exact", schedule_options={"tick": 1.0}, time_limit=60)
    pipedream = plan_pipeline(problem, "pipedream", "1f1b*")
    assert joint.valid and mad.valid
    assert joint.period_s <= mad.period_s + 1e-9
    if pipedream.valid:
        assert mad.period_s <= pipedream.period_s + 1e-9
    assert joint.status in (Status.OPTIMAL, Status.TIME_LIMIT)


def test_densenet121_matches_torchvision():
    # torchvision's densenet121: 7,978,856 parameters (torchvision.models docs, "DenseNet121_Weights")
    from solver_plan.graph.zoo import build_model
    graph = build_model("densenet121:batch=8,image=1000")
    assert graph.total_params == 7_978_856
    chain = chain_from_model("densenet121:batch=2,image=64", resolve_cluster("v100x8-nvlink"), processors=4)
    assert len(chain) == len(build_model("densenet121:batch=2,image=64").topological_order) - 1  # the input
