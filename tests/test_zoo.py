"""Model zoo: published parameter counts and FLOPs, options, spec errors, graph structure."""
from __future__ import annotations

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph
from solver_plan.graph.ops import OpType
from solver_plan.graph.zoo import build_model, model_description, model_names, model_options
from solver_plan.graph.zoo.llm_shapes import DATA_ENV

TOLERANCE = 0.05

# Published parameter counts (torchvision model cards, the papers, Hugging Face model cards).
PUBLISHED_PARAMS = {
    "lenet": 60e3,  # LeCun et al. 1998: "about 60,000"
    "alexnet": 61.1e6,
    "vgg16": 138.4e6,
    "resnet50": 25.6e6,
    "resnet101": 44.5e6,
    "resnet152": 60.2e6,
    "inception_v3": 23.8e6,  # torchvision's 27.2M less the auxiliary classifier
    "bert-base": 110e6,
    "bert-large": 340e6,
    "gpt2": 124e6,
    "gpt2-medium": 355e6,
    "gpt2-large": 774e6,
    "gpt2-xl": 1.5e9,
    "t5-base": 220e6,
    "rnnlm": 66e6,  # Zaremba et al. 2014, large LSTM
}

# Forward multiply-accumulates per image (torchvision model cards, "GFLOPS" there meaning GMACs).
PUBLISHED_GMACS = {
    "resnet50": 4.1, "resnet101": 7.8, "resnet152": 11.5, "vgg16": 15.5, "alexnet": 0.71,
    "inception_v3": 5.7,
}


def close(value: float, expected: float) -> bool:
    return abs(value - expected) <= TOLERANCE * expected


def loss_ops(graph: Graph):
    return [op for op in graph if op.op_type == OpType.SOFTMAX_CE]


def input_ops(graph: Graph):
    return [op for op in graph if op.op_type == OpType.INPUT]


@pytest.mark.parametrize("name, params", PUBLISHED_PARAMS.items())
def test_parameter_counts_match_published(name, params):
    graph = build_model(f"{name}:batch=1")
    assert close(graph.total_params, params), f"{name}: {graph.total_params:,} vs {params:,.0f}"


@pytest.mark.parametrize("name, gmacs", PUBLISHED_GMACS.items())
def test_forward_flops_match_published_macs(name, gmacs):
    graph = build_model(f"{name}:batch=1")  # default image: 224, or 299 for Inception-v3
    assert close(graph.total_flops / 2, gmacs * 1e9), f"{name}: {graph.total_flops / 2e9:.3f} GMACs"


def test_gpt3_175b_comes_from_its_shape_file_and_builds_fast():
    assert "gpt3-175B" in model_names()
    options = model_options("gpt3-175B")
    assert (options["hidden"], options["layers"], options["heads"], options["seq"]) == (12288, 96, 96, 2048)
    start = time.perf_counter()
    graph = build_model("gpt3-175B")
    assert time.perf_counter() - start < 3.0
    assert close(graph.total_params, 175e9)
    assert len([op for op in graph if op.op_type == OpType.ATTENTION]) == 96


def test_every_llm_shape_file_is_a_model():
    from solver_plan.graph.zoo.llm_shapes import shapes_dir
    stems = {path.stem for path in shapes_dir().glob("*.json")}
    assert len(stems) >= 13 and stems <= set(model_names())


@pytest.mark.parametrize("name", model_names())
def test_every_model_builds_with_defaults_into_a_valid_graph_ending_in_the_loss(name):
    graph = build_model(name)
    assert graph.name == name
    Graph(graph.name, graph.operators)  # re-validates names, inputs, acyclicity and every shape
    (loss,) = loss_ops(graph)
    sinks = [op.name for op in graph if not graph.successors(op.name)]
    assert sinks == [loss.name]
    assert graph.topological_order[-1] == loss.name
    batch = model_options(name)["batch"]
    assert all(op.output.shape[0] == batch for op in input_ops(graph))
    description = model_description(name)
    assert description and "\n" not in description


@pytest.mark.parametrize("name", model_names())
def test_flops_scale_with_batch_and_params_do_not(name):
    shallow = ",layers=2" if "layers" in model_options(name) else ""
    small, large = build_model(f"{name}:batch=1{shallow}"), build_model(f"{name}:batch=3{shallow}")
    assert large.total_params == small.total_params
    assert large.total_flops == pytest.approx(3 * small.total_flops, rel=1e-9)


def test_spec_options_reach_the_graph():
    graph = build_model("resnet50:batch=8,image=1000")
    assert graph.name == "resnet50:batch=8,image=1000"
    assert input_ops(graph)[0].output.shape == (8, 3, 1000, 1000)
    assert graph.total_params == build_model("resnet50").total_params  # global pooling: size-independent

    mlp = build_model("mlp:layers=2,hidden=1024,batch=128")
    linears = [op for op in mlp if op.op_type == OpType.LINEAR]
    assert len(linears) == 2 and mlp.total_params == 2 * (1024 * 1024 + 1024)

    vgg = build_model("vgg16:classes=10")
    assert vgg.op("fc").output.shape == (64, 10)


def test_transformer_layers_option_overrides_the_block_count():
    full, small = build_model("gpt2"), build_model("gpt2:layers=4")
    hidden = 768
    per_block = 12 * hidden * hidden + 13 * hidden  # q, k, v, out, two MLP linears + biases + 2 norms
    assert full.total_params - small.total_params == 8 * per_block
    assert any(op.name.startswith("block3/") for op in small)
    assert not any(op.name.startswith("block4/") for op in small)
    assert small.op("block0/self_attn/q").output.shape == (8, 1024, hidden)


def test_block_structure_of_a_pre_norm_decoder():
    graph = build_model("gpt2:layers=1,batch=2,seq=16")
    kinds = [op.op_type for op in graph if op.name.startswith("block0/")]
    assert kinds == [
        OpType.LAYERNORM, OpType.LINEAR, OpType.LINEAR, OpType.LINEAR, OpType.ATTENTION, OpType.LINEAR,
        OpType.BINARY, OpType.LAYERNORM, OpType.LINEAR, OpType.UNARY, OpType.LINEAR, OpType.BINARY,
    ]
    assert graph.op("block0/mlp/gelu0").attr("kind") == "gelu"


def test_output_projections_share_the_embedding_weights():
    gpt2 = build_model("gpt2")
    assert gpt2.op("lm_head").attr("tied_to") == "wte" and gpt2.op("lm_head").params == 0
    t5 = build_model("t5-small")
    assert t5.op("decoder/embed").params == 0 and t5.op("shared").params == 32128 * 512
    bert = build_model("bert-base")
    assert bert.op("lm_head").params == 30522  # only its bias


def test_t5_decoder_attends_to_the_encoder_output():
    graph = build_model("t5-small:layers=2")
    attention = [op for op in graph if op.op_type == OpType.ATTENTION]
    assert len(attention) == 2 + 2 * 2  # encoder self, decoder self and cross per block
    cross_key = graph.op("decoder/block1/cross_attn/k")
    assert graph.producer(cross_key.inputs[0]).name == "encoder/final_norm"


def test_resnet_has_projection_shortcuts_where_shapes_change():
    graph = build_model("resnet50")
    residual_adds = [op for op in graph if op.op_type == OpType.BINARY]
    assert len(residual_adds) == 3 + 4 + 6 + 3
    convs = [op.name for op in graph if op.op_type == OpType.CONV2D]
    assert len(convs) == 53  # torchvision's resnet50 has 53 Conv2d modules
    for stage in range(1, 5):  # a projection shortcut opens every stage, and only there
        assert len([c for c in convs if c.startswith(f"layer{stage}/block0/")]) == 4
        assert len([c for c in convs if c.startswith(f"layer{stage}/block1/")]) == 3
    assert graph.op("fc").output.shape == (32, 1000)


def test_inception_modules_concatenate_their_branches_along_channels():
    graph = build_model("inception_v3:batch=1")
    concats = {op.name.split("/")[0]: op for op in graph if op.op_type == OpType.CONCAT}
    assert len(concats) == 11
    assert len([op for op in graph if op.op_type == OpType.CONV2D]) == 94  # torchvision, less the aux head
    assert concats["Mixed_5b"].output.shape == (1, 256, 35, 35)
    assert concats["Mixed_6a"].output.shape == (1, 768, 17, 17)
    assert concats["Mixed_7c"].output.shape == (1, 2048, 8, 8)
    assert len(concats["Mixed_7b"].inputs) == 6  # 1x1, two 3x3 splits of two each, pool


def test_recurrent_and_recsys_structure():
    nmt = build_model("nmt:layers=4")
    lstms = [op for op in nmt if op.op_type == OpType.LSTM]
    assert len(lstms) == 5 + 4  # bidirectional first encoder layer
    assert nmt.op("decoder/attention").attr("heads") == 1
    rnnlm = build_model("rnnlm:layers=3,hidden=200,vocab=1000,seq=20,batch=4")
    assert [op.output.shape for op in rnnlm if op.op_type == OpType.LSTM] == [(4, 20, 200)] * 3
    wide_deep = build_model("wide_deep:fields=4,vocab=10,embed_dim=8")
    tables = [op for op in wide_deep if op.op_type == OpType.EMBEDDING]
    assert len(tables) == 4 and all(op.params == 80 for op in tables)


@given(layers=st.integers(1, 6), hidden=st.integers(1, 64), batch=st.integers(1, 16))
@settings(max_examples=25, deadline=None)
def test_mlp_counts_follow_its_shape(layers, hidden, batch):
    graph = build_model(f"mlp:layers={layers},hidden={hidden},batch={batch}")
    assert graph.total_params == layers * (hidden * hidden + hidden)
    assert len([op for op in graph if op.op_type == OpType.LINEAR]) == layers


@pytest.mark.parametrize("spec, message", [
    ("mlp:hiden=3", "mlp: unknown option 'hiden' (options: batch, hidden, layers)"),
    ("resnet5", "unknown model 'resnet5' (did you mean 'resnet50'?) (models: lenet, alexnet"),
    ("mlp:layers=0", "mlp: option 'layers' expects a positive integer, got '0'"),
    ("mlp:layers=-2", "mlp: option 'layers' expects a positive integer"),
    ("mlp:layers=two", "mlp: option 'layers' expects a positive integer, got 'two'"),
    ("mlp:layers=2.5", "mlp: option 'layers' expects a positive integer"),
    ("mlp:layers", "mlp: expected 'key=value' in 'layers'"),
    ("mlp:layers=2,layers=3", "mlp: option 'layers' given twice"),
    ("", "empty model spec"),
    (":batch=2", "missing model name"),
    ("gpt2:seq=2048", "gpt2: option 'seq' (2048) must not exceed option 'positions' (1024)"),
    ("nmt:layers=1", "nmt: option 'layers' must be at least 2"),
    ("lenet:image=8", "lenet: options"),
])
def test_bad_specs_raise_input_errors_naming_model_and_option(spec, message):
    with pytest.raises(InputError) as info:
        build_model(spec)
    assert message in str(info.value)


def test_unknown_model_lookups_raise_input_errors():
    for lookup in (model_options, model_description):
        with pytest.raises(InputError, match="unknown model 'nope'"):
            lookup("nope")


def test_data_folder_comes_from_the_environment(tmp_path, monkeypatch):
    shapes = tmp_path / "llm-shapes"
    shapes.mkdir()
    shape = {"hidden": 64, "feedforward": 256, "seq_size": 32, "attn_heads": 4, "attn_size": 16, "num_blocks": 2}
    (shapes / "tiny.json").write_text(json.dumps(shape))
    (shapes / "broken.json").write_text(json.dumps({**shape, "num_blocks": "two"}))
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    assert {"tiny", "broken"} <= set(model_names())
    graph = build_model("tiny:vocab=100")
    assert len([op for op in graph if op.op_type == OpType.ATTENTION]) == 2
    with pytest.raises(InputError, match="'num_blocks' must be a positive integer"):
        build_model("broken")
    assert "gpt3-175B" not in model_names()


def test_missing_data_folder_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ENV, str(tmp_path / "absent"))
    assert "gpt2" in model_names() and "gpt3-175B" not in model_names()
    with pytest.raises(InputError, match=f"llm-shapes, missing \\(set {DATA_ENV}"):
        build_model("gpt3-175B")
