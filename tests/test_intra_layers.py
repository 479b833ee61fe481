"""intra/ has no import cycle, counting imports hidden inside functions (issue 21): the planner
plumbing (answer, context, clock, warm start, diagnosis, the harness) sits below the planners."""
from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

INTRA = Path(__file__).resolve().parents[1] / "solver_plan" / "intra"
PREFIX = "solver_plan.intra."


def _module_name(path: Path) -> str:
    relative = path.relative_to(INTRA).with_suffix("")
    parts = [part for part in relative.parts if part != "__init__"]
    return PREFIX + ".".join(parts) if parts else PREFIX.rstrip(".")


def intra_imports() -> dict[str, set[str]]:
    """Every intra/ module and the intra/ modules it imports anywhere in its text."""
    graph: dict[str, set[str]] = {}
    for path in INTRA.rglob("*.py"):
        name = _module_name(path)
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                base = node.module
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = targets
    return {name: {t for t in targets if t in graph and t != name} for name, targets in graph.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_intra_import_graph_is_acyclic():
    graph = intra_imports()
    assert PREFIX + "harness" in graph and PREFIX + "answer" in graph
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_plumbing_never_imports_a_planner():
    """The pieces planners build on never import a registered planner module."""
    graph = intra_imports()
    planners = {PREFIX + name for name in ("greedy", "milp", "cpsat", "brute", "elimination", "edge_drop",
                                           "reference", "baselines")}
    for piece in ("answer", "context", "clock", "warm_start", "diagnose", "harness", "simplified",
                  "subprocess_guard"):
        reached, todo = set(), [PREFIX + piece]
        while todo:
            for target in graph[todo.pop()]:
                if target not in reached:
                    reached.add(target)
                    todo.append(target)
        assert not reached & planners, f"{piece} reaches {sorted(reached & planners)}"


@pytest.mark.parametrize("first", ["greedy", "local_search", "linear_model", "lagrangian_fixing", "memory",
                                   "warm_start", "harness"])
def test_each_module_imports_first_in_a_fresh_interpreter(first):
    """Orders that used to depend on a function-level import running late now import cleanly."""
    code = f"import importlib; importlib.import_module('{PREFIX}{first}'); import solver_plan.intra.solve"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def test_answer_lives_in_its_own_module():
    answer = importlib.import_module(PREFIX + "answer")
    assert answer.Answer.__module__ == PREFIX + "answer"
