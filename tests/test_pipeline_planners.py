"""Planners end to end: ordering of periods on small chains, MadPipe's allocation shape, the front
door, JSON output, the CLI and bad input."""
import argparse
import json
import math
import random

import pytest

from solver_plan.errors import InputError
from solver_plan.pipeline.chain import LayerChain
from solver_plan.pipeline import madpipe
from solver_plan.pipeline.api import plan_pipeline
from solver_plan.pipeline.cli import register_command
from solver_plan.pipeline.memory import pipedream_rule
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.planners import planners
from solver_plan.result import Status


def random_problem(seed: int, layers: int, processors: int, memory: float, state=None) -> ChainProblem:
    """A random chain in fp32 (default model state: Adam, 4 x W; `state` e.g. PipeDream's rule)."""
    rng = random.Random(seed)
    chain = LayerChain.simple(f"r{seed}", [rng.randint(1, 4) for _ in range(layers)],
                              [rng.randint(1, 6) for _ in range(layers)], [rng.randint(0, 3) for _ in range(layers)],
                              [rng.randint(1, 3) for _ in range(layers)], 2)
    return ChainProblem(chain, processors, memory, 1.0, **({"state": state} if state is not None else {}))


def test_registry_lists_the_planners():
    assert {"pipedream", "madpipe", "exact-joint"} <= set(planners("pipeline"))
    assert {"1f1b*", "exact"} <= set(planners("schedule"))


@pytest.mark.parametrize("seed, memory", [(1, 1000.0), (2, 45.0), (4, 40.0), (5, 60.0)])
def test_exact_joint_le_madpipe_le_pipedream(seed, memory):
    # the MadPipe paper's setting (its Figure 7 ordering), with its memory model: 3 x the weights
    problem = random_problem(seed, 6, 3, memory, pipedream_rule())
    pipedream = plan_pipeline(problem, "pipedream", "1f1b*")
    mad = plan_pipeline(problem, "madpipe", "exact", schedule_options={"tick": 1.0}, time_limit=30)
    joint = plan_pipeline(problem, "exact-joint", "exact", planner_options={"tick": 1.0}, time_limit=60)
    for result in (pipedream, mad, joint):
        assert result.valid, result.to_dict()["violations"]
    assert joint.status == Status.OPTIMAL
    assert joint.period_s <= mad.period_s + 1e-9
    assert mad.period_s <= pipedream.period_s + 1e-9
    assert joint.lower_bound_s == pytest.approx(joint.period_s)


def test_madpipe_allocation_has_one_special_processor():
    problem = random_problem(11, 12, 4, 1e6)
    result = madpipe.plan(problem)
    counts = {}
    for stage in result.allocation.stages:
        counts[stage.processor] = counts.get(stage.processor, 0) + 1
    assert sum(1 for c in counts.values() if c > 1) <= 1
    assert result.period_s >= result.allocation.load_bound(problem) - 1e-9
    assert result.period_s >= result.lower_bound_s - 1e-9


def test_madpipe_no_memory_limit_balances_load():
    # with ample memory and free transfers, MadPipe's period is within a layer of the ideal split
    problem = ChainProblem(LayerChain.simple("flat", [1] * 16, [2] * 16, [0] * 16, [1] * 16), 4, 1e9, math.inf)
    result = plan_pipeline(problem, "madpipe", "exact")
    assert result.valid and result.period_s <= 12 * 1.02


def test_memory_too_small_reports_needed_memory():
    problem = random_problem(3, 5, 2, 5.0)
    for planner in ("pipedream", "madpipe"):
        result = plan_pipeline(problem, planner, "exact")
        assert result.status == Status.INFEASIBLE and not result.valid
        assert result.allocation.min_memory > 5.0
        assert "needs at least" in result.allocation.notes[0]
        assert json.loads(result.to_json())["min_memory_bytes"] == result.allocation.min_memory


def test_json_has_the_documented_fields():
    problem = random_problem(1, 6, 3, 1000.0)
    data = json.loads(plan_pipeline(problem, "pipedream", "1f1b*").to_json())
    for key in ("status", "period_s", "lower_bound_s", "valid", "peak_memory_bytes", "stages", "operations"):
        assert key in data
    assert data["valid"] is True and data["status"] == "FEASIBLE"
    assert {"first_layer", "last_layer", "processor"} <= set(data["stages"][0])
    assert {"resource", "start_s", "duration_s", "shift"} <= set(data["operations"][0])


def test_1f1b_star_refuses_non_contiguous():
    problem = random_problem(4, 6, 2, 1000.0)
    from solver_plan.pipeline.allocation import Allocation
    from solver_plan.pipeline.api import schedule_allocation
    with pytest.raises(InputError, match="contiguous"):
        schedule_allocation(problem, Allocation.from_processors([0, 0, 1, 1, 0, 0]), "1f1b*")


def parse(argv):
    parser = argparse.ArgumentParser()
    register_command(parser.add_subparsers())
    return parser.parse_args(argv)


PROFILE_ARGS = ["pipeline", "--model", "resnet50:batch=2,image=64", "--cluster", "v100x8-nvlink"]


def test_cli_writes_json_and_gantt(tmp_path, capsys):
    args = parse(PROFILE_ARGS + ["--processors", "3", "--memory", "1GB", "--planner", "madpipe",
                                 "--schedule", "exact", "--time-limit", "20",
                                 "--out", str(tmp_path / "p.json"), "--gantt", str(tmp_path / "g.png")])
    assert args.func(args) == 0
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["valid"] and data["processors"] == 3
    assert (tmp_path / "g.png").stat().st_size > 1000
    assert "period" in capsys.readouterr().out


def test_cli_no_comm_and_infeasible_exit_code(capsys):
    args = parse(PROFILE_ARGS + ["--processors", "2", "--memory", "1KB", "--planner", "pipedream",
                                 "--schedule", "1f1b*", "--no-comm"])
    assert args.func(args) == 1
    out = capsys.readouterr().out
    assert "INFEASIBLE" in out and "needs at least" in out


@pytest.mark.parametrize("extra, needle", [
    (["--processors", "0"], "positive integer"),
    (["--processors", "100000"], r"has \d+ devices"),
    (["--processors", "8", "--max-layers", "4"], "use at most"),
    (["--processors", "2", "--memory", "lots"], "--memory"),
    (["--processors", "2", "--planner", "nope"], "unknown planner"),
])
def test_cli_bad_input_raises_input_error(extra, needle):
    args = parse(PROFILE_ARGS + extra)
    with pytest.raises(InputError, match=needle):
        args.func(args)


def test_exact_joint_past_its_safety_net_returns_at_once_and_says_so():
    """With the wall-clock deadline already spent (a machine far slower than the work limits assume),
    exact-joint schedules no heuristic seed and probes no more periods; the answer says why."""
    import time
    from solver_plan.deadline import Deadline
    from solver_plan.pipeline import exact_joint
    problem = random_problem(2, 6, 3, 45.0)
    deadline = Deadline(1e-6)
    time.sleep(1e-3)
    assert exact_joint.heuristic_seed(problem, 1.0, 10.0, deadline) is None
    result = exact_joint.plan(problem, time_limit=10.0, tick=1.0, deadline=deadline)
    assert result.status in (Status.OPTIMAL, Status.FEASIBLE, Status.TIME_LIMIT)  # a small model may still be proven
    if result.pattern is not None:
        from solver_plan.pipeline.validate import validate
        assert validate(result.pattern).valid
    else:
        assert result.status == Status.TIME_LIMIT and any("ran out" in n or "time limit" in n for n in result.notes)


def test_a_kinds_planners_load_only_their_packages():
    """`plan` asks for config planners: the pipeline and hybrid planner modules stay unimported
    (their imports cost seconds); asking for every kind still lists them all."""
    import subprocess
    import sys
    code = ("import sys\nfrom solver_plan.planners import planners, KINDS\nplanners('config')\n"
            "print(sorted(m for m in ('solver_plan.pipeline.madpipe', 'solver_plan.hybrid.search', "
            "'solver_plan.intra.milp') if m in sys.modules))\n"
            "print(all(planners(k) for k in KINDS), 'madpipe' in planners('pipeline'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "['solver_plan.intra.milp']"
    assert out[1] == "True True"
