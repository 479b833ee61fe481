"""Expert-parallel plans (issue 24): the MoE model's counts against the importer's graph, memory and
all-to-all volume of a tiny MoE by hand, routing skew, and the search against a brute force."""
from __future__ import annotations

import json

import pytest

from solver_plan.cluster import resolve_cluster
from solver_plan.cost.collectives import collective_time
from solver_plan.cost.routing import histogram, parse_capacity, parse_load, uniform, zipf
from solver_plan.data import data_dir
from solver_plan.errors import InputError
from solver_plan.graph.importers.hf import load_hf_config
from solver_plan.hybrid import moe
from solver_plan.hybrid.moe_model import MoEModel, moe_model
from solver_plan.hybrid.moe_plan import brute_force, evaluate_moe, plan_moe, skew_robustness
from solver_plan.hybrid.moe_price import make_context, stage_memory
from solver_plan.hybrid.moe_space import MoEPoint, enumerate_points
from solver_plan.result import Status

CONFIGS = data_dir() / "hf-configs"
PUBLISHED = {k: v for k, v in json.loads((CONFIGS / "published.json").read_text()).items() if not k.startswith("_")}
MOE_CONFIGS = ["deepseek-v3", "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen1.5-moe-a2.7b", "mixtral-8x7b-v0.1"]


@pytest.mark.parametrize("name", MOE_CONFIGS)
def test_counts_equal_the_importer_graph_and_published(name):
    model = moe_model(str(CONFIGS / f"{name}.json"))
    graph = load_hf_config(CONFIGS / f"{name}.json", {"batch": "1", "seq": "64"})
    assert model.total_params == graph.total_params == PUBLISHED[name]["exact"] - PUBLISHED[name]["omitted"]
    active = PUBLISHED[name]["active_nominal"]
    assert abs(model.active_params - active) / active < 0.03


def test_deepseek_v3_layers():
    model = moe_model(str(CONFIGS / "deepseek-v3.json"))
    assert model.layers == 61 and model.moe_layers[:4] == (False, False, False, True) and model.moe_layer_count == 58
    assert (model.experts, model.top_k, model.shared_ffn) == (256, 8, 2048)


def tiny(**kw) -> MoEModel:
    """4 experts, top-2, h 64, f_e 128, 4 MoE layers, seq 16."""
    h = 64
    args = dict(name="tiny-moe", hidden=h, seq=16, vocab=100, heads=4, attention_gemms=((h, h),) * 4,
                attention_extra_params=0, scores_width=h, values_width=h, attention_stored=4 * h,
                attention_recomputable=3 * h, kv_width=2 * h,
                moe_layers=(True,) * 4, dense_ffn=0, experts=4, top_k=2, expert_ffn=128)
    return MoEModel(**{**args, **kw})


def test_tiny_moe_memory_by_hand():
    """dp 2, tp 1, pp 1, ep 2, no ZeRO, mixed precision: each device holds 2 of the 4 experts of each
    layer (4 x 2 x 3 x 64 x 128 parameters), all of the rest (4 layers x (4 x 64^2 attention + 2 x 64
    norms + 64 x 4 router) + 100 x 64 embedding + 64 final norm + 100 x 64 head); 2 + 2 + 12 bytes each."""
    cluster = resolve_cluster("h100-4x8-ib", 2)
    ctx = make_context(tiny(), cluster, 4, None)
    p = MoEPoint(dp=2, tp=1, pp=1, ep=2, etp=1, micro_batch_size=1, micro_batches=2, zero_stage=0)
    experts = 4 * 2 * 3 * 64 * 128
    dense = 4 * (4 * 64 * 64 + 2 * 64 + 64 * 4) + 100 * 64 + 64 + 100 * 64
    m = stage_memory(ctx, p, 0, 4, 0)
    assert m.weights == pytest.approx(2 * (dense + experts))
    assert m.gradients == pytest.approx(2 * (dense + experts))
    assert m.optimizer == pytest.approx(12 * (dense + experts))
    # ZeRO-1 (distributed optimizer): dense optimizer state over dp = 2, experts over edp = 2 x 1 / 2 = 1
    m1 = stage_memory(ctx, MoEPoint(2, 1, 1, 2, 1, 1, 2, zero_stage=1), 0, 4, 0)
    assert m1.optimizer == pytest.approx(12 * (dense / 2 + experts))


def test_tiny_moe_alltoall_volume_by_hand():
    """Each device sends its b s / tp = 16 tokens x k = 2 copies x h = 64 x 2 bytes = 4096 bytes per
    all-to-all; balanced it receives as much; on one node the ep = 2 group is priced on NVLink."""
    model, cluster = tiny(), resolve_cluster("h100-4x8-ib", 2)
    balanced = moe.Routing(uniform(4))
    assert moe.dispatch_bytes(model, 1, 1, 2.0) == 16 * 2 * 64 * 2 == 4096
    assert moe.routed_copies(model, 1, 1, 2, 1, balanced) == 32  # 2 experts x 16 copies each
    assert moe.alltoall_s(cluster, model, 1, 1, 2, 1, balanced, 2.0) == collective_time(cluster, "all_to_all",
                                                                                       4096, 2, 2)
    # zipf:1 over 4 experts: shares 12/25, 6/25, 4/25, 3/25; rank 0 (experts 0, 1) is routed 18/25
    skewed = moe.Routing(zipf(4, 1.0))
    assert skewed.rank_share(2) == pytest.approx(18 / 25)
    assert moe.routed_copies(model, 1, 1, 2, 1, skewed) == pytest.approx(18 / 25 * 2 * 2 * 16)
    assert moe.alltoall_s(cluster, model, 1, 1, 2, 1, skewed, 2.0) == pytest.approx(
        collective_time(cluster, "all_to_all", 4096 * 2 * 18 / 25, 2, 2))
    # across nodes when the expert group leaves the node (h100-4x8-ib: 8 per node; ep 2 x etp 8)
    assert moe.group_per_node(cluster, 8, 2) == 1 and moe.group_per_node(cluster, 1, 2) == 2


def test_capacity_pads_and_drops():
    load = zipf(4, 1.0)
    assert load.dropped(None) == 0.0
    assert load.dropped(1.0) == pytest.approx(12 / 25 - 1 / 4)  # expert 0 over its 1/4
    padded = moe.Routing(load, 1.25)
    assert padded.rank_share(2) == pytest.approx(1.25 / 2) and padded.expert_shares(2) == (1.25 / 4,) * 2


@pytest.mark.parametrize("routing", ["zipf:0.5", "zipf:1", "zipf:2", [5, 1, 1, 1], [1, 1, 1, 5], [0, 0, 3, 1]])
def test_skew_is_never_priced_faster_than_balance(routing):
    cluster = resolve_cluster("h100-4x8-ib", 8)
    point = {"dp": 4, "tp": 2, "pp": 1, "ep": 4, "etp": 1, "micro_batch_size": 2, "recompute": "none"}
    for overlap in ("none", "shared-expert", "full"):
        kwargs = dict(a2a_overlap=overlap, memory_limit=None)
        balanced = evaluate_moe(tiny(shared_ffn=64), cluster, 16, point, **kwargs)
        skewed = evaluate_moe(tiny(shared_ffn=64), cluster, 16, point, routing=routing, **kwargs)
        assert skewed.step_time_s >= balanced.step_time_s
        assert skewed.memory_per_device_bytes >= balanced.memory_per_device_bytes



@pytest.mark.parametrize("pp, v, m, warmup", [
    (1, 1, 8, 1),  # combined_1f1b without pipelining: the first forward (and the last backward)
    (8, 2, 128, 14 + 8 + 1),  # interleaved: (pp - 1) 2 + (v - 1) pp + the overlap's extra forward
    (2, 24, 32, 2 + 46 + 1),
    (16, 1, 120, 14 + 2 + 7),  # DualPipe's first rank: steps 1-3
    (4, 4, 2, 6 + 12 + 1),  # warm-up longer than the 8 passes: all of them
])
def test_unpaired_fraction_by_hand(pp, v, m, warmup):
    assert moe.unpaired_fraction(pp, v, m) == pytest.approx(min(1.0, warmup / (m * v)))


def test_full_overlap_leaves_the_unpaired_passes_alltoall_exposed():
    """Under "full" the MoE layer's exposed all-to-all is the paired passes' leftover plus the unpaired
    share u of what the overlap hid: none >= full >= full with every pass paired, by hand."""
    from solver_plan.hybrid.moe_price import _layer_cost
    cluster = resolve_cluster("h100-4x8-ib", 8)
    args = (True, 1, 2, 4, 1, "none", None, 1)  # MoE layer, tp 1, b 2, ep 4, etp 1, no recompute, dropless, cp 1
    raw = _layer_cost(make_context(tiny(), cluster, 16, None, a2a_overlap="none"), *args).alltoall_s
    full = make_context(tiny(), cluster, 16, None, a2a_overlap="full")
    paired = _layer_cost(full, *args, 0.0).alltoall_s
    u = moe.unpaired_fraction(2, 2, 4)  # (2 - 1) 2 + 2 + 1 = 5 of 8 passes
    assert u == pytest.approx(5 / 8)
    assert _layer_cost(full, *args, u).alltoall_s == pytest.approx(paired + u * (raw - paired))
    assert raw >= _layer_cost(full, *args, u).alltoall_s >= paired and raw > 0
    point = {"dp": 2, "tp": 1, "pp": 2, "ep": 2, "micro_batch_size": 1, "virtual_stages": 2}
    for overlap in ("shared-expert", "full"):
        assert (evaluate_moe(tiny(), resolve_cluster("h100-4x8-ib", 4), 16, point, a2a_overlap=overlap,
                             memory_limit=None).step_time_s
                <= evaluate_moe(tiny(), resolve_cluster("h100-4x8-ib", 4), 16, point,
                                memory_limit=None).step_time_s * (1 + 1e-12))

def test_skewed_search_is_never_faster_and_its_plan_is_chosen_for_the_skew():
    """The optimum under skew is never below the balanced optimum; the plan chosen for the balanced
    load, priced under the skew, is never better than the plan chosen for the skew."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    kwargs = dict(time_limit=None, memory_limit=None)
    balanced = plan_moe(tiny(), cluster, 16, **kwargs)
    skewed = plan_moe(tiny(), cluster, 16, routing="zipf:1.5", **kwargs)
    assert balanced.status == skewed.status == Status.OPTIMAL
    assert skewed.step_time_s >= balanced.step_time_s
    (_, blind), = skew_robustness(tiny(), cluster, 16, balanced.plan, ["zipf:1.5"])
    assert blind >= skewed.step_time_s * (1 - 1e-12)


@pytest.mark.parametrize("limit", [None, 0.6e9, 1e6])
def test_search_equals_brute_force_on_a_tiny_space_with_ep(limit):
    """Every point (dp x tp x pp = 8, ep 1-4, etp, micro-batch, virtual stages, recomputation, ZeRO 0-2)
    priced: the pruned search finds the same best step time, or none where nothing fits."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    model = tiny(moe_layers=(False, True, True, True))
    result = plan_moe(model, cluster, 16, routing="zipf:0.7", memory_limit=limit, time_limit=None)
    ctx = make_context(model, cluster, 16, limit, routing="zipf:0.7")
    points = list(enumerate_points(model, 8, cluster.devices_per_node, 16, {}))
    assert {p.ep for p in points} == {1, 2, 4}
    best = brute_force(ctx, points)
    if best is None:
        assert result.status == Status.INFEASIBLE and result.plan is None
    else:
        assert result.status == Status.OPTIMAL
        assert result.step_time_s == pytest.approx(best.step_time_s, rel=1e-12)
        assert limit is None or result.plan.memory_per_device_bytes <= limit


def test_fix_pins_ep_and_etp_and_json_fields():
    cluster = resolve_cluster("h100-4x8-ib", 16)
    result = plan_moe(tiny(experts=8), cluster, 32, fix="ep=8,etp=1,capacity=1.25", time_limit=None,
                      memory_limit=None)
    par = result.plan.to_dict()["parallelism"]
    assert (par["ep"], par["etp"], par["capacity"]) == (8, 1, 1.25)
    assert par["edp"] == par["dp"] * par["tp"] // 8
    assert result.plan.to_dict()["routing"] == "uniform" and result.plan.dropped_fraction == 0.0


@pytest.mark.parametrize("fix, message", [
    ("ep=3", "--fix ep"), ("etp=0", "--fix etp"), ("zero_stage=4", "--fix zero_stage"), ("sp=2", "unknown key 'sp'"),
    ("capacity=0.5", "capacity"), ("recompute=some", "--fix recompute"),
])
def test_bad_pins_are_input_errors(fix, message):
    with pytest.raises(InputError, match=message):
        plan_moe(tiny(), resolve_cluster("h100-4x8-ib", 8), 16, fix=fix, time_limit=None)


@pytest.mark.parametrize("value, message", [("zipf:-1", "zipf exponent"), ("zipf:x", "zipf exponent"),
                                            ("histogram:1/2", "histogram has 2 counts"), ("gauss", "expects uniform"),
                                            ([0, 0, 0, 0], "not all zero")])
def test_bad_routing_is_an_input_error(value, message):
    with pytest.raises(InputError, match=message):
        parse_load(value, 4)


def test_routing_forms():
    assert parse_load(None, 4) == uniform(4)
    assert parse_load("histogram:1/1/2/0", 4).shares == (0.25, 0.25, 0.5, 0.0)
    assert histogram([2, 2, 2, 2], 4).rank_share(2) == pytest.approx(0.5)
    assert parse_capacity("dropless") is None and parse_capacity("1.5") == 1.5


def test_non_moe_config_is_refused():
    with pytest.raises(InputError, match="llama-2-7b.json.*mixture of experts"):
        moe_model(str(CONFIGS / "llama-2-7b.json"))


def test_deepseek_v3_ep_shards_the_experts():
    """DeepSeek-V3 as DeepSeek trained it (tp 1, pp 16, ep 64, ZeRO-1, 2,048 GPUs): experts sharded 64
    ways, so a stage's expert weights are 1/64 of its layers' experts (not every expert on every replica)."""
    cluster = resolve_cluster("h100-80gb-superpod", 2048)
    plan = evaluate_moe(str(CONFIGS / "deepseek-v3.json"), cluster, 15360,
                        {"dp": 128, "tp": 1, "pp": 16, "ep": 64, "micro_batch_size": 1, "recompute": "selective"},
                        precision="fp8", a2a_overlap="full", memory_limit=None)
    middle = plan.stages[8]
    per_expert_layer = 256 * 3 * 7168 * 2048 / 64
    assert middle.moe_layers >= 3
    assert middle.memory.weights >= 2 * middle.moe_layers * per_expert_layer
    assert middle.memory.weights < 2 * (middle.moe_layers * per_expert_layer + 4 * 0.6e9)


# --- the hybrid command sends mixtures of experts to the expert-parallel planner ---------------------
def _tiny_config(tmp_path):
    cfg = {"model_type": "qwen3_moe", "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
           "num_experts": 8, "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_attention_heads": 4,
           "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 256, "vocab_size": 1000,
           "tie_word_embeddings": False}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return f"{path}:seq=64"


def test_hybrid_command_plans_experts(tmp_path, capsys):
    from solver_plan.cli import main

    out = tmp_path / "plan.json"
    assert main(["hybrid", "--model", _tiny_config(tmp_path), "--cluster", "h100-4x8-ib", "--devices", "8",
                 "--batch", "16", "--fix", "ep=4,etp=1", "--routing", "zipf:1", "--a2a-overlap", "shared-expert",
                 "--out", str(out)]) == 0
    plan = json.loads(out.read_text())["plan"]
    assert plan["kind"] == "moe-hybrid" and plan["routing"] == "zipf:1" and plan["a2a_overlap"] == "shared-expert"
    assert {"dp", "tp", "pp", "ep", "etp", "edp", "capacity", "micro_batch_size", "virtual_stages", "recompute",
            "zero_stage"} <= set(plan["parallelism"])
    assert (plan["parallelism"]["ep"], plan["parallelism"]["etp"]) == (4, 1)
    assert "experts etp 1 x ep 4" in capsys.readouterr().out


@pytest.mark.parametrize("stage, name", [(0, "no ZeRO"), (1, "distributed optimizer"), (2, "ZeRO-2"),
                                         (3, "ZeRO-3 / FSDP")])
def test_hybrid_command_names_every_zero_stage(tmp_path, capsys, stage, name):
    from solver_plan.cli import main

    assert main(["hybrid", "--model", _tiny_config(tmp_path), "--cluster", "h100-4x8-ib", "--devices", "8",
                 "--batch", "16", "--fix", f"ep=4,pp=1,zero_stage={stage}"]) == 0
    assert f", {name}\n" in capsys.readouterr().out


@pytest.mark.parametrize("extra, message", [(["--fix", "ep=3"], "--fix ep"), (["--routing", "zipf:9"], "routing"),
                                            (["--fix", "sequence_parallel=true"], "unknown key")])
def test_hybrid_command_bad_moe_input_is_one_line(tmp_path, capsys, extra, message):
    from solver_plan.cli import main

    code = main(["hybrid", "--model", _tiny_config(tmp_path), "--cluster", "h100-4x8-ib", "--devices", "8",
                 "--batch", "16", *extra])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and len(err.splitlines()) == 1


def test_recomputation_trades_memory_for_time():
    """none > selective > full in activation memory, the reverse in step time; full keeps one layer's
    activations as its working set."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    plans = {r: evaluate_moe(tiny(shared_ffn=64), cluster, 16, {"dp": 4, "tp": 2, "pp": 1, "ep": 4,
                                                                "micro_batch_size": 2, "recompute": r},
                             memory_limit=None) for r in ("none", "selective", "full")}
    acts = {r: p.stages[0].memory.activations for r, p in plans.items()}
    assert acts["none"] > acts["selective"] > acts["full"]
    assert plans["none"].step_time_s < plans["selective"].step_time_s < plans["full"].step_time_s
    assert plans["full"].stages[0].memory.recompute_working > 0


def test_context_parallelism_splits_the_sequence():
    """cp = 2: half the tokens per rank (activations about half, all-to-all volume half), the dense
    weights replicated over cp and their optimizer state sharded over dp x cp; the search takes cp."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    model = tiny(shared_ffn=64)
    base = {"tp": 1, "pp": 1, "ep": 4, "micro_batch_size": 1, "zero_stage": 1}
    one = evaluate_moe(model, cluster, 16, {**base, "dp": 8}, memory_limit=None)
    two = evaluate_moe(model, cluster, 16, {**base, "dp": 4, "cp": 2}, memory_limit=None)
    assert two.point.edp == one.point.edp == 2 and two.point.devices == 8
    assert two.stages[0].memory.weights == pytest.approx(one.stages[0].memory.weights)
    assert two.stages[0].memory.optimizer == pytest.approx(one.stages[0].memory.optimizer)
    per_microbatch_one = one.stages[0].memory.activations / one.point.micro_batches
    per_microbatch_two = two.stages[0].memory.activations / two.point.micro_batches
    assert per_microbatch_two < per_microbatch_one
    assert moe.dispatch_bytes(model, 1, 2, 2.0) == moe.dispatch_bytes(model, 1, 1, 2.0) / 2
    found = plan_moe(model, cluster, 16, fix="cp=2", time_limit=None, memory_limit=None)
    assert found.plan.point.cp == 2 and found.plan.to_dict()["parallelism"]["cp"] == 2


def test_capacity_costs_at_least_dropless_balanced_and_reports_drops():
    """A capacity factor pads every expert to c x its balanced share: never cheaper than dropless
    balanced routing where the GPU's work sets the pace (wide experts: the host's issue time, which
    padding hides, does not bind); under skew it drops the excess copies (said in the plan) instead
    of slowing. Where the host binds (the tiny model's 16-token GEMMs), padding removes the dropless
    sync's stall and may be cheaper (hybrid/moe_host.py)."""
    cluster = resolve_cluster("h100-4x8-ib", 8)
    point = {"dp": 4, "tp": 2, "pp": 1, "ep": 4, "micro_batch_size": 2}
    wide = tiny(hidden=1024, expert_ffn=4096, seq=2048, attention_gemms=((1024, 1024),) * 4, scores_width=1024,
                values_width=1024, attention_stored=4096, attention_recomputable=3072, kv_width=2048)
    assert (evaluate_moe(wide, cluster, 16, {**point, "capacity": 1.25}, memory_limit=None).step_time_s
            >= evaluate_moe(wide, cluster, 16, point, memory_limit=None).step_time_s)
    padded = evaluate_moe(tiny(), cluster, 16, {**point, "capacity": 1.25}, memory_limit=None)
    skewed = evaluate_moe(tiny(), cluster, 16, {**point, "capacity": 1.25}, routing="zipf:1", memory_limit=None)
    assert padded.dropped_fraction == 0.0
    assert skewed.step_time_s == pytest.approx(padded.step_time_s)
    assert skewed.dropped_fraction == pytest.approx(12 / 25 - 1.25 / 4)
    assert skewed.to_dict()["parallelism"]["capacity"] == 1.25


def test_fp8_keeps_attention_core_router_and_head_in_16_bits():
    """Under fp8 only the Transformer Engine linears run in fp8: the attention core (TE's fp8
    dot-product attention is off by default), the router and Megatron-core's output layer cost what
    they cost in bf16."""
    from solver_plan.hybrid import moe_price

    cluster = resolve_cluster("h100-4x8-ib", 8)
    model = moe_model(str(CONFIGS / "qwen3-30b-a3b.json"))
    fp8 = make_context(model, cluster, 64, None, precision="fp8")
    bf16 = make_context(model, cluster, 64, None, precision="bf16")
    assert fp8.dtype == "fp8" and fp8.activation_dtype == "bf16"
    assert moe_price._core_s(fp8, 1, 1, 1) == moe_price._core_s(bf16, 1, 1, 1)
    p = MoEPoint(dp=8, tp=1, pp=1, ep=8, etp=1, micro_batch_size=1, micro_batches=8)
    assert moe_price._ends_s(fp8, p) == moe_price._ends_s(bf16, p)
    # the GEMMs themselves do run faster in fp8
    assert moe_price._gemm_s(fp8, 4096, 2048, 4096, 1) < moe_price._gemm_s(bf16, 4096, 2048, 4096, 1)


@pytest.mark.parametrize("point", [
    {"dp": 4, "tp": 2, "pp": 1, "ep": 4, "micro_batch_size": 2},
    {"dp": 2, "tp": 1, "pp": 4, "ep": 2, "micro_batch_size": 1, "virtual_stages": 1, "recompute": "selective"},
])
def test_step_breakdown_sums_to_the_step(point):
    from solver_plan.hybrid.moe_price import step_breakdown

    cluster = resolve_cluster("h100-4x8-ib", 8)
    model = tiny(shared_ffn=64, moe_layers=(False,) + (True,) * 7)
    plan = evaluate_moe(model, cluster, 16, point, memory_limit=None)
    parts = step_breakdown(make_context(model, cluster, 16, None), plan)
    assert sum(parts.values()) == pytest.approx(plan.step_time_s, rel=1e-9)
    assert parts["grouped GEMMs"] > 0 and parts["all-to-all"] > 0 and all(v >= -1e-15 for v in parts.values())


def test_fp8_saves_gemm_inputs_in_one_byte_by_hand():
    """tiny (h 64, f_e 128, top-2 of 4, seq 16), ep 2, b 1: 16 tokens, n = 32 routed copies at the
    busiest rank, 2 local experts. Per token: 2 x 64 pre-MLP norm input (the MoE layer's own TENorm),
    2 x 64 router input, 4 x 4 fp32 probabilities, 4 x (2 x 4
    + 1) of the fused permutation's int32 row map; nothing of the combine (Megatron-core 0.15 applies
    the probabilities in the weighted SwiGLU, so the un-permutation saves its row map only). Per copy:
    4 fp32 probability + 4 int32 sort place; bf16 2 x (64 + 3 x 128); fp8 (g = 1) 1 x 64 + (2 x 2 + 1)
    x 128; selective keeps the expert input, probability and sort place."""
    model = tiny()
    balanced = moe.Routing(uniform(4))
    common = 16 * (2 * 2 * 64 + 4 * 4 + 4 * 9) + 32 * (4 + 4)
    assert moe.moe_activation_bytes(model, 1, 1, 2, 1, balanced, "none", 2.0) == common + 32 * 2 * (64 + 3 * 128)
    assert moe.moe_activation_bytes(model, 1, 1, 2, 1, balanced, "none", 2.0, 1.0) == common + 32 * (64 + 5 * 128)
    assert moe.moe_activation_bytes(model, 1, 1, 2, 1, balanced, "selective", 2.0, 1.0) == common + 32 * 64
    # ep 4: one local expert, no sort by local expert (token_dispatcher.py sorts only when it holds more)
    assert (moe.moe_activation_bytes(model, 1, 1, 2, 1, balanced, "none", 2.0)
            - moe.moe_activation_bytes(model, 1, 1, 4, 1, balanced, "none", 2.0)) == 32 * 4
    # a shared expert (f_s 64) under fp8: SwiGLU input 2 x 2 x 64, down input 1 x 64, its own fp8 input copy 64
    shared = tiny(shared_ffn=64)
    assert (moe.moe_activation_bytes(shared, 1, 1, 2, 1, balanced, "none", 2.0, 1.0)
            - moe.moe_activation_bytes(model, 1, 1, 2, 1, balanced, "none", 2.0, 1.0)) == 16 * (5 * 64 + 64)
    # whole plans: fp8 keeps less than bf16, the same step structure
    cluster = resolve_cluster("h100-4x8-ib", 8)
    point = {"dp": 4, "tp": 2, "pp": 1, "ep": 4, "micro_batch_size": 2}
    fp8 = evaluate_moe(shared, cluster, 16, point, precision="fp8", memory_limit=None)
    bf16 = evaluate_moe(shared, cluster, 16, point, precision="bf16", memory_limit=None)
    assert fp8.stages[0].memory.activations < bf16.stages[0].memory.activations


def test_fp8_casts_write_both_copies_by_hand():
    """Transformer Engine's casts read e = 2 bytes and write the GEMM's and the weight gradient's
    fp8 copies: 4 bytes per element of the input forward and of the output gradient backward
    (per-tensor torchao-style casts, the default: 3)."""
    from solver_plan.cost.compute import memory_time
    from solver_plan.cost.kernels import fp8_cast_bytes
    from solver_plan.hybrid import moe_price

    assert fp8_cast_bytes(10.0, 20.0) == (30.0, 60.0)
    assert fp8_cast_bytes(10.0, 20.0, 2.0, fp8_copies=2) == (40.0, 80.0)
    cluster = resolve_cluster("h100-4x8-ib", 8)
    ctx = make_context(tiny(), cluster, 16, None, precision="fp8")
    assert moe_price._fp8_casts_s(ctx, 1e6, 3e6) == (memory_time(cluster.device, 4e6), memory_time(cluster.device, 12e6))
    assert moe_price._fp8_casts_s(make_context(tiny(), cluster, 16, None, precision="bf16"), 1e6, 3e6) == (0.0, 0.0)


def test_moe_attention_core_is_the_dense_definition():
    """The expert-parallel pricer's attention core is `cost.attention`'s, as the dense and per-operator
    paths price it: a causal cuDNN kernel at the H100's measured efficiency for the rank's query
    length (s / cp), backward 2.5x the forward; without fused attention, the scores' passes."""
    from solver_plan.cost.attention import attention_core_seconds
    from solver_plan.cost.compute import compute_time
    from solver_plan.hybrid import moe_price

    cluster = resolve_cluster("h100-4x8-ib", 8)
    model = moe_model(str(CONFIGS / "qwen3-30b-a3b.json"))
    ctx = make_context(model, cluster, 64, None, precision="bf16")
    b, tp, cp = 2, 2, 2
    flops = b * model.seq * model.attention_core_flops_per_token() / (tp * cp)
    moved = 2.0 * b * model.seq * (2 * model.scores_width + 2 * model.values_width) / (tp * cp)
    expected = attention_core_seconds(
        cluster, flops=flops, hbm_bytes=moved, dense_forward_s=compute_time(cluster, flops, moved, dtype="bf16"),
        fused=True, causal_skip=True, backend="cudnn", dtype="bf16", query_length=model.seq / cp)
    forward, backward = moe_price._core_s(ctx, b, tp * cp, cp)
    assert (forward, backward) == pytest.approx(expected)
    assert backward == pytest.approx(2.5 * forward)
    unfused = make_context(model, cluster, 64, None, precision="bf16", runtime="megatron-2021")
    assert sum(moe_price._core_s(unfused, b, tp * cp, cp)) > sum(expected)


def test_attention_and_dense_mlp_kept_bytes_by_hand():
    """tiny (h 64, 4 heads, attention_stored 4 h, context 64 wide), 16 tokens, tp 2. bf16 (e = g = 2):
    16 x (2 x (2 x 64 + 256) + 4 x 4) / 2; fp8 (g = 1): less 1 x 16 x (64 + 64) / 2 for the fp8 norm
    output and context copies, plus 1 x 16 x 64 / 2 for the context kept twice (the attention's O in
    bf16 and the output projection's fp8 copy). Dense MLP (f 96): 16 x ((2 + 1) x 64 + (2 x 2 + 1) x 96) / 2."""
    from solver_plan.hybrid.moe_price import attention_kept_bytes, dense_mlp_kept_bytes

    model = tiny(dense_ffn=96)
    bf16 = 16 * (2 * (2 * 64 + 256) + 4 * 4) / 2
    assert attention_kept_bytes(model, 16, 2, 2.0, 2.0) == bf16
    assert attention_kept_bytes(model, 16, 2, 2.0, 1.0) == bf16 - 16 * (64 + 64) / 2 + 16 * 64 / 2
    assert dense_mlp_kept_bytes(model, 16, 2, 2.0, 1.0) == 16 * (3 * 64 + 5 * 96) / 2
    assert dense_mlp_kept_bytes(model, 16, 2, 2.0, 2.0) == 16 * (4 * 64 + 6 * 96) / 2


def test_qwen3_qk_norm_inputs_are_kept_by_hand():
    """Qwen3-30B-A3B (32 heads, 4 kv heads, head dim 128): q, k, v and the context (2 x 32 + 2 x 4) x 128,
    plus the q/k norms' saved inputs (32 + 4) x 128 (Megatron's q_layernorm / k_layernorm are TE
    RMSNorms, which save a contiguous copy of their input; the attention saves the rotated q, k)."""
    model = moe_model(str(CONFIGS / "qwen3-30b-a3b.json"))
    assert model.attention_stored == (2 * 32 + 2 * 4) * 128 + (32 + 4) * 128
    assert model.attention_recomputable == (32 + 2 * 4) * 128
