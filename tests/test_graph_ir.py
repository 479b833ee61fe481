import pytest

from solver_plan.errors import GraphError
from solver_plan.graph import Graph, GraphBuilder, Operator, OpType, Tensor
from solver_plan.graph.ir import freeze_attrs


def small_cnn():
    b = GraphBuilder("cnn")
    x = b.input((8, 3, 32, 32))
    y = b.conv2d(x, 16, 3, padding=1, name="conv")
    y = b.relu(y)
    left, right = b.split(y, (8, 8), axis=1, name="split")
    y = b.concat([b.relu(left), right], axis=1, name="concat")
    y = b.global_avg_pool(y)
    y = b.flatten(y)
    y = b.linear(y, 10, name="fc")
    b.softmax_cross_entropy(y)
    return b.build()


def test_builder_counts_flops_and_params():
    g = small_cnn()
    conv = g.op("conv")
    assert conv.output.shape == (8, 16, 32, 32)
    assert conv.params == 16 * 3 * 3 * 3
    assert conv.flops == 2 * 8 * 16 * 32 * 32 * 27
    fc = g.op("fc")
    assert fc.params == 16 * 10 + 10
    assert fc.flops == 2 * 8 * 16 * 10 + 8 * 10
    assert fc.backward_flops == 2 * fc.flops
    assert g.op("split").outputs[1].name == "split:1"


def test_topology_and_edges():
    g = small_cnn()
    order = g.topological_order
    assert order.index("split") < order.index("concat")
    assert set(g.predecessors("concat")) == {"split", "relu1"}
    assert ("split", "concat", "split:1") in {(e.src, e.dst, e.tensor) for e in g.edges}
    assert g.to_networkx().number_of_edges() == len({(e.src, e.dst) for e in g.edges})


def _op(name, op_type, inputs, outputs, **attrs):
    return Operator(name, op_type, tuple(inputs), tuple(outputs), freeze_attrs(attrs))


def test_unknown_input_names_operator():
    ops = (_op("a", OpType.UNARY, ["ghost"], [Tensor("a", (4,))], kind="relu"),)
    with pytest.raises(GraphError, match="operator 'a'.*ghost"):
        Graph("g", ops)


def test_duplicate_names():
    x = _op("x", OpType.INPUT, [], [Tensor("x", (4,))], shape=(4,))
    with pytest.raises(GraphError, match="duplicate"):
        Graph("g", (x, x))


def test_cycle_detected():
    ops = (
        _op("a", OpType.BINARY, ["x", "b"], [Tensor("a", (4,))], kind="add"),
        _op("b", OpType.UNARY, ["a"], [Tensor("b", (4,))], kind="relu"),
        _op("x", OpType.INPUT, [], [Tensor("x", (4,))], shape=(4,)),
    )
    with pytest.raises(GraphError, match="cycle"):
        Graph("g", ops)


def test_shape_mismatch_in_hand_made_graph():
    ops = (
        _op("x", OpType.INPUT, [], [Tensor("x", (4, 8))], shape=(4, 8)),
        _op("fc", OpType.LINEAR, ["x"], [Tensor("fc", (4, 3))], in_features=8, out_features=5, bias=True),
    )
    with pytest.raises(GraphError, match="operator 'fc'.*inferred"):
        Graph("g", ops)


@pytest.mark.parametrize("build", [
    lambda b, x: b.add_(x, b.input((4, 9), name="y")),
    lambda b, x: b.matmul(x, b.input((7, 2), name="y")),
    lambda b, x: b.concat([x, b.input((3, 9), name="y")], axis=1),
    lambda b, x: b.reshape(x, (5, 5)),
    lambda b, x: b.conv2d(x, 4, 3),
])
def test_builder_shape_errors_name_operator(build):
    b = GraphBuilder("g")
    x = b.input((4, 8))
    with pytest.raises(GraphError, match="operator"):
        build(b, x)


def test_builder_refuses_foreign_tensor():
    other = GraphBuilder("other").input((2, 2))
    b = GraphBuilder("g")
    b.input((3, 3))
    with pytest.raises(GraphError, match="not made by this builder"):
        b.relu(other)
