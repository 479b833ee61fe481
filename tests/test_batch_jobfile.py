"""Job files: grids expand as written, settings inherit, and every mistake names the job and key path."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import solver_plan.planners as planner_registry
from solver_plan.batch.jobfile import load_jobs
from solver_plan.errors import InputError

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "jobs"


@pytest.fixture
def registry(monkeypatch):
    """A registry holding only stand-in planners, so these tests need no real planner module."""
    monkeypatch.setattr(planner_registry, "_REGISTRY", {kind: {} for kind in planner_registry.KINDS})
    monkeypatch.setattr(planner_registry, "load_builtin_planners", lambda *kinds: None)
    for name, kind in (("exact-a", "config"), ("heuristic-b", "config"), ("stages", "pipeline"),
                       ("cyclic", "schedule")):
        planner_registry.register(name, kind)(lambda problem, **options: None)
    return planner_registry


def write(tmp_path: Path, text: str, name: str = "jobs.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def error_of(path: Path) -> str:
    with pytest.raises(InputError) as info:
        load_jobs(path)
    return str(info.value)


def test_grid_expands_every_combination_with_inherited_settings(tmp_path, registry):
    path = write(tmp_path, """
        defaults: {time_limit: 5, seed: 3, max_candidates: 8}
        jobs:
          - name: grid
            models: ["mlp:layers=2,hidden=64,batch=8", "mlp:layers=3,hidden=64,batch=8"]
            clusters: v100x8-nvlink
            devices: [2, 4]
            planners: [exact-a, {name: heuristic-b, seeds: [0, 1], time_limit: 1s, options: {steps: 7}}]
            memory_limit: 16GB
    """)
    jobs = load_jobs(path)
    assert len(jobs) == 2 * 2 * (1 + 2)
    exact = [job for job in jobs if job.planner == "exact-a"]
    heuristic = [job for job in jobs if job.planner == "heuristic-b"]
    assert {(job.seed, job.time_limit, job.options) for job in exact} == {(3, 5.0, ())}
    assert {(job.seed, job.time_limit, job.options) for job in heuristic} == {(0, 1.0, (("steps", 7),)),
                                                                              (1, 1.0, (("steps", 7),))}
    assert {job.devices for job in jobs} == {2, 4}
    assert all(job.memory_limit == 16e9 and job.max_candidates == 8 and job.group == "grid" for job in jobs)
    assert len({job.key for job in jobs}) == len(jobs)


def test_job_names_are_unique(tmp_path, registry):
    path = write(tmp_path, """
        jobs:
          - {name: same, models: mlp, clusters: v100x8-nvlink, planners: exact-a}
          - {name: same, models: lenet, clusters: v100x8-nvlink, planners: exact-a}
    """)
    assert "job 'same': jobs[1].name: name 'same' is already used by jobs[0]" in error_of(path)


def test_repeated_jobs_run_once_and_keys_ignore_the_group_name(tmp_path, registry):
    path = write(tmp_path, """
        jobs:
          - {name: first, models: mlp, clusters: v100x8-nvlink, planners: [exact-a]}
          - {name: second, models: mlp, clusters: v100x8-nvlink, planners: [exact-a, heuristic-b]}
    """)
    jobs = load_jobs(path)
    assert [(job.group, job.planner) for job in jobs] == [("first", "exact-a"), ("second", "heuristic-b")]


def test_a_newly_registered_planner_is_accepted_without_changes(tmp_path, registry):
    path = write(tmp_path, "jobs: [{name: j, models: mlp, clusters: v100x8-nvlink, planners: [brand-new]}]")
    assert "unknown config planner 'brand-new'" in error_of(path)
    registry.register("brand-new", "config")(lambda problem, **options: None)
    assert [job.planner for job in load_jobs(path)] == ["brand-new"]


def test_cluster_file_is_found_next_to_the_job_file_and_its_content_is_in_the_key(tmp_path, registry):
    preset = Path(__file__).resolve().parents[1] / "configs" / "clusters" / "v100x8-nvlink.yaml"
    folder = tmp_path / "batch"
    folder.mkdir()
    (folder / "mine.yaml").write_text(preset.read_text())
    path = write(folder, "jobs: [{name: j, models: mlp, clusters: mine.yaml, planners: exact-a}]")
    (before,) = load_jobs(path)
    assert Path(before.cluster) == folder / "mine.yaml"
    (folder / "mine.yaml").write_text(preset.read_text() + "\n# edited\n")
    (after,) = load_jobs(path)
    assert after.key != before.key
    assert "mine.yaml#sha256:" in after.inputs()["cluster"] and str(folder) not in after.inputs()["cluster"]


@pytest.mark.parametrize("entry, expected", [
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: [exact-a], colour: red}",
     "job 'j': jobs[0].colour: unknown key 'colour'"),
    ("{name: j, models: [mlp, no-such-net], clusters: v100x8-nvlink, planners: exact-a}",
     "job 'j': jobs[0].models[1]: "),
    ("{name: j, models: 'mlp:wings=2', clusters: v100x8-nvlink, planners: exact-a}",
     "job 'j': jobs[0].models: "),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: [exact-a, nope]}",
     "job 'j': jobs[0].planners[1]: unknown config planner 'nope'; available: exact-a, heuristic-b"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: [{name: exact-a, speed: 3}]}",
     "job 'j': jobs[0].planners[0].speed: unknown key 'speed'"),
    ("{name: j, models: mlp, clusters: nowhere-cluster, planners: exact-a}",
     "job 'j': jobs[0].clusters: unknown cluster 'nowhere-cluster'"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, devices: 99, planners: exact-a}",
     "job 'j': jobs[0].devices: "),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, time_limit: soon}",
     "job 'j': jobs[0].time_limit: cannot read 'soon'"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, seeds: [1, x]}",
     "job 'j': jobs[0].seeds[1]: expected an integer"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, processors: 4}",
     "job 'j': jobs[0].processors: only pipeline jobs take 'processors'"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, precision: fp12}",
     "job 'j': jobs[0].precision: unknown precision 'fp12'"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, precision: 16}",
     "job 'j': jobs[0].precision: expected auto or one of"),
    ("{name: j, kind: pipeline, models: mlp, clusters: v100x8-nvlink, processors: 2, planners: stages, "
     "optimizer: lamb}", "job 'j': jobs[0].optimizer: unknown optimizer 'lamb'; expected one of adam, sgd-momentum"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, optimizer: adam}",
     "job 'j': jobs[0].optimizer: only pipeline jobs take 'optimizer'"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, all_devices: yes please}",
     "job 'j': jobs[0].all_devices: expected true or false"),
    ("{name: j, kind: pipeline, models: mlp, clusters: v100x8-nvlink, processors: 2, planners: stages, "
     "all_devices: true}", "job 'j': jobs[0].all_devices: only config jobs take 'all_devices'"),
    ("{name: j, models: mlp, clusters: v100x8-nvlink, planners: exact-a, options: {a: {b: 1}}}",
     "job 'j': jobs[0].options.a: expected a number, string, boolean"),
    ("{models: mlp, clusters: v100x8-nvlink, planners: exact-a}",
     "job '#1': jobs[0].name: missing required key"),
    ("{name: j, kind: training, models: mlp, clusters: v100x8-nvlink, planners: exact-a}",
     "job 'j': jobs[0].kind: expected one of config, pipeline, hybrid, got 'training'"),
])
def test_bad_entries_name_the_file_job_and_key(tmp_path, registry, entry, expected):
    path = write(tmp_path, f"jobs:\n  - {entry}\n")
    message = error_of(path)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_unquoted_spec_split_by_yaml_gets_a_hint(tmp_path, registry):
    path = write(tmp_path, "jobs: [{name: j, models: [mlp:layers=2,hidden=64], clusters: v100x8-nvlink, "
                           "planners: exact-a}]\n")
    assert "jobs[0].models[1]" in error_of(path) and "quote model specs" in error_of(path)


def test_top_level_mistakes_name_the_key(tmp_path, registry):
    assert "jobs.yaml.job: unknown key 'job'" in error_of(write(tmp_path, "job: []\njobs: [{}]\n"))
    assert "jobs.yaml.jobs: expected a non-empty list" in error_of(write(tmp_path, "jobs: []\n"))
    assert "defaults.seeds: must be >= 0" in error_of(write(tmp_path, "defaults: {seeds: -1}\njobs: [{}]\n"))
    assert "jobs.yaml:3: malformed YAML" in error_of(write(tmp_path, "jobs:\n  - {name: [\n"))


def test_pipeline_jobs_need_processors(tmp_path, registry, monkeypatch):
    # issue 21: the pipeline front door is imported by name, no longer probed for (no "front door missing" case)
    entry = "{name: p, kind: pipeline, models: mlp, clusters: v100x8-nvlink, planners: stages"
    assert "jobs[0].processors: pipeline jobs need 'processors'" in error_of(write(tmp_path, f"jobs: [{entry}}}]\n"))
    assert "jobs[0].schedule: unknown schedule planner 'later'" in error_of(
        write(tmp_path, f"jobs: [{entry}, processors: 4, schedule: later}}]\n"))
    assert "jobs[0].processors: " in error_of(write(tmp_path, f"jobs: [{entry}, processors: 12}}]\n"))
    jobs = load_jobs(write(tmp_path, f"jobs: [{entry}, processors: [2, 4], schedule: cyclic}}]\n"))
    assert [(job.kind, job.processors, job.schedule, job.devices) for job in jobs] == [
        ("pipeline", 2, "cyclic", None), ("pipeline", 4, "cyclic", None)]


def test_time_limit_defaults_to_the_clis_and_precision_and_all_devices_reach_the_job(tmp_path, registry):
    from solver_plan.deadline import DEFAULT_TIME_LIMIT_S
    path = write(tmp_path, """
        jobs:
          - {name: plain, models: mlp, clusters: v100x8-nvlink, planners: exact-a}
          - {name: unbounded, models: mlp, clusters: v100x8-nvlink, planners: exact-a, time_limit: null}
          - {name: tuned, models: mlp, clusters: v100x8-nvlink, planners: exact-a, precision: FP16,
             all_devices: true}
          - {name: auto, models: mlp, clusters: v100x8-nvlink, planners: exact-a, precision: auto}
          - {name: piped, kind: pipeline, models: mlp, clusters: v100x8-nvlink, processors: 2, planners: stages,
             precision: fp32}
        """)
    jobs = {job.group: job for job in load_jobs(path)}
    assert jobs["plain"].time_limit == DEFAULT_TIME_LIMIT_S and jobs["unbounded"].time_limit is None
    assert (jobs["tuned"].precision, jobs["tuned"].all_devices) == ("fp16", True)
    assert (jobs["plain"].precision, jobs["plain"].all_devices) == (None, False)
    assert "auto" not in jobs and jobs["piped"].precision == "fp32"  # auto = unset: the same job as plain
    assert jobs["tuned"].key != jobs["plain"].key
    # unset precision and all_devices leave the record key as before the settings existed
    assert "precision" not in jobs["plain"].inputs() and "all_devices" not in jobs["plain"].inputs()


def test_pipeline_optimizer_reaches_the_job_and_its_key(tmp_path, registry):
    path = write(tmp_path, """
        jobs:
          - {name: adam, kind: pipeline, models: mlp, clusters: v100x8-nvlink, processors: 2, planners: stages}
          - {name: rule, kind: pipeline, models: mlp, clusters: v100x8-nvlink, processors: 2, planners: stages,
             optimizer: PipeDream}
        """)
    jobs = {job.group: job for job in load_jobs(path)}
    assert (jobs["adam"].optimizer, jobs["rule"].optimizer) == (None, "pipedream")
    assert "optimizer" not in jobs["adam"].inputs() and jobs["rule"].inputs()["optimizer"] == "pipedream"
    assert jobs["adam"].key != jobs["rule"].key
