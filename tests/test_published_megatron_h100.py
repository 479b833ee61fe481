"""Megatron-LM's H100 scaling table (data/published/runs-2022-2025.yaml, source megatron2024_h100) and the
megatron-core-tp-overlap profile its runs used: each row's degrees multiply to its GPUs and its batch divides
into data-parallel replicas; its teraFLOP/s convert to a step with Megatron's own FLOP count at that commit
(num_floating_point_operations), which equals the project's model FLOPs for these models; the profile
differs from megatron-core by the tensor-parallel overlap only, with its source."""
import importlib.util
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from solver_plan.hybrid.model import transformer_spec
from solver_plan.runtime import RUNTIMES, resolve_runtime

ROOT = Path(__file__).resolve().parents[1]
RUNS = yaml.safe_load((ROOT / "data/published/runs-2022-2025.yaml").read_text())
ROWS = [p for p in RUNS["points"] if p["source"] == "megatron2024_h100"]


def _megatron_flops(spec, batch: int) -> float:
    """Megatron-LM 937571cf megatron/training/training.py num_floating_point_operations, multi-head
    attention, no SwiGLU, no experts: 12 B s L h^2 ((1 + 1 + s/h) q/h + f/h + V/(2 L h))."""
    s, L, h, q = spec.seq, spec.layers, spec.hidden, spec.heads * spec.head_dim
    return 12 * batch * s * L * h * h * ((2 + s / h) * q / h + spec.ffn / h + spec.vocab / (2 * L * h))


def _published_step():
    path = ROOT / "scripts" / "hybrid_vs_published.py"
    module_spec = importlib.util.spec_from_file_location("hybrid_vs_published", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.published_step


def test_nine_rows_with_consistent_degrees():
    assert len(ROWS) == 9
    for row in ROWS:
        fix = row["fix"]
        assert fix["dp"] * fix["tp"] * fix["pp"] == row["gpus"] and fix["dp"] == 48
        assert row["global_batch"] % fix["dp"] == 0 and fix["sequence_parallel"] == (fix["tp"] > 1)
        assert row["runtime"] == "megatron-core-tp-overlap"


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_teraflops_convert_with_megatrons_own_count(row):
    spec = transformer_spec(row["model"])
    assert spec.model_flops_per_step(row["global_batch"]) == pytest.approx(_megatron_flops(spec, row["global_batch"]))
    step = _published_step()(row)
    assert step == pytest.approx(_megatron_flops(spec, row["global_batch"]) / (row["tflops_per_gpu"] * 1e12 * row["gpus"]))


def test_profile_is_megatron_core_with_tensor_parallel_overlap():
    profile = resolve_runtime("megatron-core-tp-overlap")
    assert profile is RUNTIMES["megatron-core-tp-overlap"] and profile.overlap.tp_comm
    core = RUNTIMES["megatron-core"]
    assert not core.overlap.tp_comm
    assert replace(profile, name=core.name, summary=core.summary, sources=core.sources,
                   overlap=core.overlap) == core
    assert "tp_comm" in {key for key, _ in profile.sources}
