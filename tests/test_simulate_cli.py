"""`solver-plan simulate`, plan files and Chrome traces; bad plans give one line, never a traceback."""
import json

import pytest

from solver_plan.cli import main
from solver_plan.cluster import resolve_cluster
from solver_plan.errors import InputError
from solver_plan.graph.zoo import build_model
from solver_plan.simulate import format_simulation, load_plan_json, simulate_strategy
from solver_plan.simulate.trace import chrome_trace


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("plans") / "plan.json"
    assert main(["plan", "--model", "lenet", "--cluster", "k80-16x4", "--devices", "4",
                 "--planner", "data-parallel", "--out", str(path)]) == 0
    return path


def edited(plan_path, tmp_path, edit):
    data = json.loads(plan_path.read_text())
    edit(data)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_simulate_command_uses_the_plans_model_and_cluster(plan_path, tmp_path, capsys):
    trace = tmp_path / "trace.json"
    assert main(["simulate", "--plan", str(plan_path), "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "simulated iteration" in out and "critical path" in out
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)


def test_plan_file_round_trip_matches_the_strategy(plan_path):
    graph, cluster = build_model("lenet"), resolve_cluster("k80-16x4", 4)
    strategy = load_plan_json(plan_path, graph, cluster)
    data = json.loads(plan_path.read_text())
    for entry in data["operators"]:
        assert dict(strategy[entry["name"]].degrees) | entry["degrees"] == dict(strategy[entry["name"]].degrees)
        assert list(strategy[entry["name"]].devices) == entry["devices"]
    sim = simulate_strategy(graph, cluster, strategy)
    trace = chrome_trace(sim)
    assert trace["otherData"]["iteration_s"] == sim.iteration_s
    assert format_simulation(sim).startswith("simulated iteration")


@pytest.mark.parametrize("edit,words", [
    (lambda d: d["operators"][2].update(name="nope"), ["operators[2]", "unknown operator 'nope'"]),
    (lambda d: d["operators"][3].update(degrees={"sample": 3}, devices=[0, 1, 2]),
     ["operator 'avgpool0'", "field 'degrees'", "does not divide"]),
    (lambda d: d["operators"][4].update(devices=[0, 1, 2, 9]), ["operator 'conv2d1'", "field 'devices'", "out of range"]),
    (lambda d: d["operators"][4].update(degrees={"colour": 2}), ["operator 'conv2d1'", "unknown dimension 'colour'"]),
    (lambda d: d["operators"][4].update(devices=[0, 1]), ["operator 'conv2d1'", "multiply to 4"]),
    (lambda d: d["operators"].pop(), ["no configuration for operator 'loss0'"]),
])
def test_bad_plans_name_the_operator_and_field(plan_path, tmp_path, capsys, edit, words):
    path = edited(plan_path, tmp_path, edit)
    assert main(["simulate", "--plan", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    for word in words:
        assert word in err


def test_missing_or_broken_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such plan file"):
        load_plan_json(tmp_path / "none.json", build_model("lenet"), resolve_cluster("k80-16x4", 4))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["simulate", "--plan", str(broken)]) == 2


@pytest.mark.parametrize("precision, recorded", [("fp32", "fp32"), ("auto", "mixed-bf16"), (None, None)])
def test_simulate_reprices_with_the_plans_precision(tmp_path, capsys, precision, recorded):
    """The plan records its precision; `simulate --plan` prices with it, and plans without the
    field (older files) with what `plan` uses by default (mixed bf16 on an A100)."""
    from solver_plan.cost.model import CostModel
    path = tmp_path / "plan.json"
    args = ["plan", "--model", "lenet", "--cluster", "a100x8-80gb", "--devices", "2", "--planner", "data-parallel",
            "--out", str(path)]
    assert main(args + ["--precision", precision or "fp32"]) == 0
    data = json.loads(path.read_text())
    assert data["precision"] == (recorded or "fp32")
    if precision is None:  # an old plan: no field
        del data["precision"]
        path.write_text(json.dumps(data))
    capsys.readouterr()
    assert main(["simulate", "--plan", str(path)]) == 0
    out = capsys.readouterr().out
    graph, cluster = build_model("lenet"), resolve_cluster("a100x8-80gb", 2)
    used = recorded or "mixed-bf16"
    assert f"precision {used}" in out
    expected = simulate_strategy(graph, cluster, load_plan_json(path, graph, cluster),
                                 CostModel(cluster, precision=used.removeprefix("mixed-")))
    assert format_simulation(expected, max_rows=12) in out


def test_simulate_refuses_an_unknown_plan_precision(plan_path, tmp_path, capsys):
    path = edited(plan_path, tmp_path, lambda d: d.update(precision="mixed-fp32"))
    assert main(["simulate", "--plan", path]) == 2
    assert "field 'precision'" in capsys.readouterr().err
