#!/usr/bin/env python3
"""Regenerate every generated document in docs/ from one commit's code, in one command.

    python scripts/regenerate_docs.py                 # all steps, from HEAD (about 20 minutes on 2 cores)
    python scripts/regenerate_docs.py --only accuracy --only madpipe
    python scripts/regenerate_docs.py --list

Each step runs a generator script on a clean export of the commit (`git archive`, so edits in the
working tree, anyone's, never leak into committed figures) and copies what it writes into docs/
of this checkout. docs/generated.md records, per output, the commit it was made at, the command
and how long it took. Steps:
- accuracy: scripts/accuracy_report.py -> docs/accuracy.md, docs/accuracy.png
- hybrid-accuracy: scripts/hybrid_vs_published.py --plan -> docs/hybrid-accuracy.md
- llm-foundry-sweep: scripts/llm_foundry_sweep.py -> docs/llm-foundry-sweep.md
- madpipe: scripts/madpipe_vs_pipedream.py --jobs 2 -> docs/madpipe-vs-pipedream.{csv,txt,png}
- compare-standard: `solver-plan compare` on the committed records of the standard suite
  (docs/compare-standard-records.tar.gz; re-running the suite itself takes about 30 minutes:
  `solver-plan batch configs/jobs/standard.yaml`) -> docs/compare-standard.{md,csv,jsonl} and plots
Not regenerated here: docs/time-limits.md and docs/pipeline-scaling.md (bench scripts: this
machine's speed), docs/pipeline-pipedream-side-by-side.txt (needs a PipeDream checkout:
scripts/pipedream_side_by_side.py --pipedream DIR), docs/compare-summary.md (superseded, made by the
earlier report code).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = "docs/generated.md"


@dataclass(frozen=True)
class Step:
    name: str
    command: tuple[str, ...]  # run in the export's root; {out} is a scratch folder for outputs
    outputs: tuple[tuple[str, str], ...]  # (file under {out}, destination in the checkout)
    minutes: float  # typical on 2 shared cores, for --list


STEPS = (
    Step("accuracy", ("{python}", "scripts/accuracy_report.py", "--out-md", "{out}/accuracy.md",
                      "--out-png", "{out}/accuracy.png"),
         (("accuracy.md", "docs/accuracy.md"), ("accuracy.png", "docs/accuracy.png")), 5),
    Step("hybrid-accuracy", ("{python}", "scripts/hybrid_vs_published.py", "--cluster", "a100-80gb-superpod",
                             "--plan", "--write", "{out}/hybrid-accuracy.md"),
         (("hybrid-accuracy.md", "docs/hybrid-accuracy.md"),), 3),
    Step("llm-foundry-sweep", ("{python}", "scripts/llm_foundry_sweep.py", "--write", "{out}/llm-foundry-sweep.md"),
         (("llm-foundry-sweep.md", "docs/llm-foundry-sweep.md"),), 0.1),
    Step("madpipe", ("{python}", "scripts/madpipe_vs_pipedream.py", "--jobs", "2", "--out", "{out}"),
         tuple((f"madpipe-vs-pipedream.{ext}", f"docs/madpipe-vs-pipedream.{ext}") for ext in ("csv", "txt", "png")),
         10),
    Step("compare-standard", ("{solver_plan}", "compare", "{records}", "--jobs", "configs/jobs/standard.yaml",
                              "--report", "{out}/compare-standard.md"),
         tuple((f"compare-standard{suffix}", f"docs/compare-standard{suffix}") for suffix in
               (".md", ".csv", ".jsonl", "-profile-config.png", "-gap-time-config.png", "-profile-hybrid.png",
                "-gap-time-hybrid.png", "-profile-pipeline.png", "-gap-time-pipeline.png")), 0.5),
)
RECORDS = "runs/standard"  # where the committed records are unpacked, relative to the export (the report names it)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def export(commit: str, into: Path) -> None:
    """The commit's tracked files, nothing else (no working-tree edits, no build outputs)."""
    archive = into.parent / "export.tar"
    with open(archive, "wb") as handle:
        subprocess.run(["git", "archive", "--format=tar", commit], cwd=ROOT, check=True, stdout=handle)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    archive.unlink()


def run_step(step: Step, tree: Path, scratch: Path) -> float | None:
    """Seconds the step took, or None when it failed (its outputs are then not copied)."""
    out = scratch / step.name
    out.mkdir(parents=True)
    if step.name == "compare-standard" and not (tree / RECORDS).exists():
        with tarfile.open(tree / "docs" / "compare-standard-records.tar.gz") as tar:  # one folder, records/
            tar.extractall(scratch, filter="data")
        (tree / RECORDS).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(scratch / "records", tree / RECORDS)
    values = {"python": sys.executable, "out": str(out), "records": RECORDS,
              "solver_plan": str(Path(sys.executable).with_name("solver-plan"))}
    command = [part.format(**values) for part in step.command]
    env = {**os.environ, "PYTHONPATH": str(tree), "SOLVER_PLAN_DATA": str(tree / "data")}
    began = time.perf_counter()
    print(f"[{step.name}] {' '.join(command)}", flush=True)
    result = subprocess.run(command, cwd=tree, env=env, text=True, stdout=subprocess.PIPE)
    print(result.stdout[-3000:], end="")
    if result.returncode != 0:
        print(f"[{step.name}] FAILED with exit status {result.returncode}; docs/ keeps its earlier outputs", flush=True)
        return None
    return time.perf_counter() - began


def copy_outputs(step: Step, scratch: Path) -> list[str]:
    copied = []
    for source, destination in step.outputs:
        path = scratch / step.name / source
        if path.exists():
            shutil.copyfile(path, ROOT / destination)
            copied.append(destination)
    return copied


def write_manifest(entries: dict[str, tuple[str, str, float, list[str]]]) -> None:
    """docs/generated.md: per step, the commit, the command and its time; steps not run this time
    keep their earlier line."""
    path = ROOT / MANIFEST
    old = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("| ") and not line.startswith("| step") and not line.startswith("| ---"):
                old[line.split("|")[1].strip()] = line
    lines = ["# Generated documents", "",
             "Written by `python scripts/regenerate_docs.py` (see its docstring for what each step runs). Each "
             "step ran on a clean export of the commit named, so the figures are those of that commit's code.", "",
             "| step | commit | generated (UTC) | wall time | files |", "| --- | --- | --- | ---: | --- |"]
    for step in STEPS:
        if step.name in entries:
            commit, when, seconds, files = entries[step.name]
            lines.append(f"| {step.name} | `{commit}` | {when} | {seconds:.0f} s | {', '.join(files)} |")
        elif step.name in old:
            lines.append(old[step.name])
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commit", default="HEAD", help="commit whose code generates the documents (default HEAD)")
    parser.add_argument("--only", action="append", choices=[s.name for s in STEPS], help="run only these steps")
    parser.add_argument("--list", action="store_true", help="list the steps and their typical time, run nothing")
    args = parser.parse_args(argv)
    if args.list:
        for step in STEPS:
            print(f"{step.name:<17} ~{step.minutes:g} min  -> {', '.join(d for _, d in step.outputs)}")
        return 0
    commit = git("rev-parse", "--short", args.commit)
    steps = [s for s in STEPS if not args.only or s.name in args.only]
    entries, failed = {}, []
    with tempfile.TemporaryDirectory(prefix="regenerate-docs-") as temp:
        tree, scratch = Path(temp) / "tree", Path(temp) / "scratch"
        export(commit, tree)
        for step in steps:
            seconds = run_step(step, tree, scratch)
            if seconds is None:
                failed.append(step.name)
                continue
            files = copy_outputs(step, scratch)
            entries[step.name] = (commit, time.strftime("%Y-%m-%d %H:%M", time.gmtime()), seconds, files)
            print(f"[{step.name}] {seconds:.0f} s: wrote {', '.join(files)}", flush=True)
    write_manifest(entries)
    print(f"wrote {MANIFEST}; documents generated at commit {commit}"
          + (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
