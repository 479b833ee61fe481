"""The llm-foundry runtime profile (Composer + PyTorch FSDP1, MPT) and LLM Foundry's published H100 runs
(data/published/runs-2022-2025.yaml, source llmfoundry2024_h100): the profile resolves by name and names a
source for every fact it sets; each row's batch arithmetic and parameter count agree with the table, and
its pinned configuration is priced with the validator agreeing (errors against the measurements:
scripts/hybrid_vs_published.py, docs/hybrid-accuracy.md)."""
from dataclasses import replace, MISSING, fields
from pathlib import Path

import pytest
import yaml

from solver_plan.hybrid import evaluate
from solver_plan.hybrid.model import transformer_spec
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES, resolve_runtime, runtime_names
from solver_plan.runtime.profiles import NCCL_BYTES_PER_COMMUNICATOR, RuntimeProfile

RUNS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data/published/runs-2022-2025.yaml").read_text())
FOUNDRY = [p for p in RUNS["points"] if p.get("runtime") in ("llm-foundry", "llm-foundry-flash")]


def _set_facts(obj) -> list[str]:
    """Fields of a profile part that say something: a value other than the field's default (a required
    field: other than False / 0 / "")."""
    out = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, (tuple, RuntimeProfile)) or f.name in ("name", "summary", "sources", "kernels",
                                                                      "overlap", "memory"):
            continue
        default = f.default if f.default is not MISSING else type(value)()
        if value != default:
            out.append(f.name)
    return out


def test_llm_foundry_resolves_by_name():
    profile = resolve_runtime(" LLM-Foundry ")
    assert profile is RUNTIMES["llm-foundry"] and "llm-foundry" in runtime_names()
    # FSDP1 with Composer's DEFAULT mixed precision: bf16 compute, fp32 reduce, fp32 sharded parameters
    assert profile.fp32_gradients and profile.sharded_fp32_params and profile.overlap.bucket_per_layer
    assert profile.kernels.flash_attention and profile.kernels.fused_cross_entropy and not profile.kernels.fp8_gemms


def test_llm_foundry_names_a_source_for_every_fact_it_sets():
    profile = RUNTIMES["llm-foundry"]
    keys = [fact for fact, source in profile.sources if source]
    facts = _set_facts(profile) + _set_facts(profile.kernels) + _set_facts(profile.overlap) + [
        name for name in _set_facts(profile.memory)
        if not (name == "nccl_per_communicator" and profile.memory.nccl_per_communicator == NCCL_BYTES_PER_COMMUNICATOR)]
    missing = [name for name in facts if not any(name == key or name.startswith(key) for key in keys)]
    assert not missing, missing


def test_llm_foundry_flash_differs_only_in_its_attention_kernel():
    """attn_impl triton (the yamls' default: the 2022 Triton kernel) against attn_impl flash (FlashAttention-2):
    the same Composer stack otherwise; the large-scale table's 1b, 7b and 70b rows ran flash (sweep.py)."""
    triton, flash = RUNTIMES["llm-foundry"], RUNTIMES["llm-foundry-flash"]
    assert (triton.kernels.attention_backend, flash.kernels.attention_backend) == ("triton2022", "flash2")
    assert replace(flash, name=triton.name, summary=triton.summary, sources=triton.sources,
                   kernels=triton.kernels) == triton
    large_scale = {p["name"] for p in FOUNDRY if p["gpus"] >= 128}
    assert large_scale and all(p["runtime"] == "llm-foundry-flash" for p in FOUNDRY if p["name"] in large_scale)
    assert all(p["runtime"] == "llm-foundry" for p in FOUNDRY if p["name"] not in large_scale)


def test_the_triton_kernel_prices_the_attention_slower_than_flash_attention_2():
    """One MPT-7b micro-batch at 8K tokens on an H100: the attention core at the triton2022 curve (0.133 of
    the peak at 8K) against flash2's (0.30); everything else alike."""
    model = "gpt2:layers=32,hidden=4096,heads=32,head_dim=128,ffn=16384,seq=8192,positions=8192,vocab=50368"
    fix = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 3, "recompute": "none"}
    steps = {name: evaluate(model, "h100-80gb-superpod", 8, fix, memory_limit="none", runtime=name,
                            precision="bf16").plan.step_time_s for name in ("llm-foundry", "llm-foundry-flash")}
    # causal attention FLOPs of the step: (forward 1 + backward 2.5) x 4 b a s^2 d / 2 x 32 layers
    attention = 3.5 * 4 * 32 * 8192 ** 2 * 128 / 2 * 32
    expected = attention / 989e12 * (1 / 0.133 - 1 / 0.3)
    assert steps["llm-foundry"] - steps["llm-foundry-flash"] == pytest.approx(expected, rel=0.02)


def test_llm_foundry_rows_match_their_table():
    assert 8 <= len(FOUNDRY) <= 12
    source = RUNS["sources"]["llmfoundry2024_h100"]
    assert source["url"].startswith("https://github.com/mosaicml/llm-foundry/blob/")
    assert {p["fix"]["zero_stage"] for p in FOUNDRY} == {2, 3} and {p["fix"]["recompute"] for p in FOUNDRY} == {"none", "full"}
    for p in FOUNDRY:
        fix = p["fix"]
        assert p["source"] == "llmfoundry2024_h100" and fix["dp"] == p["gpus"] and fix["tp"] == fix["pp"] == 1
        assert p["global_batch"] == p["gpus"] * fix["micro_batch_size"] * p["grad_accum"], p["name"]
        spec = transformer_spec(p["model"])
        assert spec.positions == spec.seq  # MPT's learned positions: max_seq_len = the row's sequence
        assert spec.total_params == p["num_params"], p["name"]


@pytest.mark.parametrize("point", FOUNDRY, ids=lambda p: p["name"])
def test_llm_foundry_row_is_priced_and_validated(point):
    result = evaluate(point["model"], point["cluster"], point["global_batch"], point["fix"], memory_limit="none",
                      runtime=point["runtime"], precision=point["precision"])
    assert result.status == Status.FEASIBLE, result.notes
    assert result.notes[-1].startswith("validator: step time and memory re-derived")
    assert result.plan.devices == point["gpus"] and result.plan.parallelism.zero_stage == point["fix"]["zero_stage"]


def test_the_search_offers_llm_foundry_only_what_composer_runs():
    """Composer 0.17 runs FSDP1 over all ranks only (no tensor, pipeline or context parallelism; ZeRO 0,
    2 or 3): the unpinned search recommends such a plan, where without the restriction it chose tp, pp,
    cp or ZeRO-1 on these rows; a pinned dimension the runtime lacks is still priced (a what-if)."""
    from solver_plan.hybrid import plan_hybrid
    profile = resolve_runtime("llm-foundry")
    assert profile.dimensions == () and profile.zero_stages == (0, 2, 3)
    assert {"dimensions", "zero_stages"} <= {fact for fact, _ in profile.sources}
    assert not profile.runs_layout({"tp": 2, "pp": 1, "cp": 1}, 3) and not profile.runs_layout({"tp": 1}, 1)
    assert profile.runs_layout({"tp": 1, "pp": 1, "cp": 1}, 2) and profile.runs_layout({"tp": 2}, None) is False
    assert resolve_runtime("megatron-core").runs_layout({"tp": 8, "pp": 4, "cp": 2}, 1)
    row = next(p for p in FOUNDRY if "x8 seq 8192" in p["name"])
    free = plan_hybrid(row["model"], "h100-80gb-superpod", row["global_batch"], devices=row["gpus"], time_limit=30,
                       runtime="llm-foundry", precision="bf16")
    assert free.status is Status.OPTIMAL
    par = free.plan.parallelism
    assert (par.tp, par.pp, par.cp) == (1, 1, 1) and par.zero_stage in (0, 2, 3)
    pinned = plan_hybrid(row["model"], "h100-80gb-superpod", row["global_batch"], devices=row["gpus"], time_limit=30,
                         runtime="llm-foundry", precision="bf16", fix={"tp": 2, "zero_stage": 1})
    assert pinned.plan is not None and (pinned.plan.parallelism.tp, pinned.plan.parallelism.zero_stage) == (2, 1)
    assert any("llm-foundry does not run tp=2, zero_stage=1" in note for note in pinned.notes)
    assert not any("does not run" in note for note in free.notes)
    from solver_plan.hybrid import evaluate as evaluate_pinned
    what_if = evaluate_pinned(row["model"], "h100-80gb-superpod", row["global_batch"],
                              {"dp": 4, "tp": 2, "pp": 1, "micro_batch_size": 1, "zero_stage": 3},
                              runtime="llm-foundry", precision="bf16")
    assert any("does not run tp=2 (it runs data parallelism alone, ZeRO 0/2/3)" in note for note in what_if.notes)


def test_a_runtime_profile_refuses_unknown_dimensions_and_stages():
    from dataclasses import replace

    from solver_plan.errors import InputError
    base = resolve_runtime("torchtitan")
    with pytest.raises(InputError, match="dimensions"):
        replace(base, dimensions=("tp", "ep"))
    with pytest.raises(InputError, match="zero_stages"):
        replace(base, zero_stages=())


# Composer's per-step work outside the model's forward and backward (issue 22, s39): what the profile
# declares is priced exactly as its docstring formula says, and only where the runtime declares it.
MPT_1B = "gpt2:layers=24,hidden=2048,heads=16,head_dim=128,ffn=8192,seq=2048,positions=2048,vocab=50368"


def test_composer_train_metrics_add_their_logit_passes_to_the_head():
    from dataclasses import replace

    from solver_plan.cluster import resolve_cluster
    from solver_plan.cost.compute import compute_time
    from solver_plan.hybrid.stage_cost import BlockCoster, train_metric_s

    cluster, spec = resolve_cluster("h100-80gb-superpod"), transformer_spec(MPT_1B)
    foundry = resolve_runtime("llm-foundry")
    assert foundry.kernels.metric_bytes_per_logit == 28.0  # two eager fp32 cross entropies, 14 bytes a logit each
    none = replace(foundry, name="llm-foundry-without-metrics",
                   kernels=replace(foundry.kernels, metric_bytes_per_logit=0.0))
    expected = compute_time(cluster.first_devices(1), 0.0, 28.0 * 4 * spec.seq * spec.vocab, unit="vector")
    assert train_metric_s(cluster.first_devices(1), spec, 4, 1, foundry) == pytest.approx(expected)
    assert train_metric_s(cluster.first_devices(1), spec, 4, 1, none) == 0.0
    assert train_metric_s(cluster.first_devices(1), spec, 4, 1, resolve_runtime("megatron-core")) == 0.0
    with_metrics = BlockCoster(spec, cluster, runtime=foundry, precision="bf16").profile(1, 4)
    without = BlockCoster(spec, cluster, runtime=none, precision="bf16").profile(1, 4)
    assert with_metrics.head_s - without.head_s == pytest.approx(expected)
    assert with_metrics.block_s == pytest.approx(without.block_s)


def test_composer_update_prices_its_eager_optimizer_and_gradient_clipping():
    from solver_plan.cluster import resolve_cluster
    from solver_plan.cost.compute import compute_time
    from solver_plan.cost.model_state import ADAM_FLOPS_PER_PARAM
    from solver_plan.hybrid import schedule
    from solver_plan.hybrid.memory import runtime_state, state_bytes

    cluster = resolve_cluster("h100-80gb-superpod")
    foundry = resolve_runtime("llm-foundry")
    state = runtime_state(state_bytes(cluster.device), foundry)
    params, dp = 6.7e9, 8
    local = params / dp
    assert foundry.optimizer_bytes_per_param == 92.0  # DecoupledAdamW's 8 kernels (80) + clip_grad_norm_ (12)
    priced = schedule.optimizer_s(cluster, params, dp, 3, state, foundry)
    assert priced == pytest.approx(compute_time(cluster, ADAM_FLOPS_PER_PARAM * local, 92.0 * local, unit="vector"))
    fused = schedule.optimizer_s(cluster, params, dp, 3, state, None)  # megatron-core: no own count, one pass
    assert fused == pytest.approx(compute_time(cluster, ADAM_FLOPS_PER_PARAM * local,
                                               local * state.model.optimizer_step_bytes, unit="vector"))
    assert priced > fused


def test_fsdp1_gradient_preparation_is_paid_per_micro_batch_only_with_replicas():
    from dataclasses import replace

    from solver_plan.cluster import resolve_cluster
    from solver_plan.cost.compute import compute_time
    from solver_plan.hybrid.evaluate import layer_s
    from solver_plan.hybrid.space import Parallelism
    from solver_plan.hybrid.stage_cost import BlockCoster, grad_reduce_prep_s

    cluster, spec = resolve_cluster("h100-80gb-superpod"), transformer_spec(MPT_1B)
    foundry = resolve_runtime("llm-foundry")
    assert foundry.kernels.grad_reduce_prep_bytes == 18.0  # flatten (4) + cast to fp32 (6) + pre-divide (8)
    expected = compute_time(cluster.first_devices(1), 0.0, 18.0 * spec.block_params, unit="vector")
    assert grad_reduce_prep_s(cluster.first_devices(1), spec, 1, foundry) == pytest.approx(expected)
    assert grad_reduce_prep_s(cluster.first_devices(1), spec, 1, resolve_runtime("torchtitan")) == 0.0
    profile = BlockCoster(spec, cluster, runtime=foundry, precision="bf16").profile(1, 4)
    assert profile.grad_reduce_prep_s == pytest.approx(expected)
    base = profile.block_s + profile.grad_accumulate_s  # llm-foundry declares no separate accumulation kernel
    assert profile.grad_accumulate_s == 0.0
    many = Parallelism(dp=8, tp=1, pp=1, micro_batch_size=4, micro_batches=2, zero_stage=3)
    one = replace(many, dp=1)
    assert layer_s(many, profile)[0] == pytest.approx(base + expected)
    assert layer_s(one, profile)[0] == pytest.approx(base)


def test_a_runtime_profile_refuses_negative_per_step_bytes():
    from dataclasses import replace

    from solver_plan.errors import InputError

    foundry = resolve_runtime("llm-foundry")
    with pytest.raises(InputError, match="optimizer_bytes_per_param"):
        replace(foundry, optimizer_bytes_per_param=-1.0)
    with pytest.raises(InputError, match="metric_bytes_per_logit"):
        replace(foundry, kernels=replace(foundry.kernels, metric_bytes_per_logit=-28.0))


def test_the_whole_h100_table_is_priced_at_its_published_shapes():
    """data/published/llm-foundry-{h100-bf16,a100-80gb}.csv (every row of the tables; the A100 one's head-dimension-64
    models left out): the yamls' shapes give exactly each
    row's NumParams, each row's batch is GPUs x micro batch x accumulation, and one short and one long row
    price as scripts/llm_foundry_sweep.py does (the Triton kernel slower than FlashAttention-2, more so at
    long sequences)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
    import llm_foundry_sweep as sweep

    rows = sweep.rows()
    a100 = sweep.rows("A100 80GB")
    assert len(rows) == 52 and {r["model"] for r in rows} == set(sweep.SHAPES) and len(a100) == 44
    for row in rows + a100:
        assert transformer_spec(sweep.model_spec(row)).total_params == int(row["num_params"]), row
        assert int(row["global_batch"]) == int(row["gpus"]) * int(row["micro_batch"]) * int(row["grad_accum"])
    short = next(r for r in rows if r["model"] == "1b" and r["seq"] == "2048" and r["gpus"] == "8")
    long = next(r for r in rows if r["model"] == "1b" and r["seq"] == "65536")
    ratio = {id(r): sweep.price(r, "llm-foundry") / sweep.price(r, "llm-foundry-flash") for r in (short, long)}
    assert 1.0 < ratio[id(short)] < ratio[id(long)]
