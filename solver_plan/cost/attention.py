"""The attention core's kernel seconds as a runtime runs it: the one definition that the per-operator
cost model (`CostModel.attention_seconds`), the hybrid block cost (`hybrid/stage_cost.py`) and the
expert-parallel pricer (`hybrid/moe_price.py`) use.

For an attention core of F forward FLOPs on one device (4 b a s_q s_k d / shards: the dense count,
every score computed) with T(F) the roofline time of one dense forward kernel of its size:
- fused (FlashAttention, cuDNN fused attention; the graph does not mark its scores materialized and
  the runtime runs a fused kernel): K = `cost.compute.attention_time` at the device's measured
  efficiency for the runtime's kernel family and the query length, or T(F) where the device has no
  figure for that family; forward f K, backward 2.5 f K (`cost.kernels.attention_kernel_factors`) (FlashAttention-2 recomputes the scores in its
  backward: five GEMMs against the forward's two, Dao 2023), f = 1/2 when the attention is causal and
  the kernel skips the masked tiles above the diagonal (Dao 2023, section 3.1), 1 otherwise. The
  device tables' efficiencies are measured on exactly this count (scripts/device_tables.py).
- unfused (scores written to HBM: Megatron-LM 2021-22, or `scores="materialized"`): forward T(F),
  backward 2 T(F) (the cost model's dX, dW rule), plus the score matrix's own memory-bound kernels
  (`cost.kernels.attention_score_traffic`: softmax, dropout and their gradients) at the HBM roofline.
"""
from __future__ import annotations

from solver_plan.cost.compute import attention_time, compute_time
from solver_plan.cost.kernels import attention_kernel_factors, attention_score_traffic


def attention_core_seconds(cluster, *, flops: float, hbm_bytes: float, dense_forward_s: float, fused: bool,
                           causal_skip: bool, backend: str, dtype, query_length: float | None,
                           score_elements: float = 0.0, element_bytes: float = 2.0,
                           dropout: bool = False) -> tuple[float, float]:
    """(forward, backward) seconds of one device's attention core (module text). `flops`, `hbm_bytes`:
    the device's dense forward FLOPs and q, k, v, output bytes; `dense_forward_s`: T(F);
    `causal_skip`: the attention is causal and the kernel skips the masked tiles; `backend`: the
    runtime's fused kernel family (a key of the device's attention_efficiency, "" for none);
    `score_elements`, `element_bytes`, `dropout`: the score matrix of an unfused attention."""
    if fused:
        measured = attention_time(cluster, flops, hbm_bytes, backend, dtype, query_length) if backend else None
        one = dense_forward_s if measured is None else measured
        forward_factor, backward_factor = attention_kernel_factors(True, causal_skip)
        return forward_factor * one, backward_factor * one
    forward_bytes, backward_bytes = attention_score_traffic(score_elements, element_bytes, dropout)
    return (dense_forward_s + compute_time(cluster, 0.0, forward_bytes, unit="vector", dtype=dtype),
            2.0 * dense_forward_s + compute_time(cluster, 0.0, backward_bytes, unit="vector", dtype=dtype))
