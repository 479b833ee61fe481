"""The attention kernel as a planning choice: a runtime that runs another fused attention kernel when its
configuration asks (LLM Foundry's attn_impl: the 2022 Triton kernel by default, FlashAttention-2 with
`flash`) offers it to the hybrid search (`Kernels.attention_offered`), a pin chooses one (`--fix
attention=NAME`), and the choice changes only the block's kernel price (`RuntimeProfile.with_attention`).

Checked: the profile facts and their validation; the pins; the enumeration; the search agrees with the
best of its two pinned searches (brute force over the kernel); the what-if under llm-foundry with
attention flash2 equals the what-if under the llm-foundry-flash profile (two routes, one price); a
kernel the device has no measurement of is neither offered nor accepted; the validator and the
exporters say what the plan chose."""
from dataclasses import replace

import pytest

from solver_plan.errors import InputError
from solver_plan.export.common import hybrid_view
from solver_plan.export.torchtitan import export_torchtitan
from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.hybrid.model import transformer_spec
from solver_plan.hybrid.space import check_fix, enumerate_space, parse_fix
from solver_plan.hybrid.validate import validate_plan
from solver_plan.cluster import resolve_cluster
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES
from solver_plan.runtime.profiles import Kernels

FOUNDRY, FLASH = RUNTIMES["llm-foundry"], RUNTIMES["llm-foundry-flash"]
# an MPT-like model at a long sequence, where the kernel decides the step (share s / 12 h = 1.3)
MPT = "gpt2:layers=4,hidden=1024,heads=8,head_dim=128,ffn=4096,seq=16384,positions=16384,vocab=50368"
PINS = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 3, "recompute": "none"}


def test_llm_foundry_offers_flash_attention_and_the_flash_profile_is_that_choice():
    assert FOUNDRY.attention_kernels == ("triton2022", "flash2")
    assert FLASH.attention_kernels == ("flash2", "triton2022")
    assert dict(FOUNDRY.sources)["attention_offered"] and dict(FLASH.sources)["attention_offered"]
    chosen = FOUNDRY.with_attention("flash2")
    assert chosen.kernels == FLASH.kernels and chosen.name == "llm-foundry"  # validated as the named runtime
    assert FOUNDRY.with_attention("") is FOUNDRY and FOUNDRY.with_attention("triton2022") is FOUNDRY
    with pytest.raises(InputError) as err:
        FOUNDRY.with_attention("cudnn")
    assert err.value.where == "--fix attention" and "triton2022, flash2" in str(err.value)
    # megatron-core offers no other kernel (its default is the fastest measured on Hopper)
    assert RUNTIMES["megatron-core"].attention_kernels == ("cudnn",)


def test_every_offered_kernel_says_how_the_runtime_is_set_to_run_it():
    assert FOUNDRY.attention_setting("flash2") == "model.attn_config.attn_impl: flash"
    assert FLASH.attention_setting("triton2022") == "model.attn_config.attn_impl: triton"
    with pytest.raises(InputError) as err:
        replace(FOUNDRY, kernels=replace(FOUNDRY.kernels, attention_settings=()))
    assert err.value.where == "attention_settings"
    with pytest.raises(InputError):
        replace(FOUNDRY, kernels=replace(FOUNDRY.kernels, attention_settings=FOUNDRY.kernels.attention_settings
                                         + (("cudnn", "x"),)))


@pytest.mark.parametrize("offered", [("triton2022",), ("flash2", "flash2"), ("",)])
def test_offered_kernels_must_be_other_distinct_families(offered):
    with pytest.raises(InputError) as err:
        replace(FOUNDRY, kernels=replace(FOUNDRY.kernels, attention_offered=offered))
    assert err.value.where == "attention_offered"


def test_unfused_runtime_offers_no_fused_kernel():
    unfused = Kernels(flash_attention=False, attention_dropout=True, causal_skip=False, fused_swiglu=False,
                      fused_cross_entropy=False, fp8_gemms=False, attention_offered=("flash2",))
    with pytest.raises(InputError) as err:
        replace(FOUNDRY, kernels=replace(unfused, attention_settings=(("flash2", "model.attn_config.attn_impl: "
                                                                                 "flash"),)))
    assert err.value.where == "attention_offered"
    with pytest.raises(InputError) as err:
        RUNTIMES["deepspeed"].with_attention("flash2")
    assert "runs no fused attention kernel" in str(err.value)


def test_attention_pin_is_parsed_and_checked():
    assert parse_fix("dp=8,attention=flash2") == {"dp": 8, "attention": "flash2"}
    assert check_fix({"attention": " "}) == {"attention": ""}  # the default, as a plan's parallelism says it
    for bad in (3, None, True):
        with pytest.raises(InputError) as err:
            check_fix({"attention": bad})
        assert err.value.where == "--fix attention"


def test_enumeration_yields_each_kernel_and_a_pin_keeps_one():
    spec = transformer_spec(MPT)
    one = list(enumerate_space(spec, 8, 8, 8, {"tp": 1, "pp": 1}))
    two = list(enumerate_space(spec, 8, 8, 8, {"tp": 1, "pp": 1}, attentions=("", "flash2")))
    assert {p.attention for p in one} == {""} and len(two) == 2 * len(one)
    assert [replace(p, attention="") for p in two if p.attention == "flash2"] == one
    pinned = list(enumerate_space(spec, 8, 8, 8, {"tp": 1, "pp": 1, "attention": "flash2"}, attentions=("", "flash2")))
    assert {p.attention for p in pinned} == {"flash2"} and len(pinned) == len(one)


def test_search_takes_the_better_kernel_and_agrees_with_each_pinned_search():
    kwargs = dict(devices=8, time_limit=60, runtime="llm-foundry", precision="bf16")
    free = plan_hybrid(MPT, "h100-80gb-superpod", 8, **kwargs)
    triton = plan_hybrid(MPT, "h100-80gb-superpod", 8, fix={"attention": "triton2022"}, **kwargs)
    flash = plan_hybrid(MPT, "h100-80gb-superpod", 8, fix={"attention": "flash2"}, **kwargs)
    assert {free.status, triton.status, flash.status} == {Status.OPTIMAL}
    assert triton.plan.parallelism.attention == "" and flash.plan.parallelism.attention == "flash2"
    assert free.plan.step_time_s == pytest.approx(min(triton.plan.step_time_s, flash.plan.step_time_s), rel=1e-12)
    # FlashAttention-2 measured ~2x the 2022 Triton kernel on an H100 at 16K tokens: it decides here
    assert free.plan.parallelism.attention == "flash2" and flash.plan.step_time_s < 0.8 * triton.plan.step_time_s
    assert "attention=flash2 (not the runtime's default kernel: set model.attn_config.attn_impl: flash)" in free.table()
    assert free.plan.to_dict()["attention_setting"] == "model.attn_config.attn_impl: flash"
    assert triton.plan.to_dict()["attention_setting"] is None
    assert free.plan.to_dict()["parallelism"]["attention"] == "flash2"


def test_what_if_with_a_kernel_prices_as_the_profile_that_runs_it():
    chosen = evaluate(MPT, "h100-80gb-superpod", 8, {**PINS, "attention": "flash2"}, runtime="llm-foundry",
                      precision="bf16")
    profile = evaluate(MPT, "h100-80gb-superpod", 8, PINS, runtime="llm-foundry-flash", precision="bf16")
    default = evaluate(MPT, "h100-80gb-superpod", 8, PINS, runtime="llm-foundry", precision="bf16")
    named = evaluate(MPT, "h100-80gb-superpod", 8, {**PINS, "attention": "triton2022"}, runtime="llm-foundry",
                     precision="bf16")
    assert chosen.plan.step_time_s == pytest.approx(profile.plan.step_time_s, rel=1e-12)
    assert chosen.plan.memory_per_device_bytes == pytest.approx(profile.plan.memory_per_device_bytes, rel=1e-12)
    assert named.plan.parallelism.attention == "" and named.plan.step_time_s == default.plan.step_time_s
    assert chosen.plan.step_time_s < default.plan.step_time_s
    assert "validator: step time and memory re-derived, agree" in chosen.notes


def test_a_kernel_the_device_has_not_measured_is_neither_offered_nor_accepted():
    # the B200's table has no 2022 Triton kernel: llm-foundry-flash keeps FlashAttention-2 there
    free = plan_hybrid(MPT, "b200-8x8-ib", 8, devices=8, time_limit=60, runtime="llm-foundry-flash",
                       precision="bf16")
    assert free.status == Status.OPTIMAL and free.plan.parallelism.attention == ""
    with pytest.raises(InputError) as err:
        plan_hybrid(MPT, "b200-8x8-ib", 8, devices=8, fix={"attention": "triton2022"}, runtime="llm-foundry-flash",
                    precision="bf16")
    assert err.value.where == "--fix attention" and "no measured efficiency" in str(err.value)
    with pytest.raises(InputError):
        evaluate(MPT, "h100-80gb-superpod", 8, {**PINS, "attention": "cudnn"}, runtime="llm-foundry")


def test_validator_and_exports_say_the_kernel():
    result = evaluate(MPT, "h100-80gb-superpod", 8, {**PINS, "attention": "flash2"}, runtime="llm-foundry",
                      precision="bf16")
    plan = result.plan
    cluster = resolve_cluster("h100-80gb-superpod", 8)
    assert validate_plan(plan, cluster) == []
    wrong = replace(plan, parallelism=replace(plan.parallelism, attention="cudnn"))
    assert any("attention kernel 'cudnn'" in p for p in validate_plan(wrong, cluster))
    record = {"status": "FEASIBLE", **plan.to_dict()}
    assert hybrid_view(record).attention == "flash2"
    exported = export_torchtitan(record)
    assert "attention kernel flash2" in exported and "(llm-foundry: model.attn_config.attn_impl: flash)" in exported
    assert "torchtitan picks its own attention kernel" in exported
    default = {"status": "FEASIBLE", **evaluate(MPT, "h100-80gb-superpod", 8, PINS, runtime="llm-foundry",
                                                precision="bf16").plan.to_dict()}
    assert "attention kernel" not in export_torchtitan(default)


@pytest.mark.parametrize("runtime", ["llm-foundry", "megatron-core"])
def test_a_plans_own_parallelism_reads_back_as_pins(runtime):
    from solver_plan.hybrid.space import FIX_KEYS
    found = plan_hybrid(MPT, "h100-80gb-superpod", 8, devices=8, time_limit=60, runtime=runtime, precision="bf16")
    pins = {k: v for k, v in found.plan.parallelism.to_dict().items() if k in FIX_KEYS}
    again = evaluate(MPT, "h100-80gb-superpod", 8, pins, runtime=runtime, precision="bf16")
    pinned = plan_hybrid(MPT, "h100-80gb-superpod", 8, devices=8, time_limit=60, fix=pins, runtime=runtime,
                         precision="bf16")
    assert again.plan.parallelism == found.plan.parallelism == pinned.plan.parallelism
    assert pinned.plan.step_time_s == pytest.approx(found.plan.step_time_s, rel=1e-12)


def test_a_kernel_without_a_measured_curve_is_priced_with_a_note_saying_so():
    small = "gpt2:layers=2,hidden=1024,heads=8,head_dim=128,ffn=4096,seq=4096,positions=4096,vocab=50368"
    # megatron-core's default kernel family (cuDNN's) has no curve on the MI300X: matrix curve, with a note
    guessed = plan_hybrid(small, "mi300x-8x8", 8, devices=8, time_limit=60)
    note = [n for n in guessed.notes if "no measured efficiency" in n]
    assert guessed.status == Status.OPTIMAL and len(note) == 1
    assert "cudnn attention kernel that megatron-core runs" in note[0] and "measured there: flash2" in note[0]
    measured = plan_hybrid(small, "h100-4x8-ib", 8, devices=8, time_limit=60)
    assert not [n for n in measured.notes if "no measured efficiency" in n]
    # the B200 has no curve of LLM Foundry's default Triton kernel: pinned, it is priced with the note
    pinned = evaluate(small, "b200-8x8-ib", 8, {**PINS, "attention": "triton2022"}, runtime="llm-foundry",
                      precision="bf16")
    assert any("triton2022 attention kernel that llm-foundry runs" in n for n in pinned.notes)
    unfused = evaluate(small, "mi300x-8x8", 8, PINS, runtime="megatron-2021", precision="bf16")
    assert not [n for n in unfused.notes if "no measured efficiency" in n]
