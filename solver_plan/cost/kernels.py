"""One definition of the kernels a layer runs, shared by the cost model and the calibration.

`solver_plan/calibrate/profiles.py` derives the kernels of measured PipeDream layers from these
functions and `cost/model.py` prices the graph's operators with the same ones, so what the
calibration fits is what the cost model predicts with.

Convolution (`conv_kernel`), forward (narrow dimension: channels per group, `channels_narrow`);
backward runs it twice (input gradient dX and weight
gradient dW; once when the input needs no gradient):
- FLOPs: 2 x output elements x (cin / groups) x kh x kw, divided by `winograd_saving(r)` for r x r
  (r = 3 or 5) stride-1 ungrouped convolutions when computed in fp32 on the SIMT units. cuDNN runs
  those with Winograd's F(2x2, r x r) (Lavin and Gray, "Fast Algorithms for Convolutional Neural
  Networks", CVPR 2016: (2r)^2 / (r + 1)^2 fewer multiplications, 2.25x for 3x3, 2.78x for 5x5;
  cuDNN's non-fused Winograd takes 3x3 and 5x5 filters); evidence: VGG-16's 3x3 layers counted
  directly run at 25-28 TFLOP/s in the PipeDream V100 fp32 profiles, AlexNet's and Inception-v3's
  5x5 layers at 18-37 TFLOP/s, above the 15.7 TFLOP/s peak. On tensor cores
  (fp16, bf16, tf32) cuDNN's implicit-GEMM kernels are the usual choice (its Winograd kernels are
  SIMT ones), so no saving is assumed there.
- HBM bytes: input x max(1, kh kw / (sh sw)) (implicit GEMM reads each input element once per
  filter tap it meets: an upper bound, caches catch some) + weights + output; plus, for tensors in
  NCHW (PyTorch's default memory format) on tensor cores, 2 x (input + output) for the transposes
  to and from NHWC that cuDNN's tensor-core kernels run in (NVIDIA, "Deep Learning Performance
  Guide: Convolutional layers", channels-last: "NCHW ... requires transposes"; SIMT fp32 kernels
  work in NCHW directly). NHWC ("channels last") is the default, as mixed-precision users run.

Memory-bound layers (`ELEMENTWISE`): passes over the output of A bytes (and the input of I bytes
for pooling) per forward and backward kernel, with FLOPs per output element:
- BatchNorm forward 3A (a statistics pass reading x, a pass reading x and writing y), backward 5A
  (a reduction pass reading x and dy, then reading x and dy and writing dx);
- ReLU forward 2A, backward 3A (reads the output or mask and dy, writes dx);
- Add forward 3A (two inputs, one output), backward 3A: the gradient passes through the add, but
  the tensor the residual forked from receives two gradients that autograd sums (read 2, write 1);
  PipeDream times no Add backward (in-place adds run inside their consumer), so the calibration
  never sees it;
- Max/avg pooling forward I + A, backward 2A + I; Dropout 2.25A each way (a one-byte mask);
- Concat 2A each way; Embedding forward 2A, backward 2A + P (a dense weight gradient).
"""
from __future__ import annotations

from dataclasses import dataclass

MEMORY_FORMATS = ("nhwc", "nchw")  # layouts of 4-d activations; nhwc (channels last) the default
WINOGRAD_SAVING = 2.25  # F(2x2, 3x3): winograd_saving(3)
WINOGRAD_FILTERS = (3, 5)


def winograd_saving(r: int) -> float:
    """Multiplications saved by Winograd's F(2x2, r x r): (2 r)^2 / (r + 1)^2 (Lavin and Gray 2016)."""
    return (2.0 * r) ** 2 / (r + 1.0) ** 2


@dataclass(frozen=True)
class KernelWork:
    """FLOPs and HBM bytes of one kernel; `narrow` its smallest GEMM dimension (0: not a GEMM or
    unknown; `cost.compute.narrow_efficiency`)."""
    flops: float
    hbm_bytes: float
    narrow: float = 0.0


def winograd_applies(kh: int, kw: int, sh: int, sw: int, groups: int, simt_fp32: bool) -> bool:
    """3x3 or 5x5, stride 1, ungrouped, on fp32 SIMT units (module text)."""
    return simt_fp32 and kh == kw and kh in WINOGRAD_FILTERS and (sh, sw) == (1, 1) and groups == 1


def conv_kernel(out_elements: float, cin: int, kh: int, kw: int, sh: int, sw: int, groups: int,
                input_bytes: float, output_bytes: float, parameter_bytes: float, simt_fp32: bool,
                cout: int | None = None, nchw: bool = False) -> KernelWork:
    """The forward kernel of a convolution: 2 E (cin / groups) kh kw FLOPs (/ WINOGRAD_SAVING where
    `winograd_applies`: winograd_saving(kh)), I max(1, kh kw / (sh sw)) + P + A bytes (module text). Its narrow
    dimension is min(cin, cout) / groups, the channels per group (`channels_narrow`); `nchw` adds the
    layout transposes of tensor-core kernels."""
    flops = 2.0 * out_elements * cin / groups * kh * kw
    if winograd_applies(kh, kw, sh, sw, groups, simt_fp32):
        flops /= winograd_saving(kh)
    traffic = input_bytes * max(1.0, kh * kw / (sh * sw)) + parameter_bytes + output_bytes
    if nchw and not simt_fp32:  # layout transposes around a tensor-core kernel (module text)
        traffic += 2.0 * (input_bytes + output_bytes)
    return KernelWork(flops, traffic, channels_narrow(cin, cout, groups))


def channels_narrow(cin: int, cout: int | None, groups: int = 1) -> float:
    """Smallest GEMM dimension of a convolution's kernels: min(cin, cout) / groups. Forward is an
    implicit GEMM [N P Q x cout] = [N P Q x cin kh kw] [cin kh kw x cout], the input gradient
    swaps cin and cout and the weight gradient is [cout x cin kh kw] over N P Q: each has a side
    of cin or cout channels per group (the filter taps multiply the reduction, but cuDNN iterates
    over them, so a 3-channel 7x7 layer runs like a 3-channel one)."""
    return float(min(cin, cin if cout is None else cout)) / groups


# kind: (forward FLOPs per output element, forward bytes (a, i, p), backward FLOPs per element,
# backward bytes (a, i, p)); bytes = a A + i I + p P. `window` (pooling) multiplies the FLOPs.
ELEMENTWISE: dict[str, tuple[float, tuple[float, float, float], float, tuple[float, float, float]]] = {
    "BatchNorm2d": (8, (3, 0, 0), 10, (5, 0, 0)),
    "ReLU": (1, (2, 0, 0), 1, (3, 0, 0)),
    "Add": (1, (3, 0, 0), 1, (3, 0, 0)),
    "Concat": (0, (2, 0, 0), 0, (2, 0, 0)),
    "MaxPool2d": (1, (1, 1, 0), 1, (2, 1, 0)),
    "AvgPool2d": (1, (1, 1, 0), 1, (2, 1, 0)),
    "Dropout": (2, (2.25, 0, 0), 1, (2.25, 0, 0)),
    "Embedding": (0, (2, 0, 0), 1, (2, 0, 1)),
}
WINDOWED = frozenset({"MaxPool2d", "AvgPool2d"})


def elementwise_kernels(kind: str, output_bytes: float, input_bytes: float, parameter_bytes: float,
                        output_elements: float, window: int = 1) -> tuple[KernelWork | None, KernelWork | None]:
    """(forward, backward) kernels of a memory-bound layer of `kind` (a key of ELEMENTWISE; the
    module text gives the passes); a phase with no bytes has no kernel (None)."""
    f_flops, f_bytes, b_flops, b_bytes = ELEMENTWISE[kind]
    scale = window if kind in WINDOWED else 1

    def kernel(per_element, coefficients):
        a, i, p = coefficients
        nbytes = a * output_bytes + i * input_bytes + p * parameter_bytes
        return KernelWork(per_element * scale * output_elements, nbytes) if nbytes > 0 else None
    return kernel(f_flops, f_bytes), kernel(b_flops, b_bytes)


# Attention without a fused kernel: HBM passes over the heads x Sq x Sk score matrix, per element.
SCORE_PASSES = {False: (4, 7), True: (6, 9)}  # dropout -> (forward, backward) passes of the element dtype
SCORE_MASK_BYTES = {False: (0, 0), True: (1, 1)}  # dropout mask, 1 byte per element, written then read


def attention_score_traffic(score_elements: float, element_bytes: float, dropout: bool) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the score matrix when attention is not fused
    (`scores="materialized"`): each pass reads or writes score_elements x element_bytes.

    Forward: Q K^T writes the scores (1), softmax reads and writes them (2), dropout reads the
    probabilities and writes the kept ones and a 1-byte mask (2 + mask), P V reads them (1): 4 passes
    without dropout, 6 with. Backward: dO V^T writes dP (1), P^T dO reads P (1), dropout's backward
    reads dP and the mask and writes its gradient (2 + mask), softmax's backward reads P and dP and
    writes dS (3), dS K and dS^T Q read dS (2): 7 passes without dropout, 9 with. The tensors are
    the ones Korthikanti et al. (2022, section 4.1, "5 a s^2 b" bytes of attention activations in
    16-bit: softmax output 2, dropout mask 1, dropout output 2) count; FlashAttention (Dao et al.
    2022) removes exactly this Theta(s^2) traffic, which is why fused attention has none."""
    forward_passes, backward_passes = SCORE_PASSES[dropout]
    forward_mask, backward_mask = SCORE_MASK_BYTES[dropout]
    return (score_elements * (forward_passes * element_bytes + forward_mask),
            score_elements * (backward_passes * element_bytes + backward_mask))


def attention_score_memory(score_elements: float, element_bytes: float, dropout: bool) -> float:
    """Bytes of the score matrix kept for the backward pass when attention is not fused: the
    softmax output, and with dropout its 1-byte mask and the dropped probabilities (Korthikanti et
    al. 2022: 2 a s^2 b without dropout, 5 a s^2 b with it, in 16-bit)."""
    return score_elements * (element_bytes + (1 + element_bytes if dropout else 0))


# Fused (flash) attention: FlashAttention-2 (Dao 2023) recomputes the scores in its backward pass,
# five GEMMs against the forward's two: 2.5x the forward's FLOPs (the paper's own FLOP count for
# its backward benchmarks); with a causal mask it skips the tiles above the diagonal, about half of
# the s x s work (section 3.1, "causal masking"). An unfused attention computes every score and
# masks afterwards, and its backward is two GEMMs per forward GEMM.
FLASH_BACKWARD_RATIO = 2.5
CAUSAL_WORK_FRACTION = 0.5


def attention_kernel_factors(fused: bool, causal_skip: bool) -> tuple[float, float]:
    """(forward, backward) time of the attention core's kernels relative to one dense forward kernel
    of its FLOPs: unfused 1 and 2 (the cost model's dX, dW rule); fused f and 2.5 f, with f = 1/2
    when the kernel skips the causal mask's upper half and 1 otherwise (module text)."""
    if not fused:
        return 1.0, 2.0
    forward = CAUSAL_WORK_FRACTION if causal_skip else 1.0
    return forward, FLASH_BACKWARD_RATIO * forward


@dataclass(frozen=True)
class ScoreCost:
    """What the s x s score matrix costs an attention as a runtime runs it: HBM bytes of its forward
    and backward passes and bytes kept for backward (all zero when fused)."""
    forward_bytes: float
    backward_bytes: float
    kept_bytes: float


def attention_scores(score_elements: float, element_bytes: float, fused: bool, dropout: bool) -> ScoreCost:
    """The one definition of the score matrix's cost, for the per-operator cost model
    (`scores="materialized"`) and the hybrid block cost alike: fused attention (FlashAttention, cuDNN
    fused attention) keeps the scores in on-chip memory, so nothing; unfused,
    `attention_score_traffic` and `attention_score_memory`."""
    if fused:
        return ScoreCost(0.0, 0.0, 0.0)
    forward, backward = attention_score_traffic(score_elements, element_bytes, dropout)
    return ScoreCost(forward, backward, attention_score_memory(score_elements, element_bytes, dropout))


def fp8_cast_bytes(input_elements: float, output_elements: float, element_bytes: float = 2.0,
                   fp8_copies: int = 1) -> tuple[float, float]:
    """(forward, backward) HBM bytes of the casts around one fp8 GEMM (Transformer Engine, torchao
    float8 with per-tensor scaling): forward casts the input activation (read e bytes, write 1 per
    element and fp8 copy; the amax comes out of the same pass), backward casts the output gradient
    likewise; weights are cast once per optimizer step and cached across micro-batches (TE's
    is_first_microbatch), so not counted per micro-batch. `fp8_copies` = 2 where the pass also writes
    the copy the weight-gradient GEMM reads (Transformer Engine's quantizers with rowwise and
    columnwise usage: Hopper's cast-transpose, MXFP8's column-scaled copy on Blackwell)."""
    per_element = element_bytes + float(fp8_copies)
    return input_elements * per_element, output_elements * per_element


# Eager (unfused) normalisation and rotary embedding, as eager PyTorch models write them (torchtitan's
# Llama: RMSNorm computed in fp32, rotary embeddings through view_as_complex(x.float())): HBM bytes per
# element of a 16-bit activation, beyond what one fused kernel moves. RMSNorm forward: x.float()
# (read 2, write 4), pow (4 + 4), mean (4), x * rsqrt (4 + 4), type_as (4 + 2), * weight (2 + 2) = 36;
# a fused kernel reads 2 and writes 2, so 32 more; backward about twice the forward's passes (66 more
# than a fused backward's 6). Rotary forward on q and k: float() (2 + 4), complex multiply (4 + 4),
# type_as (4 + 2) = 20, backward alike; a fused RoPE kernel reads and writes once (4 each way), which
# the graph (no rotary operator) does not price either.
EAGER_RMSNORM_EXTRA_BYTES = (32.0, 66.0)
EAGER_ROPE_BYTES = (20.0, 20.0)
FUSED_ROPE_BYTES = (4.0, 4.0)


def norm_rope_bytes(norm_elements: float, rope_elements: float, fused: bool) -> tuple[float, float]:
    """(forward, backward) HBM bytes one block's normalisations (`norm_elements`: both norms' inputs)
    and rotary embeddings (`rope_elements`: q and k; 0 without rotary positions) move beyond the
    cost model's fused-norm pricing: eager fp32 ops, or a fused RoPE kernel (module text above)."""
    rope = FUSED_ROPE_BYTES if fused else EAGER_ROPE_BYTES
    norm = (0.0, 0.0) if fused else EAGER_RMSNORM_EXTRA_BYTES
    return (norm_elements * norm[0] + rope_elements * rope[0], norm_elements * norm[1] + rope_elements * rope[1])
