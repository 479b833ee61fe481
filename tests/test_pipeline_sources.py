"""Chains from the three inputs (profiles, zoo graphs, pipeline blocks), and the slow oracle test."""
import random

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.graph.chain import LayerChain
from solver_plan.data import data_dir
from solver_plan.pipeline.api import plan_pipeline
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.pipeline.sources import chain_from_blocks, chain_from_model
from solver_plan.result import Status

BLOCKS = data_dir() / "pipeline-blocks"


def test_zoo_chain_times_come_from_the_cost_model():
    cluster = resolve_cluster("v100x8-nvlink")
    chain = chain_from_model("resnet50:batch=2,image=64", cluster)
    from solver_plan.graph.zoo import build_model
    graph = build_model("resnet50:batch=2,image=64")
    assert sum(chain.forward_s) == pytest.approx(graph.total_flops * cluster.w)
    assert sum(chain.backward_s) == pytest.approx(2 * sum(chain.forward_s))
    assert sum(chain.weight_bytes) == pytest.approx(4 * graph.total_params)
    assert chain.input_bytes == 2 * 3 * 64 * 64 * 4


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
    problem = ChainProblem(chain, 4, 60.0, 1.0)
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
