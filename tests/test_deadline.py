"""One deadline per command: expired clocks give the best plan so far (never an error), building
counts against the clock, failures are one-line notes, options and progress on the command line."""
from __future__ import annotations

import io
import time

import pytest

from solver_plan.cli import main
from solver_plan.cluster import resolve_cluster
from solver_plan.deadline import Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.graph.zoo import build_model
from solver_plan.intra import harness, progress
from solver_plan.intra.build import build_config_problem
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.intra.validate import validate_config_result
from solver_plan.planners import get_planner
from solver_plan.planning import parse_option_value, parse_planner_options
from solver_plan.result import Status

PROBLEM = random_problem(60, seed=3, shape="dag", extra_edge_ratio=1.0, max_candidates=6, memory_tightness=0.5)


def _expired() -> Deadline:
    clock = Deadline(1e-6)
    time.sleep(1e-3)
    assert clock.expired()
    return clock


@pytest.mark.parametrize("planner", ["milp", "cpsat", "elimination", "edge-drop", "greedy", "mcmc"])
def test_an_expired_deadline_is_a_time_out_not_an_error(planner):
    result = solve(PROBLEM, planner, deadline=_expired())
    assert result.status in (Status.TIME_LIMIT, Status.FEASIBLE, Status.OPTIMAL), result.notes
    assert validate_config_result(PROBLEM, result) == []
    if result.assignment is not None:
        assert PROBLEM.memory_ok(result.assignment)


def test_elimination_with_an_expired_clock_keeps_the_heuristic_plan():
    """It used to hand the MILP 0 s left, which the MILP refused as a bad limit (exit 2, no plan)."""
    result = solve(PROBLEM, "elimination", deadline=_expired())
    assert result.status.has_solution, result.notes
    assert not any("must be" in note for note in result.notes)


def test_a_budget_given_in_seconds_works_and_a_share_ends_with_its_parent():
    """solve takes one budget type (issue 21); seconds become one at the boundary (time_budget)."""
    generous = solve(PROBLEM, "greedy", deadline=time_budget(30.0))
    assert generous.status is Status.FEASIBLE
    both = solve(PROBLEM, "milp", deadline=Deadline(30.0, parent=_expired()))
    assert both.status in (Status.TIME_LIMIT, Status.FEASIBLE), both.notes


def test_building_past_the_deadline_stops_without_changing_what_is_built():
    """Issue 26: the wall clock only stops the build (BuildStopped, answered as TIME_LIMIT with its one
    plan at most); it no longer cuts the candidates to a few per operator (formerly this test's subject)."""
    from solver_plan.intra.build import BuildStopped
    graph = build_model("mlp:layers=3,hidden=256,batch=64")
    cluster = resolve_cluster("v100x8-nvlink")
    with pytest.raises(BuildStopped, match="time limit"):  # past the deadline and the build's grace
        build_config_problem(graph, cluster, deadline=Deadline(1.0, start=time.perf_counter() - 10.0))


def test_a_failing_solver_is_a_one_line_note_without_traceback():
    def core(problem, context):
        raise ValueError("backend exploded\nwith detail")

    result = harness.run_planner("broken", PROBLEM, core, exact=True, deadline=time_budget(30.0))
    assert result.status.has_solution  # the heuristic plan is kept
    failure = [note for note in result.notes if "broken failed" in note]
    assert failure == ["broken failed (ValueError: with detail)"]
    assert not any("Traceback" in note or "\n" in note for note in result.notes)


def test_a_solver_killed_at_the_wall_clock_is_a_time_limit():
    def core(problem, context):
        raise TimeoutError("solver process killed after 1.0 s of wall clock")

    result = harness.run_planner("slow", PROBLEM, core, exact=True, deadline=time_budget(30.0))
    assert result.status is Status.TIME_LIMIT
    assert result.assignment is not None


@pytest.mark.parametrize("text, value", [("3", 3), ("2.5", 2.5), ("true", True), ("off", False),
                                         ("none", None), ("sum", "sum"), ("1e3", 1000.0)])
def test_option_values_are_typed(text, value):
    parsed = parse_option_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_options_are_checked_against_the_planner():
    mcmc = get_planner("mcmc")
    assert parse_planner_options(["objective=sum", "iterations=50"], mcmc) == {"objective": "sum", "iterations": 50}
    with pytest.raises(InputError, match="has no option 'objectiv'"):
        parse_planner_options(["objectiv=sum"], mcmc)
    with pytest.raises(InputError, match="KEY=VALUE"):
        parse_planner_options(["objective"], mcmc)
    with pytest.raises(InputError, match="twice"):
        parse_planner_options(["beta=1", "beta=2"], mcmc)


def test_cli_option_reaches_the_planner_and_bad_ones_exit_2(capsys):
    assert main(["plan", "--model", "mlp:layers=2,hidden=64,batch=64", "--planner", "mcmc", "--quiet",
                 "--option", "objective=sum", "--option", "iterations=20", "--rows", "2"]) == 0
    assert "sum objective" in capsys.readouterr().out
    assert main(["plan", "--model", "mlp:layers=2,hidden=64,batch=64", "--planner", "mcmc",
                 "--option", "iteration=20"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["solver-plan: error: --option: planner 'mcmc' has no option 'iteration' "
                   "(options: iterations, objective, beta, simulation)"]


def test_progress_lines_are_throttled_and_honest():
    stream = io.StringIO()
    with progress.Progress("milp", stream=stream, every_s=0.05) as reporter:
        with progress.bounds_only():
            progress.report(incumbent=1.0, bound=0.25)  # a plan that may break memory: bound only
        progress.report(incumbent=2.0)
        progress.report(incumbent=3.0)  # worse: the best so far stays
        time.sleep(0.3)
    assert reporter.incumbent == 2.0 and reporter.bound == 0.25
    lines = stream.getvalue().splitlines()
    assert lines and all(line.startswith("milp: ") and "best plan 2.000 s (objective)" in line  # issue 21: the sum is no step time
                         and "bound 250.000 ms" in line for line in lines)
    assert progress._current is None
    progress.report(incumbent=0.5)  # no reporter running: nothing happens


def test_quiet_progress_prints_nothing():
    stream = io.StringIO()
    with progress.Progress("milp", stream=stream, every_s=0.01, enabled=False):
        progress.report(incumbent=1.0)
        time.sleep(0.05)
    assert stream.getvalue() == ""


def test_progress_line_keeps_an_incumbent_of_zero():
    """A best plan of 0.0 is a plan: the bound shown is never above it (it was read as no plan)."""
    import io

    from solver_plan.intra import progress
    reporter = progress.Progress("milp", stream=io.StringIO(), enabled=False)
    reporter.incumbent, reporter.bound = 0.0, 1e-3
    line = reporter.line()
    assert "best plan 0" in line and "bound 0" in line and "bound 1" not in line
