"""ResNet-50/101/152 (He et al. 2016) as in torchvision: bottleneck blocks, stride on the 3x3
convolution (v1.5), projection shortcuts where the shape changes."""
from __future__ import annotations

from functools import partial

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.zoo.layers import conv_bn_relu, image_input
from solver_plan.graph.zoo.spec import ModelEntry

BLOCKS_PER_STAGE = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
STAGE_WIDTHS = (64, 128, 256, 512)
EXPANSION = 4


def bottleneck(b: GraphBuilder, x: Tensor, width: int, stride: int) -> Tensor:
    """ResNet bottleneck block: 1x1, 3x3 (carrying the stride), 1x1 to EXPANSION x `width`, with a projection
    shortcut where the shape changes.
    """
    out_channels = width * EXPANSION
    y = conv_bn_relu(b, x, width, 1)
    y = conv_bn_relu(b, y, width, 3, stride, 1)
    y = conv_bn_relu(b, y, out_channels, 1, relu=False)
    shortcut = x
    if stride != 1 or x.shape[1] != out_channels:
        shortcut = conv_bn_relu(b, x, out_channels, 1, stride, relu=False)
    return b.relu(b.add_(y, shortcut))


def resnet(graph_name: str, *, depth: int, batch: int, image: int, classes: int) -> Graph:
    """ResNet of `depth` with bottleneck blocks (He et al. 2016, torchvision's layout): stem, four stages,
    global pooling, classifier.
    """
    b = GraphBuilder(graph_name)
    x = image_input(b, batch, 3, image)
    with b.scope("stem"):
        x = b.pool2d(conv_bn_relu(b, x, 64, 7, 2, 3), "max", 3, 2, 1)
    for stage, (blocks, width) in enumerate(zip(BLOCKS_PER_STAGE[depth], STAGE_WIDTHS)):
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            with b.scope(f"layer{stage + 1}/block{index}"):
                x = bottleneck(b, x, width, stride)
    x = b.flatten(b.global_avg_pool(x))
    b.softmax_cross_entropy(b.linear(x, classes, name="fc"))
    return b.build()


ENTRIES = tuple(
    ModelEntry(f"resnet{depth}", f"ResNet-{depth} (torchvision v1.5): bottleneck blocks {'-'.join(map(str, blocks))}",
               {"batch": 32, "image": 224, "classes": 1000}, partial(resnet, depth=depth))
    for depth, blocks in BLOCKS_PER_STAGE.items()
)
