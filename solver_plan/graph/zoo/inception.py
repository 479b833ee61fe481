"""Inception-v3 (Szegedy et al. 2016) as in torchvision, without the auxiliary classifier.

Each module runs parallel branches of conv+BN+ReLU and concatenates them along channels; the
factorised 1x7/7x1 and 1x3/3x1 convolutions are kept as separate operators.
"""
from __future__ import annotations

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Tensor
from solver_plan.graph.zoo.layers import conv_bn_relu, image_input
from solver_plan.graph.zoo.spec import ModelEntry

CHANNELS = 1  # concatenation axis of NCHW tensors


def conv(b: GraphBuilder, x: Tensor, out_channels: int, kernel, stride=1, padding=0) -> Tensor:
    """Inception's basic convolution: conv, batch norm, ReLU."""
    return conv_bn_relu(b, x, out_channels, kernel, stride, padding)


def pooled_projection(b: GraphBuilder, x: Tensor, out_channels: int) -> Tensor:
    """The pool branch of an Inception module: 3x3 average pooling, then a 1x1 convolution."""
    return conv(b, b.pool2d(x, "avg", 3, 1, 1), out_channels, 1)


def seven_by_seven(b: GraphBuilder, x: Tensor, widths, row_first: bool = True) -> Tensor:
    """A chain of factorised 7x7 convolutions alternating 1x7 and 7x1 (one width per step)."""
    for step, width in enumerate(widths):
        if (step % 2 == 0) == row_first:
            x = conv(b, x, width, (1, 7), padding=(0, 3))
        else:
            x = conv(b, x, width, (7, 1), padding=(3, 0))
    return x


def split_three(b: GraphBuilder, x: Tensor) -> list[Tensor]:
    """The widening pair of InceptionE: a 1x3 and a 3x1 convolution side by side."""
    return [conv(b, x, 384, (1, 3), padding=(0, 1)), conv(b, x, 384, (3, 1), padding=(1, 0))]


def inception_a(b: GraphBuilder, x: Tensor, pool_features: int) -> Tensor:
    """Inception-A module (torchvision's InceptionA): 1x1, 5x5, double 3x3 and pool branches."""
    branch5x5 = conv(b, conv(b, x, 48, 1), 64, 5, padding=2)
    branch3x3dbl = conv(b, conv(b, conv(b, x, 64, 1), 96, 3, padding=1), 96, 3, padding=1)
    return b.concat([conv(b, x, 64, 1), branch5x5, branch3x3dbl, pooled_projection(b, x, pool_features)], CHANNELS)


def inception_b(b: GraphBuilder, x: Tensor) -> Tensor:
    """Inception-B module (torchvision's InceptionB): grid reduction by stride-2 3x3, double 3x3 and max-pool
    branches.
    """
    branch3x3dbl = conv(b, conv(b, conv(b, x, 64, 1), 96, 3, padding=1), 96, 3, stride=2)
    return b.concat([conv(b, x, 384, 3, stride=2), branch3x3dbl, b.pool2d(x, "max", 3, 2)], CHANNELS)


def inception_c(b: GraphBuilder, x: Tensor, c7: int) -> Tensor:
    """Inception-C module (torchvision's InceptionC): 1x1, factorised 7x7, double factorised 7x7 and pool
    branches, `c7` channels inside.
    """
    branch7x7 = seven_by_seven(b, conv(b, x, c7, 1), (c7, 192))
    branch7x7dbl = seven_by_seven(b, conv(b, x, c7, 1), (c7, c7, c7, 192), row_first=False)
    return b.concat([conv(b, x, 192, 1), branch7x7, branch7x7dbl, pooled_projection(b, x, 192)], CHANNELS)


def inception_d(b: GraphBuilder, x: Tensor) -> Tensor:
    """Inception-D module (torchvision's InceptionD): grid reduction by stride-2 3x3, 7x7-then-3x3 and
    max-pool branches.
    """
    branch3x3 = conv(b, conv(b, x, 192, 1), 320, 3, stride=2)
    branch7x7x3 = conv(b, seven_by_seven(b, conv(b, x, 192, 1), (192, 192)), 192, 3, stride=2)
    return b.concat([branch3x3, branch7x7x3, b.pool2d(x, "max", 3, 2)], CHANNELS)


def inception_e(b: GraphBuilder, x: Tensor) -> Tensor:
    """Inception-E module (torchvision's InceptionE): 1x1, split 3x3, double split 3x3 and pool branches."""
    branch3x3 = split_three(b, conv(b, x, 384, 1))
    branch3x3dbl = split_three(b, conv(b, conv(b, x, 448, 1), 384, 3, padding=1))
    return b.concat([conv(b, x, 320, 1), *branch3x3, *branch3x3dbl, pooled_projection(b, x, 192)], CHANNELS)


MODULES = (
    ("Mixed_5b", inception_a, (32,)), ("Mixed_5c", inception_a, (64,)), ("Mixed_5d", inception_a, (64,)),
    ("Mixed_6a", inception_b, ()),
    ("Mixed_6b", inception_c, (128,)), ("Mixed_6c", inception_c, (160,)), ("Mixed_6d", inception_c, (160,)),
    ("Mixed_6e", inception_c, (192,)),
    ("Mixed_7a", inception_d, ()), ("Mixed_7b", inception_e, ()), ("Mixed_7c", inception_e, ()),
)


def inception_v3(graph_name: str, *, batch: int, image: int, classes: int) -> Graph:
    """Inception-v3 (Szegedy et al. 2016, torchvision's layout without the auxiliary head)."""
    b = GraphBuilder(graph_name)
    x = image_input(b, batch, 3, image)
    with b.scope("stem"):
        x = conv(b, conv(b, conv(b, x, 32, 3, stride=2), 32, 3), 64, 3, padding=1)
        x = b.pool2d(x, "max", 3, 2)
        x = b.pool2d(conv(b, conv(b, x, 80, 1), 192, 3), "max", 3, 2)
    for name, module, args in MODULES:
        with b.scope(name):
            x = module(b, x, *args)
    x = b.dropout(b.flatten(b.global_avg_pool(x)))
    b.softmax_cross_entropy(b.linear(x, classes, name="fc"))
    return b.build()


ENTRIES = (
    ModelEntry("inception_v3", "Inception-v3 (torchvision, no auxiliary head): 11 inception modules, 299x299 input",
               {"batch": 32, "image": 299, "classes": 1000}, inception_v3),
)
