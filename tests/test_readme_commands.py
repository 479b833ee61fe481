"""Every command the README and docs show: each parses as written (fast), and the cheap ones run
as written (scripts/check_readme_commands.py --quick, slow)."""
from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _checker():
    spec = importlib.util.spec_from_file_location("check_readme_commands", ROOT / "scripts" / "check_readme_commands.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_commands_are_found_across_line_breaks_and_placeholders_are_not_run():
    checker = _checker()
    commands = {c.text: c for c in checker.collect()}
    calibrate = ("solver-plan calibrate --cluster v100x8-nvlink --profile all --csv my-kernels.csv "
                 "--out my-cluster.yaml")
    assert calibrate in commands and commands[calibrate].where.startswith("README.md:")
    assert "solver-plan models" in commands  # an indented block's line, comment dropped
    placeholders = [c for c in commands.values() if "FILE" in c.text]
    assert placeholders and all(checker.why_not(c, quick=False) == "has placeholders" for c in placeholders)


def test_every_documented_command_parses():
    """Subcommands, options and choices as the docs write them are what the CLI accepts."""
    from solver_plan.cli import build_parser, normalise_argv
    checker = _checker()
    parser = build_parser()
    checked = 0
    for command in checker.collect():
        if checker.why_not(command, quick=False) is not None:
            continue
        for part in command.text.split("&&"):
            tokens = shlex.split(part)
            if tokens[0] != "solver-plan":
                continue
            try:
                parser.parse_args(normalise_argv(tokens[1:]))
            except SystemExit:
                pytest.fail(f"{command.where}: `{part.strip()}` does not parse")
            checked += 1
    assert checked >= 10


@pytest.mark.slow
def test_quick_commands_run_as_written():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_readme_commands.py"), "--quick"],
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
