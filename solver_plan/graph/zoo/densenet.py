"""DenseNet-121/169 (Huang et al. 2017) as in torchvision: dense blocks of pre-activation bottleneck
layers (BN-ReLU-1x1 conv to bn_size x growth channels, BN-ReLU-3x3 conv to growth channels), each
layer reading the concatenation of the block input and every earlier layer's output; transitions
BN-ReLU-1x1 conv halving the channels, then 2x2 average pooling; BN-ReLU, global pooling and the
classifier at the end. DenseNet-121 is one of the networks of the MadPipe comparison (Figure 7)."""
from __future__ import annotations

from functools import partial

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.zoo.layers import image_input
from solver_plan.graph.zoo.spec import ModelEntry

BLOCKS = {121: (6, 12, 24, 16), 169: (6, 12, 32, 32)}
GROWTH = 32
BN_SIZE = 4
INIT_FEATURES = 64
CHANNELS = 1  # concatenation axis of NCHW tensors


def dense_layer(b: GraphBuilder, inputs: list[Tensor]) -> Tensor:
    """One DenseNet layer: BN-ReLU-1x1 conv to BN_SIZE x GROWTH channels, then BN-ReLU-3x3 conv to GROWTH, on
    the concatenation of every earlier feature map of the block.
    """
    x = inputs[0] if len(inputs) == 1 else b.concat(inputs, CHANNELS)
    x = b.conv2d(b.relu(b.batchnorm(x)), BN_SIZE * GROWTH, 1)
    return b.conv2d(b.relu(b.batchnorm(x)), GROWTH, 3, 1, 1)


def transition(b: GraphBuilder, x: Tensor) -> Tensor:
    """DenseNet transition: BN-ReLU-1x1 conv halving the channels, then 2x2 average pooling."""
    x = b.conv2d(b.relu(b.batchnorm(x)), x.shape[CHANNELS] // 2, 1)
    return b.pool2d(x, "avg", 2, 2)


def densenet(graph_name: str, *, depth: int, batch: int, image: int, classes: int) -> Graph:
    """DenseNet-BC of `depth` (Huang et al. 2017, torchvision's layout): stem, dense blocks joined by
    transitions, global pooling and a classifier.
    """
    b = GraphBuilder(graph_name)
    x = image_input(b, batch, 3, image)
    with b.scope("stem"):
        x = b.relu(b.batchnorm(b.conv2d(x, INIT_FEATURES, 7, 2, 3)))
        x = b.pool2d(x, "max", 3, 2, 1)
    for index, layers in enumerate(BLOCKS[depth]):
        features = [x]
        for layer in range(layers):
            with b.scope(f"denseblock{index + 1}/layer{layer + 1}"):
                features.append(dense_layer(b, features))
        with b.scope(f"denseblock{index + 1}"):
            x = b.concat(features, CHANNELS)
        if index + 1 < len(BLOCKS[depth]):
            with b.scope(f"transition{index + 1}"):
                x = transition(b, x)
    x = b.flatten(b.global_avg_pool(b.relu(b.batchnorm(x, name="norm5"))))
    b.softmax_cross_entropy(b.linear(x, classes, name="fc"))
    return b.build()


ENTRIES = tuple(
    ModelEntry(f"densenet{depth}", f"DenseNet-{depth} (torchvision): dense blocks {'-'.join(map(str, blocks))}, "
               f"growth {GROWTH}, bottleneck {BN_SIZE}x", {"batch": 32, "image": 224, "classes": 1000},
               partial(densenet, depth=depth))
    for depth, blocks in BLOCKS.items()
)
