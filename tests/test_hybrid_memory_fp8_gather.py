"""FSDP's fp8 all-gather (torchao float8 with torchtitan's float8.enable_fsdp_float8_all_gather, profile
torchtitan-compile-fp8-gather; hybrid/memory.py fp8_gather_saving) checked by hand on a tiny model: a
gathered block keeps its Linear weights at 1 byte a parameter, its norms at 2."""
import pytest

from solver_plan.cost.precision import TrainingPrecision
from solver_plan.hybrid import memory as mem
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.runtime import resolve_runtime

# tiny Llama-style model: 2 blocks, h 8, ffn 16, 2 heads of 4, 1 kv head, vocab 32, RMSNorm, untied
TINY = TransformerSpec("tiny", layers=2, hidden=8, ffn=16, heads=2, head_dim=4, seq=4, vocab=32, positions=4,
                       gated_mlp=True, kv_heads=1, rms_norm=True, learned_positions=False, tied_embeddings=False)
GATHER = "torchtitan-compile-fp8-gather"
FP8 = mem.runtime_state(mem.precision_state(TrainingPrecision.mixed("fp8")), GATHER)
BF16 = mem.runtime_state(mem.precision_state(TrainingPrecision.mixed("bf16")), GATHER)
# per block: q 8 x 8, k and v 8 x 4 each, output 8 x 8 = 192; w1, w3, w2 3 x 8 x 16 = 384; the rest
# (2 RMSNorms 16, q/k/v biases 16 and the output's 8: TransformerSpec's default biases) stays bf16
LINEAR, REST = 192 + 384, 16 + 16 + 8
BLOCK = LINEAR + REST


def test_saving_by_hand():
    assert TINY.block_params == BLOCK
    assert FP8.compute == 1.0 and BF16.compute == 2.0 and FP8.weights == 2.0
    # (2 - 1) bytes per Linear parameter, / t
    assert mem.fp8_gather_saving(TINY, 1, FP8, GATHER) == LINEAR
    assert mem.fp8_gather_saving(TINY, 2, FP8, GATHER) == LINEAR / 2
    assert mem.gathered_block_bytes(TINY, 2, FP8, GATHER) == (1 * LINEAR + 2 * REST) / 2
    # nothing in bf16, nothing under a profile that gathers the working weights
    assert mem.fp8_gather_saving(TINY, 1, BF16, GATHER) == 0.0
    assert mem.fp8_gather_saving(TINY, 1, FP8, "torchtitan-compile") == 0.0
    assert mem.gathered_block_bytes(TINY, 1, FP8, "torchtitan-compile") == 2 * BLOCK
    # the profile differs from torchtitan-compile in that flag only
    a, b = resolve_runtime(GATHER), resolve_runtime("torchtitan-compile")
    assert a.fp8_weight_gather and not b.fp8_weight_gather
    assert (a.kernels, a.overlap, a.memory) == (b.kernels, b.overlap, b.memory)


def test_fsdp_without_a_pipeline_gathers_two_fp8_blocks():
    kw = dict(layers=2, stage=0, pp=1, tp=1, dp=4, micro_batch=1, micro_batches=1, recompute="full",
              sequence_parallel=False, zero_stage=3, schedule="1f1b", state=FP8)
    fp8 = mem.stage_memory(TINY, runtime=GATHER, **kw)
    plain = mem.stage_memory(TINY, runtime="torchtitan-compile", **kw)
    # zero3_gather_bytes: two gathered blocks, 2 x (1 x 576 + 2 x 40) instead of 2 x 2 x 616
    assert plain.buffers - fp8.buffers == pytest.approx(2 * LINEAR)
    # all-gather pool: max(root, block) + block: root 2 x 520 = 1040 bytes, block 656 instead of 1232
    assert 2 * (32 * 8 + 8 + 32 * 8) == 1040 and LINEAR + 2 * REST == 656 and 2 * BLOCK == 1232
    assert plain.fragmentation - fp8.fragmentation == pytest.approx((1232 + 1232) - (1040 + 656))
    # the sharded weights, gradients and optimizer state do not change
    assert (fp8.weights, fp8.gradients, fp8.optimizer) == (plain.weights, plain.gradients, plain.optimizer)


def test_fsdp_under_a_pipeline_keeps_every_block_in_fp8():
    kw = dict(layers=2, stage=0, pp=2, tp=2, dp=4, micro_batch=1, micro_batches=2, recompute="full",
              sequence_parallel=False, zero_stage=1, schedule="1f1b", state=FP8, pipelined_fsdp=True)
    fp8 = mem.stage_memory(TINY, runtime=GATHER, **kw)
    plain = mem.stage_memory(TINY, runtime="torchtitan-compile", **kw)
    # the stage's 2 blocks stay gathered all step (reshard_after_forward=False): 2 x 576 / 2 bytes less
    assert plain.weights - fp8.weights == pytest.approx(2 * LINEAR / 2)
    assert fp8.weights == pytest.approx(mem.stage_weights_bytes(TINY, plain.weights / 2, 2, 2, 4, 1, True, FP8,
                                                                GATHER))
    # the pools' two gathered units: root (embedding 32 x 8 / 2, bf16: 256 bytes) against a block
    # (656 / 2 = 328 bytes in fp8, 1232 / 2 = 616 in bf16), the larger plus a block
    assert plain.fragmentation - fp8.fragmentation == pytest.approx((616 + 616) - (328 + 328))
    # without the pipelined flag (ZeRO-1 proper: no FSDP units) nothing changes
    kw["pipelined_fsdp"] = False
    assert mem.stage_memory(TINY, runtime=GATHER, **kw) == mem.stage_memory(TINY, runtime="torchtitan-compile",
                                                                            **kw)


def test_a_405b_stage_by_hand():
    # Llama 3.1 405B block: h 16384, 128 heads of 128, 8 kv heads, ffn 53248: Linear parameters
    # 16384 x (16384 + 2 x 1024) + 16384 x 16384 + 3 x 16384 x 53248 = 3.187e9; / t 8, 1 byte each
    from solver_plan.hybrid.model import transformer_spec
    spec = transformer_spec("data/published/models/llama-3.1-405b.json:seq=8192")
    linear = 16384 * (16384 + 2 * 1024) + 16384 * 16384 + 3 * 16384 * 53248
    assert spec.block_params - 2 * spec.norm_params == linear  # no biases
    assert mem.fp8_gather_saving(spec, 8, FP8, GATHER) == pytest.approx(linear / 8)
    assert linear / 8 / 2**30 == pytest.approx(0.371, abs=1e-3)


def test_the_validator_and_the_state_bound_follow_the_fp8_gather():
    """A pinned FSDP-under-PP plan priced with fp8 all-gather passes the independent validator (which
    re-derives every stage's memory), holds less than without it, and the search's cheap state bound
    stays below every point's memory floor."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.deadline import Deadline
    from solver_plan.hybrid import search
    from solver_plan.hybrid.evaluate import memory_floor
    from solver_plan.hybrid.model import transformer_spec
    from solver_plan.hybrid.validate import validate_plan
    fix = {"dp": 2, "tp": 2, "pp": 2, "micro_batch_size": 1, "zero_stage": 3, "recompute": "full",
           "sequence_parallel": True}
    plans = {r: search.evaluate("data/hf-configs/llama-3-8b.json:layers=4,seq=512", "h100-4x8-ib", 8, fix, memory_limit="none",
                                precision="fp8", runtime=r).plan for r in (GATHER, "torchtitan-compile")}
    cluster = resolve_cluster("h100-4x8-ib", 8)
    assert validate_plan(plans[GATHER], cluster, enforce_memory=False) == []
    spec = transformer_spec("data/hf-configs/llama-3-8b.json:layers=4,seq=512")
    saving = mem.fp8_gather_saving(spec, 2, FP8, GATHER)
    # each stage keeps its blocks gathered; its all-gather pool holds the root unit (the embedding or
    # the output projection, 128256 x 4096 / 2 bf16, larger than a block) and one block
    assert 2 * 128256 * 4096 / 2 > 2 * spec.block_params / 2
    for a, b in zip(plans[GATHER].stages, plans["torchtitan-compile"].stages):
        assert a.layers == b.layers  # the same split: the fp8 gather changes memory, not time
        assert b.memory.weights - a.memory.weights == pytest.approx(a.layers * saving)
        assert b.memory.reserved - a.memory.reserved == pytest.approx((a.layers + 1) * saving)
    ctx = search._context(spec, cluster, 8, None, TrainingPrecision.mixed("fp8"), GATHER)
    points = search._points(spec, cluster, 8, {}, Deadline(None), ("none",))
    assert any(p.state_zero != p.zero_stage for p in points)  # FSDP under a pipeline is among them
    assert all(search.state_bound(ctx, p) <= memory_floor(ctx, p) * (1 + 1e-12) for p in points)


def test_block_matrix_params_by_hand():
    """The block's weight matrices alone: a Llama-3-8B-shaped block (h 4096, 32 heads of 128, 8 kv heads,
    SwiGLU f 14336): 4096 x (4096 + 2 x 1024) + 4096 x 4096 + 3 x 4096 x 14336, below block_params by its
    two norms (no biases); an MoE block counts every expert's matrices, not its router."""
    from dataclasses import replace

    from solver_plan.hybrid.model import TransformerSpec
    spec = TransformerSpec("b", layers=1, hidden=4096, ffn=14336, heads=32, head_dim=128, seq=8192, vocab=128256,
                           positions=8192, gated_mlp=True, kv_heads=8, rms_norm=True, learned_positions=False,
                           qkv_bias=False, out_bias=False, mlp_bias=False)
    expected = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336
    assert spec.block_matrix_params == expected
    assert spec.block_params - spec.block_matrix_params == 2 * spec.norm_params
    moe = replace(spec, experts=8)
    assert moe.block_matrix_params == expected + 7 * 3 * 4096 * 14336
