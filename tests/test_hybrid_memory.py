"""Memory arithmetic of hybrid plans against hand-computed cases (solver_plan/hybrid/memory.py)."""
import pytest

from solver_plan.hybrid import memory as mem
from solver_plan.hybrid.model import TransformerSpec

# GPT-3 175B shapes (Korthikanti et al. 2022 Table 3): s 2048, h 12288, a 96, ffn 4h, d = h / a
GPT3 = TransformerSpec("gpt3", layers=96, hidden=12288, ffn=49152, heads=96, head_dim=128, seq=2048,
                       vocab=51200, positions=2048)
S, H, A = 2048, 12288, 96
M21 = "megatron-2021"  # the runtime Korthikanti et al. measured: unfused attention with dropout


def test_model_state_bytes_by_zero_stage():
    p, dp = 1_000_000, 8
    # stage 0: 2 + 2 + 12 = 16 bytes per parameter (Rajbhandari et al. 2020)
    assert mem.weights_bytes(p, dp, 0) + mem.gradients_bytes(p, dp, 0) + mem.optimizer_bytes(p, dp, 0) == 16 * p
    # ZeRO-1 shards the 12 optimizer bytes: 2 + 2 + 12/8 = 5.5
    assert mem.weights_bytes(p, dp, 1) + mem.gradients_bytes(p, dp, 1) + mem.optimizer_bytes(p, dp, 1) == 5.5 * p
    # ZeRO-2 also the gradients: 2 + 2/8 + 12/8 = 3.75
    assert mem.weights_bytes(p, dp, 2) + mem.gradients_bytes(p, dp, 2) + mem.optimizer_bytes(p, dp, 2) == 3.75 * p
    # ZeRO-3 everything: 16 / 8 = 2
    assert mem.weights_bytes(p, dp, 3) + mem.gradients_bytes(p, dp, 3) + mem.optimizer_bytes(p, dp, 3) == 2 * p


def test_activations_match_korthikanti_table_2():
    b, t = 1, 8
    sbh = S * b * H
    # no parallelism: sbh (34 + 5as/h)
    assert mem.layer_activation_bytes(GPT3, b, 1, "none", False, runtime=M21) == pytest.approx(sbh * (34 + 5 * A * S / H))
    # tensor parallel: sbh (10 + 24/t + 5as/(ht))
    assert mem.layer_activation_bytes(GPT3, b, t, "none", False, runtime=M21) == pytest.approx(
        sbh * (10 + 24 / t + 5 * A * S / (H * t)))
    # tensor + sequence parallel: sbh (34/t + 5as/(ht))
    assert mem.layer_activation_bytes(GPT3, b, t, "none", True, runtime=M21) == pytest.approx(sbh * (34 / t + 5 * A * S / (H * t)))
    # selective recomputation drops the attention-score term
    assert mem.layer_activation_bytes(GPT3, b, t, "selective", False, runtime=M21) == pytest.approx(sbh * (10 + 24 / t))
    assert mem.layer_activation_bytes(GPT3, b, t, "selective", True, runtime=M21) == pytest.approx(sbh * 34 / t)
    # full recomputation keeps the layer input only: 2 sbh (2 sbh / t with sequence parallel)
    assert mem.layer_activation_bytes(GPT3, b, t, "full", False, runtime=M21) == pytest.approx(2 * sbh)
    assert mem.layer_activation_bytes(GPT3, b, t, "full", True, runtime=M21) == pytest.approx(2 * sbh / t)


def test_activations_scale_with_micro_batch():
    one = mem.layer_activation_bytes(GPT3, 1, 4, "none", False, runtime=M21)
    assert mem.layer_activation_bytes(GPT3, 3, 4, "none", False, runtime=M21) == pytest.approx(3 * one)


def test_in_flight_microbatches_1f1b_and_interleaved():
    # 1F1B: stage i holds min(p - i, m)
    assert [mem.in_flight_microbatches(i, 4, 8, "1f1b") for i in range(4)] == [4, 3, 2, 1]
    assert [mem.in_flight_microbatches(i, 4, 2, "1f1b") for i in range(4)] == [2, 2, 2, 1]
    assert mem.in_flight_microbatches(0, 4, 8, "gpipe") == 8
    # interleaved, stage 0: p (1 + (p - 1)/(p v)) (Korthikanti et al. 2022 section 4.2.3)
    p, v = 8, 3
    assert mem.in_flight_microbatches(0, p, 64, "interleaved", v) == pytest.approx(p * (1 + (p - 1) / (p * v)))
    # last stage: ((v - 1) p + 1) / v
    assert mem.in_flight_microbatches(p - 1, p, 64, "interleaved", v) == pytest.approx(((v - 1) * p + 1) / v)
    assert mem.in_flight_microbatches(0, p, 2, "interleaved", v) == 2  # never more than m


def test_stage_memory_sums_its_terms_by_hand():
    # 175B, t = 8, p = 8, stage 3 of 8 with 12 blocks, 1F1B with 64 micro-batches, ZeRO-1 over dp = 4
    m = mem.stage_memory(GPT3, layers=12, stage=3, pp=8, tp=8, dp=4, micro_batch=1, micro_batches=64,
                         recompute="selective", sequence_parallel=True, zero_stage=1, schedule="1f1b", runtime=M21)
    params = 12 * GPT3.block_params / 8
    assert m.weights == pytest.approx(2 * params)
    assert m.gradients == pytest.approx(2 * params)
    assert m.optimizer == pytest.approx(12 * params / 4)
    assert m.activations == pytest.approx(5 * 12 * S * H * 34 / 8)  # 8 - 3 = 5 micro-batches in flight
    # the scores of one layer, the MLP's backward transients (the gradient of the output projection's
    # input 2 s b f / t while the sequence-parallel incoming gradient 2 s b h / t lives; Megatron's
    # fused weight gradients add none), plus the whole-sequence inputs of the two column-parallel GEMMs
    # that backward gathers again under sequence parallelism (2 x 2 s b h)
    assert m.recompute_working == pytest.approx(5 * A * S * S / 8 + 2 * (S * 4 * H / 8 + S * H / 8) + 4 * S * H)
    assert m.buffers == pytest.approx(8 * S * H / 8)
    # the runtime's reserve: CUDA context 1 GiB (CUDA 11, no lazy loading), NCCL 280 MiB for each of
    # dp, tp, the two pipeline neighbours and the tied-embedding pair, 5% fragmentation of what changes
    assert m.cuda_context == 1024 ** 3
    assert m.nccl == pytest.approx(5 * 2 * 16 * 8.75 * 1024 ** 2)
    assert m.fragmentation == pytest.approx(0.05 * (m.activations + m.recompute_working + m.buffers))
    assert m.allocated == pytest.approx(m.weights + m.gradients + m.optimizer + m.activations + m.recompute_working
                                        + m.buffers)
    assert m.total == pytest.approx(m.allocated + m.fragmentation + m.cuda_context + m.nccl)


def test_first_and_last_stage_hold_embedding_and_head():
    kw = dict(layers=1, pp=4, tp=2, dp=1, micro_batch=1, micro_batches=4, recompute="none", sequence_parallel=False,
              zero_stage=0, schedule="1f1b")
    first, middle = mem.stage_memory(GPT3, stage=0, **kw), mem.stage_memory(GPT3, stage=1, **kw)
    last = mem.stage_memory(GPT3, stage=3, **kw)
    emb = (GPT3.vocab + GPT3.positions) * GPT3.hidden / 2
    assert first.weights - middle.weights == pytest.approx(2 * emb)
    assert last.weights - middle.weights == pytest.approx(2 * (2 * GPT3.hidden + GPT3.vocab * GPT3.hidden / 2))


def test_fused_attention_keeps_no_scores():
    """Flash attention (megatron-core) keeps no s^2 term, only its fp32 log-sum-exp 4 a s b; unfused
    attention without dropout keeps the softmax output 2 a s^2 b (Korthikanti's 5 is with dropout)."""
    b, t = 1, 8
    sbh = S * b * H
    flash = mem.layer_activation_bytes(GPT3, b, t, "none", True, runtime="megatron-core")
    assert flash == pytest.approx(sbh * 34 / t + 4 * A * S * b / t)
    unfused = mem.layer_activation_bytes(GPT3, b, t, "none", True, runtime=M21)
    assert unfused - sbh * 34 / t == pytest.approx(5 * A * S * S * b / t)
    # selective recomputation has nothing to drop under flash attention: same memory as none
    assert mem.layer_activation_bytes(GPT3, b, t, "selective", True, runtime="megatron-core") == pytest.approx(flash)
    # backward temporaries: the fused kernel's fp32 dQ accumulator 4 s b h / t, or the MLP's (the
    # gradient of the output projection's input 2 s b f / t with the incoming gradient 2 s b h, / t under
    # sequence parallelism), whichever is larger (+ 2 e s b h gathered GEMM inputs with sequence parallelism)
    f = GPT3.ffn
    assert mem.recompute_working_bytes(GPT3, b, t, "none", False, runtime="megatron-core") == pytest.approx(
        max(4 * sbh / t, 2 * (S * b * f / t + sbh)))
    assert mem.recompute_working_bytes(GPT3, b, t, "none", True, runtime="megatron-core") == pytest.approx(
        max(4 * sbh / t, 2 * (S * b * f / t + sbh / t)) + 4 * sbh)


def test_unfused_swiglu_and_fused_cross_entropy():
    llama = TransformerSpec("llama", layers=2, hidden=4096, ffn=14336, heads=32, head_dim=128, seq=8192, vocab=128256,
                            positions=8192, gated_mlp=True, kv_heads=8)
    fused = mem.layer_activation_bytes(llama, 1, 1, "none", False, runtime="megatron-core")
    eager = mem.layer_activation_bytes(llama, 1, 1, "none", False, runtime="torchtitan")
    assert eager - fused == pytest.approx(2 * 8192 * 14336)  # 8 s b f instead of 6 s b f
    megatron = mem.logits_activation_bytes(llama, 1, 1, False, runtime="megatron-core")
    fused_ce = mem.logits_activation_bytes(llama, 1, 1, False, runtime="nemo")
    eager = mem.logits_activation_bytes(llama, 1, 1, False, runtime="torchtitan")
    assert megatron - fused_ce == pytest.approx((4 - 2) * 8192 * 128256)  # fp32 logits vs bf16 in the fused kernel
    assert eager - megatron == pytest.approx((12 - 4) * 8192 * 128256)  # eager fp32 log-softmax + two gradients


def test_torchtitan_op_selective_keeps_every_other_matmul():
    """torchtitan's op-level selective checkpointing: input, attention output + log-sum-exp, and the
    1st, 3rd, 5th, 7th matmul outputs in call order (q, k, v, o, gate, up, down): q, v, gate, down;
    less than no recomputation, more than full."""
    llama = TransformerSpec("llama", layers=2, hidden=4096, ffn=14336, heads=32, head_dim=128, seq=8192, vocab=128256,
                            positions=8192, gated_mlp=True, kv_heads=8)
    s, h, f = 8192, 4096, 14336
    kept = mem.layer_activation_bytes(llama, 1, 1, "selective", False, runtime="torchtitan")
    saved = h + 1024 + f + h  # q (32 x 128), v (8 x 128), gate (f), down (h)
    assert kept == pytest.approx(2 * s * h + 2 * s * h + 4 * 32 * s + 2 * s * saved)
    assert mem.layer_activation_bytes(llama, 1, 1, "full", False, runtime="torchtitan") < kept
    assert kept < mem.layer_activation_bytes(llama, 1, 1, "none", False, runtime="torchtitan")


def test_dtensor_sequence_parallel_keeps_the_gathered_inputs():
    """torchtitan's column-parallel GEMMs (DTensor ColwiseParallel, input Shard(1) -> Replicate) save the
    all-gathered whole-sequence input; Megatron keeps its 1/t shard and gathers again in backward
    (Kernels.sp_saves_gathered_inputs). Hand-computed on GPT-3 175B shapes, b 2, t 8, 16-bit."""
    from dataclasses import replace

    from solver_plan.runtime import resolve_runtime

    b, t = 2, 8
    sbh, sbv = S * b * H, S * b * GPT3.vocab
    titan = resolve_runtime("torchtitan")
    as_megatron = replace(titan, kernels=replace(titan.kernels, sp_saves_gathered_inputs=False))
    # the output projection's input whole, the final norm's input split: 2 sbh (1 + 1/t), then 16 B per logit / t
    assert mem.logits_activation_bytes(GPT3, b, t, True, runtime=titan) == pytest.approx(
        2 * sbh * (1 + 1 / t) + 16 * sbv / t)
    assert mem.logits_activation_bytes(GPT3, b, t, True, runtime=as_megatron) == pytest.approx(4 * sbh / t + 16 * sbv / t)
    # without sequence parallelism nothing is gathered: the same either way
    assert mem.logits_activation_bytes(GPT3, b, t, False, runtime=titan) == pytest.approx(
        mem.logits_activation_bytes(GPT3, b, t, False, runtime=as_megatron))
    # a block without recomputation keeps the attention's and the MLP's inputs whole: + 4 sbh (1 - 1/t)
    assert mem.layer_activation_bytes(GPT3, b, t, "none", True, runtime=titan) == pytest.approx(
        mem.layer_activation_bytes(GPT3, b, t, "none", True, runtime=as_megatron) + 4 * sbh * (1 - 1 / t))
    # full recomputation keeps the (split) input only, and its backward gathers nothing again
    assert mem.layer_activation_bytes(GPT3, b, t, "full", True, runtime=titan) == pytest.approx(2 * sbh / t)
    for mode in ("none", "full"):
        titan_working = mem.recompute_working_bytes(GPT3, b, t, mode, True, runtime=titan)
        megatron_working = mem.recompute_working_bytes(GPT3, b, t, mode, True, runtime=as_megatron)
        rematerialised = 4 * sbh * (1 - 1 / t) if mode == "full" else 0.0
        assert titan_working == pytest.approx(megatron_working - 4 * sbh + rematerialised)
