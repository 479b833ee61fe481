"""Reports on a small fixed result set: tables, summary statistics, CSV/JSONL, plots, CLI."""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from solver_plan.batch.job import Job
from solver_plan.batch.kinds import outcome
from solver_plan.batch.records import build_record
from solver_plan.batch.store import RecordStore
from solver_plan.cli import main
from solver_plan.report.compare import compare, geomean_gap
from solver_plan.report.markdown import failure_table, instance_table, summary_table
from solver_plan.report.runs import load_runs, runs_from_records
from solver_plan.report.write import write_report
from solver_plan.result import Status

# (devices, planner, status, objective, bound, runtime); None objective = no solution.
RESULTS = [
    (4, "milp", Status.OPTIMAL, 2.0, 2.0, 1.5),
    (4, "greedy", Status.FEASIBLE, 2.2, None, 0.01),
    (4, "data-parallel", Status.FEASIBLE, 3.0, None, 0.001),
    (8, "milp", Status.TIME_LIMIT, 4.0, 3.6, 10.0),
    (8, "greedy", Status.FEASIBLE, 4.0, None, 0.02),
    (8, "data-parallel", Status.ERROR, None, None, None),
    (2, "milp", Status.TIME_LIMIT, None, None, 12.0),
    (2, "greedy", Status.FEASIBLE, 1.0, None, 0.0),
    (2, "data-parallel", Status.FEASIBLE, 1.25, None, 0.002),
]


def fixed_records() -> list[dict]:
    records = []
    for devices, planner, status, objective, bound, runtime in RESULTS:
        job = Job("fixed", "config", "mlp", "v100x8-nvlink", planner, devices=devices, time_limit=10, grace=1)
        result = outcome(status, objective, bound, runtime, None, killed=devices == 2 and planner == "milp",
                         error="no | plan" if status == Status.ERROR else None)
        records.append(build_record(job, result, wall_s=runtime or 0.5))
    return records


def write_fixed(folder: Path) -> Path:
    store = RecordStore(folder)
    for record in fixed_records():
        job = Job("fixed", "config", "mlp", "v100x8-nvlink", record["job"]["planner"],
                  devices=record["job"]["devices"], time_limit=10, grace=1)
        store.write(record, job)
    return folder


# By hand: gaps censored at 100% for runs without a plan, shifted geo-mean (shift 1e-2); times
# censored at max(time limit, runtime) = 10 s (12 s for the killed milp run), floored at 1 ms.
EXPECTED_SUMMARY = """\
| kind | planner | instances | solved | proven | wins | geo-mean gap | within 10.00% | time to 10.00% | time to optimality |
| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |
| config | data-parallel | 3 | 2 | 0 | 0 | 40.76% | 0 | 10.000 s | 10.000 s |
|  | greedy | 3 | 3 | 0 | 2 | 3.81% | 3 | 5.848 ms | 10.000 s |
|  | milp | 3 | 2 | 1 | 2 | 9.36% | 2 | 5.646 s | 5.646 s |"""

EXPECTED_INSTANCES = """\
| instance | reference | planner | status | objective | gap | time |
| --- | ---: | --- | --- | ---: | ---: | ---: |
| mlp @ v100x8-nvlink, 2 devices | 1.000 s * | data-parallel | FEASIBLE | 1.250 s | 20.00% | 2.000 ms |
|  |  | greedy | **FEASIBLE** | 1.000 s | 0.00% | 0.0 us |
|  |  | milp | TIME_LIMIT (killed) | - | - | 12.000 s |
| mlp @ v100x8-nvlink, 4 devices | 2.000 s | data-parallel | FEASIBLE | 3.000 s | 33.33% | 1.000 ms |
|  |  | greedy | FEASIBLE | 2.200 s | 9.09% | 10.000 ms |
|  |  | milp | **OPTIMAL** | 2.000 s | 0.00% | 1.500 s |
| mlp @ v100x8-nvlink, 8 devices | 3.600 s | data-parallel | ERROR | - | - | 500.000 ms |
|  |  | greedy | **FEASIBLE** | 4.000 s | 10.00% | 20.000 ms |
|  |  | milp | **TIME_LIMIT** | 4.000 s | 10.00% | 10.000 s |"""


EXPECTED_FAILURES = """\
| instance | planner | status | why |
| --- | --- | --- | --- |
| mlp @ v100x8-nvlink, 2 devices | milp | TIME_LIMIT (killed) | - |
| mlp @ v100x8-nvlink, 8 devices | data-parallel | ERROR | no | plan |"""


def test_tables_match_the_hand_computed_comparison():
    comparison = compare(runs_from_records(fixed_records()), target_gap=0.10)
    assert summary_table(comparison) == EXPECTED_SUMMARY
    assert instance_table(comparison) == EXPECTED_INSTANCES
    assert failure_table(comparison) == EXPECTED_FAILURES.replace("no | plan", "no \\| plan")


def test_summary_statistics_follow_their_definitions():
    comparison = compare(runs_from_records(fixed_records()), target_gap=0.10)
    milp = next(s for s in comparison.summary if s.planner == "milp")
    # gaps 0 (4 devices), 0.1 (8), no plan (2): censored at 1
    assert milp.geomean_gap == pytest.approx(math.exp((math.log(0.01) + math.log(0.11) + math.log(1.01)) / 3) - 0.01)
    assert milp.time_to_target_s == pytest.approx((1.5 * 10.0 * 12.0) ** (1 / 3))  # 12 s: killed past its limit
    assert milp.time_to_optimal_s == pytest.approx((1.5 * 10.0 * 12.0) ** (1 / 3))
    assert (milp.solved, milp.optimal, milp.reached) == (2, 1, 2)
    assert geomean_gap([0.0, 0.0]) == pytest.approx(0.0, abs=1e-15)
    assert geomean_gap([0.5, 0.5]) == pytest.approx(0.5)
    tighter = compare(runs_from_records(fixed_records()), target_gap=0.0)
    assert [s.reached for s in tighter.summary] == [0, 1, 1]
    assert [group.name for group in comparison.families] == ["fixed"]
    assert comparison.families[0].summary == comparison.summary  # one family: the same instances


def test_planner_labels_show_only_the_settings_that_vary():
    records = fixed_records()
    for seed in (1, 2):
        job = Job("fixed", "config", "mlp", "v100x8-nvlink", "greedy", seed=seed, devices=4, time_limit=10, grace=1)
        records.append(build_record(job, outcome(Status.FEASIBLE, 2.1, None, 0.01, None), 0.01))
    planners = {run.planner for run in runs_from_records(records)}
    assert planners == {"milp", "data-parallel", "greedy seed=0", "greedy seed=1", "greedy seed=2"}


def test_report_files_csv_jsonl_and_plots(tmp_path):
    folder = write_fixed(tmp_path / "records")
    (folder / "broken.json").write_text("{")
    report = write_report(folder, tmp_path / "report" / "report.md", target_gap=0.10)
    names = sorted(path.name for path in report.files)
    assert names == ["report-gap-time-config.png", "report-profile-config.png", "report.csv", "report.jsonl",
                     "report.md"]
    assert [(path.name, why) for path, why in report.invalid] == [("broken.json", "not valid JSON (cut short?)")]
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert EXPECTED_SUMMARY in markdown and EXPECTED_INSTANCES in markdown
    assert "![performance profile: config planners](report-profile-config.png)" in markdown
    assert "1 invalid records skipped" in markdown and "censored" in markdown and "floored at 1.000 ms" in markdown
    for png in ("report-profile-config.png", "report-gap-time-config.png"):
        assert (tmp_path / "report" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    with open(tmp_path / "report" / "report.csv") as handle:
        table = list(csv.DictReader(handle))
    lines = [json.loads(line) for line in (tmp_path / "report" / "report.jsonl").read_text().splitlines()]
    assert len(table) == len(lines) == len(RESULTS)
    assert [row["planner"] for row in table] == [row["planner"] for row in lines]
    greedy4 = next(row for row in lines if row["planner"] == "greedy" and row["devices"] == 4)
    assert greedy4["gap_to_reference"] == pytest.approx(0.2 / 2.2) and greedy4["reference_s"] == 2.0
    assert greedy4["ratio_to_best"] == pytest.approx(1.1) and greedy4["win"] is False
    failed = next(row for row in table if row["status"] == "ERROR")
    assert failed["objective_s"] == "" and failed["gap_to_reference"] == ""


def test_compare_cli_prints_the_summary_and_rejects_bad_input(tmp_path, capsys):
    folder = write_fixed(tmp_path / "records")
    assert main(["compare", str(folder), "--target-gap", "0.1", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert EXPECTED_SUMMARY in out and (folder / "report.md").exists() and not (folder / "report-profile-config.png").exists()
    assert load_runs(folder)[1] == []  # the report files are not mistaken for records
    assert {run.planner for run in load_runs(folder, keys={fixed_records()[0]["key"]})[0]} == {"milp"}

    assert main(["compare", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert "missing: no such folder of batch records" in err and "Traceback" not in err
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty")]) == 2
    assert "no valid batch records to compare" in capsys.readouterr().err
    assert main(["compare", str(folder), "--target-gap", "2"]) == 2
    assert "--target-gap: must be in [0, 1)" in capsys.readouterr().err
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    assert main(["compare", str(folder), "--report", str(blocker / "r.md")]) == 2
    assert "cannot write the report" in capsys.readouterr().err


def test_instances_with_equal_labels_but_different_inputs_stay_apart():
    records = []
    for folder, content_digest in (("a", "1" * 16), ("b", "2" * 16)):  # two site.yaml files that differ
        cluster = f"{folder}/site.yaml"
        job = Job("g", "config", "mlp", cluster, "milp", fingerprints=((cluster, content_digest),))
        records.append(build_record(job, outcome(Status.OPTIMAL, 1.0, 1.0, 0.1, None), 0.1))
    instances = sorted({run.instance for run in runs_from_records(records)})
    assert len(instances) == 2 and all(name.startswith("mlp @ site.yaml #") for name in instances)


def test_families_aggregate_apart_and_keep_plain_names_at_their_own_time_limits():
    records = []
    for group, limit, objective in (("small", 10, 1.0), ("large", 30, 5.0)):
        for planner, value in (("milp", objective), ("greedy", objective * 1.1)):
            job = Job(group, "config", f"mlp:{group}", "v100x8-nvlink", planner, time_limit=limit)
            records.append(build_record(job, outcome(Status.FEASIBLE, value, objective, 1.0, None), 1.0))
    # a planner that ran on only part of a family is named there, not aggregated
    job = Job("large", "config", "mlp:other", "v100x8-nvlink", "milp", time_limit=30)
    records.append(build_record(job, outcome(Status.OPTIMAL, 2.0, 2.0, 1.0, None), 1.0))
    comparison = compare(runs_from_records(records))
    assert {run.planner for run in runs_from_records(records)} == {"milp", "greedy"}
    families = {group.name: group for group in comparison.families}
    assert [s.planner for s in families["small"].summary] == ["greedy", "milp"]
    assert [s.planner for s in families["large"].summary] == ["milp"] and families["large"].omitted == ("greedy",)
    greedy = families["small"].summary[0]
    assert greedy.geomean_gap == pytest.approx(0.1 / 1.1) and greedy.reached == 0  # one instance: its gap
    assert greedy.time_to_target_s == pytest.approx(10.0)  # censored at its family's time limit


def test_a_bound_above_a_found_plan_is_ignored_and_named():
    records = []
    for planner, objective, bound in (("milp", 4.0, 4.0), ("edge-drop", 6.1, 6.1), ("greedy", 6.0, None)):
        job = Job("g", "config", "mlp", "v100x8-nvlink", planner, time_limit=10)
        records.append(build_record(job, outcome(Status.FEASIBLE, objective, bound, 1.0, None), 1.0))
    result = compare(runs_from_records(records)).instances[0]
    assert result.invalid_bounds == ("edge-drop",) and result.reference_s == 4.0


def _figures_of(draw, monkeypatch):
    """The figures a plot function makes, kept open for inspection (it closes them when saving)."""
    import matplotlib.pyplot as plt
    figures = []
    monkeypatch.setattr(plt, "close", lambda fig: figures.append(fig))
    draw()
    return figures


def test_plots_explain_themselves(tmp_path, monkeypatch):
    """Titles say what was compared (source, counts in the singular when 1), one legend naming
    every planner, x tick labels that do not overlap, axes with units."""
    from solver_plan.report.plots import gap_versus_time, performance_profile
    folder = write_fixed(tmp_path / "records")
    comparison = compare(load_runs(folder)[0], 0.1)
    (gap,) = _figures_of(lambda: gap_versus_time(comparison, tmp_path / "g.png", "config", source=folder), monkeypatch)
    assert str(folder) in gap._suptitle.get_text()
    assert {t.get_text() for t in gap.legends[0].get_texts()} == set(comparison.planners)
    gap.canvas.draw()
    for ax in gap.axes:
        if not ax.get_visible():
            continue
        assert ax.get_xlabel().endswith("(s)") and ax.get_ylabel().endswith("(%)")
        assert "1 instances" not in ax.get_title()
        boxes = [label.get_window_extent() for label in ax.get_xticklabels() if label.get_text()
                 and ax.get_xlim()[0] <= label.get_position()[0] <= ax.get_xlim()[1]]
        assert all(not a.overlaps(b) for a, b in zip(boxes, boxes[1:]))
    (profile,) = _figures_of(lambda: performance_profile(comparison, tmp_path / "p.png", "config", source=folder),
                             monkeypatch)
    assert "common instance" in profile._suptitle.get_text() and profile.axes[1].get_legend() is not None
