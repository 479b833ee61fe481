"""Measured efficiency of the node-deduplicating token-dispatch kernels (DeepEP's normal kernels, the
flex dispatcher's HybridEP backend) against hybrid/moe.py's link model of them (`dedup_alltoall_s`).

`dedup_alltoall_s` prices a dispatch (or combine) from the bytes each link carries at the cluster's
NCCL-calibrated link rate (bandwidth x efficiency) plus one latency per level. The kernels do not
reach that rate: their published algorithm bandwidths, converted to the model's own measure on the
cluster they ran on, give

    efficiency = dedup_alltoall_s(the table's shape) / measured seconds(the table's shape)

(`moe.kernel_table_efficiency`), and `moe.alltoall_s` prices the deduplicating dispatchers at
dedup_alltoall_s / `kernel_efficiency`: exact at the tables' points, piecewise linear in between
(in ranks inside an NVLink domain, in nodes across them), the nearest point outside them. One value
per point: the mean of the dispatch's and the combine's efficiency (a layer runs both, as often).
Calibrated on kernels only, never on end-to-end rows.

Points (data/device/published/; the figures as tests/test_moe_kernels.py recomputes them):
- "deepep", one NVLink domain: DeepEP's README table on H800 (deepep-normal-kernels.csv: 8 ranks,
  4,096 tokens of h 7168, top-8, FP8 dispatch, BF16 combine), on data/published/clusters/
  h800-deepseek-v3.yaml: 0.853 of the link model's rate;
- "deepep", across nodes (the RDMA part bounds the kernel there): 2, 4 and 8 nodes of 8 H800s,
  0.782, 0.690, 0.804;
- "hybridep", one NVLink domain: NVIDIA's HybridEP table on GB200 (hybridep-kernels.csv: 4,096
  tokens of h 7168, top-8, 8 local experts per rank, BF16, the Python API's time at 32 SMs: what the
  published runs ran, Megatron-Bridge v0.2.1's scripts/performance/utils/helpers.py
  set_common_perf_overrides setting moe_hybridep_num_sms 32 for hybridep (Megatron-core's default
  16), and no FP8 dispatch, which Megatron-core's HybridEP path refuses), on
  configs/clusters/gb200-nvl72.yaml: 8, 16, 24, 32, 36 ranks, 0.840, 0.842, 0.816, 0.789, 0.774
  (at 16 SMs 0.820, 0.763, 0.730, 0.756, 0.742; the table's B200 row, 8 ranks at 16 SMs: 0.804 on
  b200-8x8-ib, a cross-check). Past 36 ranks (the DeepSeek-V3 GB200 bf16 row's 64) the 36-rank point
  holds: not measured. The table's Python-API time reuses the dispatch's handle (tests/test_hybrid_ep.py
  passes it), so the per-step metadata preprocessing of a training step's first dispatch is not in
  it: not priced;
- "hybridep" across NVLink domains: no published kernel figure the model can read (the H100 RDMA
  table's IB bytes are counted by another rule), so 1.0, the link model as it is.
The H800 and GB200 figures are applied to every device with that link level (an H100, a B200):
the kernels' efficiency on other devices is not published.
"""
from __future__ import annotations

# (dispatcher, across nodes) -> ((ranks or nodes, efficiency), ...) ascending: the module docstring's points
KERNEL_POINTS: dict[tuple[str, bool], tuple[tuple[int, float], ...]] = {
    ("deepep", False): ((8, 0.853),),
    ("deepep", True): ((2, 0.782), (4, 0.690), (8, 0.804)),
    ("hybridep", False): ((8, 0.840), (16, 0.842), (24, 0.816), (32, 0.789), (36, 0.774)),
}


def kernel_efficiency(dispatcher: str, across_nodes: bool, units: int) -> float:
    """Fraction of `dedup_alltoall_s`'s rate the dispatcher's kernels reach at `units` (ranks inside
    an NVLink domain, nodes across): piecewise linear between the measured points of `KERNEL_POINTS`,
    the nearest point outside them, 1.0 where none is published (module docstring)."""
    points = KERNEL_POINTS.get((dispatcher, across_nodes))
    if not points:
        return 1.0
    if units <= points[0][0]:
        return points[0][1]
    for (lo, e_lo), (hi, e_hi) in zip(points, points[1:]):
        if units <= hi:
            return e_lo + (e_hi - e_lo) * (units - lo) / (hi - lo)
    return points[-1][1]
