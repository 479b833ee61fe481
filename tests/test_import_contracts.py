"""The import contracts of pyproject.toml ([tool.importlinter], docs/architecture.md "Layers") hold
for the tree, so a new cycle or an import reaching up a layer fails the default suite, not only
CI's lint job; and the solver libraries of the pipeline planners load only when a planner solves."""
from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[1]


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_are_kept(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True)
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"Contracts: {len(_contracts())} kept, 0 broken" in out


def test_every_package_and_top_level_module_has_a_layer():
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    placed = {name.strip() for layer in layers for name in layer.split("|")}
    package = ROOT / "solver_plan"
    present = {f"solver_plan.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    present |= {f"solver_plan.{p.parent.name}" for p in package.glob("*/__init__.py")}
    assert present - placed == set(), "a new package or module of solver_plan/ needs its layer in pyproject.toml"
    assert placed - present == set()


def test_the_architecture_document_lists_the_layers_in_the_contract_order():
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    text = (ROOT / "docs" / "architecture.md").read_text()
    paragraph = text[text.index("## Layers"):]
    paragraph = paragraph[:paragraph.index("\n## ", 4)]
    written = re.findall(r"^\s*\d+\. (.+)$", paragraph, re.MULTILINE)
    expected = [" | ".join(name.strip().removeprefix("solver_plan.") for name in layer.split("|")) for layer in layers]
    assert [line.split(":")[0].strip().replace("`", "") for line in written] == expected


def test_pipeline_planners_load_without_their_solver_libraries_and_pulp_after_ortools():
    code = ("import sys; from solver_plan.planners import planners; planners('pipeline'); "
            "assert not {'ortools', 'pulp', 'highspy'} & {m.split('.')[0] for m in sys.modules}, sorted(sys.modules); "
            "from solver_plan.pipeline import solvers; import importlib.abc; "
            "order = []; sys.meta_path.insert(0, type('Spy', (importlib.abc.MetaPathFinder,), "
            "{'find_spec': lambda self, name, path, target=None: order.append(name) or None})()); "
            "solvers.pulp(); tops = [n for n in order if n in ('ortools', 'pulp')]; "
            "assert tops == ['ortools', 'pulp'], tops")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
