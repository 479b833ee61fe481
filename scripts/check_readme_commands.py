#!/usr/bin/env python3
"""Run every command the README and docs/*.md show, as written, and say which fail.

    python scripts/check_readme_commands.py            # every runnable command (about 5 minutes on 2 cores)
    python scripts/check_readme_commands.py --quick    # the cheap ones (about 1 minute): what CI's default job runs
    python scripts/check_readme_commands.py --list     # what would run, and why the others do not

Commands are taken from indented code blocks and inline code spans (joined across line breaks)
that start with `solver-plan`, `python scripts/` or `python -m solver_plan`; `pip install ... &&`
prefixes are dropped (the environment is the install). They run in a scratch folder where
`data/`, `configs/` and `scripts/` point at this checkout and `docs/` is a copy, so files they write
(plan.json, runs/quick, ...) land there; files the docs tell the reader to make are made first
(`my-kernels.csv` from docs/calibration-csv.md's example, `my-cluster.yaml` as a copy of a preset).
A command that fails is retried once after all others (it may read what a later one writes).
Not run, with the reason listed: commands with placeholders (FILE, DIR, MODEL, a|b), the test
suite, commands that regenerate committed docs (scripts/regenerate_docs.py runs those), ones that
need what the repository does not have (a PipeDream checkout), and with --quick those in SLOW.
Exit status 1 if any command fails.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
STARTS = ("solver-plan ", "python scripts/", "python -m solver_plan")
SHELL_STEPS = ("mkdir ", "tar ")  # other commands a fenced block runs before ours (unpacking records)
PLACEHOLDER = re.compile(r"\b(FILE|DIR|BASE|MODEL|PLAN|CLUSTER|JOBS|NAME|KEY|VALUE|N|X)\b|<[^>]+>|\.\.\.|\||\[")
NOT_RUN = {  # fragment of a command -> why it is not run here
    "python -m pytest": "the test suite (CI runs it)",
    "scripts/regenerate_docs.py": "rewrites docs/ (run it on purpose)",
    "scripts/accuracy_report.py": "regenerates docs/accuracy.* (scripts/regenerate_docs.py runs it)",
    "scripts/hybrid_vs_published.py": "regenerates docs/hybrid-accuracy.md (scripts/regenerate_docs.py runs it)",
    "scripts/madpipe_vs_pipedream.py": "regenerates docs/madpipe-vs-pipedream.* (scripts/regenerate_docs.py)",
    "--pipedream": "needs a checkout of msr-fiddle/pipedream",
    "batch configs/jobs/standard.yaml": "the standard suite, about 30 minutes",
    "batch configs/jobs/compare.yaml": "the zoo comparison, about 15 minutes",
    "compare runs/standard ": "needs the standard suite's records (unpacked: runs/standard/records)",
    "compare runs/compare ": "needs the zoo comparison's records",
    "scripts/bench_": "a benchmark of this machine's speed (minutes)",
    "scripts/load_objective_check.py": "minutes of simulation (run it on purpose)",
}
# skipped by --quick: tens of seconds each, or reading what one of those writes (the hybrid plan.json)
SLOW = ("--time-limit 30", "--devices 1024", "--simulate", "--profile all", "bert-large", "--target megatron",
        "--planner madpipe --schedule exact")
EXAMPLE_CSV = "docs/calibration-csv.md"


@dataclass(frozen=True)
class Command:
    text: str
    where: str  # file:line


def _spans(path: Path) -> list[Command]:
    text = path.read_text()
    name = str(path.relative_to(ROOT))
    found: list[Command] = []
    lines = text.splitlines()
    in_fence, shell_fence = False, False
    block: list[tuple[int, str]] = []
    for number, line in enumerate(lines + [""], start=1):
        if line.startswith("```"):
            in_fence = not in_fence
            shell_fence = in_fence and line.strip("`").strip() in ("", "sh", "bash", "shell")
            continue
        if in_fence and shell_fence and line.startswith(STARTS + SHELL_STEPS):  # a fenced block's command lines
            found.append(Command(re.split(r"\s+#\s", line)[0].strip(), f"{name}:{number}"))
            continue
        if not in_fence and line.startswith("    ") and line.strip():
            block.append((number, line[4:]))
            continue
        joined, start = "", None
        for n, part in block:  # indented block: continuation lines end with a backslash
            start = start or n
            joined += part.rstrip("\\").rstrip() + " " if part.rstrip().endswith("\\") else part
            if not part.rstrip().endswith("\\"):
                found.append(Command(re.split(r"\s+#\s", joined)[0].strip(), f"{name}:{start}"))
                joined, start = "", None
        block = []
    prose = re.sub(r"```.*?```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    for match in re.finditer(r"`([^`]+)`", prose):
        span = " ".join(match.group(1).split())
        if not _mention(span):
            found.append(Command(span, f"{name}:{prose.count(chr(10), 0, match.start()) + 1}"))
    commands = []
    for command in found:
        parts = [p.strip() for p in command.text.split("&&") if not p.strip().startswith("pip ")]
        text = " && ".join(parts)
        if text.startswith(STARTS + SHELL_STEPS):
            commands.append(Command(text, command.where))
    return commands


def _mention(text: str) -> bool:
    """A command named in prose, not one to run: `solver-plan pipeline`, `solver-plan hybrid
    --precision`, `solver-plan main()`."""
    tokens = text.split()
    return "(" in text or len(tokens) <= 2 or (len(tokens) == 3 and tokens[-1].startswith("--"))


def collect() -> list[Command]:
    seen, commands = set(), []
    for document in DOCUMENTS:
        for command in _spans(ROOT / document):
            if command.text not in seen:
                seen.add(command.text)
                commands.append(command)
    return commands


def why_not(command: Command, quick: bool) -> str | None:
    for fragment, reason in NOT_RUN.items():
        if fragment in command.text:
            return reason
    if PLACEHOLDER.search(command.text.replace("solver_plan", "")):
        return "has placeholders"
    if quick and any(fragment in command.text for fragment in SLOW):
        return "slow (full mode runs it)"
    return None


def prepare(scratch: Path) -> None:
    for name in ("data", "configs", "scripts", "solver_plan"):
        (scratch / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "docs", scratch / "docs")
    example = (ROOT / EXAMPLE_CSV).read_text().split("```\n")[1]  # the first fenced block: the example CSV
    (scratch / "my-kernels.csv").write_text(example)
    shutil.copyfile(ROOT / "configs" / "clusters" / "v100x8-nvlink.yaml", scratch / "my-cluster.yaml")


def run(command: Command, scratch: Path, timeout: float) -> tuple[bool, float, str]:
    text = command.text.replace("python ", f"{sys.executable} ", 1) if command.text.startswith("python") else command.text
    solver_plan = str(Path(sys.executable).with_name("solver-plan"))
    text = re.sub(r"(^|&& )solver-plan ", lambda m: f"{m.group(1)}{solver_plan} ", text)
    began = time.perf_counter()
    try:
        result = subprocess.run(text, shell=True, cwd=scratch, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, time.perf_counter() - began, f"timed out after {timeout:.0f} s"
    output = (result.stdout + result.stderr).strip().splitlines()
    return result.returncode == 0, time.perf_counter() - began, "\n".join(output[-3:])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="only the cheap commands (skips those in SLOW)")
    parser.add_argument("--list", action="store_true", help="list the commands and what would run, run nothing")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per command (default 300)")
    args = parser.parse_args(argv)
    commands = collect()
    runnable = [c for c in commands if why_not(c, args.quick) is None]
    for command in commands:
        reason = why_not(command, args.quick)
        if args.list or reason is not None:
            print(f"{'run ' if reason is None else 'skip'} {command.where:<28} {command.text}"
                  + (f"  ({reason})" if reason else ""))
    if args.list:
        return 0
    began = time.perf_counter()
    failed: list[tuple[Command, str]] = []
    with tempfile.TemporaryDirectory(prefix="readme-commands-") as temp:
        scratch = Path(temp)
        prepare(scratch)
        retry = []
        for command in runnable:
            ok, seconds, tail = run(command, scratch, args.timeout)
            print(f"{'ok  ' if ok else 'later'} {seconds:6.1f} s  {command.where:<28} {command.text}", flush=True)
            if not ok:
                retry.append(command)
        for command in retry:  # it may read a file a later command writes
            ok, seconds, tail = run(command, scratch, args.timeout)
            print(f"{'ok  ' if ok else 'FAIL'} {seconds:6.1f} s  {command.where:<28} {command.text}", flush=True)
            if not ok:
                failed.append((command, tail))
    for command, tail in failed:
        print(f"\nFAILED {command.where}: {command.text}\n  " + tail.replace("\n", "\n  "))
    print(f"\n{len(runnable) - len(failed)} of {len(runnable)} commands ran as written "
          f"({len(commands) - len(runnable)} not run, listed above) in {time.perf_counter() - began:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
