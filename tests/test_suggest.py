"""'Did you mean' for model, cluster and planner names, and the errors that use it."""
from __future__ import annotations

import pytest

from solver_plan.errors import InputError
from solver_plan.suggest import closest, did_you_mean


def test_closest_ignores_case_and_small_typos():
    assert closest("gpt3-175b", ["gpt3-13B", "gpt3-175B"]) == "gpt3-175B"
    assert closest("resnt50", ["resnet50", "resnet101"]) == "resnet50"
    assert closest("zzzz", ["resnet50", "lenet"]) is None
    assert did_you_mean("lenet", ["lenet"]) == ""
    assert did_you_mean("mlip", ["milp", "cpsat"]) == " (did you mean 'milp'?)"


@pytest.mark.parametrize("lookup, typo, meant", [
    ("model", "gpt3-175b", "gpt3-175B"),
    ("cluster", "a100x8", "a100x8-80gb"),
    ("planner", "mlip", "milp"),
])
def test_lookups_suggest_the_closest_name(lookup, typo, meant):
    from solver_plan.cluster import resolve_cluster
    from solver_plan.graph.resolve import resolve_model
    from solver_plan.planners import get_planner
    find = {"model": resolve_model, "cluster": resolve_cluster, "planner": get_planner}[lookup]
    with pytest.raises(InputError, match=f"did you mean '{meant}'"):
        find(typo)


def test_hybrid_unknown_model_lists_only_decoders():
    from solver_plan.hybrid.cli import check_model_name
    with pytest.raises(InputError) as info:
        check_model_name("gpt3-175b:seq=2048")
    message = str(info.value)
    assert "did you mean 'gpt3-175B'" in message and "resnet50" not in message and "bert" not in message
    check_model_name("gpt2:layers=2")  # known: no error
