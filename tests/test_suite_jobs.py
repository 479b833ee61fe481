"""The standard suite's job files, generated problems in job files, and the small suite end to end
through `batch` and `compare` (the CI version of the committed standard run)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from solver_plan.batch.jobfile import load_jobs
from solver_plan.batch.store import iter_records
from solver_plan.cli import main
from solver_plan.errors import InputError
from solver_plan.report.compare import compare
from solver_plan.report.runs import load_runs
from solver_plan.suite import GENERATED_CLUSTER, is_problem_spec, parse_problem_spec

JOBS = Path(__file__).resolve().parents[1] / "configs" / "jobs"


def test_the_standard_suite_covers_its_families_and_sizes():
    jobs = load_jobs(JOBS / "standard.yaml")
    assert len({job.key for job in jobs}) == len(jobs) and all(job.time_limit is not None for job in jobs)
    generated = [job for job in jobs if is_problem_spec(job.model)]
    specs = {parse_problem_spec(job.model) for job in generated}
    assert {spec.family for spec in specs} == {"random-dag", "series-parallel", "skip-chain"}
    assert {spec.memory for spec in specs} == {"none", "binding", "infeasible"}
    assert min(spec.nodes for spec in specs) == 100 and max(spec.nodes for spec in specs) == 10_000
    assert all(job.cluster == GENERATED_CLUSTER for job in generated)
    for family in ("random-dag", "series-parallel", "skip-chain"):  # each family at every memory level
        assert {s.memory for s in specs if s.family == family and s.nodes < 10_000} == {"none", "binding", "infeasible"}
    # the reference formulation runs beside the exact planners wherever its model fits in memory
    for job in generated:
        if parse_problem_spec(job.model).nodes <= 1000:
            names = {j.planner for j in generated if j.model == job.model}
            assert {"milp", "reference-cbc", "reference-highs"} <= names
    assert {job.kind for job in jobs} == {"config", "pipeline", "hybrid"}


def test_the_small_suite_runs_end_to_end(tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["batch", str(JOBS / "standard-small.yaml"), "--out", str(out), "--workers", "2", "--quiet"]) == 0
    records = [record for _, record, _ in iter_records(out)]
    assert len(records) == len(load_jobs(JOBS / "standard-small.yaml"))
    assert all(record["status"] != "ERROR" for record in records), [r["error"] for r in records]
    comparison = compare(load_runs(out)[0])
    families = {group.name: group for group in comparison.families}
    assert set(families) == {"random-dag", "skip-chain", "pipeline-tight"}
    for name in ("random-dag", "skip-chain"):
        summary = {s.planner: s for s in families[name].summary}
        assert set(summary) == {"milp", "greedy", "reference-cbc", "reference-highs"} and not families[name].omitted
        assert summary["milp"].speedup_vs_reference is not None and summary["reference-cbc"].speedup_vs_reference is None
    dag = next(result for result in comparison.instances if result.family == "random-dag")
    optima = {entry.run.objective_s for entry in dag.entries if entry.run.status == "OPTIMAL"}
    assert len(optima) == 1 and dag.proven  # every proof names the same optimum
    assert all(entry.run.objective_s >= min(optima) - 1e-9 for entry in dag.entries)
    skip_chain = next(result for result in comparison.instances if result.family == "skip-chain")
    assert skip_chain.infeasible  # proven, by the exact planners and the reference alike
    assert main(["compare", str(out), "--report", str(tmp_path / "report.md"), "--no-plots"]) == 0
    report = (tmp_path / "report.md").read_text()
    assert "## By family" in report and "speed vs reference" in report


def write(tmp_path, body: str) -> Path:
    path = tmp_path / "jobs.yaml"
    path.write_text(textwrap.dedent(body))
    return path


@pytest.mark.parametrize("entry, message", [
    ({"models": ["random-dag:nodes=10"], "clusters": ["v100x8-nvlink"]},
     "generated problems carry their own devices; remove 'clusters'"),
    ({"models": ["random-dag:nodes=10"], "memory_limit": "16GB"}, "remove 'memory_limit'"),
    ({"models": ["random-dag:nodes=10"], "devices": [4]}, "remove 'devices'"),
    ({"models": ["random-dag:nodes=10", "gpt2"]}, "cannot share a job"),
    ({"models": ["random-dag:nodes=10", "seed=2"]}, "cannot share a job; split it (and quote specs"),
    ({"models": ["random-dag:nodes=10,memory=tight"]}, "jobs[0].models[0]: memory must be one of"),
    ({"kind": "pipeline", "processors": [2], "models": ["random-dag:nodes=10"], "planners": ["pipedream"]},
     "generated problems are config jobs"),
])
def test_generated_problems_in_job_files_are_checked(tmp_path, entry, message):
    import yaml
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"jobs": [{"name": "g", "planners": ["greedy"], **entry}]}))
    with pytest.raises(InputError) as error:
        load_jobs(path)
    assert message in str(error.value)


def test_a_generated_job_needs_no_cluster(tmp_path):
    path = write(tmp_path, """
        jobs:
          - name: g
            models: ["skip-chain:nodes=10,candidates=3"]
            planners: [greedy, milp]
    """)
    jobs = load_jobs(path)
    assert [job.cluster for job in jobs] == [GENERATED_CLUSTER] * 2 and jobs[0].devices is None
