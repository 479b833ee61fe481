"""NCHW activations on tensor cores pay layout transposes around each convolution kernel."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.kernels import conv_kernel
from solver_plan.cost.model import CostModel
from solver_plan.errors import InputError
from solver_plan.graph.resolve import resolve_model
from solver_plan.intra.solve import solve
from solver_plan.planning import prepare_problem


def test_transpose_bytes_by_hand():
    # input 1000 B, output 3000 B, weights 10 B, 1x1 stride 1: I + P + A = 4010 B in NHWC
    nhwc = conv_kernel(750.0, 4, 1, 1, 1, 1, 1, 1000.0, 3000.0, 10.0, simt_fp32=False, cout=4)
    nchw = conv_kernel(750.0, 4, 1, 1, 1, 1, 1, 1000.0, 3000.0, 10.0, simt_fp32=False, cout=4, nchw=True)
    assert nhwc.hbm_bytes == pytest.approx(4010.0)
    assert nchw.hbm_bytes == pytest.approx(4010.0 + 2 * (1000.0 + 3000.0))
    assert nchw.flops == nhwc.flops
    # SIMT fp32 kernels read NCHW directly: no transposes
    simt = conv_kernel(750.0, 4, 1, 1, 1, 1, 1, 1000.0, 3000.0, 10.0, simt_fp32=True, cout=4, nchw=True)
    assert simt.hbm_bytes == pytest.approx(4010.0)


def _step(cluster, precision, memory_format):
    graph = resolve_model("resnet50:batch=32")
    problem, model = prepare_problem(graph, resolve_cluster(cluster, 1), None, precision=precision,
                                     memory_format=memory_format)
    result = solve(problem, "data-parallel")
    return result.objective


def test_nchw_is_slower_on_tensor_cores_only():
    assert _step("a100x8-80gb", "tf32", "nchw") > 1.05 * _step("a100x8-80gb", "tf32", "nhwc")
    assert _step("v100x8-nvlink", "fp32", "nchw") == pytest.approx(_step("v100x8-nvlink", "fp32", "nhwc"))


def test_bad_memory_format_names_the_option():
    with pytest.raises(InputError) as info:
        CostModel(resolve_cluster("a100x8-80gb"), memory_format="nwhc")
    assert "memory format" in str(info.value)
