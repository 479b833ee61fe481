"""The device measurement kit's dry run (scripts/measure_device.py): no GPU, no torch; the plan of
measurements and every writer run, and the calibration CSV it writes is one `calibrate` reads."""
import csv
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _kit():
    sys.path.insert(0, str(ROOT / "scripts"))  # the kit is a script, not a module of the package
    import measure_device
    return measure_device


@pytest.mark.parametrize("quick", [True, False])
def test_dry_run_writes_every_planned_case(tmp_path, quick):
    kit = _kit()
    assert kit.main(["--out", str(tmp_path), "--dry-run", "--cluster", "h100-4x8-ib"] + (["--quick"] if quick else [])) == 0
    meta = json.loads((tmp_path / "meta.json").read_text())
    plan = kit.plan_cases(quick)
    assert meta["dry_run"] and meta["planned"] == {k: len(v) for k, v in plan.items()} == meta["written"]
    assert {c.dtype for c in plan["gemm"]} == {"bf16", "fp16", "fp8", "tf32"}
    assert {"llama", "gpt"} <= {c.style for c in plan["block"]} <= {"llama", "gpt", "titan"}

    from solver_plan.calibrate.csvfile import read_calibration_csv
    kernels, collectives = read_calibration_csv(tmp_path / "calibration.csv")
    calibrated_attention = [c for c in plan["attention"] if c.backend == "default" and c.head_dim == 128]
    assert len(kernels) == len(plan["gemm"]) + len(calibrated_attention) and not collectives
    with open(tmp_path / "blocks.csv") as f:
        blocks = list(csv.DictReader(f))
    assert len(blocks) == len(plan["block"]) + len(plan["compiled"]) and all("dry-run" in row["how"] for row in blocks)
    assert [row["mode"] for row in blocks[len(plan["block"]):]] == [c.mode for c in plan["compiled"]]
    for row, case in zip(blocks, plan["block"]):
        assert int(row["predicted_allocated_bytes"]) == round(kit.predicted_block_bytes(case))
    with open(tmp_path / "attention-backward.csv") as f:
        ratios = {float(row["backward_over_forward"]) for row in csv.DictReader(f)}
    from solver_plan.cost.kernels import FLASH_BACKWARD_RATIO
    assert ratios == {FLASH_BACKWARD_RATIO}  # the dry run is the cost model's own rule


def test_predicted_block_memory_sums_the_hybrid_terms():
    """Llama-style block, b = 1, s = 4096: weights + grads 4 P, activations (eager SwiGLU 8 s b f,
    flash log-sum-exp), the larger of the dQ accumulator and the MLP's backward transients, input and
    its gradient, two cuBLAS workspaces."""
    kit = _kit()
    case = kit.BlockCase("llama", 1, 4096, 4096, 32, 8, 14336)
    s, b, h, f, a, kv = 4096, 1, 4096, 14336, 32, 8
    params = 2 * h * h + 2 * h * kv * 128 + 3 * h * f + 2 * h  # q, o; k, v (grouped); gate, up, down; 2 RMSNorms
    acts = 10 * s * b * h + 2 * s * b * (h + 2 * kv * 128) + 2 * s * b * h + 8 * s * b * f + 4 * a * s * b
    dq_accumulator = 4 * s * b * h
    mlp_backward = max(2 * (s * b * f + s * b * h + h * f), 2 * 2 * s * b * f)  # hybrid/memory.py mlp_backward_bytes
    expected = 4 * params + acts + max(dq_accumulator, mlp_backward) + 4 * s * b * h + 64 * 1024 ** 2
    assert kit.predicted_block_bytes(case) == pytest.approx(expected)


def test_tables_option_measures_only_the_named_tables(tmp_path):
    kit = _kit()
    assert kit.main(["--out", str(tmp_path), "--dry-run", "--tables", "fsdp,model"]) == 0
    meta = json.loads((tmp_path / "meta.json").read_text())
    plan = kit.plan_cases(False)
    assert meta["written"] == {k: (len(v) if k in ("fsdp", "model") else 0) for k, v in plan.items()}
    with open(tmp_path / "fsdp-memory.csv") as f:
        assert len(list(csv.DictReader(f))) == len(plan["fsdp"])
    with pytest.raises(SystemExit, match="unknown table"):
        kit.main(["--out", str(tmp_path), "--dry-run", "--tables", "gemm,colour"])


def test_alloc_conf_is_set_before_torch_and_recorded(tmp_path, monkeypatch):
    """--alloc-conf sets PYTORCH_CUDA_ALLOC_CONF for the call (the caching allocator's mode changes the
    reserved peaks of fsdp-memory.csv) and the files say which mode measured them."""
    monkeypatch.setenv("PYTORCH_CUDA_ALLOC_CONF", "")  # recorded, so that the test's value is undone after it
    monkeypatch.delenv("PYTORCH_CUDA_ALLOC_CONF")
    kit = _kit()
    assert kit.main(["--out", str(tmp_path), "--dry-run", "--quick", "--tables", "fsdp",
                     "--alloc-conf", "expandable_segments:True"]) == 0
    import os
    assert os.environ["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert json.loads((tmp_path / "meta.json").read_text())["alloc_conf"] == "expandable_segments:True"
    with open(tmp_path / "fsdp-memory.csv") as f:
        assert all("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in row["how"] for row in csv.DictReader(f))


def test_a_case_starts_after_earlier_cases_cycles_are_collected(monkeypatch):
    """An FSDP2 model left by the previous case lives on in a reference cycle (hooks <-> modules):
    `clean_start` collects it before emptying the cache, so its memory is not this case's."""
    import gc
    kit = _kit()
    calls = []

    class FakeCuda:
        def synchronize(self):
            calls.append("synchronize")

        def empty_cache(self):
            calls.append("empty_cache")

        def memory_allocated(self):
            calls.append("memory_allocated")
            return 123

    class FakeTorch:
        cuda = FakeCuda()

    monkeypatch.setattr(gc, "collect", lambda *a: calls.append("collect") or 0)
    assert kit.clean_start(FakeTorch()) == 123
    assert calls == ["collect", "synchronize", "empty_cache", "memory_allocated"]
