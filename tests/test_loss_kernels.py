"""The loss priced as the runtime's kernels move the logits (`Kernels.loss_kernel_bytes_per_logit`, one
definition in cost/model.py for the per-operator and the hybrid paths): megatron-core's unfused
vocabulary-parallel cross entropy is its counted passes over the logits' tile, each a memory-bound kernel
with its launch; runtimes whose loss was not counted keep the graph's roofline; a malformed count is refused."""
import math
from dataclasses import replace

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.compute import compute_time
from solver_plan.cost.config import ParallelConfig
from solver_plan.cost.enumerate import enumerate_configs
from solver_plan.cost.model import CostModel
from solver_plan.errors import InputError
from solver_plan.graph.ops import OpType
from solver_plan.graph.resolve import resolve_model
from solver_plan.hybrid.stage_cost import _compute_s
from solver_plan.runtime import RUNTIMES

GRAPH = resolve_model("gpt2:layers=1,hidden=256,heads=4,head_dim=64,ffn=1024,seq=512,positions=512,vocab=32000,batch=2")
CLUSTER = resolve_cluster("h100-80gb-superpod")
LOSS = next(GRAPH.op(n) for n in GRAPH.topological_order if GRAPH.op(n).op_type == OpType.SOFTMAX_CE)


def _config() -> ParallelConfig:
    return enumerate_configs(LOSS, GRAPH, 1)[0]  # on one device


def test_megatron_core_loss_is_its_counted_passes():
    model = CostModel(CLUSTER, runtime="megatron-core")
    cfg = _config()
    forward, backward = model.loss_seconds(GRAPH, LOSS, cfg)
    logits = float(math.prod(GRAPH.tensor(LOSS.inputs[0]).shape))  # one device: the whole tensor
    fwd_bytes, bwd_bytes = RUNTIMES["megatron-core"].kernels.loss_kernel_bytes_per_logit
    expect_f = (compute_time(CLUSTER, LOSS.flops, logits * fwd_bytes[0], unit="vector", dtype=model.precision.compute)
                + sum(compute_time(CLUSTER, 0.0, logits * b, unit="vector", dtype=model.precision.compute)
                      for b in fwd_bytes[1:]))
    expect_b = sum(compute_time(CLUSTER, 0.0, logits * b, unit="vector", dtype=model.precision.compute)
                   for b in bwd_bytes)
    assert forward == pytest.approx(expect_f) and backward == pytest.approx(expect_b)
    assert sum(fwd_bytes) == 38 and sum(bwd_bytes) == 14  # cross_entropy.py's passes, forward and backward
    # one definition: the per-operator node cost and the hybrid block cost take the same seconds
    assert model.node(GRAPH, LOSS, cfg).compute_s == pytest.approx(forward + backward)
    assert _compute_s(CLUSTER, model, GRAPH, LOSS, cfg, 1.0, "megatron-core") == pytest.approx((forward, backward))


@pytest.mark.parametrize("runtime", ["nemo", "llm-foundry"])
def test_runtimes_whose_loss_was_not_counted_keep_the_graphs_roofline(runtime):
    model = CostModel(CLUSTER, runtime=runtime)
    cfg = _config()
    assert model.loss_seconds(GRAPH, LOSS, cfg) is None
    forward, backward = _compute_s(CLUSTER, model, GRAPH, LOSS, cfg, 1.0, runtime)
    assert backward == pytest.approx(2 * forward)  # the roofline's 1 : 2 split


def test_the_counted_loss_costs_more_than_the_roofline():
    counted = CostModel(CLUSTER, runtime="megatron-core")
    roofline = CostModel(CLUSTER, runtime="nemo")
    cfg = _config()
    assert counted.node(GRAPH, LOSS, cfg).compute_s > roofline.node(GRAPH, LOSS, cfg).compute_s


@pytest.mark.parametrize("bad", [((1.0,),), ((), (1.0,)), ((1.0,), (-1.0,)), ((1.0,), (2.0,), (3.0,))])
def test_a_malformed_count_is_refused(bad):
    core = RUNTIMES["megatron-core"]
    with pytest.raises(InputError, match="loss_kernel_bytes_per_logit"):
        replace(core, kernels=replace(core.kernels, loss_kernel_bytes_per_logit=bad))


@pytest.mark.parametrize("runtime", ["megatron-core", "megatron-2021", "deepspeed", "deepspeed-bf16",
                                     "megatron-core-tp-overlap"])
def test_megatrons_vocabulary_parallel_loss_is_one_count(runtime):
    """Megatron-LM of 2021, Megatron-DeepSpeed and megatron-core's unfused path run the same
    vocabulary-parallel cross entropy: one count of its passes."""
    from solver_plan.runtime.profiles import VOCAB_PARALLEL_CROSS_ENTROPY_BYTES
    assert RUNTIMES[runtime].kernels.loss_kernel_bytes_per_logit == VOCAB_PARALLEL_CROSS_ENTROPY_BYTES
