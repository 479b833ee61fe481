"""FSDP2's side-stream pools under a pipeline (hybrid/memory.py stage_pool_bytes), checked by hand:
fsdp.state_zero prices ZeRO-3 with pp > 1 as ZeRO-1 (weights and fp32 gradients whole during the step),
but the reduce-scatter and all-gather pools of FSDP2 are still reserved beside them."""
import pytest

from solver_plan.hybrid import memory as mem
from solver_plan.hybrid.model import TransformerSpec

# tiny Llama-style model: 2 blocks, h 8, ffn 16, 2 heads of 4, 1 kv head, vocab 32, untied
TINY = TransformerSpec("tiny", layers=2, hidden=8, ffn=16, heads=2, head_dim=4, seq=4, vocab=32, positions=4,
                       gated_mlp=True, kv_heads=1, rms_norm=True, learned_positions=False, tied_embeddings=False)
TITAN = mem.runtime_state(mem.MIXED_PRECISION, "torchtitan")  # bf16 weights, fp32 gradients


def test_pipelined_pools_by_hand():
    # 1.6e9 parameters on the stage, 8 shards: sharded fp32 gradients 4 x 1.6e9 / 8 = 8e8 (reduce-scatter
    # pool); all-gather pool: bf16 root 1e8 or block 2e8, the larger plus a block: 2 x (2e8 + 2e8) = 8e8
    pools = mem.stage_pool_bytes(1e8, 2e8, 1.6e9, 8, 1, 6.4e9, 6.4e9, True, TITAN, "torchtitan")
    assert pools == pytest.approx(4 * 1.6e9 / 8 + 2 * (2e8 + 2e8))
    # the caller's gradients (here the unsharded accumulation, all live) play no part under a pipeline
    assert mem.stage_pool_bytes(1e8, 2e8, 1.6e9, 8, 1, 0.0, 0.0, True, TITAN, "torchtitan") == pytest.approx(pools)
    # without the pipelined flag ZeRO-1 has no FSDP units and no pools; Megatron has none either way
    assert mem.stage_pool_bytes(1e8, 2e8, 1.6e9, 8, 1, 6.4e9, 6.4e9, False, TITAN, "torchtitan") == 0.0
    assert mem.stage_pool_bytes(1e8, 2e8, 1.6e9, 8, 1, 6.4e9, 6.4e9, True, TITAN, "megatron-core") == 0.0
    # without a pipeline: stream_pool_bytes with the caller's gradients, as before
    assert mem.stage_pool_bytes(1e8, 2e8, 1.6e9, 8, 3, 8e8, 2e8, False, TITAN, "torchtitan") == \
        pytest.approx(6e8 + 8e8)


def test_stage_memory_adds_the_pools_to_reserved_only():
    kw = dict(layers=1, stage=0, pp=2, tp=1, dp=4, micro_batch=1, micro_batches=2, recompute="full",
              sequence_parallel=False, zero_stage=1, schedule="1f1b", state=TITAN, runtime="torchtitan")
    plain = mem.stage_memory(TINY, **kw)
    fsdp = mem.stage_memory(TINY, pipelined_fsdp=True, **kw)
    assert fsdp.allocated == pytest.approx(plain.allocated)
    # stage 0 of 2 holds 1 block and the embedding 32 x 8: P = block + 256; root 256, block B
    block = TINY.block_params
    params = block + 32 * 8
    expected = 4 * params / 4 + 2 * (max(32 * 8, block) + block)
    assert fsdp.reserved - plain.reserved == pytest.approx(expected)


def test_pipeline_buffers_per_microbatch_by_hand():
    # TINY: s 4, h 8, V 32; b 1, t 1, bf16: x = 2 x 4 x 8 = 64 bytes, logits 2 x 4 x 32 = 256 bytes
    x, logits = 2 * 4 * 8, 2 * 4 * 32
    args = (TINY, 1, 1, False, 4, 8)  # pp 4, m 8
    # at the end of the steady phase (all 8 forwards done, 8 - f backwards), torch 2.6 stage.py:
    # first device, 1F1B, 4 in flight: no receive side; 8 gradient buffers + 8 outputs in output_chunks
    assert mem.pipeline_buffer_bytes(*args, 4, True, False, runtime="torchtitan") == (8 + 8) * x
    # a middle device, 3 in flight: 8 - 3 activation buffers beyond the first block's inputs and the
    # 8 - 3 finished micro-batches' input gradients (the buffers' .grad); 8 + 8 on the sending side
    assert mem.pipeline_buffer_bytes(*args, 3, False, False, runtime="torchtitan") == (5 + 5 + 16) * x
    # the last device, 1 in flight: 7 receive buffers and their 7 .grad, nothing to send, all 8 logits kept
    assert mem.pipeline_buffer_bytes(*args, 1, False, True, runtime="torchtitan") == 14 * x + 8 * logits
    # interleaved, 2 chunks per device: the first device's second chunk receives, both send
    assert mem.pipeline_buffer_bytes(*args, 6, True, False, 2, runtime="torchtitan") == (2 * 2 + 2 * 16) * x
    # Megatron: the four reused send / receive buffers whatever m; none without a pipeline
    assert mem.pipeline_buffer_bytes(*args, 4, True, False, runtime="megatron-core") == 4 * x
    assert mem.pipeline_buffer_bytes(TINY, 1, 1, False, 1, 8, 1, True, True, runtime="torchtitan") == 0.0
    # sequence parallelism splits the boundary tensor over t, not the vocabulary-parallel logits' t
    assert mem.pipeline_buffer_bytes(TINY, 1, 2, True, 4, 8, 1, False, True, runtime="torchtitan") == \
        14 * x / 2 + 8 * logits / 2


def test_chunk_gradients_at_peak_by_hand():
    # two chunks, one round (m 4 < 2 p = 8): the last chunk's gradients at the warm-up's peak H = 30, or
    # chunk 0's with its own m x A_0 when it starts its backwards, whichever is larger
    assert mem.chunk_gradients_at_peak((10.0, 20.0), (1.0, 2.0), 30.0, 4, 4) == 20.0
    assert mem.chunk_gradients_at_peak((60.0, 20.0), (1.0, 2.0), 30.0, 4, 4) == 4 * 1.0 + 60.0 - 30.0
    # three chunks: chunk 1 starts with chunks 0 and 1 in flight, m (A_0 + A_1) + G_1
    assert mem.chunk_gradients_at_peak((1.0, 50.0, 5.0), (2.0, 3.0, 9.0), 40.0, 4, 4) == 4 * 5.0 + 50.0 - 40.0
    # two rounds (m >= 2p) or one chunk: every chunk's gradients at once
    assert mem.chunk_gradients_at_peak((10.0, 20.0), (1.0, 2.0), 30.0, 8, 4) == 30.0
    assert mem.chunk_gradients_at_peak((10.0,), (1.0,), 30.0, 4, 4) == 10.0


def test_interleaved_fsdp_holds_one_chunks_gradients():
    kw = dict(layers=2, stage=0, pp=2, tp=1, dp=4, micro_batch=1, micro_batches=2, recompute="full",
              sequence_parallel=False, zero_stage=1, state=TITAN)
    block, embedding = TINY.block_params, 32 * 8
    g0, g1 = 4.0 * (block + embedding), 4.0 * block  # fp32 gradients, whole under the pipeline's ZeRO-1
    a = mem.layer_activation_bytes(TINY, 1, 1, "full", False, TITAN, "torchtitan")
    e = mem.embedding_activation_bytes(TINY, 1, 1, False, TITAN)
    m = mem.stage_memory(TINY, schedule="interleaved", virtual_stages=2, runtime="torchtitan", pipelined_fsdp=True,
                         **kw)
    assert m.gradients == pytest.approx(max(m.activations + g1, 2 * (a + e) + g0) - m.activations)
    assert m.gradients < g0 + g1
    # all of them: Megatron's persistent buffers, llama3-meta (not stated), DDP under the pipeline, 1F1B
    for runtime in ("megatron-core", "llama3-meta"):
        assert mem.stage_memory(TINY, schedule="interleaved", virtual_stages=2, runtime=runtime, pipelined_fsdp=True,
                                **kw).gradients == pytest.approx(g0 + g1)
    assert mem.stage_memory(TINY, schedule="interleaved", virtual_stages=2, runtime="torchtitan",
                            **kw).gradients == pytest.approx(g0 + g1)
    assert mem.stage_memory(TINY, schedule="1f1b", runtime="torchtitan", pipelined_fsdp=True,
                            **kw).gradients == pytest.approx(g0 + g1)
