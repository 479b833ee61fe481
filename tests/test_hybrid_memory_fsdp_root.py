"""Memory terms of torchtitan runs checked by hand on a tiny model (solver_plan/hybrid/memory.py):
FSDP2's unsharded root unit, torch's loss_parallel cross entropy, op-level selective checkpointing."""
import pytest

from solver_plan.hybrid import memory as mem
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.runtime import resolve_runtime

# tiny Llama-style model: 2 blocks, h 8, ffn 16, 2 heads of 4, 1 kv head, vocab 32, RMSNorm, rotary, untied
TINY = TransformerSpec("tiny", layers=2, hidden=8, ffn=16, heads=2, head_dim=4, seq=4, vocab=32, positions=4,
                       gated_mlp=True, kv_heads=1, rms_norm=True, learned_positions=False, tied_embeddings=False)
KW = dict(layers=2, stage=0, pp=1, dp=4, micro_batch=1, micro_batches=1, recompute="full",
          sequence_parallel=False, schedule="1f1b")


def test_fsdp_root_unit_stays_unsharded_under_torchtitan():
    # root unit: embedding 32 x 8, final RMSNorm 8, output 32 x 8 (untied): 520 parameters, bf16
    root = 32 * 8 + 8 + 32 * 8
    assert mem.fsdp_root_bytes(root, 3, runtime="torchtitan") == 2 * root
    assert mem.fsdp_root_bytes(root, 1, runtime="torchtitan") == 0.0  # weights already whole
    assert mem.fsdp_root_bytes(root, 3, runtime="megatron-core") == 0.0
    titan = mem.stage_memory(TINY, tp=1, zero_stage=3, runtime="torchtitan", **KW)
    # the root's 2 x 520 bytes join the two gathered blocks (zero3_gather_bytes)
    assert titan.buffers == pytest.approx(2 * 2 * TINY.block_params + 2 * root)
    # with t = 2 the vocabulary-parallel embedding and output are halved, the norm is whole
    titan2 = mem.stage_memory(TINY, tp=2, zero_stage=3, runtime="torchtitan", **KW)
    assert titan2.buffers == pytest.approx(2 * 2 * TINY.block_params / 2 + 2 * (32 * 8 / 2 + 8 + 32 * 8 / 2))


def test_loss_parallel_holds_four_fp32_logit_tensors():
    s, b, h, v = 4, 1, 8, 32
    plain = mem.logits_activation_bytes(TINY, b, 1, False, runtime="torchtitan")
    assert plain == pytest.approx(2 * 2 * s * b * h + 12 * s * b * v)  # eager F.cross_entropy on fp32 logits
    # t = 2: loss_parallel's backward keeps x, zeros_like(x), exp(x) and their sum: 16 bytes per local logit
    split = mem.logits_activation_bytes(TINY, b, 2, False, runtime="torchtitan")
    assert split == pytest.approx(2 * 2 * s * b * h + 16 * s * b * v / 2)
    # Megatron's vocabulary-parallel cross entropy is unchanged by t
    assert mem.logits_activation_bytes(TINY, b, 2, False, runtime="megatron-core") == pytest.approx(
        2 * 2 * s * b * h + 4 * s * b * v / 2)


def test_op_selective_keeps_odd_numbered_matmuls():
    # call order q (8), k (4), v (4), o (8), gate (16), up (16), down (8): keeps q, v, gate, down
    assert mem.matmul_output_widths(TINY) == (8, 4, 4, 8, 16, 16, 8)
    s, b, e = 4, 1, 2
    kept = mem.layer_activation_bytes(TINY, b, 1, "selective", False, runtime="torchtitan")
    assert kept == pytest.approx(e * s * b * 8 + e * s * b * 8 + 4 * 2 * s * b + e * s * b * (8 + 4 + 16 + 8))
    # a plain (non-gated) MLP: q, k, v, o, up, down keeps q, v, up
    plain = TransformerSpec("plain", layers=2, hidden=8, ffn=16, heads=2, head_dim=4, seq=4, vocab=32, positions=4)
    assert sum(mem.matmul_output_widths(plain)[0::2]) == 8 + 8 + 16


def test_fsdp2_side_stream_pools_by_hand():
    """stream_pool_bytes: the reduce-scatter pool holds the sharded gradients not already at the peak, the
    all-gather copy-in pool the root's and a block's unsharded bf16 parameters (the larger of the root and
    a block, plus a block)."""
    assert mem.stream_pool_bytes(1e9, 2e8, 4e9, 0.0, 3, runtime="torchtitan") == pytest.approx(4e9 + 2 * 1.2e9)
    assert mem.stream_pool_bytes(1e8, 2e8, 4e9, 1e9, 3, runtime="torchtitan") == pytest.approx(3e9 + 2 * 4e8)
    assert mem.stream_pool_bytes(1e9, 2e8, 4e9, 0.0, 2, runtime="torchtitan") == 0.0  # no FSDP units
    assert mem.stream_pool_bytes(1e9, 2e8, 4e9, 0.0, 3, runtime="megatron-core") == 0.0
    # in stage_memory: reserved - allocated = the pools (torchtitan prices no other fragmentation);
    # TINY under torchtitan's state: fp32 gradients 4 B / param / dp 4, none at the peak (one micro-batch)
    state = mem.runtime_state(mem.MIXED_PRECISION, resolve_runtime("torchtitan"))
    titan = mem.stage_memory(TINY, tp=1, zero_stage=3, runtime="torchtitan", state=state, **KW)
    params = TINY.total_params
    root = params - 2 * TINY.block_params
    expected = 4.0 * params / 4 - titan.gradients + 2.0 * (max(root, TINY.block_params) + TINY.block_params)
    # and the loss's hole: the bf16 prediction's 2 B a logit, s b V = 4 x 1 x 32 (the loss is the peak here)
    expected += 2.0 * 4 * 1 * 32
    assert titan.reserved - titan.allocated == pytest.approx(expected)
    # a one-rank shard group keeps FSDP2's all-gather outputs on the compute stream: the reduce-scatter pool
    # (and the loss's hole) only
    one = mem.stage_memory(TINY, tp=1, zero_stage=3, runtime="torchtitan", state=state, **{**KW, "dp": 1})
    assert one.reserved - one.allocated == pytest.approx(4.0 * params - one.gradients + 2.0 * 4 * 1 * 32)
    assert mem.stream_pool_bytes(1e9, 2e8, 4e9, 0.0, 3, runtime="torchtitan", gather_pool=False) == 4e9
