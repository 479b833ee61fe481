"""The model-state module (cost/model_state.py, issue 21): bytes per parameter by optimizer, precision
and sharding, by hand, and the same bytes from the per-operator, pipeline and hybrid memory."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.model import CostModel
from solver_plan.cost.model_state import ParameterState, state_per_parameter
from solver_plan.cost.precision import ParameterBytes, TrainingPrecision
from solver_plan.errors import InputError
from solver_plan.hybrid import memory as hybrid
from solver_plan.pipeline.memory import model_state

MIXED, FP32, FP8 = TrainingPrecision.mixed("bf16"), TrainingPrecision.fp32(), TrainingPrecision.mixed("fp8")
FP16 = TrainingPrecision.mixed("fp16")


@pytest.mark.parametrize("precision, optimizer, terms", [
    # ZeRO section 3.1: fp16/bf16 weights 2 + gradients 2 + K = 12 (fp32 master 4, momentum 4, variance 4)
    (MIXED, "adam", (2, 2, 4, 8, 0)),
    (FP16, "adam", (2, 2, 4, 8, 0)),
    (FP8, "adam", (2, 2, 4, 8, 0)),  # Transformer Engine keeps bf16 weights and gradients
    (FP32, "adam", (4, 4, 0, 8, 0)),  # no master copy: 16 as well
    (MIXED, "sgd-momentum", (2, 2, 4, 4, 0)),
    (FP32, "sgd-momentum", (4, 4, 0, 4, 0)),
    (MIXED, "sgd", (2, 2, 4, 0, 0)),
    (FP32, "sgd", (4, 4, 0, 0, 0)),
    (FP32, "pipedream", (4, 4, 0, 0, 4)),  # two weight versions and a gradient: 3 w
    (MIXED, "PipeDream", (2, 2, 0, 0, 2)),
])
def test_bytes_per_parameter_by_hand(precision, optimizer, terms):
    state = state_per_parameter(precision, optimizer)
    assert (state.weights, state.gradients, state.master, state.moments, state.weight_version) == terms
    assert state.total == sum(terms)
    assert state.optimizer == terms[2] + terms[3]


def test_adam_is_sixteen_bytes_in_every_precision():
    assert {state_per_parameter(p).total for p in (MIXED, FP16, FP8, FP32)} == {16}


@pytest.mark.parametrize("zero, expected", [(0, 16), (1, 2 + 2 + 12 / 8), (2, 2 + (2 + 12) / 8), (3, 16 / 8)])
def test_zero_stages_divide_by_the_shard_group(zero, expected):
    """Rajbhandari et al. 2020, figure 1 with N_d = 8: 16 P, 5.5 P (P_os), 3.75 P (P_os+g), 2 P (P_os+g+p)."""
    state, params = state_per_parameter(MIXED), 1e9
    total = sum(state.sharded_bytes(term, params, zero, 8) for term in ("weights", "gradients", "optimizer"))
    assert total == pytest.approx(expected * params)


def test_runtime_rules_in_mixed_precision():
    mixed = state_per_parameter(MIXED)
    megatron = mixed.for_runtime(fp32_gradients=True, sharded_fp32_params=False)
    assert (megatron.weights, megatron.gradients, megatron.optimizer, megatron.total) == (2, 4, 12, 18)
    fsdp2 = mixed.for_runtime(fp32_gradients=True, sharded_fp32_params=True)
    assert (fsdp2.weights, fsdp2.gradients, fsdp2.optimizer, fsdp2.total) == (2, 4, 10, 16)
    assert mixed.for_runtime(fp32_gradients=False, sharded_fp32_params=False) is mixed
    fp32 = state_per_parameter(FP32)
    assert fp32.for_runtime(fp32_gradients=True, sharded_fp32_params=True) is fp32  # no master: unchanged


def test_bad_input_is_one_clear_input_error():
    with pytest.raises(InputError, match="unknown optimizer 'lamb'; expected one of adam"):
        state_per_parameter(MIXED, "lamb")
    with pytest.raises(ValueError, match="model state.gradients"):  # InputError is a ValueError
        ParameterState(2.0, -1.0)
    with pytest.raises(InputError, match="must be positive"):
        hybrid.StateBytes(state_per_parameter(MIXED), 0.0)
    with pytest.raises(InputError, match="ParameterState"):
        hybrid.StateBytes(16.0, 2.0)


@pytest.mark.parametrize("precision", [MIXED, FP16, FP8, FP32], ids=lambda p: p.name)
def test_every_question_keeps_the_same_bytes_per_parameter(precision):
    """Adam, unsharded: per-operator memory (CostModel), pipeline (ModelState) and hybrid (StateBytes
    and its ZeRO-0 terms) give the model-state module's bytes."""
    expected = state_per_parameter(precision, "adam").total
    cluster = resolve_cluster("h100-4x8-ib" if precision.compute.value == "fp8" else "a100x8-80gb")
    assert CostModel(cluster, precision=precision).parameter_bytes() == expected
    assert precision.bytes_per_parameter().total == expected
    assert model_state(precision, "adam").bytes_per_parameter == expected
    state = hybrid.precision_state(precision)
    assert state.weights + state.gradients + state.optimizer == expected
    assert (hybrid.weights_bytes(1.0, 8, 0, state) + hybrid.gradients_bytes(1.0, 8, 0, state)
            + hybrid.optimizer_bytes(1.0, 8, 0, state)) == expected


@pytest.mark.parametrize("zero", [0, 1, 2, 3])
@pytest.mark.parametrize("precision", [MIXED, FP32], ids=lambda p: p.name)
def test_hybrid_zero_terms_are_the_module_sharding(precision, zero):
    state, params, shard = hybrid.precision_state(precision), 3.0e8, 16
    model = state_per_parameter(precision)
    assert hybrid.weights_bytes(params, shard, zero, state) == model.sharded_bytes("weights", params, zero, shard)
    assert hybrid.gradients_bytes(params, shard, zero, state) == model.sharded_bytes("gradients", params, zero, shard)
    assert hybrid.optimizer_bytes(params, shard, zero, state) == model.sharded_bytes("optimizer", params, zero, shard)


@pytest.mark.parametrize("moments, optimizer", [(2, "adam"), (1, "sgd-momentum"), (0, "sgd")])
def test_per_operator_moments_match_the_pipeline_optimizers(moments, optimizer):
    """The per-operator cost model counts `TrainingPrecision.num_moments`; the pipeline names the
    optimizer: the same state for the same number of moments."""
    from dataclasses import replace

    precision = replace(MIXED, num_moments=moments)
    assert precision.bytes_per_parameter() == state_per_parameter(MIXED, optimizer)
    assert model_state(MIXED, optimizer).bytes_per_parameter == precision.bytes_per_parameter().total


def test_old_names_are_the_module_types():
    assert ParameterBytes is ParameterState
    assert hybrid.MIXED_PRECISION == hybrid.precision_state(TrainingPrecision.mixed())
    assert hybrid.MIXED_PRECISION.model == state_per_parameter(MIXED)
