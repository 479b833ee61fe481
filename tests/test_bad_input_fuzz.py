"""Property: whatever bytes a user hands an entry point, the command ends with exit 0 (accepted)
or 2 (refused on one stderr line), never a traceback. Inputs are random edits of valid files, so
most are nearly valid: the cases that slip past checks written for hand-made mistakes."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import bad_input_cases as cases
from solver_plan.cli import main

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
NASTY = st.sampled_from(["", "-", "0", "-1", "null", "~", "[", "]", "{", "}", ":", ",", "\t", "\n", "'", '"', "#",
                         "&a", "*a", "!!", "1e999", "nan", "é", "\x00", "\ufeff", "99999999999999999999"])


@st.composite
def edited(draw, text: str):
    """`text` with a few random replacements, insertions and deletions."""
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 8))
        text = text[:at] + draw(st.one_of(NASTY, st.text(max_size=4))) + text[at + cut:]
    return text


def outcome(argv, capsys) -> int:
    code = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert code in (0, 2), (argv, code, err)
    if code == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and "error" in lines[0], err
    return code


@FUZZ
@given(edited(cases.render_yaml(cases.CLUSTER) + "\n"))
def test_edited_cluster_yaml(tmp_path, capsys, text):
    path = tmp_path / "c.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    outcome(["check", str(path)], capsys)


@FUZZ
@given(edited(cases._job_text()))
def test_edited_job_file(tmp_path, capsys, text):
    path = tmp_path / "j.yaml"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    outcome(["batch", str(path), "--out", str(tmp_path / "out"), "--list"], capsys)


@FUZZ
@given(edited("mlp:layers=2,hidden=64,batch=8"))
def test_edited_model_spec(capsys, spec):
    from solver_plan.errors import InputError
    from solver_plan.graph.resolve import resolve_model
    if "\x00" in spec or spec.strip().endswith((".txt", ".json", ".onnx", ".yaml", ".yml")):
        return  # a path: the file cases cover those
    try:
        resolve_model(spec)
    except InputError as exc:  # the only exception bad input may raise
        assert str(exc).strip() and "\n" not in str(exc)


@FUZZ
@given(edited(cases._profile()))
def test_edited_pipedream_profile(tmp_path, capsys, text):
    path = tmp_path / "g.txt"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    outcome(["plan", "--model", str(path), "--planner", "greedy", "--memory-limit", "none", "--rows", "1"], capsys)


@FUZZ
@given(edited(json.dumps(cases.BLOCKS)))
def test_edited_blocks_json(tmp_path, capsys, text):
    path = tmp_path / "b.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    outcome(["pipeline", "--model", str(path), "-P", "2", "--planner", "pipedream", "--schedule", "1f1b*"], capsys)
