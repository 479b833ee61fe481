"""Convolutional building blocks shared by the image models (torchvision conventions)."""
from __future__ import annotations

from typing import Sequence

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Tensor


def image_input(b: GraphBuilder, batch: int, channels: int, image: int) -> Tensor:
    """Model input of `batch` NCHW images, `channels` x `image` x `image`."""
    return b.input((batch, channels, image, image), name="images")


def conv_bn_relu(b: GraphBuilder, x: Tensor, out_channels: int, kernel, stride=1, padding=0,
                 relu: bool = True) -> Tensor:
    """Bias-free convolution followed by batch normalisation (the bias would be cancelled by it)."""
    x = b.batchnorm(b.conv2d(x, out_channels, kernel, stride, padding))
    return b.relu(x) if relu else x


def conv_relu(b: GraphBuilder, x: Tensor, out_channels: int, kernel, stride=1, padding=0) -> Tensor:
    """Convolution with bias and ReLU, as in networks without batch normalisation (AlexNet, VGG)."""
    return b.relu(b.conv2d(x, out_channels, kernel, stride, padding, bias=True))


def adaptive_avg_pool(b: GraphBuilder, x: Tensor, size: int) -> Tensor:
    """Average-pool to size x size, as torchvision's AdaptiveAvgPool2d does for inputs at least
    that large. An input already of that size is left alone (the pool would be the identity); a
    smaller one too, since there is no upsampling operator: the classifier then sees fewer features."""
    height, width = x.shape[2:]
    if (height, width) == (size, size) or min(height, width) < size:
        return x
    stride = (height // size, width // size)
    kernel = (height - (size - 1) * stride[0], width - (size - 1) * stride[1])
    return b.pool2d(x, "avg", kernel, stride)


def classifier(b: GraphBuilder, x: Tensor, hidden: Sequence[int], classes: int) -> Tensor:
    """Flatten, then dropout + linear + ReLU per hidden width, then the class logits and the loss."""
    x = b.flatten(x)
    for width in hidden:
        x = b.relu(b.linear(b.dropout(x), width))
    return b.softmax_cross_entropy(b.linear(x, classes, name="fc"))
