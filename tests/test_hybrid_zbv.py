"""ZB-V in hybrid plans (hybrid/zero_bubble.py, issue 23): the V schedule's bubble and in-flight
micro-batches by hand, its placement (embedding and loss on the first rank, two chunks a rank, twice
the transfers), the runtimes that run it and the refusal elsewhere. Brute force with ZB-V in the
space: tests/test_hybrid_fsdp.py."""
import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.memory import in_flight_microbatches
from solver_plan.hybrid.schedule import pipeline_s
from solver_plan.hybrid.space import Parallelism, parse_fix
from solver_plan.result import Status

CLUSTER = resolve_cluster("h100-4x8-ib", 16)
SMALL = "gpt2:layers=8,hidden=512,heads=8,head_dim=64,ffn=2048,seq=512,positions=512,vocab=32000"


def test_bubble_by_hand():
    # 4 equal stages, F = B = W = 1 (T = 3), 8 micro-batches: the paper's zero bubble
    assert pipeline_s([3.0] * 4, 8, "zb-v", weight_times=[1.0] * 4) == pytest.approx(8 * 3)
    # F = 1, B = 1.5, W = 0.5: (p - 1)(F + B - 2W) / 2 = 3 x 1.5 / 2, half of ZB-H2's 3 x 1.5
    assert pipeline_s([3.0] * 4, 8, "zb-v", weight_times=[0.5] * 4) == pytest.approx(24 + 2.25)
    assert pipeline_s([3.0] * 4, 8, "zb-h2", weight_times=[0.5] * 4) == pytest.approx(24 + 4.5)
    # W = 0: the V without the split is the interleaved schedule with two chunks, (p - 1) T / 2
    assert pipeline_s([3.0] * 4, 8, "zb-v", weight_times=[0.0] * 4) == pytest.approx(
        pipeline_s([3.0] * 4, 8, "interleaved", 2))
    # one micro-batch alone: F and B of every chunk in turn, then rank 0's last chunk W: 4 x 2 + 0.5
    assert pipeline_s([3.0] * 4, 1, "zb-v", weight_times=[1.0] * 4) == pytest.approx(8.5)
    # ZB-H1 with one micro-batch: its formula already is the critical path p (F + B) + W
    assert pipeline_s([3.0] * 4, 1, "zb-h1", weight_times=[1.0] * 4) == pytest.approx(9.0)


def test_in_flight_micro_batches():
    # p micro-batches of the whole stage on every rank (p of each half-stage chunk), at most m
    assert [in_flight_microbatches(i, 4, 16, "zb-v", 2) for i in range(4)] == [4, 4, 4, 4]
    assert in_flight_microbatches(0, 4, 3, "zb-v", 2) == 3


def _plan(schedule, runtime="torchtitan", **extra):
    fix = {"dp": 2, "tp": 2, "pp": 4, "micro_batch_size": 1, "schedule": schedule, "recompute": "none", **extra}
    return evaluate(SMALL, CLUSTER, 16, fix, memory_limit="none", runtime=runtime)


def test_placement_memory_and_transfers():
    v, h1 = _plan("zb-v"), _plan("zb-h1")
    assert v.status == Status.FEASIBLE and "agree" in v.notes[-1]  # the validator re-derived it
    stages = v.plan.stages
    # the V returns to rank 0: embedding and output layer on the first stage, no tied-embedding all-reduce
    assert stages[0].embedding and stages[0].head and not any(s.head for s in stages[1:])
    assert v.plan.terms.embedding_sync_s == 0.0 < h1.plan.terms.embedding_sync_s
    # a middle rank holds p micro-batches of its blocks, as ZB-H1's; the first adds the logits
    assert stages[1].memory.activations == pytest.approx(h1.plan.stages[1].memory.activations)
    assert stages[0].memory.activations > h1.plan.stages[0].memory.activations
    assert stages[3].memory.activations < h1.plan.stages[3].memory.activations  # no logits there
    # tied embedding: the first stage holds it once (no output copy), plus the final norm (weight and
    # bias, 2 x 512 values of 2 bytes); the last stage no longer holds the output layer
    assert stages[0].memory.weights == pytest.approx(h1.plan.stages[0].memory.weights + 2 * 2 * 512)
    assert stages[3].memory.weights < h1.plan.stages[3].memory.weights
    # two chunks a rank (one block each here), each crossing the rank boundaries: twice the transfers
    assert all(s.chunks == (1, 1) for s in stages)
    assert stages[1].p2p_s == pytest.approx(2 * h1.plan.stages[1].p2p_s)
    d = v.to_dict()
    assert d["parallelism"]["schedule"] == "zb-v" and d["parallelism"]["virtual_stages"] == 2
    assert "torchtitan" in d["schedule_runtimes"] and "megatron-core" not in d["schedule_runtimes"]
    assert d["stages"][0]["head"] and d["stages"][0]["chunk_layers"] == [1, 1]


def test_pins_refusals_and_search():
    assert parse_fix("schedule=zb-v") == {"schedule": "zb-v"}
    with pytest.raises(InputError, match="virtual_stages"):
        Parallelism(2, 2, 4, 1, 8, schedule="zb-v")  # a V has two chunks
    with pytest.raises(InputError, match="recompute"):
        Parallelism(2, 2, 4, 1, 8, 2, recompute="per-stage", schedule="zb-v")
    with pytest.raises(InputError, match="cannot run zb-v.*torchtitan"):
        _plan("zb-v", runtime="megatron-core")
    with pytest.raises(InputError, match="--fix schedule"):
        plan_hybrid(SMALL, CLUSTER, 16, fix={"schedule": "zb-v"}, runtime="nemo", time_limit=None)
    pinned = plan_hybrid(SMALL, CLUSTER, 64, fix={"schedule": "zb-v", "pp": 4}, memory_limit="none",
                         time_limit=None, runtime="torchtitan")
    assert pinned.status == Status.OPTIMAL and pinned.plan.parallelism.schedule == "zb-v"
    assert pinned.plan.parallelism.micro_batches >= 4  # the space's zb-v points fill the V: m >= p
