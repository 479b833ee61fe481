"""The cost model against the H100 measurements committed in data/device/ (scripts/measure_device.py):
the device tables are read from kernel measurements; these tests check the memory model, which was
not fitted to them, against the blocks and optimizer state measured in the same call."""
import csv
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "data" / "device" / "h100-2026-11-26"


def _kit():
    sys.path.insert(0, str(ROOT / "scripts"))  # the kit is a script, not a module of the package
    import measure_device
    return measure_device


def _rows(name):
    with open(RUN / name) as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("row", _rows("blocks.csv"), ids=lambda r: f"{r['style']}-b{r['batch']}-s{r['seq']}-h{r['hidden']}-{r['gqa']}-{r.get('ac', 'none')}")
def test_block_peak_and_kept_memory_within_5_percent(row):
    kit = _kit()
    case = kit.BlockCase(row["style"], int(row["batch"]), int(row["seq"]), int(row["hidden"]), int(row["heads"]),
                         int(row["kv_heads"]), int(row["ffn"]), gqa=row["gqa"], ac=row.get("ac", "none"))
    peak = int(row["peak_allocated_bytes"])
    if row["gqa"] == "repeat":  # the model's attention repeats k and v to every head (torchtitan's repeat_kv)
        assert kit.predicted_block_bytes(case) == pytest.approx(peak, rel=0.05)
        # exact for selective and full recomputation; without, eager PyTorch keeps one e s b h tensor more
        # than the model counts (2-6% of a block)
        tolerance = 0.001 if row.get("ac", "none") != "none" else 0.06
        assert kit.predicted_kept_bytes(case) == pytest.approx(int(row["kept_after_forward_bytes"]), rel=tolerance)
    else:  # SDPA's native grouped-query attention keeps k and v unrepeated: the model errs high, by under 10%
        assert peak <= kit.predicted_block_bytes(case) <= 1.1 * peak


@pytest.mark.parametrize("row", [r for r in _rows("optimizer.csv") if r["where"] == "gpu"], ids=lambda r: r["block"])
def test_model_state_under_adamw_within_3_percent(row):
    assert int(row["predicted_state_bytes"]) == pytest.approx(int(row["state_allocated_bytes"]), rel=0.03)


def test_attention_efficiency_follows_the_query_length():
    """The H100's cuDNN curve (read from attention-backward.csv) and a YAML with one figure."""
    from solver_plan.cluster import resolve_cluster
    from solver_plan.cluster.loader import cluster_from_dict
    from solver_plan.cost.compute import attention_time

    h100 = resolve_cluster("h100-4x8-ib")
    flops = 1e12
    short, long = (attention_time(h100, flops, 0.0, "cudnn", query_length=q) for q in (1024, 8192))
    assert short > 1.5 * long  # 0.26 vs 0.49 of peak
    assert attention_time(h100, flops, 0.0, "cudnn") == pytest.approx(attention_time(h100, flops, 0.0, "cudnn", query_length=1e6))
    links = {"intra_node": {"bandwidth": "300GB/s"}}
    flat = cluster_from_dict({"name": "x", "devices_per_node": 8, "links": links, "device": {
        "name": "H100-SXM-80GB", "attention_efficiency": {"cudnn": 0.5, "flash2": [[4096, 0.3], [0, 0.2]]}}})
    assert attention_time(flat, flops, 0.0, "cudnn", query_length=1024) == attention_time(flat, flops, 0.0, "cudnn", query_length=8192)
    assert attention_time(flat, flops, 0.0, "flash2", query_length=1024) > attention_time(flat, flops, 0.0, "flash2", query_length=4096)


@pytest.mark.parametrize("row", _rows("model-memory.csv"), ids=lambda r: f"vocab{r['vocab']}-s{r['seq']}")
def test_whole_decoder_peak_within_3_percent(row):
    """stage_memory (one stage, torchtitan) against a whole eager decoder's measured peak: the loss's
    fp32 logits dominate at a 128K vocabulary."""
    kit = _kit()
    case = kit.ModelCase(int(row["layers"]), int(row["batch"]), int(row["seq"]), int(row["hidden"]), 32, 8,
                         int(row["ffn"]), int(row["vocab"]))
    assert sum(kit.predicted_model_terms(case).values()) == pytest.approx(int(row["peak_allocated_bytes"]), rel=0.03)


@pytest.mark.parametrize("row", _rows("fsdp-memory.csv"), ids=lambda r: f"vocab{r['vocab']}-s{r['seq']}")
def test_fsdp2_decoder_peak_within_5_percent(row):
    """stage_memory with ZeRO-3 under torchtitan against FSDP2 on one rank (fp32 sharded parameters,
    Adam moments, the gathered blocks and the unsharded root, the activations; the gradients are
    dropped after each step and are not there at the backward's start)."""
    kit = _kit()
    case = kit.FsdpCase(kit.ModelCase(int(row["layers"]), int(row["batch"]), int(row["seq"]), int(row["hidden"]), 32, 8,
                                      int(row["ffn"]), int(row["vocab"])))
    terms = kit.predicted_fsdp_terms(case)
    assert terms["gradients"] == 0.0
    assert terms["weights"] + terms["optimizer"] == pytest.approx(int(row["allocated_before_bytes"]), rel=0.01)
    assert sum(terms.values()) == pytest.approx(int(row["peak_allocated_bytes"]), rel=0.05)


@pytest.mark.parametrize("row", _rows("fsdp-memory.csv"), ids=lambda r: f"vocab{r['vocab']}-s{r['seq']}")
def test_fsdp2_reserved_counts_the_side_stream_pools(row):
    """The reserved peak over the allocated one: FSDP2's reduce-scatter pool (the sharded fp32 gradients)
    is held apart from the compute stream's memory (hybrid/memory.py stream_pool_bytes), and the loss
    leaves the bf16 prediction's bytes as a hole (loss_hole_bytes). This run did not set
    expandable segments, so the compute stream's own cudaMalloc segments also fragment, which the model
    does not price: the prediction lies between the measured allocated and reserved peaks (measured
    1.38-1.59x the allocated; predicted 1.23-1.25x: -9% and -20% of the reserved; the 32K row's
    reserved figure also holds the first case's leaked parameters: the test below takes them off)."""
    from solver_plan.hybrid import memory as mem
    from solver_plan.runtime import resolve_runtime

    kit = _kit()
    case = kit.FsdpCase(kit.ModelCase(int(row["layers"]), int(row["batch"]), int(row["seq"]), int(row["hidden"]), 32, 8,
                                      int(row["ffn"]), int(row["vocab"])))
    state = mem.runtime_state(mem.MIXED_PRECISION, resolve_runtime("torchtitan"))
    spec = kit.model_spec(case.model)
    m = mem.stage_memory(spec, layers=case.model.layers, stage=0, pp=1, tp=1, dp=1, micro_batch=case.model.batch,
                         micro_batches=1, recompute="none", sequence_parallel=False, zero_stage=3, schedule="1f1b",
                         state=state, runtime="torchtitan")
    params = spec.total_params
    logits = case.model.batch * case.model.seq * case.model.vocab
    # the reduce-scatter pool (fp32 sharded gradients) and the loss's hole (the bf16 prediction's bytes);
    # at world size 1 FSDP2's all-gather outputs live on the compute stream, no pool of their own
    # (data/device/h200-2026-11-27-alloc/traces-expandable, tests/test_allocator_traces.py)
    assert m.fragmentation == pytest.approx(4.0 * params + 2.0 * logits, rel=1e-9)
    allocated, reserved = int(row["peak_allocated_bytes"]), int(row["peak_reserved_bytes"])
    assert allocated < m.reserved < reserved


def test_fsdp2_32k_reserved_less_the_first_cases_leaked_parameters():
    """The 32K-vocabulary FSDP2 row ran second in its process (meta-fsdp.json) under a kit that did not
    run gc.collect() between cases, while the first case's FSDP2 model outlives its function in a
    reference cycle (tests/test_fsdp_reference_cycle.py reproduces it with torch on CPU; the optimizer
    and its moments are not in that cycle). The kit subtracted what was allocated at the case's start
    from the allocated figures but not from `max_memory_reserved`, which is process-wide: the row's
    reserved peak holds the first case's fp32 sharded parameters, 4 B each (their count: the first
    row's allocation before its step, 12 B per parameter). Less them, the row is within 1% of the same
    case measured clean a day later (H200, each case after gc.collect(), the same allocator setting:
    data/device/h200-2026-11-27-alloc/kit-plain); the allocated figures were right all along. Also a
    bound: the leak fits under the row's reserved peak, which the first case's 12 B per parameter would
    not. (The memory model against the clean rows: tests/test_allocator_traces.py.)"""
    first, second = _rows("fsdp-memory.csv")
    assert int(first["vocab"]) == 128256 and int(second["vocab"]) == 32000  # measuring order of the call
    leaked_params = int(first["allocated_before_bytes"]) / 12.0
    reserved, allocated = int(second["peak_reserved_bytes"]), int(second["peak_allocated_bytes"])
    assert allocated + 12.0 * leaked_params > reserved  # not the whole first case: its optimizer was freed
    own = reserved - 4.0 * leaked_params
    with open(ROOT / "data" / "device" / "h200-2026-11-27-alloc" / "kit-plain" / "fsdp-memory.csv") as f:
        clean = next(r for r in csv.DictReader(f) if int(r["vocab"]) == 32000)
    assert int(clean["peak_allocated_bytes"]) == allocated  # the same case, byte for byte
    assert own == pytest.approx(int(clean["peak_reserved_bytes"]), rel=0.01)
