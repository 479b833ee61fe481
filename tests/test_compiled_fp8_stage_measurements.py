"""The memory model against the H200 measurements of 2026-11-27 (data/device/h200-2026-11-27-compile-fp8):
allocator traces of torchtitan's FSDP2 (dp 8) x TP 8 pipeline stage of Llama 3.1 405B (rank 0 of a fake
64-rank group, 4 blocks, full recomputation, 8 micro-batches in flight under 1F1B) with each block
torch.compile'd (`-compile`), and with torchao's float8 Linears, float8 TP styles and fp8 all-gather as
torchtitan's 405B preset runs them (`-compile-fp8`, and its 32,768-token micro-batches); and the same
stage under torch.distributed.pipelining's own ScheduleInterleaved1F1B (`torch-interleaved`, 2 chunks of
2 blocks). Compared with the eager stage of data/device/h200-2026-11-27-pp-cp."""
import json
import sys
from pathlib import Path

import pytest

from solver_plan.hybrid import memory as mem
from solver_plan.runtime import RUNTIMES

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "data" / "device" / "h200-2026-11-27-compile-fp8"
EAGER = ROOT / "data" / "device" / "h200-2026-11-27-pp-cp"
GIB = 1 << 30
CASES = ["fsdp-tp-stage-1f1b-compile", "fsdp-tp-stage-1f1b-compile-fp8", "fsdp-tp-stage-1f1b-32k-compile-fp8",
         "torch-interleaved"]


def _tracer():
    sys.path.insert(0, str(ROOT / "scripts"))  # the tracer is a script, not a module of the package
    import trace_allocator
    return trace_allocator


def _replay(name, run=RUN):
    tracer = _tracer()
    return tracer.replay(tracer.read_events(run / "traces" / f"{name}.csv.gz"))


@pytest.mark.parametrize("name", CASES)
def test_traces_replay_to_the_measured_peaks(name):
    """Each trace is whole: its replay gives torch's second-step peaks (each case ran alone in its process,
    from an empty allocator)."""
    s = json.loads((RUN / "traces" / "summary.json").read_text())["cases"][name]
    r = _replay(name)
    assert s["allocated_before_bytes"] == 0
    assert r.allocated == pytest.approx(s["peak_allocated_bytes"], abs=1 << 20)
    assert r.mapped == pytest.approx(s["peak_reserved_bytes"], abs=128 << 20)


def test_compiled_blocks_hold_no_less_than_eager():
    """Compiling each block does not lower the stage's allocated peak under full recomputation (23.00 GiB
    against 22.56 eager): the model prices the compiled block's recompute working set with the unfused
    kernels (`Kernels.fusions_compiled`, hybrid/memory.py unfused_runtime), so it predicts the same for both."""
    compiled, eager = _replay("fsdp-tp-stage-1f1b-compile"), _replay("fsdp-tp-stage-1f1b", EAGER)
    assert compiled.allocated >= eager.allocated
    tracer = _tracer()
    assert tracer.predicted_memory("fsdp-tp-stage-1f1b-compile") == pytest.approx(
        tracer.predicted_memory("fsdp-tp-stage-1f1b"), rel=1e-9)
    assert RUNTIMES["torchtitan-compile"].kernels.fusions_compiled
    assert not RUNTIMES["torchtitan"].kernels.fusions_compiled


def test_fp8_all_gather_holds_the_gathered_blocks_at_one_byte():
    """With torchao's fp8 all-gather the 4 gathered blocks (FSDP2's unsharded parameters,
    reshard_after_forward off under the pipeline) hold 1 byte a matrix parameter: the allocation at
    FSDP's alloc_storage is half the bf16 case's, as `gathered_block_bytes` prices it."""
    tracer = _tracer()
    case = tracer.plan_cases()["fsdp-tp-stage-1f1b-compile-fp8"]
    spec = tracer.kit.block_spec(case.stage.shapes)
    state = mem.precision_state(mem.TrainingPrecision.mixed("fp8"))
    priced = case.stage.layers * mem.gathered_block_bytes(spec, case.stage.tp, state, "torchtitan-compile-fp8-gather")
    bf16 = case.stage.layers * mem.gathered_block_bytes(spec, case.stage.tp, state, "torchtitan-compile")
    rows = tracer.read_events(RUN / "traces" / "fsdp-tp-stage-1f1b-compile-fp8.csv.gz")
    gathered = max(_live_at(rows, "alloc_storage"))
    assert gathered == pytest.approx(priced, rel=0.01)
    assert priced == pytest.approx(bf16 / 2, rel=0.01)


def _live_at(rows, where):
    """The bytes alive that were allocated from `where`, after each event."""
    live, total = {}, 0
    for r in rows:
        if r["action"] == "alloc" and where in r["where"]:
            live[r["addr"]] = int(r["size"])
            total += int(r["size"])
        elif r["action"] == "free_completed" and r["addr"] in live:
            total -= live.pop(r["addr"])
        yield total


@pytest.mark.parametrize("name", CASES)
def test_stage_memory_within_7_and_10_percent(name):
    """stage_memory as the planner prices FSDP under a pipeline, with the runtime profile the runs of the
    case's settings name (torchtitan-compile, torchtitan-compile-fp8-gather with fp8 GEMMs, torchtitan for
    the eager interleaved schedule): allocated -4.8%, -6.4%, -5.3%, -6.3%; reserved -5.8%, -9.1%, -8.7%,
    +0.1%. Always below the measurement in allocation: what is left is under-priced working memory of
    the compiled fp8 backward (per-Linear fp8 copies of the gathered input for the weight-gradient GEMM),
    not an over-count."""
    allocated, reserved = _tracer().predicted_memory(name)
    r = _replay(name)
    assert allocated == pytest.approx(r.allocated, rel=0.07)
    assert reserved == pytest.approx(r.mapped, rel=0.10)
    assert allocated < r.allocated


def test_interleaved_schedule_holds_no_more_than_one_f_one_b():
    """ScheduleInterleaved1F1B's stage 0 (2 chunks of 2 blocks, each its own FSDP root) holds no more than
    Schedule1F1B's stage of the same 4 blocks (22.34 GiB allocated against 22.81): all m x v chunk passes
    run forward first, the same block-micro-batches as 1F1B's m in flight."""
    interleaved, one_f_one_b = _replay("torch-interleaved"), _replay("torch-1f1b", EAGER)
    assert interleaved.allocated <= one_f_one_b.allocated
    assert interleaved.mapped <= one_f_one_b.mapped


def _compiled_blocks():
    import csv
    sys.path.insert(0, str(ROOT / "scripts"))
    import measure_device as kit
    with (RUN / "kit-compiled" / "blocks.csv").open() as f:
        for row in csv.DictReader(f):
            yield kit, kit.BlockCase(row["style"], int(row["batch"]), int(row["seq"]), int(row["hidden"]),
                                     int(row["heads"]), int(row["kv_heads"]), int(row["ffn"]), gqa=row["gqa"],
                                     ac=row["ac"], mode=row["mode"]), row


def test_compiled_blocks_priced_within_10_percent():
    """torchtitan's block compiled (and in float8) on the H200, forward + backward + what its checkpointing
    repeats, against BlockCoster under torchtitan-compile (fp8 GEMMs for compile-fp8) on the H200 preset:
    +7.0%, +6.3%, -6.0%, -8.3%, no common sign; the peak allocation within 7%."""
    import warnings

    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid.stage_cost import BlockCoster
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cluster = resolve_cluster("h200-8x8-ib")
    errors = []
    for kit, case, row in _compiled_blocks():
        if case.mode == "eager":
            continue
        profile = BlockCoster(kit.block_spec(case), cluster, runtime=kit.block_runtime(case),
                              precision=kit.block_precision(case)).profile(1, case.batch)
        errors.append((profile.block_s + profile.repeated_forward_s(case.ac)) / (float(row["forward_backward_ms"]) / 1e3)
                      - 1)
        assert kit.predicted_block_bytes(case) == pytest.approx(int(row["peak_allocated_bytes"]), rel=0.07)
    assert len(errors) == 4 and max(abs(e) for e in errors) < 0.10
    assert min(errors) < 0 < max(errors)  # no common sign: nothing to calibrate out
