"""Token dispatchers of expert-parallel plans (hybrid/moe.py): Megatron-core's alltoall (one copy per
(token, expert) pair) against the node-deduplicating dispatch of DeepEP / the flex dispatcher (one
copy per (token, node) over the network, per (token, rank) over NVLink), with group-limited
routing read from the config.json: the expected nodes and ranks a token reaches by hand and
against a brute force over every routing, the dispatch seconds by hand, the pins and the export."""
from __future__ import annotations

import itertools
import json
from fractions import Fraction
from math import comb

import pytest

from solver_plan.cluster import LinkLevel, resolve_cluster
from solver_plan.cost.collectives import collective_time
from solver_plan.cost.compute import compute_time
from solver_plan.cost.routing import uniform, zipf
from solver_plan.data import data_dir
from solver_plan.errors import InputError
from solver_plan.hybrid import moe
from solver_plan.hybrid.moe_kernels import kernel_efficiency
from solver_plan.hybrid.moe_model import moe_model
from solver_plan.hybrid.moe_plan import evaluate_moe, plan_moe
from solver_plan.hybrid.moe_space import check_fix
from test_moe import tiny


def brute_units_hit(experts: int, top_k: int, units: int, groups: int = 1, chosen: int = 1) -> Fraction:
    """Every choice of `chosen` groups, then every top_k of their experts, equally likely: the mean
    number of units (experts / units contiguous experts each) reached."""
    per_unit, per_group = experts // units, experts // groups
    total, count = Fraction(0), 0
    for picked in itertools.combinations(range(groups), chosen):
        pool = [x for g in picked for x in range(g * per_group, (g + 1) * per_group)]
        for experts_hit in itertools.combinations(pool, top_k):
            total += len({x // per_unit for x in experts_hit})
            count += 1
    return total / count


def test_units_hit_by_hand():
    """8 experts, top-2, 2 nodes of 4: a node is missed when both experts are on the other one,
    C(4,2)/C(8,2) = 3/14, so 2 x 11/14 = 11/7 nodes, 11/14 of them the other node (Megatron's
    alltoall sends it k / 2 = 1 copy). With 4 groups of 2, 2 chosen: 13/9 nodes (fewer)."""
    assert moe.expected_units_hit(8, 2, 2) == pytest.approx(11 / 7)
    assert moe.expected_units_hit(8, 2, 2, 4, 2) == pytest.approx(13 / 9)
    # no groups: N (1 - C(E - E/N, k) / C(E, k))
    assert moe.expected_units_hit(256, 8, 8) == pytest.approx(8 * (1 - comb(224, 8) / comb(256, 8)))
    # DeepSeek-V3 on 8 nodes: at most topk_group = 4 nodes, 4 (1 - C(96, 8) / C(128, 8)) of them
    assert moe.expected_units_hit(256, 8, 8, 8, 4) == pytest.approx(4 * (1 - comb(96, 8) / comb(128, 8)))
    assert moe.expected_units_hit(256, 8, 8, 8, 4) <= 4


@pytest.mark.parametrize("experts,top_k,units,groups,chosen", [
    (8, 2, 2, 1, 1), (8, 2, 4, 1, 1), (8, 2, 2, 4, 2), (8, 2, 4, 4, 2), (8, 3, 4, 2, 1), (8, 2, 8, 4, 3),
    (12, 3, 3, 4, 2), (12, 2, 4, 3, 2), (16, 4, 8, 4, 2)])  # groups over units, units over groups, straddling
def test_units_hit_equals_brute_force(experts, top_k, units, groups, chosen):
    assert moe.expected_units_hit(experts, top_k, units, groups, chosen) == pytest.approx(
        float(brute_units_hit(experts, top_k, units, groups, chosen)), rel=1e-12)


def test_dedup_inside_a_node_by_hand():
    """Tiny MoE (4 experts, top-2), ep 2 on one node: a token reaches 2 (1 - C(2,2)/C(4,2)) = 5/3
    ranks, the other one 5/6 of the time: 16 tokens x 5/6 x 64 x 2 bytes over NVLink + one latency,
    against alltoall's 16 x 2 copies x 64 x 2 bytes pairwise (half of it off the device). The
    deduplicating kernels run at their measured efficiency (hybrid/moe_kernels.py; 2 ranks is below
    the tables' first point, so that point's: DeepEP's 0.853 at 8 H800s, HybridEP's 0.840 at 8 GB200s)."""
    model, cluster = tiny(), resolve_cluster("h100-4x8-ib", 2)
    balanced = moe.Routing(uniform(4))
    expected = (16 * 5 / 6 * 64 * 2 * cluster.g(LinkLevel.INTRA_NODE) + cluster.alpha(LinkLevel.INTRA_NODE))
    assert moe.dedup_alltoall_s(cluster, model, 1, 1, 2, 2, 2.0) == pytest.approx(expected)
    assert moe.alltoall_s(cluster, model, 1, 1, 2, 1, balanced, 2.0, "deepep") == pytest.approx(expected / 0.853)
    assert moe.alltoall_s(cluster, model, 1, 1, 2, 1, balanced, 2.0, "hybridep") == pytest.approx(expected / 0.840)
    assert moe.alltoall_s(cluster, model, 1, 1, 2, 1, balanced, 2.0, "alltoall") == collective_time(
        cluster, "all_to_all", 4096, 2, 2)


def test_dedup_across_nodes_by_hand():
    """8 experts, top-2, ep 8 x etp 2 on nodes of 8 (4 ep ranks per node, 2 nodes): network copies
    (1 - 1/2) x 11/7 per token, NVLink copies (1 - 1/4) x 8 (1 - C(7,2)/C(8,2)) = 3/4 x 2 per token,
    the slower of the two plus one latency of each level; DeepEP's kernels across 2 nodes at their
    measured 0.782 of that (hybrid/moe_kernels.py)."""
    model, cluster = tiny(experts=8), resolve_cluster("h100-4x8-ib", 16)
    per_node = moe.group_per_node(cluster, 2, 8)
    assert per_node == 4
    token = 16 * 64 * 2.0  # 16 tokens of h 64 in 2 bytes
    network = token * 0.5 * 11 / 7 * cluster.g(LinkLevel.INTER_NODE)
    nvlink = token * 0.75 * 8 * (1 - comb(7, 2) / comb(8, 2)) * cluster.g(LinkLevel.INTRA_NODE)
    expected = max(network, nvlink) + cluster.alpha(LinkLevel.INTER_NODE) + cluster.alpha(LinkLevel.INTRA_NODE)
    balanced = moe.Routing(uniform(8))
    assert moe.alltoall_s(cluster, model, 1, 1, 8, 2, balanced, 2.0, "deepep") == pytest.approx(expected / 0.782)


@pytest.mark.parametrize("experts,top_k,ep,etp", [(8, 2, 8, 1), (8, 2, 8, 2), (8, 2, 4, 4), (16, 4, 16, 2),
                                                  (4, 2, 2, 1), (8, 1, 8, 4)])
def test_dedup_never_slower_than_alltoall(experts, top_k, ep, etp):
    """A token reaches at most k ranks and k nodes, so the deduplicating dispatch never moves more bytes
    than alltoall's k copies, on either level, nor pays more latency: its link model (the kernels'
    time x their measured efficiency, hybrid/moe_kernels.py) is never slower. (The calibrated kernels
    themselves may be, where a token reaches k ranks anyway: NCCL's all-to-all is priced at the link's
    NCCL efficiency, the dedup kernels at theirs.)"""
    model, cluster = tiny(experts=experts, top_k=top_k), resolve_cluster("h100-4x8-ib", 32)
    per_node = moe.group_per_node(cluster, etp, ep)
    across = per_node < ep
    efficiency = kernel_efficiency("deepep", across, ep // per_node if across else ep)
    for load in (uniform(experts), zipf(experts, 0.5)):
        routing = moe.Routing(load)
        assert (moe.alltoall_s(cluster, model, 2, 1, ep, etp, routing, 2.0, "deepep") * efficiency
                <= moe.alltoall_s(cluster, model, 2, 1, ep, etp, routing, 2.0, "alltoall") * (1 + 1e-12))


def test_skew_is_never_priced_faster_with_deepep():
    cluster = resolve_cluster("h100-4x8-ib", 8)
    point = dict(dp=8, tp=1, pp=1, ep=4, micro_batch_size=1, dispatcher="deepep")
    balanced = evaluate_moe(tiny(), cluster, 16, point, memory_limit=None)
    for skew in ("zipf:0.5", "histogram:10/1/1/1"):
        assert evaluate_moe(tiny(), cluster, 16, point, routing=skew, memory_limit=None).step_time_s \
            >= balanced.step_time_s


def test_group_limited_routing_is_read_from_the_config():
    """DeepSeek-V3's config.json: n_group 8, topk_group 4 (topk_method noaux_tc); Qwen3 and Mixtral
    route over all experts."""
    v3 = moe_model(str(data_dir() / "hf-configs" / "deepseek-v3.json"))
    assert (v3.expert_groups, v3.groups_per_token) == (8, 4)
    qwen = moe_model(str(data_dir() / "hf-configs" / "qwen3-30b-a3b.json"))
    assert (qwen.expert_groups, qwen.groups_per_token) == (1, 1)
    with pytest.raises(InputError, match="expert groups"):
        tiny(expert_groups=3)
    with pytest.raises(InputError, match="expert groups"):
        tiny(expert_groups=4, groups_per_token=1)  # 1 group of 1 expert cannot give top-2


def test_dispatcher_pins():
    assert check_fix("dispatcher=deepep") == {"dispatcher": "deepep"}
    with pytest.raises(InputError, match="alltoall, deepep, hybridep"):
        check_fix("dispatcher=nccl")
    cluster = resolve_cluster("h100-4x8-ib", 8)
    with pytest.raises(InputError, match="runs dropless"):
        evaluate_moe(tiny(), cluster, 16, dict(dp=8, tp=1, pp=1, ep=4, micro_batch_size=1, dispatcher="deepep",
                                                capacity=1.25), memory_limit=None)
    result = plan_moe(tiny(), cluster, 16, fix={"dispatcher": "deepep"}, time_limit=None)
    assert result.plan.point.dispatcher == "deepep"
    assert result.plan.to_dict()["parallelism"]["dispatcher"] == "deepep"
    # the deduplicating dispatch is never slower than alltoall: the search with it is no slower
    assert result.step_time_s <= plan_moe(tiny(), cluster, 16, time_limit=None).step_time_s


def test_megatron_export_carries_the_dispatcher(tmp_path, monkeypatch):
    from solver_plan.export import export_plan
    from solver_plan.resources import REPO_ROOT
    from test_export import command_args

    monkeypatch.chdir(REPO_ROOT)
    plan = json.loads((REPO_ROOT / "tests" / "fixtures" / "plans" / "moe-qwen3-30b-ep8.json").read_text())
    assert command_args(export_plan(plan, "megatron"))["--moe-token-dispatcher-type"] == "alltoall"
    body = plan.get("plan", plan)
    body["parallelism"]["dispatcher"] = "deepep"
    args = command_args(export_plan(plan, "megatron"))
    assert (args["--moe-token-dispatcher-type"], args["--moe-enable-deepep"]) == ("flex", True)
    body["parallelism"]["dispatcher"] = "hybridep"
    text = export_plan(plan, "megatron")
    assert command_args(text)["--moe-flex-dispatcher-backend"] == "hybridep" and "core_dev_r0.15.0" in text
    body["parallelism"]["dispatcher"] = "deepep"
    assert "token dispatcher deepep" in export_plan(plan, "deepspeed")


@pytest.mark.parametrize("overlap", ["none", "full"])
def test_memoised_layer_costs_equal_fresh_ones(overlap):
    """The layer costs' shared parts are memoised per context (moe_price._dense_terms, _expert_terms,
    the ends and p2p): every point priced in one context, in enumeration order and reversed, equals
    that point priced alone in a fresh context, bit for bit (a key missing a component would mix two
    points' parts)."""
    from solver_plan.hybrid.moe_price import _costs, price, time_bound
    from solver_plan.hybrid.moe_space import enumerate_points

    cluster = resolve_cluster("h100-4x8-ib", 16)
    model = tiny(experts=8, expert_groups=4, groups_per_token=2)

    def context():
        from solver_plan.hybrid.moe_price import make_context
        return make_context(model, cluster, 32, None, a2a_overlap=overlap)

    points = [p for pins in ({}, {"dispatcher": "deepep"})
              for p in enumerate_points(model, 16, 8, 32, pins, (None, 1.25))][::7]
    assert len(points) > 100 and {p.dispatcher for p in points} == {"alltoall", "deepep"}
    for order in (points, points[::-1]):
        shared = context()
        for p in order:
            fresh = context()
            assert _costs(shared, p) == _costs(fresh, p)
            assert time_bound(shared, p) == time_bound(fresh, p)
            assert price(shared, p).step_time_s == price(fresh, p).step_time_s


@pytest.mark.parametrize("dispatcher", ["deepep", "hybridep"])
def test_a_deduplicating_dispatcher_with_a_capacity_is_refused_by_name(dispatcher):
    """Megatron-core's flex dispatcher runs dropless only: the pin pair is an input error naming both,
    not an empty space answered INFEASIBLE; dropless and alltoall with a capacity stay accepted."""
    from solver_plan.hybrid.moe_space import check_fix as check_moe_fix
    with pytest.raises(InputError, match=f"dispatcher={dispatcher} runs dropless.*capacity=1.25"):
        check_moe_fix(f"dispatcher={dispatcher},capacity=1.25")
    assert check_moe_fix(f"dispatcher={dispatcher},capacity=dropless") == {"dispatcher": dispatcher, "capacity": None}
    assert check_moe_fix("dispatcher=alltoall,capacity=1.25") == {"dispatcher": "alltoall", "capacity": 1.25}
    with pytest.raises(InputError, match="runs dropless"):  # the Python API's capacity argument likewise
        plan_moe(tiny(), resolve_cluster("h100-4x8-ib", 8), 16, fix={"dispatcher": dispatcher}, capacity=1.25,
                 time_limit=None)


def test_alltoall_sorts_by_local_expert_by_hand():
    """Megatron's alltoall dispatcher with 2 local experts (tiny MoE: 4 experts, top-2, ep 2) copies the
    routed tokens 4 times per forward (permute, sort by local expert, sort back, un-permute), the
    deduplicating ones twice; with one local expert (ep 4) every dispatcher twice. The busiest rank of
    the balanced load: n = 1/2 x 2 x 2 x 16 = 32 copies of h 64 in 2 bytes, each pass reading and
    writing n h e bytes."""
    model, cluster = tiny(), resolve_cluster("h100-4x8-ib", 4)
    routing = moe.Routing(uniform(4))
    one_pass = compute_time(cluster, 0.0, 2.0 * 32 * 64 * 2.0, unit="vector")
    assert moe.permute_passes(model, 2, "alltoall") == 4 and moe.permute_passes(model, 2, "deepep") == 2
    assert moe.permute_passes(model, 4, "alltoall") == 2
    assert (moe.permute_s(cluster, model, 1, 1, 2, 1, routing, 2.0, "alltoall")
            - moe.permute_s(cluster, model, 1, 1, 2, 1, routing, 2.0, "hybridep")) == pytest.approx(2 * one_pass)
    assert moe.permute_s(cluster, model, 1, 1, 4, 1, routing, 2.0, "alltoall") == pytest.approx(
        moe.permute_s(cluster, model, 1, 1, 4, 1, routing, 2.0, "deepep"))
