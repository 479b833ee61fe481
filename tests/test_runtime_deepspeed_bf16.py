"""The deepspeed-bf16 runtime profile (DeepSpeed's BF16_Optimizer, BigScience's BLOOM) and its published run:
the profile resolves by name and sources what it changes; its fp32 gradient buffer is counted whole (not
sharded, 4 bytes a parameter) and reduced in fp32; only ZeRO-1 is offered; the BLOOM row's batch arithmetic
holds and its pinned configuration is priced with the validator agreeing."""
from pathlib import Path

import pytest
import yaml

from solver_plan.hybrid import evaluate, plan_hybrid
from solver_plan.result import Status
from solver_plan.runtime import RUNTIMES, resolve_runtime

RUNS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data/published/runs-2022-2025.yaml").read_text())
BLOOM = next(p for p in RUNS["points"] if p["name"] == "BLOOM 176B 384 GPUs")
CLUSTER = str(Path(__file__).resolve().parents[1] / BLOOM["cluster"])
SMALL = "gpt2:layers=8,hidden=1024,heads=8,head_dim=128,ffn=4096,seq=1024,positions=1024,vocab=32000"
FIX = {"dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 1, "recompute": "full", "zero_stage": 1}


def test_resolves_by_name_and_sources_its_facts():
    profile = resolve_runtime("deepspeed-bf16")
    assert profile is RUNTIMES["deepspeed-bf16"]
    assert profile.fp32_gradients and not RUNTIMES["deepspeed"].fp32_gradients and profile.zero_stages == (1,)
    assert {"fp32_gradients", "zero_stages"} <= {key for key, _ in profile.sources}
    assert profile.kernels == RUNTIMES["deepspeed"].kernels and profile.overlap == RUNTIMES["deepspeed"].overlap


def test_fp32_gradient_buffer_is_whole_and_reduced_in_fp32():
    plain = evaluate(SMALL, "a100x8-80gb", 16, FIX, memory_limit="none", runtime="deepspeed", precision="bf16")
    bf16 = evaluate(SMALL, "a100x8-80gb", 16, FIX, memory_limit="none", runtime="deepspeed-bf16", precision="bf16")
    for stage_plain, stage_bf16 in zip(plain.plan.stages, bf16.plan.stages):
        assert stage_bf16.memory.gradients == pytest.approx(2 * stage_plain.memory.gradients)
        assert stage_bf16.memory.optimizer == pytest.approx(stage_plain.memory.optimizer)
    assert bf16.plan.terms.dp_sync_s > plain.plan.terms.dp_sync_s


def test_the_search_offers_zero_1_only():
    result = plan_hybrid(SMALL, "a100x8-80gb", 16, runtime="deepspeed-bf16", precision="bf16", time_limit=20)
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE) and result.plan.parallelism.zero_stage == 1


def test_bloom_row_batch_arithmetic_and_pinned_price():
    fix = BLOOM["fix"]
    assert fix["dp"] * fix["tp"] * fix["pp"] == BLOOM["gpus"] == 384
    assert BLOOM["global_batch"] % (fix["dp"] * fix["micro_batch_size"]) == 0  # 128 micro-batches a replica
    result = evaluate(BLOOM["model"], CLUSTER, BLOOM["global_batch"], fix, memory_limit="none",
                      runtime=BLOOM["runtime"], precision=BLOOM["precision"])
    assert result.status is Status.FEASIBLE and result.plan.parallelism.micro_batches == 128
    assert any("validator" in note and "agree" in note for note in result.notes)
    stage_layers = [s.layers for s in result.plan.stages]
    assert sum(stage_layers) == 70 and result.plan.stages[0].embedding  # the embedding on the first stage
