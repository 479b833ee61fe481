"""Every public definition in the listed packages has a docstring.

Public means a module-level function or class, or a method or property of a
public class, whose name does not start with ``_``. The check reads the source
with ``ast`` (nothing is imported), so it costs nothing and names each missing
docstring as ``path:line qualified.name``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TypeGuard

# Covered packages, relative to solver_plan/: "" is the top-level modules of
# solver_plan/ alone; any other entry is a package with all its subpackages.
# One entry a line, so branches that add packages merge cleanly.
DOCUMENTED = (
    "",
    "batch",
    "calibrate",
    "cluster",
    "cost",
    "export",
    "graph",
    "hybrid",
    "intra",
    "pipeline",
    "report",
    "runtime",
    "simulate",
    "suite",
)

ROOT = Path(__file__).resolve().parent.parent / "solver_plan"


def _modules(package: str) -> list[Path]:
    if package == "":
        return sorted(ROOT.glob("*.py"))
    return sorted((ROOT / package).rglob("*.py"))


Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _public(node: ast.stmt) -> TypeGuard[Definition]:
    """A definition that needs a docstring: a public name, and not an `@overload` stub (the
    implementation after the stubs carries the docstring)."""
    if not isinstance(node, Definition) or node.name.startswith("_"):
        return False
    return not any((d.id if isinstance(d, ast.Name) else getattr(d, "attr", None)) == "overload"
                   for d in node.decorator_list)


def _undocumented(path: Path, root: Path = ROOT) -> list[str]:
    """``path:line name`` of each public definition in ``path`` without a docstring (paths
    relative to the folder above the package ``root``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.relative_to(root.parent)
    missing: list[str] = []
    for node in tree.body:
        if not _public(node):
            continue
        if ast.get_docstring(node) is None:
            missing.append(f"{where}:{node.lineno} {node.name}")
        if isinstance(node, ast.ClassDef):
            for member in node.body:
                if _public(member) and not isinstance(member, ast.ClassDef) and ast.get_docstring(member) is None:
                    missing.append(f"{where}:{member.lineno} {node.name}.{member.name}")
    return missing


def _all_undocumented() -> list[str]:
    return [entry for package in DOCUMENTED for path in _modules(package) for entry in _undocumented(path)]


def test_listed_packages_exist() -> None:
    for package in DOCUMENTED:
        assert (ROOT / package).is_dir(), f"solver_plan/{package} is listed but is not a package"


def test_public_definitions_have_docstrings() -> None:
    missing = _all_undocumented()
    assert not missing, f"{len(missing)} public definitions without a docstring:\n" + "\n".join(missing)


def test_checker_finds_a_missing_docstring(tmp_path: Path) -> None:
    """The walker itself: a bare public function, method and class are named; private ones and documented ones not."""
    source = (
        "def shown():\n    pass\n"
        "def _hidden():\n    pass\n"
        "@overload\ndef typed(x: int) -> int: ...\n"
        'class Bare:\n    def method(self):\n        pass\n    def _private(self):\n        pass\n'
        'class Told:\n    """Documented."""\n    @property\n    def size(self):\n        """Bytes."""\n'
    )
    fake_root = tmp_path / "solver_plan"
    fake_root.mkdir()
    module = fake_root / "m.py"
    module.write_text(source, encoding="utf-8")
    found = _undocumented(module, fake_root)
    assert found == ["solver_plan/m.py:1 shown", "solver_plan/m.py:7 Bare", "solver_plan/m.py:8 Bare.method"]
