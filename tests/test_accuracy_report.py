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
