"""A configuration given without a layer split runs the runtime's own (`RuntimeProfile.default_stage_split`,
hybrid/stages.py default_split): torchtitan's generate_split_points (parallelisms/pipelining_utils.py at
d4c86e375), by hand; `evaluate` prices pinned torchtitan plans with it and keeps the best cut elsewhere."""
import pytest

from solver_plan.errors import InputError
from solver_plan.hybrid.stages import default_split
from solver_plan.runtime import RUNTIMES


def _virtual(layers, stages):
    """generate_split_points' virtual-stage sizes, as its loop runs: first base, middle base (+1 while the
    remainder lasts), last the rest."""
    base, extra = divmod(layers, stages)
    sizes, current = [], 0
    for i in range(stages - 1):
        step = base if i == 0 else base + (1 if extra > 0 else 0)
        if i > 0 and extra > 0:
            extra -= 1
        sizes.append(step)
        current += step
    return sizes + [layers - current]


@pytest.mark.parametrize("layers,pp,v", [(126, 8, 1), (126, 8, 2), (32, 4, 1), (32, 4, 2), (80, 8, 2), (127, 8, 1),
                                         (40, 16, 1), (61, 4, 2)])
def test_torchtitan_split_by_hand(layers, pp, v):
    sizes = _virtual(layers, pp * v)
    expected = tuple(sum(sizes[j] for j in range(i, pp * v, pp)) for i in range(pp))
    assert default_split("torchtitan", layers, pp, v) == expected
    assert sum(expected) == layers and min(expected) >= v


def test_llama_405b_on_8_stages():
    """126 layers: 15, then 16 on the six middle stages, 15 (and with v = 2 virtual stages of 7, 8 x 14, 7,
    the same per rank)."""
    assert default_split("torchtitan", 126, 8, 1) == (15, 16, 16, 16, 16, 16, 16, 15)
    assert default_split("torchtitan", 126, 8, 2) == (15, 16, 16, 16, 16, 16, 16, 15)
    assert default_split("planned", 126, 8, 1) is None and default_split("torchtitan", 126, 1, 1) is None


def test_runtimes_declare_their_split():
    assert RUNTIMES["torchtitan"].default_stage_split == "torchtitan"
    assert RUNTIMES["torchtitan-compile-fp8-gather"].default_stage_split == "torchtitan"
    assert RUNTIMES["megatron-core"].default_stage_split == "planned"
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
