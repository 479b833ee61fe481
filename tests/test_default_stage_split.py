"""A configuration given without a layer split runs the runtime's own (`RuntimeProfile.default_stage_split`,
hybrid/stages.py default_split): torchtitan's generate_split_points (parallelisms/pipelining_utils.py at
d4c86e375), by hand; `evaluate` prices pinned torchtitan plans with it and keeps the best cut elsewhere."""
import pytest

from solver_plan.errors import InputError
from solver_plan.hybrid.stages import default_split
from solver_plan.runtime import RUNTIMES


@pytest.mark.parametrize("layers,pp,v,schedule,expected", [
    # virtual stages of generate_split_points written out by hand, then summed per rank (j mod p)
    (32, 4, 1, "1f1b", (8, 8, 8, 8)),                  # 8 | 8 | 8 | 8
    (10, 4, 1, "gpipe", (2, 3, 3, 2)),                 # base 2, extra 2: 2 | 3 | 3 | 10 - 8 = 2
    (127, 8, 1, "1f1b", (15, 16, 16, 16, 16, 16, 16, 16)),  # extra 7: six middle 16s, the last 127 - 111
    (40, 16, 1, "1f1b", (2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2)),  # base 2, extra 8
    (32, 4, 2, "interleaved", (8, 8, 8, 8)),           # 8 virtual stages of 4
    (61, 4, 2, "interleaved", (15, 16, 15, 15)),       # base 7, extra 5: 7 8 8 8 | 8 8 7 7 -> 7+8, 8+8, 8+7, 8+7
])
def test_torchtitan_split_by_hand(layers, pp, v, schedule, expected):
    assert default_split("torchtitan", layers, pp, v, schedule) == expected
    assert sum(expected) == layers


def test_no_default_where_torchtitan_has_none():
    """Multi-stage schedules default to 2 stages a rank; the V-shaped zero-bubble placement is not j mod p."""
    assert default_split("torchtitan", 32, 4, 3, "interleaved") is None
    assert default_split("torchtitan", 32, 4, 2, "zb-v") is None
    assert default_split("planned", 32, 4, 1, "1f1b") is None and default_split("torchtitan", 32, 1, 1) is None


def test_llama_405b_on_8_stages():
    """126 layers: 15, then 16 on the six middle stages, 15 (and with v = 2 virtual stages of 7, 8 x 14, 7,
    the same per rank)."""
    assert default_split("torchtitan", 126, 8, 1) == (15, 16, 16, 16, 16, 16, 16, 15)
    assert default_split("torchtitan", 126, 8, 2, "interleaved") == (15, 16, 16, 16, 16, 16, 16, 15)


def test_runtimes_declare_their_split():
    assert RUNTIMES["torchtitan"].default_stage_split == "torchtitan"
    assert RUNTIMES["torchtitan-compile-fp8-gather"].default_stage_split == "torchtitan"
    assert RUNTIMES["megatron-core"].default_stage_split == "planned"
    assert RUNTIMES["llama3-meta"].default_stage_split == "planned"  # no published default
    from dataclasses import replace
    with pytest.raises(InputError, match="default_stage_split"):
        replace(RUNTIMES["torchtitan"], default_stage_split="even")


def test_evaluate_runs_the_runtimes_split():
    """A pinned pp = 2 plan of a 5-layer model: torchtitan runs 2 + 3 (its first stage base = 2, the last
    the rest) whatever the stages' times; megatron-core's plan takes the best cut."""
    from solver_plan.hybrid import search
    fix = {"dp": 1, "tp": 1, "pp": 2, "micro_batch_size": 1, "zero_stage": 0, "recompute": "full"}
    model = "data/hf-configs/llama-3-8b.json:layers=5,seq=512"
    titan = search.evaluate(model, "h100-4x8-ib", 4, fix, memory_limit="none", runtime="torchtitan").plan
    assert [s.layers for s in titan.stages] == [2, 3]
    core = search.evaluate(model, "h100-4x8-ib", 4, {**fix, "zero_stage": 1}, memory_limit="none",
                           runtime="megatron-core").plan
    assert sum(s.layers for s in core.stages) == 5


def test_a_given_split_over_the_memory_limit_is_infeasible():
    """The runtime's split is priced whatever its memory; over the limit the what-if says INFEASIBLE with the
    memory it needs (as for a searched cut), not a plan the validator refuses."""
    from solver_plan.hybrid import search
    from solver_plan.result import Status
    fix = {"dp": 1, "tp": 1, "pp": 2, "micro_batch_size": 1, "zero_stage": 0, "recompute": "full"}
    model = "data/hf-configs/llama-3-8b.json:layers=5,seq=512"
    free = search.evaluate(model, "h100-4x8-ib", 4, fix, memory_limit="none", runtime="torchtitan").plan
    stages = sorted(s.memory.total for s in free.stages)
    limit = (stages[0] + stages[1]) / 2  # between the two stages' memory
    result = search.evaluate(model, "h100-4x8-ib", 4, fix, memory_limit=limit, runtime="torchtitan")
    assert result.status == Status.INFEASIBLE
    assert result.needed_memory_bytes == pytest.approx(free.memory_per_device_bytes)
