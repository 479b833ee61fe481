"""Contention (hybrid/contention.py): overlapped communication slows the compute under it by the share
of the device its kernels hold; by hand for each place it is priced (dense data-parallel sync,
tensor-parallel overlap, MoE all-to-all and gradient sync), zero where nothing hides or the device's
SM count is not known, and the validator re-deriving it."""
from dataclasses import replace

import pytest

from solver_plan.cluster import DeviceSpec, resolve_cluster
from solver_plan.cluster.loader import cluster_from_dict
from solver_plan.errors import ClusterError
from solver_plan.hybrid import contention, evaluate
from solver_plan.hybrid.moe_plan import evaluate_moe
from solver_plan.hybrid.moe_price import make_context, step_breakdown
from solver_plan.hybrid.stage_cost import tp_overlap_exposed_s
from solver_plan.hybrid.validate import validate_plan
from solver_plan.runtime import resolve_runtime
from test_moe import tiny

MODEL = "gpt2:layers=4,hidden=512,heads=8,head_dim=64,ffn=2048,seq=1024,positions=1024,vocab=32000"
CLUSTER = resolve_cluster("h100-4x8-ib", 16)
# large enough for several gradient buckets (a single bucket hides nothing: schedule.hidden_behind)
BIG = "gpt2:layers=8,hidden=4096,heads=32,head_dim=128,ffn=16384,seq=1024,positions=1024,vocab=32000"
PINNED = dict(dp=4, tp=2, pp=2, micro_batch_size=1, zero_stage=1, recompute="none")


def _unknown_sms(cluster):
    return replace(cluster, device=replace(cluster.device, sm_count=0, collective_ctas=0))


def test_shares_by_hand():
    h100 = CLUSTER.device
    assert (h100.sm_count, h100.collective_ctas) == (132, 16)
    assert contention.collective_share(h100) == pytest.approx(16 / 132)
    assert contention.tp_overlap_share(h100) == pytest.approx(8.5 / 132)
    assert contention.dispatch_share(h100, "deepep") == pytest.approx(20 / 132)
    assert contention.dispatch_share(h100, "hybridep") == pytest.approx(32 / 132)
    assert contention.dispatch_share(h100, "alltoall") == pytest.approx(16 / 132)
    assert contention.slowdown_s(0.5, 16 / 132) == pytest.approx(0.5 * 16 / 132)
    assert contention.slowdown_s(-1.0, 0.5) == 0.0
    a100 = resolve_cluster("a100-80gb-superpod", 8).device
    assert contention.collective_share(a100) == pytest.approx(24 / 108)
    unknown = DeviceSpec("chip", 1e14, 8e10)  # no SM count: no contention, never a guess
    assert contention.collective_share(unknown) == contention.dispatch_share(unknown, "deepep") == 0.0
    b200 = resolve_cluster("b200-8x8-ib", 8).device  # SMs known, NCCL's channels not published
    assert contention.collective_share(b200) == 0.0
    assert contention.dispatch_share(b200, "hybridep") == pytest.approx(32 / 148)


def test_device_keys_are_read_and_checked():
    links = {"intra_node": {"bandwidth": "900GB/s", "latency": "1us"}}
    own = cluster_from_dict({"name": "x", "devices_per_node": 8, "links": links,
                             "device": {"name": "chip", "matrix_flops": {"bf16": "100TFLOPS"}, "memory": "64GB",
                                        "hbm_bandwidth": "1TB/s",
                                        "sm_count": 100, "collective_ctas": 10,
                                        "matrix_efficiency": [[0, 1.0]], "memory_efficiency": [[0, 1.0]],
                                        "vector_efficiency": [[0, 1.0]]}})
    assert (own.device.sm_count, own.device.collective_ctas) == (100, 10)
    with pytest.raises(ClusterError, match="collective_ctas"):
        DeviceSpec("chip", 1e14, 8e10, sm_count=10, collective_ctas=11)
    with pytest.raises(ClusterError, match="collective_ctas"):
        DeviceSpec("chip", 1e14, 8e10, sm_count=0, collective_ctas=4)


def test_dense_plan_pays_hidden_sync_times_the_share():
    """Megatron-core hides the gradient reduce and the parameter gather: the step pays hidden x 16/132
    (H100) more; Megatron-LM 2021 hides nothing: no contention; the validator re-derives it."""
    core = evaluate(BIG, CLUSTER, 8, PINNED, memory_limit="none", runtime="megatron-core").plan
    assert core.terms.dp_sync_hidden_s > 0
    assert core.terms.contention_s == pytest.approx(core.terms.dp_sync_hidden_s * 16 / 132)
    assert core.step_time_s == pytest.approx(core.terms.pipeline_s + core.terms.dp_sync_s + core.terms.embedding_sync_s
                                             + core.terms.optimizer_s + core.terms.contention_s)
    assert validate_plan(core, CLUSTER) == []
    wrong = replace(core, terms=replace(core.terms, contention_s=0.0))
    assert any("contention" in p for p in validate_plan(wrong, CLUSTER))
    old = evaluate(BIG, CLUSTER, 8, PINNED, memory_limit="none", runtime="megatron-2021").plan
    assert old.terms.dp_sync_hidden_s == 0.0 and old.terms.contention_s == 0.0
    # a device whose SM count is not known: no contention, the same plan otherwise
    free = evaluate(BIG, _unknown_sms(CLUSTER), 8, PINNED, memory_limit="none", runtime="megatron-core").plan
    assert free.terms.contention_s == 0.0
    assert free.step_time_s == pytest.approx(core.step_time_s - core.terms.contention_s)


def test_fsdp_prefetch_pays_contention_every_micro_batch():
    r = evaluate(MODEL, CLUSTER, 8, dict(dp=8, tp=1, pp=1, micro_batch_size=1, zero_stage=3, recompute="none"),
                 memory_limit="none", runtime="torchtitan").plan
    assert r.terms.dp_sync_hidden_s > 0
    assert r.terms.contention_s == pytest.approx(r.terms.dp_sync_hidden_s * 16 / 132)


def test_tp_overlap_by_hand():
    """tp 4, 4 ms of communication, 10 ms of GEMMs, userbuffers overlap (nemo): 1 ms exposed (the first
    chunk), 3 ms hidden, slowing the GEMMs by 3 x 8.5 / 132 ms on an H100; without the device, none."""
    nemo = resolve_runtime("nemo")
    assert tp_overlap_exposed_s(4e-3, 10e-3, 4, nemo) == pytest.approx(1e-3)
    assert tp_overlap_exposed_s(4e-3, 10e-3, 4, nemo, CLUSTER.device) == pytest.approx(1e-3 + 3e-3 * 8.5 / 132)
    # communication-bound: 1 + (3 - 2) = 2 ms exposed, 2 ms hidden
    assert tp_overlap_exposed_s(4e-3, 2e-3, 4, nemo, CLUSTER.device) == pytest.approx(2e-3 + 2e-3 * 8.5 / 132)
    # megatron-core does not overlap: all of it, nothing hidden
    assert tp_overlap_exposed_s(4e-3, 10e-3, 4, resolve_runtime("megatron-core"), CLUSTER.device) == 4e-3


@pytest.mark.parametrize("dispatcher,sms", [("deepep", 20), ("alltoall", 16)])
def test_moe_alltoall_contention_by_hand(dispatcher, sms):
    """The all-to-all the "full" overlap hides (raw, from the no-overlap plan, less what stays exposed,
    from a device without SM count) slows the layer by hidden x the dispatcher's SMs / 132."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    point = dict(dp=8, tp=1, pp=1, ep=4, micro_batch_size=1, dispatcher=dispatcher)

    def terms(c, overlap):
        plan = evaluate_moe(tiny(), c, 64, point, a2a_overlap=overlap, memory_limit=None)
        ctx = make_context(tiny(), c, 64, None, None, None, None, overlap)
        return plan, step_breakdown(ctx, plan)

    _, raw = terms(_unknown_sms(cluster), "none")
    _, free = terms(_unknown_sms(cluster), "full")
    plan, priced = terms(cluster, "full")
    hidden = raw["all-to-all"] - free["all-to-all"]
    assert hidden > 0 and free["contention (all-to-all)"] == 0.0
    assert priced["all-to-all"] == pytest.approx(free["all-to-all"])
    assert priced["contention (all-to-all)"] == pytest.approx(hidden * sms / 132)
    assert sum(priced.values()) == pytest.approx(plan.step_time_s)


def test_moe_gradient_sync_contention():
    """The hidden gradient sync of a MoE plan (Megatron-core overlaps it) slows the step by hidden x
    16/132; hidden = unoverlapped (megatron-2021) less exposed sync."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    point = dict(dp=8, tp=1, pp=1, ep=4, micro_batch_size=1, zero_stage=1)
    core = evaluate_moe(tiny(), cluster, 64, point, memory_limit=None, runtime="megatron-core")
    raw = evaluate_moe(tiny(), cluster, 64, point, memory_limit=None, runtime="megatron-2021")
    hidden = raw.dp_sync_s - core.dp_sync_s
    assert raw.contention_s == 0.0
    assert core.contention_s == pytest.approx(hidden * 16 / 132)
    assert core.step_time_s == pytest.approx(core.pipeline_s + core.dp_sync_s + core.optimizer_s + core.contention_s)
