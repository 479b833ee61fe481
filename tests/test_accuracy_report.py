"""The accuracy report's inputs and helpers (the report itself is scripts/accuracy_report.py)."""
import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


def _script():
    spec = importlib.util.spec_from_file_location("accuracy_report", ROOT / "scripts" / "accuracy_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_published_figure_names_its_source():
    data = yaml.safe_load((ROOT / "data" / "published" / "throughputs.yaml").read_text())
    sources = data["sources"]
    assert all(s["url"].startswith("https://") and s["title"] for s in sources.values())
    entries = data["configurations"]
    assert len(entries) >= 6
    kinds = {e["kind"] for e in entries}
    assert {"cnn", "transformer"} <= kinds <= {"cnn", "graph", "transformer"}  # graph: a zoo model on the per-operator path
    assert min(e["gpus"] for e in entries) == 1 and max(e["gpus"] for e in entries) >= 1000
    for e in entries:
        assert e["source"] in sources
        assert e["measured"]["value"] > 0 and e["measured"]["unit"]
        if e["kind"] == "transformer":
            assert e["gpus"] % (e["tp"] * e["pp"]) == 0
        else:
            assert e["model"] and e["per_gpu_batch"] >= 1 and e["precision"]
        if "input_pipeline" in e:  # the loader as published: workers per GPU and host cores
            assert e["input_pipeline"]["workers_per_gpu"] >= 1 and e["input_pipeline"]["cpu_cores_per_node"] >= 1


def test_megatron_equation_3_by_hand():
    # Narayanan et al. (SC'21): the 1T model (l=128, h=25600, B=3072, s=2048, V=51200) at 163 TFLOP/s
    # on 3072 GPUs gives ~ 502 PFLOP/s aggregate, as Table 1 states
    flops = _script().megatron_eq3_flops(128, 25600, 3072)
    expected = 96 * 3072 * 2048 * 128 * 25600 ** 2 * (1 + 2048 / (6 * 25600) + 51200 / (16 * 128 * 25600))
    assert flops == pytest.approx(expected)
    assert 163e12 * 3072 == pytest.approx(502e15, rel=0.01)


def _rows(dgx1_gpu_only: float) -> list[dict]:
    """Published rows shaped like accuracy_report.published_predictions' for the ids the notes quote."""
    loader = {"workers_per_gpu": 8, "cores_per_node": 40, "nodes": 1, "rate": 300.0}
    rows = []
    for row_id, gpus, precision, measured, predicted in (
            ("rn50-v100-8gpu-amp", 8, "fp16", 8000.0, None), ("rn50-a100-1gpu-amp", 1, "fp16", 2500.0, 2750.0),
            ("rn50-a100-1gpu-tf32", 1, "tf32", 1000.0, 1100.0), ("rn50-a100-8gpu-amp", 8, "fp16", 16000.0, 22000.0),
            ("rn50-a100-8gpu-tf32", 8, "tf32", 7000.0, 8800.0)):
        per_node = min(gpus, 8)
        busy = min(loader["workers_per_gpu"] * per_node, loader["cores_per_node"] - per_node)
        row_loader = dict(loader, per_node=per_node, busy_cores=busy, bound=busy * loader["rate"])
        gpu_only = dgx1_gpu_only if predicted is None else predicted
        rows.append({"id": row_id, "gpus": gpus, "precision": precision, "measured": measured,
                     "predicted": min(gpu_only, row_loader["bound"]), "calibrated": None, "gpu_only": gpu_only,
                     "global_batch": 256 * gpus, "params": 25_000_000, "allreduce_s": 2e-3, "loader": row_loader,
                     "model": "resnet50", "cluster": "a100x8-80gb", "gemm_gflop": []})
    for framework, precision in (("paddle", "fp16"), ("pytorch", "fp16"), ("pytorch", "tf32")):
        rows.append({"id": f"bert-large-{framework}-a100-1gpu-{precision}", "gpus": 1, "precision": precision,
                     "measured": 500.0, "predicted": 600.0, "calibrated": None, "gemm_gflop": [50.0, 200.0],
                     "cluster": "a100x8-80gb", "model": "bert-large:seq=128,predictions=20,dropout=0.1"})
    return rows


def test_notes_quote_figures_computed_from_the_rows():
    script = _script()
    rate = script._measurement_record()["median"]
    for gpu_only in (9600.0, 12000.0):
        text = " ".join(script._mechanism_lines(_rows(gpu_only)))
        busy = min(8 * 8, 40 - 8)
        # the per-core rate below which the DGX-1 row is loader-bound, and the row's error without the bound
        assert f"binds only below {gpu_only / busy:.0f} images per core-second" in text
        assert f"that row is {100 * (gpu_only / 8000.0 - 1):+.1f}%" in text
        assert f"measured median ({rate:g};" in text
        assert "50-200 GFLOP GEMMs" in text and "no term that costs" in text
    assert "not predicted" in " ".join(script._mechanism_lines([]))
