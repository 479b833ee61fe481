"""Bad input never shows a traceback: generated cases (tests/bad_input_cases.py and the corpus in
tests/bad_inputs/) over every entry point end with exit status 2 and one stderr line naming the
file, key or value. The unmutated inputs the cases start from are checked to be accepted, so each
case fails because of its mutation."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bad_input_cases as cases_module
from bad_input_cases import GENERATORS, PLAN_CLUSTER, PLAN_MODEL, Case, Special, plan_cases
from solver_plan.cli import main

sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))  # the default: deep inputs must not need more

CASES = [case for generate in GENERATORS for case in generate()]
_DUMMY_PLAN = {"schema_version": 1, "model": PLAN_MODEL, "cluster": PLAN_CLUSTER,
               "operators": [{"name": "x", "degrees": {}, "devices": [0]}]}
PLAN_CASE_IDS = [case.id for case in plan_cases(_DUMMY_PLAN)]


def materialise(case: Case, tmp_path: Path) -> list[str]:
    for name, content in case.files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Special):
            if content.kind == "fifo":
                os.mkfifo(path)
            elif content.kind == "folder":
                path.mkdir()
            else:
                path.symlink_to(content.kind.removeprefix("link:"))
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return [part.replace("{tmp}", str(tmp_path)) for part in case.argv]


def assert_one_line_error(case: Case, tmp_path: Path, capsys) -> str:
    argv = materialise(case, tmp_path)
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in err + out, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, f"{argv}: exit {code}; stderr {err!r}"
    assert len(lines) == 1, f"{argv}: expected one stderr line, got {lines}"
    assert "error" in lines[0]
    for fragment in case.expect:
        fragment = fragment.replace("{tmp}", str(tmp_path))
        assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def plan_document(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    assert main(["plan", "--model", PLAN_MODEL, "--cluster", PLAN_CLUSTER, "--planner", "data-parallel",
                 "--out", str(path)]) == 0
    return json.loads(path.read_text())


def test_suite_is_large_enough():
    assert len(CASES) + len(PLAN_CASE_IDS) >= 300
    assert len({case.id for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", [
    pytest.param(case, id=case.id, marks=[pytest.mark.xfail(reason=case.known_issue, strict=False)] if case.known_issue else [])
    for case in CASES])
def test_bad_input_is_one_line_exit_2(case, tmp_path, capsys):
    assert_one_line_error(case, tmp_path, capsys)


@pytest.mark.parametrize("case_id", PLAN_CASE_IDS)
def test_bad_plan_file_is_one_line_exit_2(case_id, plan_document, tmp_path, capsys):
    case = next(case for case in plan_cases(plan_document) if case.id == case_id)
    assert_one_line_error(case, tmp_path, capsys)


# --- the inputs the cases mutate are valid --------------------------------------------------
def test_unmutated_inputs_are_accepted(plan_document, tmp_path, capsys):
    (tmp_path / "c.yaml").write_text(cases_module.render_yaml(cases_module.CLUSTER) + "\n")
    assert main(["check", str(tmp_path / "c.yaml")]) == 0
    (tmp_path / "g.txt").write_text(cases_module._profile())
    assert main(["plan", "--model", str(tmp_path / "g.txt"), "--planner", "greedy", "--memory-limit", "none"]) == 0
    (tmp_path / "b.json").write_text(json.dumps(cases_module.BLOCKS))
    assert main(["pipeline", "--model", str(tmp_path / "b.json"), "-P", "2", "--planner", "pipedream",
                 "--schedule", "1f1b*"]) == 0
    (tmp_path / "j.yaml").write_text(cases_module._job_text())
    assert main(["batch", str(tmp_path / "j.yaml"), "--out", str(tmp_path / "out"), "--list"]) == 0
    (tmp_path / "p.json").write_text(json.dumps(plan_document))
    assert main(["simulate", "--plan", str(tmp_path / "p.json")]) == 0
    (tmp_path / "g.json").write_text(json.dumps(cases_module.GRAPH_ALL_TYPES))
    assert main(["plan", "--model", str(tmp_path / "g.json"), "--planner", "greedy"]) == 0
    (tmp_path / "h.yaml").write_text(cases_module.HYBRID_JOB.format(model="gpt3-175B:layers=4", options="{batch: 8}"))
    assert main(["batch", str(tmp_path / "h.yaml"), "--out", str(tmp_path / "hout"), "--list"]) == 0
    capsys.readouterr()


# --- a sample as real processes: the exit status and stderr a shell sees --------------------
SUBPROCESS_SAMPLE = ["cluster-file-binary", "cli-pipeline---memory--16GB-space"]


@pytest.mark.parametrize("case_id", SUBPROCESS_SAMPLE)
def test_bad_input_as_a_process(case_id, tmp_path):
    case = next(case for case in CASES if case.id == case_id)
    argv = materialise(case, tmp_path)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-m", "solver_plan", *argv], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert all(fragment.replace("{tmp}", str(tmp_path)) in lines[0] for fragment in case.expect)


# --- outputs survive a closed stdout (`solver-plan plan --out x.json | head -3`) ---------------
class _ClosedPipe:
    def write(self, text):
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self):
        raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("command", [
    ["plan", "--model", PLAN_MODEL, "--cluster", PLAN_CLUSTER, "--planner", "greedy", "--out", "{out}"],
    ["pipeline", "--model", "lenet", "-P", "2", "--planner", "pipedream", "--schedule", "1f1b*", "--out", "{out}"],
])
def test_output_written_before_anything_is_printed(command, tmp_path, monkeypatch):
    out = tmp_path / "result.json"
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    main([part.replace("{out}", str(out)) for part in command])
    assert json.loads(out.read_text())  # written although the very first print failed


def test_empty_files_say_so(tmp_path, capsys):
    for name, argv in (("c.yaml", ["check", "{f}"]), ("j.yaml", ["batch", "{f}", "--out", str(tmp_path / "o")]),
                       ("p.json", ["simulate", "--plan", "{f}"]), ("b.json", ["pipeline", "--model", "{f}", "-P", "2"])):
        (tmp_path / name).write_text("\n")
        assert main([part.replace("{f}", str(tmp_path / name)) for part in argv]) == 2
        assert f"{name}: file is empty" in capsys.readouterr().err


def test_strict_yaml_keeps_what_yaml_allows():
    from solver_plan.errors import InputError
    from solver_plan.yamlio import parse_yaml
    # merge keys override by design; only a key written twice is a duplicate
    assert parse_yaml("b: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n", "f") == {"b": {"x": 1, "y": 2}, "d": {"x": 1, "y": 3}}
    assert parse_yaml("\ufeffa: 1\n", "f") == {"a": 1}
    with pytest.raises(InputError, match="f:3: .*duplicate key 'y' \\(first given on line 2\\)"):
        parse_yaml("d:\n  y: 3\n  y: 4\n", "f")
