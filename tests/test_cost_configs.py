"""Dimensions per operator type and the deterministic, capped enumeration of configurations."""
import math

import numpy as np
import pytest

from solver_plan.cost.config import REPLICA
from hypothesis import given, settings, strategies as st

from solver_plan.cost import (data_parallel_config, enumerate_configs, op_dimensions, op_layout,
                              single_device_config)
from solver_plan.cost.enumerate import DEFAULT_MAX_CANDIDATES, degree_assignments, device_counts, placements
from solver_plan.cost.tiles import box_volume, tile_boxes
from solver_plan.errors import InputError
from solver_plan.graph import GraphBuilder, OpType


@pytest.fixture(scope="module")
def zoo():
    """One operator of every type."""
    b = GraphBuilder("zoo")
    img = b.input((4, 3, 8, 8), name="img")
    c = b.conv2d(img, 8, 3, padding=1, name="conv")
    c = b.batchnorm(c, name="bn")
    c = b.pool2d(c, "max", kernel=2, name="pool")
    c = b.transpose(c, (0, 2, 3, 1), name="tr")
    flat = b.reshape(c, (4, -1), name="flat")
    ids = b.input((4, 6), name="ids")
    emb = b.embedding(ids, 100, 16, name="emb")
    seq = b.lstm(emb, 16, name="lstm")
    att = b.attention(seq, seq, seq, heads=4, name="att")
    ln = b.layernorm(att, name="ln")
    q = b.linear(ln, 16, name="proj")
    s = b.softmax(b.matmul(q, b.transpose(q, (0, 2, 1), name="kt"), name="mm"), name="sm")
    parts = b.split(s, (2, 4), axis=2, name="split")
    cat = b.concat(parts, axis=2, name="cat")
    summed = b.add_(cat, b.gelu(cat, name="gelu"), name="add")
    b.softmax_cross_entropy(b.linear(b.concat((flat, b.reshape(summed, (4, 36), name="r2")), axis=1,
                                              name="cat2"), 10, name="head"), name="loss")
    return b.build()


def names(op, graph):
    return tuple(d.name for d in op_dimensions(op, graph))


def test_dimension_names_and_kinds(zoo):
    assert names(zoo.op("proj"), zoo) == ("sample", "sequence", "out", "in")
    assert names(zoo.op("head"), zoo) == ("sample", "out", "in")
    conv = op_dimensions(zoo.op("conv"), zoo)
    assert [(d.name, d.size, d.kind) for d in conv] == [
        ("sample", 4, "sample"), ("out_channel", 8, "parameter"), ("in_channel", 3, "reduction"),
        ("height", 8, "attribute"), ("width", 8, "attribute")]
    assert names(zoo.op("mm"), zoo) == ("sample", "rows", "out", "in")
    assert names(zoo.op("att"), zoo) == ("sample", "sequence", "heads")
    assert names(zoo.op("emb"), zoo) == ("sample", "sequence", "embedding", "vocab")
    assert names(zoo.op("sm"), zoo) == ("sample", "sequence")  # not the softmax axis
    assert names(zoo.op("cat"), zoo) == ("sample", "sequence")
    assert names(zoo.op("ln"), zoo) == ("sample", "sequence")
    assert names(zoo.op("lstm"), zoo) == ("sample",)
    assert names(zoo.op("flat"), zoo) == ("sample",)


def test_axis_maps(zoo):
    linear = op_layout(zoo.op("proj"), zoo)
    assert linear.output_axes == ((0, 1, 2, None),)  # `in` is on no output axis
    assert linear.input_axes == ((0, 1, None, 2),)  # `out` is on no input axis
    assert linear.weight_dims == ("out", "in")
    tr = op_layout(zoo.op("tr"), zoo)
    assert tr.input_axes == ((0, 2, 3, 1),)


def test_every_op_type_has_sample_and_enumerates(zoo):
    assert {op.op_type for op in zoo} == set(OpType) - {OpType.PROFILED}
    for op in zoo:
        dims = op_dimensions(op, zoo)
        assert dims[0].name == "sample"
        configs = enumerate_configs(op, zoo, 8)
        for c in configs:
            assert tuple(n for n, _ in c.degrees if n != REPLICA) == tuple(d.name for d in dims)
            assert all(d.size % k == 0 for d, (_, k) in zip(dims, c.degrees))
            assert max(c.devices) < 8


def test_profiled_has_only_sample():
    b = GraphBuilder("p")
    x = b.input((8, 5), name="x")
    b.add(OpType.PROFILED, (x,), {"output_shapes": ((8, 3),), "flops": 10.0}, name="layer")
    g = b.build()
    assert names(g.op("layer"), g) == ("sample",)


def test_device_counts_and_placements():
    assert device_counts(16) == (1, 2, 4, 8, 16)
    assert device_counts(12) == (1, 2, 4, 8, 12)
    assert placements(4, 16, 2) == ((0, 1, 2, 3), (8, 9, 10, 11))
    assert placements(16, 16, 2) == (tuple(range(16)),)
    assert placements(1, 4, 3) == ((0,), (1,), (2,))


def test_degree_assignments_divide_sizes(zoo):
    dims = op_dimensions(zoo.op("conv"), zoo)  # sizes 4, 8, 3, 8, 8
    assert len(degree_assignments(dims, 4)) == 10  # ordered ways to put 2x2 or 4 on the 4 dims of even size
    assert all(math.prod(d) == 4 for d in degree_assignments(dims, 4))


def test_enumeration_deterministic_capped_and_includes_required(zoo):
    op = zoo.op("head")
    first = enumerate_configs(op, zoo, 16, max_candidates=12)
    assert first == enumerate_configs(op, zoo, 16, max_candidates=12)
    assert len(first) == 12 and len(set(first)) == 12
    assert first[0] == single_device_config(op, zoo)
    assert first[1] == data_parallel_config(op, zoo, 16)
    assert len(enumerate_configs(op, zoo, 16)) == DEFAULT_MAX_CANDIDATES


def test_required_configs():
    b = GraphBuilder("g")
    b.linear(b.input((12, 4)), 8, name="fc")
    g = b.build()
    op = g.op("fc")
    single = single_device_config(op, g)
    assert single.degrees == (("sample", 1), ("out", 1), ("in", 1)) and single.devices == (0,)
    dp = data_parallel_config(op, g, 8)  # largest divisor of 12 not above 8
    assert dp.degrees == (("sample", 6), ("out", 1), ("in", 1)) and dp.devices == tuple(range(6))
    assert dp in enumerate_configs(op, g, 8)


def test_bad_arguments_rejected(zoo):
    with pytest.raises(InputError):
        enumerate_configs(zoo.op("head"), zoo, 0)
    with pytest.raises(InputError):
        enumerate_configs(zoo.op("head"), zoo, 8, max_candidates=1)


@settings(max_examples=25, deadline=None)
@given(batch=st.sampled_from([1, 2, 3, 4, 6, 8]), seq=st.sampled_from([1, 2, 5, 8]),
       hidden=st.sampled_from([2, 4, 6, 16]), devices=st.sampled_from([1, 2, 3, 4, 8]))
def test_tiles_of_every_candidate_partition_each_tensor(batch, seq, hidden, devices):
    """Distinct boxes of a configuration are disjoint and cover the tensor (replicas aside)."""
    b = GraphBuilder("g")
    b.linear(b.relu(b.input((batch, seq, hidden)), name="r"), 2 * hidden, name="fc")
    g = b.build()
    op = g.op("fc")
    layout = op_layout(op, g)
    shapes = [(layout.output_axes[0], op.output.shape), (layout.input_axes[0], (batch, seq, hidden))]
    for cfg in enumerate_configs(op, g, devices):
        assert max(cfg.devices) < devices
        for axes, shape in shapes:
            boxes = tile_boxes(cfg, layout.names, axes, shape)
            distinct = np.unique(boxes.reshape(len(boxes), -1), axis=0)
            assert box_volume(distinct.reshape(-1, len(shape), 2)).sum() == math.prod(shape)


def _degree_assignments_by_loop(dims, count):
    """The definition, one candidate degree at a time (the reference for the divisor-based enumeration)."""
    if not dims:
        return [()] if count == 1 else []
    return [(degree,) + tail for degree in range(1, count + 1) if count % degree == 0 and dims[0].size % degree == 0
            for tail in _degree_assignments_by_loop(dims[1:], count // degree)]


def test_degree_assignments_equal_the_definition_in_order():
    import random

    from solver_plan.cost.dims import Dimension
    rng = random.Random(1)
    for _ in range(500):
        dims = tuple(Dimension(f"d{i}", rng.choice([1, 2, 3, 6, 12, 64, 96, 1000, 2048, 50257]), "attribute")
                     for i in range(rng.randint(0, 4)))
        count = rng.choice([1, 2, 3, 6, 8, 96, 1024, 3072])
        assert degree_assignments(dims, count) == _degree_assignments_by_loop(dims, count)
