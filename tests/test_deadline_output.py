"""Writing a plan stays within the command's time: JSON is indented while small, compact when
indenting it would cost seconds (a 1,024-device plan), decided by its size; either reads back the same."""
from __future__ import annotations

import json

from solver_plan import files


def test_small_json_is_indented_and_large_json_compact(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "INDENT_MAX_CHARS", 200)
    small = {"devices": list(range(10))}
    large = {"operators": [{"name": f"op{i}", "devices": list(range(64))} for i in range(10)]}
    files.write_json_atomic(tmp_path / "small.json", small)
    files.write_json_atomic(tmp_path / "large.json", large)
    small_text, large_text = (tmp_path / "small.json").read_text(), (tmp_path / "large.json").read_text()
    assert small_text == json.dumps(small, indent=2) + "\n"
    assert large_text == json.dumps(large) + "\n" and large_text.count("\n") == 1
    assert json.loads(small_text) == small and json.loads(large_text) == large
