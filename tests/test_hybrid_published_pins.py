"""Published configurations with issue 23's dimensions (context parallelism, unequal stages under
the interleaved schedule) are expressible by pins and priced, the validator agreeing
(data/published/runs-2022-2025.yaml; their errors against the measurements: scripts/hybrid_vs_published.py)."""
from pathlib import Path

import pytest
import yaml

from solver_plan.hybrid import evaluate
from solver_plan.hybrid.model import transformer_spec
from solver_plan.result import Status

RUNS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data/published/runs-2022-2025.yaml").read_text())


def _new_dimensions(point) -> bool:
    fix, spec = point["fix"], transformer_spec(point["model"])
    return fix.get("cp", 1) > 1 or spec.layers % fix["pp"] != 0


@pytest.mark.parametrize("point", [p for p in RUNS["points"] if _new_dimensions(p)], ids=lambda p: p["name"])
def test_published_configuration_is_expressible_and_priced(point):
    fix = {"micro_batch_size": 1, **point["fix"]}
    result = evaluate(point["model"], point["cluster"], point["global_batch"], fix, memory_limit="none",
                      runtime=point.get("runtime"), precision=point.get("precision"))
    assert result.status == Status.FEASIBLE, result.notes
    assert result.notes[-1].startswith("validator: step time and memory re-derived")
    assert result.plan.devices == point["gpus"]
    assert result.plan.parallelism.cp == point["fix"].get("cp", 1)
