"""ONNX import: models built with onnx.helper; parameters checked against the initializers and
FLOPs against the closed forms (and against the zoo's builder for the same network)."""
from __future__ import annotations

import math

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from solver_plan.errors import InputError  # noqa: E402
from solver_plan.graph.builder import GraphBuilder  # noqa: E402
from solver_plan.graph.importers.onnx_import import load_onnx  # noqa: E402
from solver_plan.graph.ops import OpType  # noqa: E402
from solver_plan.graph.resolve import resolve_model  # noqa: E402


def _init(name, *shape):
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def _save(tmp_path, nodes, inputs, outputs, inits, name="m.onnx"):
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / name
    onnx.save(model, str(path))
    return path


def _float_params(inits):
    return sum(math.prod(t.dims) for t in inits if t.data_type == TensorProto.FLOAT and math.prod(t.dims) > 1)


def mlp_model(tmp_path):
    """x(batch, 784) -> Gemm 256 -> Relu -> MatMul + Add 10 -> Softmax; batch symbolic."""
    inits = [_init("w1", 256, 784), _init("b1", 256), _init("w2", 256, 10), _init("b2", 10)]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["m"], name="fc2"),
             helper.make_node("Add", ["m", "b2"], ["y"], name="fc2_bias"),
             helper.make_node("Softmax", ["y"], ["p"], axis=-1, name="softmax")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])
    p = helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", 10])
    return _save(tmp_path, nodes, [x], [p], inits), inits


def test_mlp_params_flops_and_shapes(tmp_path):
    path, inits = mlp_model(tmp_path)
    g = load_onnx(path, {"batch": "32"})
    assert g.total_params == _float_params(inits) == 784 * 256 + 256 + 256 * 10 + 10
    linears = [op for op in g if op.op_type == OpType.LINEAR]
    assert [op.attr("bias") for op in linears] == [True, True]  # the Add was folded into fc2
    assert g.op("fc2").output.shape == (32, 10)
    # same network from the builder: identical FLOPs
    b = GraphBuilder("ref")
    b.softmax(b.linear(b.relu(b.linear(b.input((32, 784)), 256)), 10))
    assert g.total_flops == b.build().total_flops


def test_resolve_model_with_options(tmp_path):
    path, _ = mlp_model(tmp_path)
    g = resolve_model(f"{path}:batch=4")
    assert g.op("x").output.shape == (4, 784)


def test_unknown_dimension_names_tensor(tmp_path):
    path, _ = mlp_model(tmp_path)
    with pytest.raises(InputError, match=r"input tensor 'x' has an unknown dimension 'batch'.*:batch=N"):
        load_onnx(path)


def cnn_model(tmp_path):
    inits = [_init("c1", 16, 3, 3, 3), _init("bn_s", 16), _init("bn_b", 16), _init("bn_m", 16), _init("bn_v", 16),
             _init("fc", 10, 16), _init("fcb", 10)]
    nodes = [helper.make_node("Conv", ["img", "c1"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1], name="conv"),
             helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["mp"], kernel_shape=[2, 2], strides=[2, 2], name="pool"),
             helper.make_node("GlobalAveragePool", ["mp"], ["gp"], name="gap"),
             helper.make_node("Flatten", ["gp"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], transB=1, name="fc")]
    img = helper.make_tensor_value_info("img", TensorProto.FLOAT, [8, 3, 32, 32])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 10])
    return _save(tmp_path, nodes, [img], [y], inits), inits


def test_cnn_matches_builder(tmp_path):
    path, inits = cnn_model(tmp_path)
    g = load_onnx(path)
    # BatchNorm's running mean and variance are buffers, not parameters
    assert g.total_params == _float_params(inits) - 2 * 16
    b = GraphBuilder("ref")
    x = b.global_avg_pool(b.pool2d(b.relu(b.batchnorm(b.conv2d(b.input((8, 3, 32, 32)), 16, 3, 1, 1))), "max", 2))
    b.linear(b.flatten(x), 10)
    ref = b.build()
    assert g.total_flops == ref.total_flops
    assert [op.op_type for op in g] == [op.op_type for op in ref]


def attention_model(tmp_path, tied=False, kv_heads=4, leak_scores=False):
    """Token embedding, layer norm, one self-attention head group written as ONNX primitives
    (q/k/v MatMuls, Reshape/Transpose to heads, scores MatMul, scale, Softmax, context MatMul),
    residual, and an LM head (tied to the embedding through a Transpose when `tied`)."""
    n, s, h, heads, vocab = 2, 16, 32, 4, 100
    d = h // heads
    inits = [_init("wte", vocab, h), _init("ln_s", h), _init("ln_b", h), _init("wq", h, h),
             _init("wk", h, kv_heads * d), _init("wv", h, kv_heads * d), _init("wo", h, h),
             _ints("heads_shape", [n, s, heads, d]), _ints("kv_shape", [n, s, kv_heads, d]),
             _ints("merge_shape", [n, s, h]), numpy_helper.from_array(np.array(math.sqrt(d), np.float32), "scale")]
    nodes = [helper.make_node("Gather", ["wte", "ids"], ["e"], name="embed"),
             helper.make_node("LayerNormalization", ["e", "ln_s", "ln_b"], ["x"], axis=-1, name="ln")]
    for p in "qkv":
        nodes += [helper.make_node("MatMul", ["x", f"w{p}"], [f"{p}0"], name=f"{p}_proj"),
                  helper.make_node("Reshape", [f"{p}0", "heads_shape" if p == "q" else "kv_shape"], [f"{p}1"],
                                   name=f"{p}_split"),
                  helper.make_node("Transpose", [f"{p}1"], [p], perm=[0, 2, 1, 3] if p != "k" else [0, 2, 3, 1],
                                   name=f"{p}_heads")]
    nodes += [helper.make_node("MatMul", ["q", "k"], ["sc"], name="scores"),
              helper.make_node("Div", ["sc", "scale"], ["scs"], name="scale_div"),
              helper.make_node("Softmax", ["scs"], ["pr"], axis=-1, name="probs"),
              helper.make_node("MatMul", ["pr", "v"], ["ctx"], name="context"),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="merge_t"),
              helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"], name="merge"),
              helper.make_node("MatMul", ["ctx_m", "wo"], ["o"], name="o_proj"),
              helper.make_node("Add", ["x", "o"], ["res"], name="residual")]
    if leak_scores:  # the scores also feed something else: the pattern must stay unfused
        nodes.append(helper.make_node("ReduceMean", ["sc"], ["sc_mean"], name="leak"))
    if tied:
        nodes += [helper.make_node("Transpose", ["wte"], ["wte_t"], perm=[1, 0], name="wte_t"),
                  helper.make_node("MatMul", ["res", "wte_t"], ["logits"], name="lm_head")]
    else:
        inits.append(_init("head", h, vocab))
        nodes.append(helper.make_node("MatMul", ["res", "head"], ["logits"], name="lm_head"))
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [n, s])
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [n, s, vocab])
    return _save(tmp_path, nodes, [ids], [out], inits, "attn.onnx"), inits, (n, s, h, heads, vocab)


@pytest.mark.parametrize("tied, kv_heads", [(False, 4), (True, 4)])
def test_attention_pattern_becomes_one_attention(tmp_path, tied, kv_heads):
    """Reshape/Transpose to heads, MatMul, scale, Softmax, MatMul, back: one Attention with the
    zoo's FLOPs (the scale pass over the scores is dropped)."""
    path, inits, (n, s, h, heads, vocab) = attention_model(tmp_path, tied, kv_heads)
    g = load_onnx(path)
    assert g.total_params == _float_params(inits)  # the tied head adds no parameters
    types = [op.op_type for op in g]
    assert types.count(OpType.ATTENTION) == 1 and OpType.MATMUL not in types and OpType.RESHAPE not in types
    attention = next(op for op in g if op.op_type == OpType.ATTENTION)
    assert attention.attr("heads") == heads and attention.attr("kv_heads", heads) == kv_heads
    b = GraphBuilder("ref")
    x = b.layernorm(b.embedding(b.input((n, s)), vocab, h))
    d = h // heads
    q, k, v = (b.linear(x, width, False) for width in (h, kv_heads * d, kv_heads * d))
    attrs = {"heads": heads} if kv_heads == heads else {"heads": heads, "kv_heads": kv_heads}
    core = b.add(OpType.ATTENTION, (q, k, v), attrs)[0]
    b.linear(b.add_(x, b.linear(core, h, False)), vocab, False)
    assert g.total_flops == b.build().total_flops
    assert g.op("lm_head").flops == 2 * n * s * h * vocab


def test_attention_pattern_used_elsewhere_stays_unfused(tmp_path):
    path, _, (n, s, h, heads, vocab) = attention_model(tmp_path, leak_scores=True)
    g = load_onnx(path)
    types = [op.op_type for op in g]
    assert types.count(OpType.MATMUL) == 2 and OpType.ATTENTION not in types
    d = h // heads
    assert g.op("scores").output.shape == (n, heads, s, s)
    assert g.op("scores").flops == 2 * n * heads * s * d * s


def test_unsupported_operator_is_named_or_opaque(tmp_path):
    inits = [_init("w", 4, 4)]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
             helper.make_node("Einsum", ["h"], ["y"], equation="ij->ij", name="mystery")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    path = _save(tmp_path, nodes, [x], [y], inits)
    with pytest.raises(InputError, match=r"m\.onnx.*unsupported ONNX operator\(s\) Einsum.*opaque=1"):
        load_onnx(path)
    g = load_onnx(path, {"opaque": "1"})
    op = g.op("mystery")
    assert op.op_type == OpType.PROFILED and op.attr("onnx_op") == "Einsum"
    assert op.flops == 2 * 4  # documented default: one FLOP per output element, never zero


def test_truncated_file_is_one_input_error(tmp_path):
    path, _ = mlp_model(tmp_path)
    data = path.read_bytes()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError, match="truncated.onnx"):
        load_onnx(bad, {"batch": "2"})


def _weight(name, *dims):
    """An initializer with its shape only: the importer never reads weights (as with an external-data
    model whose weight files are absent)."""
    t = TensorProto()
    t.name, t.data_type = name, TensorProto.FLOAT
    t.dims.extend(dims)
    return t


def resnet50_onnx(tmp_path):
    """ResNet-50 as torchvision exports it (bias-free Conv + BatchNormalization, Relu, Add,
    MaxPool, GlobalAveragePool, Flatten, Gemm) followed by SoftmaxCrossEntropyLoss per sample."""
    nodes, inits, count = [], [], [0]

    def conv_bn(x, cin, cout, k, stride, pad, relu=True):
        i = count[0] = count[0] + 1
        inits.append(_weight(f"w{i}", cout, cin, k, k))
        inits.extend(_weight(f"bn{i}_{p}", cout) for p in ("s", "b", "m", "v"))
        nodes.append(helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], kernel_shape=[k, k], strides=[stride] * 2,
                                      pads=[pad] * 4, name=f"conv{i}"))
        nodes.append(helper.make_node("BatchNormalization", [f"c{i}"] + [f"bn{i}_{p}" for p in "sbmv"], [f"n{i}"],
                                      name=f"bn{i}"))
        if not relu:
            return f"n{i}"
        nodes.append(helper.make_node("Relu", [f"n{i}"], [f"r{i}"], name=f"relu{i}"))
        return f"r{i}"

    x = conv_bn("images", 3, 64, 7, 2, 3)
    nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2], pads=[1] * 4,
                                  name="maxpool"))
    x, cin = "pool", 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512))):
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            y = conv_bn(x, cin, width, 1, 1, 0)
            y = conv_bn(y, width, width, 3, stride, 1)
            y = conv_bn(y, width, 4 * width, 1, 1, 0, relu=False)
            short = conv_bn(x, cin, 4 * width, 1, stride, 0, relu=False) if stride != 1 or cin != 4 * width else x
            nodes += [helper.make_node("Add", [y, short], [f"add{count[0]}"], name=f"add{count[0]}"),
                      helper.make_node("Relu", [f"add{count[0]}"], [f"out{count[0]}"], name=f"out{count[0]}")]
            x, cin = f"out{count[0]}", 4 * width
    inits += [_weight("fc_w", 1000, 2048), _weight("fc_b", 1000)]
    nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"),
              helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
              helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1, name="fc"),
              helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"], reduction="none",
                               name="loss")]
    inputs = [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 224, 224]),
              helper.make_tensor_value_info("labels", TensorProto.INT64, ["N"])]
    return _save(tmp_path, nodes, inputs, [helper.make_tensor_value_info("loss", TensorProto.FLOAT, ["N"])], inits,
                 "resnet50.onnx")


def test_resnet50_matches_the_zoo(tmp_path):
    """The same network through ONNX and through the zoo: equal parameters (torchvision's
    25,557,032, pinned in test_zoo.py), FLOPs and operator types. Labels are a second model
    input with no zoo counterpart."""
    from solver_plan.graph.zoo import build_model
    g = load_onnx(resnet50_onnx(tmp_path), {"N": "2"})
    zoo = build_model("resnet50:batch=2")
    assert g.total_params == zoo.total_params == 25_557_032
    assert g.total_flops == zoo.total_flops
    assert [op.op_type for op in g if op.name != "labels"] == [op.op_type for op in zoo]


def test_imported_model_plans_end_to_end(tmp_path):
    """An imported transformer (MatMul attention, opaque ops) goes through every front door."""
    from solver_plan.api import pipeline, plan
    from solver_plan.result import Status
    path, _, _ = attention_model(tmp_path, tied=True)
    inits = [_init("w", 4, 4)]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="fc"),
             helper.make_node("Einsum", ["h"], ["y"], equation="ij->ij", name="mystery")]
    opaque = _save(tmp_path, nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 4])], inits, "opaque.onnx")
    for spec in (str(path), f"{opaque}:opaque=1"):
        result = plan(spec, "v100x8-nvlink", "greedy", devices=2, memory_limit=None)
        assert result.status.has_solution and result.objective_s > 0
        piped = pipeline(spec, "v100x8-nvlink", 2, "pipedream", "1f1b*", time_limit=10)
        assert piped.status in (Status.OPTIMAL, Status.FEASIBLE)


def llama_block_onnx(tmp_path, n=1, s=8, h=32, heads=4, kv=2, vocab=50, leak_scores=False):
    """A LLaMA block as torch exports it: decomposed RMSNorm (Pow, ReduceMean, Add, Sqrt, Div, Mul
    by a learned vector), rotary embedding with constant cos/sin caches (Slice, Neg, Concat, Mul,
    Add), grouped-query heads repeated by Unsqueeze + Expand + Reshape, unfused attention."""
    d, group = h // heads, heads // kv
    f32 = lambda name, value: numpy_helper.from_array(np.array(value, np.float32), name)  # noqa: E731
    weights = [_init("embed", vocab, h), _init("gamma", h), _init("wq", h, h), _init("wk", h, kv * d),
               _init("wv", h, kv * d), _init("wo", h, h)]
    buffers = [_init("cos", s, d), _init("sin", s, d), f32("two", 2.0), f32("eps", 1e-6), f32("scale", d ** 0.5),
               _ints("q_shape", [n, s, heads, d]), _ints("kv_shape", [n, s, kv, d]), _ints("out_shape", [n, s, h]),
               _ints("rep_shape", [n, kv, group, s, d]), _ints("full_shape", [n, heads, s, d]),
               _ints("half", [d // 2]), _ints("zero", [0]), _ints("end", [d]), _ints("last", [3]), _ints("ax2", [2])]
    N = helper.make_node
    nodes = [N("Gather", ["embed", "ids"], ["x"], name="embed_tokens"),
             N("Pow", ["x", "two"], ["x2"], name="norm/pow"),
             N("ReduceMean", ["x2"], ["ms"], axes=[-1], keepdims=1, name="norm/mean"),
             N("Add", ["ms", "eps"], ["ms_eps"], name="norm/eps"), N("Sqrt", ["ms_eps"], ["rms"], name="norm/sqrt"),
             N("Div", ["x", "rms"], ["xn"], name="norm/div"), N("Mul", ["xn", "gamma"], ["hn"], name="norm/weight")]
    for p, width, shape in (("q", heads, "q_shape"), ("k", kv, "kv_shape"), ("v", kv, "kv_shape")):
        nodes += [N("MatMul", ["hn", f"w{p}"], [f"{p}0"], name=f"{p}_proj"),
                  N("Reshape", [f"{p}0", shape], [f"{p}1"], name=f"{p}_view"),
                  N("Transpose", [f"{p}1"], [f"{p}2"], perm=[0, 2, 1, 3], name=f"{p}_heads")]
    for p in "qk":  # rotary: x * cos + rotate_half(x) * sin
        nodes += [N("Slice", [f"{p}2", "zero", "half", "last"], [f"{p}_lo"], name=f"{p}_rope/lo"),
                  N("Slice", [f"{p}2", "half", "end", "last"], [f"{p}_hi"], name=f"{p}_rope/hi"),
                  N("Neg", [f"{p}_hi"], [f"{p}_neg"], name=f"{p}_rope/neg"),
                  N("Concat", [f"{p}_neg", f"{p}_lo"], [f"{p}_rot"], axis=-1, name=f"{p}_rope/cat"),
                  N("Mul", [f"{p}2", "cos"], [f"{p}_c"], name=f"{p}_rope/cos"),
                  N("Mul", [f"{p}_rot", "sin"], [f"{p}_s"], name=f"{p}_rope/sin"),
                  N("Add", [f"{p}_c", f"{p}_s"], [f"{p}3"], name=f"{p}_rope/add")]
    nodes += [N("Identity", ["v2"], ["v3"], name="v_rope_skip")]
    for p in "kv":  # repeat_kv
        nodes += [N("Unsqueeze", [f"{p}3", "ax2"], [f"{p}4"], name=f"{p}_rep/unsqueeze"),
                  N("Expand", [f"{p}4", "rep_shape"], [f"{p}5"], name=f"{p}_rep/expand"),
                  N("Reshape", [f"{p}5", "full_shape"], [f"{p}6"], name=f"{p}_rep/reshape")]
    nodes += [N("Transpose", ["k6"], ["kt"], perm=[0, 1, 3, 2], name="k_t"),
              N("MatMul", ["q3", "kt"], ["sc"], name="scores"), N("Div", ["sc", "scale"], ["scs"], name="scale"),
              N("Softmax", ["scs"], ["pr"], axis=-1, name="probs"), N("MatMul", ["pr", "v6"], ["ctx"], name="context"),
              N("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3], name="merge_t"),
              N("Reshape", ["ctx_t", "out_shape"], ["ctx_m"], name="merge"),
              N("MatMul", ["ctx_m", "wo"], ["o"], name="o_proj"), N("Add", ["x", "o"], ["y"], name="residual")]
    if leak_scores:
        nodes.append(N("ReduceMean", ["sc"], ["sc_mean"], axes=[-1], keepdims=1, name="leak"))
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [n, s])
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, s, h])
    return _save(tmp_path, nodes, [ids], [out], weights + buffers, "llama_block.onnx"), weights


def test_llama_style_export_fuses_to_grouped_query_attention(tmp_path):
    """Rotary embedding and repeat_kv sit between the split into heads and the scores: the block
    still becomes one Attention with 4 query and 2 key/value heads, and its parameters are the
    weights and the norm's learned vector, not the rotary caches."""
    path, weights = llama_block_onnx(tmp_path)
    g = load_onnx(path)
    assert g.total_params == _float_params(weights)
    attention = next(op for op in g if op.op_type == OpType.ATTENTION)
    assert (attention.attr("heads"), attention.attr("kv_heads")) == (4, 2)
    assert [g.tensor(t).shape for t in attention.inputs] == [(1, 8, 32), (1, 8, 16), (1, 8, 16)]
    assert not any(op.op_type == OpType.PROFILED and op.attr("onnx_op") == "Expand" for op in g)


def test_llama_style_export_unfused_keeps_buffers_apart(tmp_path):
    path, weights = llama_block_onnx(tmp_path, leak_scores=True)
    g = load_onnx(path)
    assert g.total_params == _float_params(weights)
    assert g.op("q_rope/cos").op_type == OpType.UNARY and g.op("q_rope/cos").params == 0
    assert g.op("norm/weight").params == 32
    expand = g.op("k_rep/expand")
    assert expand.op_type == OpType.PROFILED and expand.flops == 0 and expand.attr("onnx_op") == "Expand"
    assert g.op("scores").op_type == OpType.MATMUL and g.op("scores").output.shape == (1, 4, 8, 8)


# --- real exports (tests/fixtures/onnx, made by scripts/make_onnx_fixtures.py) -----------------
FIXTURES = __import__("pathlib").Path(__file__).parent / "fixtures" / "onnx"
MANIFEST = __import__("json").loads((FIXTURES / "manifest.json").read_text())
MATRIX_PRODUCTS = (OpType.LINEAR, OpType.CONV2D, OpType.MATMUL)


def _matrix_product_flops(g) -> float:
    """Forward FLOPs of the matrix products (biases included), as the independent count counts
    them: Linear, Conv2d and MatMul operators, and the two products inside each fused Attention
    (scores and context: 2 x 2 x sequence^2 x width per sample), read from its input shapes."""
    total = sum(op.flops for op in g if op.op_type in MATRIX_PRODUCTS)
    for op in g:
        if op.op_type == OpType.ATTENTION:
            (n, sq, width), (_, sk, _) = (g.tensor(t).shape for t in op.inputs[:2])
            total += 4 * n * sq * sk * width
    return total


@pytest.mark.parametrize("stem", sorted(MANIFEST))
def test_real_export_parameters_and_flops(stem):
    """Each real torch.onnx export: parameters equal torch's count (less what the exporter itself
    folded away, recorded by the script), matrix-product FLOPs within 1% of FlopCounterMode's."""
    entry = MANIFEST[stem]
    g = load_onnx(FIXTURES / entry["file"], entry["options"])
    assert g.total_params == entry["torch_parameters"] - entry["parameters_folded_by_exporter"]
    assert _matrix_product_flops(g) == pytest.approx(entry["independent_forward_flops"], rel=0.01)
    inputs = [op for op in g if op.op_type == OpType.INPUT]
    assert [tuple(op.output.shape) for op in inputs] == [tuple(entry["input_shape"])]


def test_real_exports_keep_their_attention_and_tables():
    """GPT-2 (classic exporter) fuses both blocks' attention; its learned position table and
    ViT's class token and position embedding are parameters of the operators that add them."""
    gpt2 = load_onnx(FIXTURES / "gpt2_tiny.onnx")
    assert sum(op.op_type == OpType.ATTENTION for op in gpt2) == 2
    assert any(op.op_type == OpType.PROFILED and op.params == 32 * 64 for op in gpt2)  # wpe: 32 positions x 64
    vit = load_onnx(FIXTURES / "vit_tiny.onnx")
    assert sorted(op.params for op in vit if op.op_type == OpType.PROFILED and op.params) == [64, 17 * 64]


def _table_model(tmp_path, table_values, op_type="Add"):
    """x (1, 4, 8) + or * a (1, 4, 8) table reached through Gather(table, constant positions)."""
    positions = _ints("positions", [0, 1, 2, 3])
    table = numpy_helper.from_array(np.asarray(table_values, np.float32).reshape(6, 8), "table")
    nodes = [helper.make_node("Gather", ["table", "positions"], ["rows"], name="lookup"),
             helper.make_node("Unsqueeze", ["rows", "axis0"], ["rows3"], name="batch_axis"),
             helper.make_node(op_type, ["x", "rows3"], ["y"], name="combine")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])
    return _save(tmp_path, nodes, [x], [y], [table, positions, _ints("axis0", [0])])


def test_learned_table_added_is_a_parameter_but_masks_and_multiplied_caches_are_not(tmp_path):
    rng = np.random.default_rng(0)
    assert load_onnx(_table_model(tmp_path, rng.normal(size=48))).op("combine").params == 48
    mask = np.where(rng.random(48) < 0.5, 0.0, -1e9)
    assert load_onnx(_table_model(tmp_path, mask)).op("combine").params == 0
    assert load_onnx(_table_model(tmp_path, rng.normal(size=48), "Mul")).op("combine").params == 0


def test_shape_arithmetic_is_folded(tmp_path):
    """An Expand whose shape is computed with Where/Equal/ConstantOfShape (ViT's class token, as
    torch's classic exporter writes it) gets a known shape, and the class token counts."""
    token = numpy_helper.from_array(np.ones((1, 1, 8), np.float32), "token")
    N = helper.make_node
    nodes = [N("Constant", [], ["dims"], value=numpy_helper.from_array(np.array([3, -1, -1], np.int64))),
             N("ConstantOfShape", ["three"], ["ones"], value=numpy_helper.from_array(np.array([1], np.int64))),
             N("Mul", ["ones", "minus1"], ["minus"], name="minus"),
             N("Equal", ["dims", "minus"], ["is_minus"], name="is_minus"),
             N("Where", ["is_minus", "ones", "dims"], ["shape"], name="where"),
             N("Expand", ["token", "shape"], ["tokens"], name="expand"),
             N("Concat", ["tokens", "x"], ["y"], axis=1, name="prepend")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5, 8])
    inits = [token, _ints("three", [3]), _ints("minus1", [-1])]
    g = load_onnx(_save(tmp_path, nodes, [x], [y], inits))
    assert g.op("prepend").output.shape == (3, 5, 8) and g.op("prepend").params == 8
