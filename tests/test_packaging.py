"""A non-editable install works like the checkout: the wheel carries the presets, LLM shapes,
PipeDream profiles, pipeline blocks and job files (solver_plan/_data, made by setup.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from solver_plan.resources import cluster_presets_dir

REPO = Path(__file__).resolve().parents[1]
SKIP = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "*.pyc", ".venv", "out",
                              "runs", "results", ".hypothesis", ".pytest_cache")


def run(argv, cwd, env=None, timeout=600) -> str:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def test_resources_are_the_checkouts_folders():
    from solver_plan.data import data_dir
    from solver_plan.resources import jobs_dir
    assert data_dir() == REPO / "data" or os.environ.get("SOLVER_PLAN_DATA")
    assert cluster_presets_dir() == REPO / "configs" / "clusters" and jobs_dir() == REPO / "configs" / "jobs"


def test_installed_copy_is_used_outside_a_checkout(tmp_path, monkeypatch):
    import solver_plan.resources as resources
    site = tmp_path / "site-packages"  # what an installed package looks like: no pyproject.toml above it
    (site / "solver_plan" / "_data" / "configs" / "clusters").mkdir(parents=True)
    (site / "solver_plan" / "_data" / "data").mkdir(parents=True)
    monkeypatch.setattr(resources, "REPO_ROOT", site)
    monkeypatch.setattr(resources, "INSTALLED_DIR", site / "solver_plan" / "_data")
    assert resources.cluster_presets_dir() == site / "solver_plan" / "_data" / "configs" / "clusters"
    assert resources.resource_dir("data") == site / "solver_plan" / "_data" / "data"
    with pytest.raises(ValueError):
        resources.resource_dir("secrets")


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_plans(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(REPO, source, ignore=SKIP)  # build from a copy: the shared checkout stays untouched
    dist = tmp_path / "dist"
    run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-w", str(dist), "-q"], cwd=tmp_path)
    wheel = next(dist.glob("solver_plan-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for bundled in ("solver_plan/_data/configs/clusters/v100x8-nvlink.yaml", "solver_plan/_data/configs/jobs/quickstart.yaml",
                    "solver_plan/_data/data/llm-shapes/gpt3-175B.json",
                    "solver_plan/_data/data/pipedream-profiles/alexnet/graph.txt",
                    "solver_plan/_data/data/pipeline-blocks/default.json",
                    "solver_plan/py.typed"):  # PEP 561: type checkers of users read our annotations
        assert bundled in names

    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)], cwd=tmp_path)
    python, cli = venv / "bin" / "python", venv / "bin" / "solver-plan"
    # the dependencies of the environment running the tests (CI's is itself a venv, so
    # --system-site-packages would miss them); a plain path line does not run that environment's
    # .pth files, so its editable solver_plan stays out of sight and only the wheel is importable
    import site
    inner = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     cwd=tmp_path).strip())
    (inner / "_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SOLVER_PLAN_DATA")}
    work = tmp_path / "elsewhere"  # not the checkout: nothing may be found through the current folder
    work.mkdir()

    where = run([str(python), "-c", "import solver_plan.data as d, solver_plan.resources as r; "
                 "print(d.__file__); print(d.data_dir()); print(r.cluster_presets_dir())"], cwd=work, env=env).split()
    assert all(str(venv) in path for path in where), where  # the installed copy, not the checkout

    presets = sorted(p.stem for p in cluster_presets_dir().glob("*.yaml"))
    listed = run([str(cli), "clusters"], cwd=work, env=env)
    assert presets and all(name in listed for name in presets)
    assert "gpt3-175B" in run([str(cli), "models"], cwd=work, env=env)  # LLM shapes found

    plan = run([str(cli), "plan", "--model", "mlp:layers=2,hidden=64,batch=8", "--cluster", "v100x8-nvlink",
                "--planner", "greedy", "--out", str(work / "plan.json")], cwd=work, env=env)
    assert "status" in plan and (work / "plan.json").is_file()
    profile = Path(where[1]) / "pipedream-profiles" / "alexnet" / "graph.txt"
    assert "alexnet" in run([str(cli), "plan", "--model", str(profile), "--planner", "data-parallel",
                             "--devices", "4"], cwd=work, env=env)
    blocks = Path(where[1]) / "pipeline-blocks" / "default.json"
    run([str(cli), "pipeline", "--model", str(blocks), "-P", "2", "--planner", "pipedream", "--schedule", "1f1b*"],
        cwd=work, env=env)
