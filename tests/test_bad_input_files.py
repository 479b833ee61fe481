"""Inputs only from regular files of bounded size; outputs only to the path named (files.py).

A FIFO, /dev/zero or a /proc file as an input is refused by name before a byte is read (no hang,
no unbounded read). An output that is a symbolic link is written through to its target (the link
stays), a character device or a FIFO with a reader is written in place (never replaced by a file),
a missing folder is refused (never created), and a result that cannot be written is kept in the
temporary folder with a one-line error naming both paths."""
from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from solver_plan.cli import main
from solver_plan.errors import InputError
from solver_plan.files import read_input_bytes, write_text_atomic

PLAN = ["plan", "--model", "mlp:layers=2,hidden=64,batch=8", "--cluster", "v100x8-nvlink", "--planner", "greedy"]


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom", "/proc/self/status", "folder"])
def test_reading_refuses_what_is_not_a_regular_file(kind, tmp_path):
    path = tmp_path / "in.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to(kind)
    with pytest.raises(InputError) as info:
        read_input_bytes(path, "plan JSON")
    assert str(path) in str(info.value)
    assert ("regular file" in str(info.value)) or ("folder" in str(info.value))


def test_reading_is_bounded(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b" " * 1001)
    assert read_input_bytes(path, "x", limit=1001) == b" " * 1001
    with pytest.raises(InputError, match="too large"):
        read_input_bytes(path, "x", limit=1000)


def test_symbolic_link_output_keeps_the_link(tmp_path, capsys):
    target, link = tmp_path / "target.json", tmp_path / "link.json"
    target.write_text("old")
    link.symlink_to(target.name)
    assert main(PLAN + ["--out", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == target.name
    assert json.loads(target.read_text())["planner"] == "greedy"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "target.json"]  # no temporary left


def test_character_device_is_written_through_not_replaced(capsys):
    before = os.stat("/dev/null")
    assert main(PLAN + ["--out", "/dev/null"]) == 0
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_fifo_with_a_reader_gets_the_plan_and_stays_a_fifo(tmp_path, capsys):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []

    def read() -> None:
        with open(fifo, "rb") as handle:
            received.append(handle.read())

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert main(PLAN + ["--out", str(fifo)]) == 0
    finally:
        reader.join(timeout=30)
    assert json.loads(received[0])["planner"] == "greedy"
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_fifo_without_a_reader_keeps_the_result(tmp_path, capsys):
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    assert main(PLAN + ["--out", str(fifo)]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1
    line = errors[0]
    assert str(fifo) in line and "no reader" in line
    kept = Path(line.rsplit("kept in ", 1)[1])
    try:
        assert json.loads(kept.read_text())["planner"] == "greedy"
    finally:
        kept.unlink()
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_missing_folders_are_refused_not_created(tmp_path, capsys):
    out = tmp_path / "no" / "such" / "p.json"
    assert main(PLAN + ["--out", str(out)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "no").exists()


def test_a_result_that_cannot_be_written_is_kept(tmp_path, monkeypatch):
    """The folder turned read-only (or the disk filled) while solving: the text is kept and named."""
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("solver_plan.files.tempfile.mkstemp",
                        lambda *a, **k: refuse() if k.get("dir") else _real_mkstemp(*a, **k))
    out = tmp_path / "p.json"
    with pytest.raises(InputError) as info:
        write_text_atomic(out, '{"finished": true}\n')
    message = str(info.value)
    assert str(out) in message and "Permission denied" in message
    kept = Path(message.rsplit("kept in ", 1)[1])
    try:
        assert json.loads(kept.read_text()) == {"finished": True}
    finally:
        kept.unlink()
    assert not out.exists()


_real_mkstemp = __import__("tempfile").mkstemp


def test_own_descriptor_output_lands_after_what_was_printed(tmp_path):
    """`--out /dev/stdout > file`: the JSON follows the table (the shell's descriptor, not a new file)."""
    import subprocess
    import sys
    out = tmp_path / "both.txt"
    with open(out, "w") as handle:
        done = subprocess.run([sys.executable, "-m", "solver_plan", *PLAN, "--out", "/dev/stdout"], stdout=handle,
                              stderr=subprocess.PIPE, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1])))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    assert text.count('"schema_version"') == 1 and "model mlp" in text
