"""Kernels of convolutions and memory-bound layers (cost/kernels.py), shared by the cost model and
the calibration, checked against hand calculations.

Device for the cost-model checks: 1 TFLOP/s, 1 GB/s HBM at efficiency 1 (no curves), 1 us per
kernel launch, so a kernel takes bytes / 1e9 + 1e-6 s whenever its bytes dominate its FLOPs.
"""
import pytest

from solver_plan.calibrate.profiles import layer_work
from solver_plan.cluster import Cluster, DeviceSpec, Link
from solver_plan.cost import CostModel, ParallelConfig
from solver_plan.cost.kernels import WINOGRAD_SAVING, conv_kernel, elementwise_kernels
from solver_plan.graph import GraphBuilder
from solver_plan.graph.importers.pipedream import ProfileNode

LAUNCH = 1e-6


def test_conv_kernel_winograd_only_for_fp32_3x3_stride1():
    # E = 100 outputs, cin 8, 3x3: 2 * 100 * 8 * 9 = 14400 FLOPs; Winograd / 2.25 = 6400
    fp32 = conv_kernel(100, 8, 3, 3, 1, 1, 1, input_bytes=10, output_bytes=20, parameter_bytes=5, simt_fp32=True)
    assert fp32.flops == pytest.approx(14400 / WINOGRAD_SAVING) == pytest.approx(6400)
    # input read once per tap: 10 x 9 + 5 + 20 = 115 bytes
    assert fp32.hbm_bytes == pytest.approx(115)
    tensor_cores = conv_kernel(100, 8, 3, 3, 1, 1, 1, 10, 20, 5, simt_fp32=False)
    assert tensor_cores.flops == pytest.approx(14400)  # implicit GEMM: no Winograd saving
    strided = conv_kernel(100, 8, 3, 3, 2, 2, 1, 10, 20, 5, simt_fp32=True)
    assert strided.flops == pytest.approx(14400)  # stride 2: no Winograd
    assert strided.hbm_bytes == pytest.approx(10 * 9 / 4 + 25)
    grouped = conv_kernel(100, 8, 3, 3, 1, 1, 4, 10, 20, 5, simt_fp32=True)
    assert grouped.flops == pytest.approx(2 * 100 * 2 * 9)  # groups: no Winograd, cin / 4 per output
    pointwise = conv_kernel(100, 8, 1, 1, 2, 2, 1, 10, 20, 5, simt_fp32=True)
    assert pointwise.hbm_bytes == pytest.approx(35)  # 1x1 stride 2 reads the input at most once


def test_elementwise_passes():
    bn_f, bn_b = elementwise_kernels("BatchNorm2d", 100, 100, 8, 25)
    assert (bn_f.hbm_bytes, bn_b.hbm_bytes) == (300, 500)  # stats + normalise; reduction + dx
    assert (bn_f.flops, bn_b.flops) == (8 * 25, 10 * 25)
    relu_f, relu_b = elementwise_kernels("ReLU", 100, 100, 0, 25)
    assert (relu_f.hbm_bytes, relu_b.hbm_bytes) == (200, 300)
    add_f, add_b = elementwise_kernels("Add", 100, 200, 0, 25)
    assert (add_f.hbm_bytes, add_b.hbm_bytes) == (300, 300)  # backward: the fork's gradient sum
    pool_f, pool_b = elementwise_kernels("MaxPool2d", 100, 400, 0, 25, window=9)
    assert (pool_f.hbm_bytes, pool_b.hbm_bytes) == (500, 600)
    assert pool_f.flops == 9 * 25


def test_profile_conv_uses_the_shared_definition():
    # a PipeDream Conv2d layer: 64 -> 64, 3x3 stride 1; output 4 MB, input 4 MB, weights 147456 B
    text = "Conv2d(64, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)"
    node = ProfileNode("node2", text, 1.0, 2.0, (4e6,), 147456, 3)
    work = layer_work(node, 4e6, False, "test")
    expected = conv_kernel(1e6, 64, 3, 3, 1, 1, 1, 4e6, 4e6, 147456, simt_fp32=True)
    assert work.forward[0].flops == pytest.approx(expected.flops)
    assert work.forward[0].hbm_bytes == pytest.approx(expected.hbm_bytes)
    assert len(work.backward) == 2


@pytest.fixture(scope="module")
def convnet():
    """x (2,4,8,8) -> c1 conv 3x3 (4->8) -> bn -> relu -> c2 conv 3x3 (8->8) -> add(c2, relu)."""
    b = GraphBuilder("convnet")
    x = b.input((2, 4, 8, 8), name="x")
    h = b.conv2d(x, 8, 3, padding=1, name="c1")
    h = b.batchnorm(h, name="bn")
    r = b.relu(h, name="r")
    c = b.conv2d(r, 8, 3, padding=1, name="c2")
    b.add_(c, r, name="add")
    return b.build()


@pytest.fixture(scope="module")
def model():
    device = DeviceSpec("dev", 1e12, 16e9, hbm_bandwidth=1e9, launch_overhead=LAUNCH)
    return CostModel(Cluster("one", 1, 1, device, Link(1e9, 0.0)), precision="fp32")


def seconds(model, graph, name):
    from solver_plan.cost.dims import op_layout
    op = graph.op(name)
    one_device = ParallelConfig(tuple((dim, 1) for dim in op_layout(op, graph).names), (0,))
    return model.node(graph, op, one_device).compute_s


def test_conv_priced_by_the_shared_kernel(model, convnet):
    # c2: E = 2*8*8*8 = 1024 outputs, A = 4096 B, I = 4096 B read 9 times = 36864 B, P = 8*8*9*4 = 2304 B;
    # 43264 B at 1 GB/s = 43.264 us >> 2*1024*8*9/2.25 = 65536 FLOPs at 1 TFLOP/s; forward + dX + dW
    assert seconds(model, convnet, "c2") == pytest.approx(3 * (43264e-9 + LAUNCH))
    # c1 reads the model input: no dX. I = 2*4*8*8*4 = 2048 B x 9, P = 8*4*9*4 = 1152 B, A = 4096 B
    assert seconds(model, convnet, "c1") == pytest.approx(2 * ((18432 + 1152 + 4096) * 1e-9 + LAUNCH))


def test_memory_bound_layers_priced_by_their_passes(model, convnet):
    a = 2 * 8 * 8 * 8 * 4  # 4096 bytes of output
    assert seconds(model, convnet, "bn") == pytest.approx((3 * a + 5 * a) * 1e-9 + 2 * LAUNCH)
    assert seconds(model, convnet, "r") == pytest.approx((2 * a + 3 * a) * 1e-9 + 2 * LAUNCH)
    assert seconds(model, convnet, "add") == pytest.approx((3 * a + 3 * a) * 1e-9 + 2 * LAUNCH)


def test_transformer_residual_add_keeps_the_generic_rule(model):
    # (2, 8, 16) add: A = 256 elements x 4 B = 1024 B; generic rule: 3 x the forward kernel reading
    # both inputs and writing the output (3A), not the 4-D table's 3A + 3A
    b = GraphBuilder("residual")
    x = b.input((2, 8, 16), name="x")
    h = b.relu(x, name="h")
    b.add_(h, x, name="add")
    graph = b.build()
    assert seconds(model, graph, "add") == pytest.approx(3 * (3 * 1024 * 1e-9 + LAUNCH))
