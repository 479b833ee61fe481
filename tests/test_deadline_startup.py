"""Start-up counts against a command's time limit (issue 26): the clock starts with the process,
the start-up's fixed share of the nominal budget is handed out, and a command imports only its own
package."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from solver_plan import deadline as deadline_module
from solver_plan.cli import PACKAGE_COMMANDS, build_parser, normalise_argv
from solver_plan.deadline import START_UP_S, command_budget, process_started

ROOT = Path(__file__).resolve().parents[1]


def test_the_clock_of_a_new_process_counts_from_its_start():
    """A process that slept 0.3 s before asking: its start is at least that long ago (Linux's
    /proc/self/stat; elsewhere `process_started` is now and the check is skipped)."""
    code = ("import time; time.sleep(0.3); from solver_plan.deadline import clock, process_started; "
            "print(clock() - process_started())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    since = float(done.stdout)
    if Path("/proc/self/stat").exists():
        assert 0.3 <= since < 60.0
    assert process_started() <= deadline_module.clock()  # this long-running process: now


def test_a_command_budget_counts_from_its_start_and_hands_the_start_up_its_share():
    started = deadline_module.clock() - 0.2
    budget = command_budget(1.0, started)
    assert budget.elapsed() >= 0.2
    assert budget.nominal_left() == 1.0 - START_UP_S
    assert command_budget(None, started).nominal_left() is None


def test_a_command_parser_parses_as_the_full_parser():
    argv = normalise_argv(["plan", "--model", "mlp", "--planner", "greedy", "--time-limit", "3"])
    assert vars(build_parser("plan").parse_args(argv)) == vars(build_parser().parse_args(argv))
    for command in PACKAGE_COMMANDS:  # each package's command is registered when asked for
        assert command in build_parser(command)._subparsers._group_actions[0].choices


def test_the_plan_command_imports_no_other_command_package():
    code = ("import sys; import solver_plan.cli as c; c.build_parser('plan'); "
            "print(sorted(m for m in ('solver_plan.hybrid', 'solver_plan.pipeline', 'solver_plan.report', "
            "'solver_plan.calibrate', 'solver_plan.batch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_top_level_help_lists_every_command(capsys):
    from solver_plan.cli import main
    assert main(["-h", "plan"]) == 0
    shown = capsys.readouterr().out
    assert all(command in shown for command in PACKAGE_COMMANDS)
