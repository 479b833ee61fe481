"""jsontext.json_text gives exactly json.dumps's text, long arrays encoded once per object."""
import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from solver_plan.jsontext import LONG_ARRAY, json_text, shared

scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(st.text(max_size=4), inner, max_size=4)),
                      max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(values)
def test_same_text_as_json_dumps(data):
    assert json_text(data) == json.dumps(data)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4095), min_size=LONG_ARRAY, max_size=3 * LONG_ARRAY), st.integers(1, 30))
def test_shared_long_arrays_spliced_where_they_recur(devices, operators):
    pool: dict[tuple, list] = {}
    plan = {"operators": [{"name": f"op{i}", "devices": shared(tuple(devices), pool)} for i in range(operators)],
            "long floats": [0.5] * LONG_ARRAY, "tuple": tuple(devices), "nested": [[devices, (1, 2)]]}
    assert len(pool) == 1
    assert json_text(plan) == json.dumps(plan)


def test_a_string_like_the_marker_is_kept():
    # the marker is random per call: a string of the data shaped like one is left as it is
    rng = random.Random(0)
    long = list(range(LONG_ARRAY))
    data = {"a": long, "b": f"{rng.getrandbits(64):016x}:0", "c": long}
    assert json_text(data) == json.dumps(data)
