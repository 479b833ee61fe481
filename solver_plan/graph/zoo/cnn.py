"""Plain convolutional networks: LeNet-5, AlexNet and VGG-16 (torchvision layouts)."""
from __future__ import annotations

from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph
from solver_plan.graph.zoo.layers import adaptive_avg_pool, classifier, conv_relu, image_input
from solver_plan.graph.zoo.spec import ModelEntry

POOL = "M"
VGG16_LAYOUT = (64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, 512, 512, 512, POOL, 512, 512, 512, POOL)


def lenet(graph_name: str, *, batch: int, image: int, classes: int) -> Graph:
    """LeNet-5 (LeCun et al. 1998) on grey images: tanh activations and average-pool subsampling."""
    b = GraphBuilder(graph_name)
    x = image_input(b, batch, 1, image)
    for channels in (6, 16):
        x = b.pool2d(b.unary(b.conv2d(x, channels, 5, bias=True), "tanh"), "avg", 2)
    x = b.flatten(x)
    for width in (120, 84):
        x = b.unary(b.linear(x, width), "tanh")
    b.softmax_cross_entropy(b.linear(x, classes, name="fc"))
    return b.build()


def alexnet(graph_name: str, *, batch: int, image: int, classes: int) -> Graph:
    """AlexNet (Krizhevsky et al. 2012, torchvision's layout): five convolutions, then a 4096-4096 classifier.
    """
    b = GraphBuilder(graph_name)
    x = image_input(b, batch, 3, image)
    x = b.pool2d(conv_relu(b, x, 64, 11, 4, 2), "max", 3, 2)
    x = b.pool2d(conv_relu(b, x, 192, 5, 1, 2), "max", 3, 2)
    for channels in (384, 256, 256):
        x = conv_relu(b, x, channels, 3, 1, 1)
    x = adaptive_avg_pool(b, b.pool2d(x, "max", 3, 2), 6)
    classifier(b, x, (4096, 4096), classes)
    return b.build()


def vgg16(graph_name: str, *, batch: int, image: int, classes: int) -> Graph:
    """VGG-16 (Simonyan and Zisserman 2015, configuration D): thirteen 3x3 convolutions in five pooled groups,
    then a 4096-4096 classifier.
    """
    b = GraphBuilder(graph_name)
    x = image_input(b, batch, 3, image)
    for item in VGG16_LAYOUT:
        x = b.pool2d(x, "max", 2) if item == POOL else conv_relu(b, x, item, 3, 1, 1)
    classifier(b, adaptive_avg_pool(b, x, 7), (4096, 4096), classes)
    return b.build()


ENTRIES = (
    ModelEntry("lenet", "LeNet-5: two 5x5 convolutions with average pooling, three linear layers (~60K params)",
               {"batch": 64, "image": 32, "classes": 10}, lenet),
    ModelEntry("alexnet", "AlexNet (torchvision): five convolutions, three linear layers (61M params)",
               {"batch": 128, "image": 224, "classes": 1000}, alexnet),
    ModelEntry("vgg16", "VGG-16 (torchvision, configuration D): thirteen 3x3 convolutions, three linear layers (138M)",
               {"batch": 64, "image": 224, "classes": 1000}, vgg16),
)
