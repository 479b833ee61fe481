"""Stages of unequal depth and interleaving with any layer count (hybrid/stages.py): chunk layout,
in-flight blocks and pipeline time by hand, brute force on a layer count no p v divides, Llama 3
405B's published layout, and the message naming the layer count when a pin cannot hold it."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.memory import in_flight_microbatches
from solver_plan.hybrid.schedule import pipeline_s
from solver_plan.hybrid.stages import chunk_layers, held_layers, layer_count_problem
from solver_plan.result import Status

from test_hybrid_brute import CLUSTER, RUNTIME, brute_force


def test_chunks_split_a_stage_near_equally_larger_last():
    assert chunk_layers(7, 2) == (3, 4)
    assert chunk_layers(8, 3) == (2, 3, 3)
    assert chunk_layers(6, 3) == (2, 2, 2)


def test_held_blocks_by_hand():
    # p = 2, v = 2, stage 0: warm-up (v - 1) p + 2 (p - 1) + 1 = 5 chunk forwards, on chunks 0, 0, 1, 1, 0
    assert held_layers(3, 0, 2, 8, 2) == 1 + 1 + 2 + 2 + 1  # chunks (1, 2)
    # stage 1 (last): 3 forwards on chunks 0, 0, 1
    assert held_layers(3, 1, 2, 8, 2) == 1 + 1 + 2
    # few micro-batches: m v = 2 chunk passes at most
    assert held_layers(3, 0, 2, 1, 2) == 1 + 1
    # equal chunks: the stage's blocks x Megatron's in-flight micro-batches
    for stage in range(4):
        for m in (1, 4, 16):
            expected = 6 * in_flight_microbatches(stage, 4, m, "interleaved", 3)
            assert held_layers(6, stage, 4, m, 3) == pytest.approx(expected)


def test_held_blocks_closed_form_equals_counting_every_warm_up_pass():
    from solver_plan.hybrid.stages import warmup_passes

    for layers, pp, m, v in [(7, 3, 5, 2), (13, 4, 8, 3), (9, 2, 1, 4), (30, 5, 20, 6), (11, 6, 3, 5)]:
        chunks = chunk_layers(layers, v)
        for stage in range(pp):
            passes = min(warmup_passes(stage, pp, v), m * v)
            assert held_layers(layers, stage, pp, m, v) == sum(chunks[(j // pp) % v] for j in range(passes))


def test_interleaved_pipeline_by_hand():
    # m max T + (sum T - max T) / v: 4 x 3 + (5 - 3) / 2
    assert pipeline_s([3.0, 2.0], 4, "interleaved", 2) == pytest.approx(13.0)
    # equal stages: (m + (p - 1) / v) T
    assert pipeline_s([2.0] * 4, 8, "interleaved", 4) == pytest.approx((8 + 3 / 4) * 2.0)


FIVE = "gpt2:layers=5,hidden=256,heads=8,head_dim=32,ffn=1024,seq=256,positions=256,vocab=8000"


def test_planner_equals_brute_force_when_no_p_v_divides_the_layers():
    """5 blocks: interleaving (p 2, v 2) only with unequal stages (2 + 3: chunks 1 + 1 and 1 + 2)."""
    plans = brute_force(FIVE, CLUSTER, 8)
    free = plan_hybrid(FIVE, CLUSTER, 8, memory_limit="none", time_limit=None, runtime=RUNTIME)
    assert free.status == Status.OPTIMAL
    assert free.step_time_s == pytest.approx(min(t for t, _ in plans), rel=1e-9)
    least = min(m for _, m in plans)
    limit = (least + free.plan.memory_per_device_bytes) / 2
    tight = plan_hybrid(FIVE, CLUSTER, 8, memory_limit=limit, time_limit=None, runtime=RUNTIME)
    assert tight.status == Status.OPTIMAL
    assert tight.step_time_s == pytest.approx(min(t for t, m in plans if m <= limit), rel=1e-9)
    none_fit = plan_hybrid(FIVE, CLUSTER, 8, memory_limit=least * 0.5, time_limit=None, runtime=RUNTIME)
    assert none_fit.needed_memory_bytes == pytest.approx(least, rel=1e-6)


def test_pinned_interleaving_of_five_blocks_on_two_stages():
    result = evaluate(FIVE, CLUSTER, 8, {"dp": 8, "tp": 1, "pp": 2, "micro_batch_size": 1, "virtual_stages": 2},
                      memory_limit="none", runtime=RUNTIME)
    assert result.status == Status.FEASIBLE
    stages = result.plan.stages
    assert sorted(s.layers for s in stages) == [2, 3]
    assert [list(s.chunks) for s in stages] == [list(chunk_layers(s.layers, 2)) for s in stages]
    assert result.to_dict()["stages"][0]["chunk_layers"] == list(stages[0].chunks)


LLAMA = "data/published/models/llama-3.1-405b.json:seq=8192"
META = "data/published/clusters/meta-h100-roce-16k.yaml"


def test_llama3_405b_interleaved_on_16_stages_takes_a_layer_off_each_end():
    """126 layers, pp 16 (Dubey et al. 2024, 3.3.2: one layer fewer on the first and the last stage);
    interleaved is cheaper than 1F1B there, which it could not be before (16 v never divides 126)."""
    fix = {"dp": 64, "tp": 8, "pp": 16, "micro_batch_size": 1, "zero_stage": 1, "sequence_parallel": True,
           "recompute": "selective"}
    cluster = resolve_cluster(META, 8192)
    one = evaluate(LLAMA, cluster, 2048, fix, memory_limit="none", runtime="torchtitan")
    chunked = evaluate(LLAMA, cluster, 2048, {**fix, "virtual_stages": 7}, memory_limit="none", runtime="torchtitan")
    layers = [s.layers for s in chunked.plan.stages]
    assert layers == [7] + [8] * 14 + [7]
    assert chunked.plan.parallelism.schedule == "interleaved"
    assert chunked.step_time_s < one.step_time_s
    assert chunked.plan.terms.pipeline_s < one.plan.terms.pipeline_s


def test_a_pin_no_cut_can_fill_names_the_layer_count():
    assert "126 layers" in layer_count_problem(126, {"pp": 16, "virtual_stages": 8})
    assert layer_count_problem(126, {"pp": 16, "virtual_stages": 7}) is None
    assert "5 layers" in layer_count_problem(5, {"pp": 8})
    result = plan_hybrid(FIVE, CLUSTER, 8, fix={"pp": 2, "virtual_stages": 3}, memory_limit="none", time_limit=None)
    assert result.status == Status.INFEASIBLE
    assert "5 layers" in result.notes[0] and "2 x 3" in result.notes[0]
