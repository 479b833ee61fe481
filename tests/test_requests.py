"""Requests (solver_plan/requests.py): defaults defined once and used by the command line, the Python
API and batch jobs; validation at construction naming the field; one meaning of memory_limit=None;
old option spellings equivalent to the new ones; the explicit planner tables."""
from __future__ import annotations

import dataclasses
import inspect
import math
import re
import subprocess
import sys
import warnings

import pytest

from solver_plan import api, requests
from solver_plan.batch.job import Job
from solver_plan.cli import build_parser, main, normalise_argv
from solver_plan.errors import InputError
from solver_plan.hybrid.request import HybridRequest
from solver_plan.requests import UNLIMITED, PipelineRequest, PlanRequest
from solver_plan.resources import REPO_ROOT

MLP = "mlp:layers=2,hidden=64,batch=8"


def parse(argv):
    return build_parser().parse_args(normalise_argv(argv))


# ---------------------------------------------------------------------------------------------
# Defaults in one place
def test_request_defaults_are_the_owning_modules_constants():
    plan = PlanRequest()
    assert (plan.model, plan.cluster, plan.planner) == (requests.DEFAULT_MODEL, requests.DEFAULT_CLUSTER,
                                                        requests.DEFAULT_PLANNER)
    assert plan.time_limit == requests.DEFAULT_TIME_LIMIT_S and plan.memory_limit is None
    assert plan.precision == requests.DEFAULT_PRECISION and plan.max_candidates == requests.DEFAULT_MAX_CANDIDATES
    pipe = PipelineRequest()
    assert (pipe.planner, pipe.schedule, pipe.optimizer) == (requests.DEFAULT_PIPELINE_PLANNER,
                                                             requests.DEFAULT_SCHEDULE, requests.DEFAULT_OPTIMIZER)
    assert pipe.time_limit == requests.DEFAULT_TIME_LIMIT_S and pipe.memory_limit is None
    hybrid = HybridRequest()
    assert hybrid.block_solver == requests.DEFAULT_BLOCK_SOLVER and hybrid.runtime == requests.DEFAULT_RUNTIME
    assert hybrid.time_limit == requests.DEFAULT_TIME_LIMIT_S and hybrid.memory_limit is None


def test_cli_api_and_batch_build_the_same_defaults():
    """What the command line parses with no options, what the API builds with no keywords and what a
    job with nothing set asks are the same request."""
    from solver_plan.batch.kinds import job_request
    from solver_plan.pipeline.cli import pipeline_request
    from solver_plan.hybrid.cli import hybrid_request
    args = parse(["plan", "--model", MLP])
    cli = PlanRequest(args.model, args.cluster, args.planner, devices=args.devices, time_limit=args.time_limit,
                      memory_limit=args.memory_limit, precision=args.precision, max_candidates=args.max_candidates,
                      seed=args.seed)
    assert cli == PlanRequest(MLP)
    assert job_request(Job("g", "config", MLP, requests.DEFAULT_CLUSTER, requests.DEFAULT_PLANNER)) == cli
    assert pipeline_request(parse(["pipeline", "--model", MLP, "--devices", "2"])) == PipelineRequest(MLP, devices=2)
    assert hybrid_request(parse(["hybrid", "--model", "gpt2", "--cluster", requests.DEFAULT_CLUSTER,
                                 "--batch", "8"])) == HybridRequest("gpt2", global_batch=8)
    for function, limit in ((api.plan, "time_limit"), (api.pipeline, "time_limit"), (api.hybrid, "time_limit")):
        parameters = inspect.signature(function).parameters
        assert parameters[limit].default == requests.DEFAULT_TIME_LIMIT_S
        assert parameters["memory_limit"].default is None and "deadline" in parameters
        assert parameters["cluster"].default == requests.DEFAULT_CLUSTER


def test_the_default_cluster_is_defined_once():
    sources = [p for p in (REPO_ROOT / "solver_plan").rglob("*.py")]
    defining = [p.relative_to(REPO_ROOT).as_posix() for p in sources
                if re.search(r'^\s*DEFAULT_CLUSTER\s*=\s*"', p.read_text(), re.M)]
    assert defining == ["solver_plan/requests.py"]
    literal_defaults = [p.relative_to(REPO_ROOT).as_posix() for p in sources
                        if re.search(r'default="v100x8-nvlink"', p.read_text())]
    assert literal_defaults == []


# ---------------------------------------------------------------------------------------------
# Validation at construction, naming the field
@pytest.mark.parametrize("request_type, field, value", [
    (PlanRequest, "time_limit", 0), (PlanRequest, "time_limit", math.nan), (PlanRequest, "time_limit", 1e30),
    (PlanRequest, "memory_limit", -1), (PlanRequest, "memory_limit", "lots"), (PlanRequest, "memory_limit", True),
    (PlanRequest, "precision", "fp64"), (PlanRequest, "seed", -1), (PlanRequest, "seed", 1.5),
    (PlanRequest, "devices", 0), (PlanRequest, "max_candidates", 1), (PlanRequest, "planner", ""),
    (PlanRequest, "options", 3), (PlanRequest, "model", 42), (PlanRequest, "all_devices", "yes"),
    (PipelineRequest, "devices", 0), (PipelineRequest, "memory_limit", UNLIMITED),
    (PipelineRequest, "optimizer", "lion"), (PipelineRequest, "bandwidth", -5.0), (PipelineRequest, "max_layers", 0),
    (HybridRequest, "global_batch", 0), (HybridRequest, "compute_scale", -1.0), (HybridRequest, "fix", "dp=abc"),
    (HybridRequest, "fix", "colour=3"), (HybridRequest, "runtime", "tensorflow"), (HybridRequest, "a2a_overlap", "x"),
])
def test_validation_errors_name_the_field(request_type, field, value):
    with pytest.raises(InputError) as caught:
        request_type(**{field: value})
    assert caught.value.where.split(" ")[0] == field, str(caught.value)
    assert "\n" not in str(caught.value)


def test_requests_are_frozen_hashable_and_normalised():
    a = PlanRequest(MLP, options={"refine": True, "a": 1}, precision=" BF16 ")
    assert a.options == (("a", 1), ("refine", True)) and a.precision == "bf16" and hash(a) == hash(
        PlanRequest(MLP, options=[("refine", True), ("a", 1)], precision="bf16"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.seed = 3  # type: ignore[misc]
    assert HybridRequest(fix="pp=2,tp=4").fix == (("pp", 2), ("tp", 4))
    assert HybridRequest(fix={"tp": "4"}).fix_dict() == {"tp": 4}


def test_memory_limit_has_one_meaning_of_none():
    value = requests.memory_limit_value
    assert value(None) is None and value("device") is None
    assert value("none") == value("unlimited") == value(UNLIMITED) == math.inf
    assert value("16GB") == 16e9 and value(8e9) == 8e9
    from solver_plan.planning import answer_plan
    device = answer_plan(PlanRequest(MLP, planner="greedy", time_limit=20))
    assert device.problem.memory_limit == device.cluster.device.memory
    unlimited = answer_plan(PlanRequest(MLP, planner="greedy", time_limit=20, memory_limit=UNLIMITED))
    assert unlimited.problem.memory_limit is None
    # the API's memory_limit=None was "unlimited" before issue 21: now the device's memory, as everywhere
    assert api.plan(MLP, planner="greedy", time_limit=20).to_dict()["memory_limit_bytes"] == device.cluster.device.memory
    assert api.plan(MLP, planner="greedy", time_limit=20, memory_limit=UNLIMITED).to_dict()["memory_limit_bytes"] is None


# ---------------------------------------------------------------------------------------------
# Front doors: the plan report carries the baselines the command line prints
def test_plan_report_has_the_baselines_and_the_cli_prints_them(capsys):
    from solver_plan.planning import answer_plan
    report = answer_plan(PlanRequest(MLP, planner="greedy", time_limit=20, baselines=True))
    assert [b.planner for b in report.baselines] == ["data-parallel", "single-device"]
    assert all(b.objective_s is not None and b.objective_s > 0 for b in report.baselines)
    assert answer_plan(PlanRequest(MLP, planner="greedy", time_limit=20)).baselines == ()
    assert main(["plan", "--model", MLP, "--planner", "greedy", "--quiet", "--rows", "1"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("baselines"))
    assert "data-parallel" in line and "single-device" in line


# ---------------------------------------------------------------------------------------------
# Old and new option spellings: the same request, the same answer, a note for the old one
@pytest.mark.parametrize("old, new", [
    (["pipeline", "--model", MLP, "-P", "2", "--memory", "8GB"],
     ["pipeline", "--model", MLP, "--devices", "2", "--memory-limit", "8GB"]),
    (["pipeline", "--model", MLP, "--processors=2"], ["pipeline", "--model", MLP, "--devices=2"]),
    (["hybrid", "--model", "gpt2", "--cluster", "v100x8-nvlink", "--batch", "8", "--planner", "greedy"],
     ["hybrid", "--model", "gpt2", "--cluster", "v100x8-nvlink", "--batch", "8", "--block-solver", "greedy"]),
])
def test_old_spellings_build_the_same_request(old, new):
    from solver_plan.hybrid.cli import hybrid_request
    from solver_plan.pipeline.cli import pipeline_request
    build = pipeline_request if old[0] == "pipeline" else hybrid_request
    assert build(parse(old)) == build(parse(new))


def _without_timings(text: str) -> str:
    return re.sub(r"\d+\.\d+ s\b|solved in [^|]*", "", text)


def test_old_spellings_give_the_same_answer_and_a_note(tmp_path, capsys):
    pipe = ["pipeline", "--model", "lenet", "--planner", "pipedream", "--schedule", "1f1b*", "--time-limit", "20"]
    assert main(pipe + ["-P", "2", "--memory", "8GB"]) == 0
    old = capsys.readouterr()
    assert main(pipe + ["--devices", "2", "--memory-limit", "8GB"]) == 0
    new = capsys.readouterr()
    assert _without_timings(old.out) == _without_timings(new.out)
    assert old.err.splitlines() == ["solver-plan: note: -P is deprecated; use --devices",
                                    "solver-plan: note: --memory is deprecated; use --memory-limit"]
    assert new.err == ""
    plan = tmp_path / "p.json"
    assert main(["plan", "--model", MLP, "--planner", "greedy", "--quiet", "--out", str(plan)]) == 0
    capsys.readouterr()
    assert main(["simulate", "--plan", str(plan)]) == 0
    old = capsys.readouterr()
    assert main(["simulate", str(plan)]) == 0
    assert capsys.readouterr().out == old.out and "--plan is deprecated" in old.err


def test_help_shows_only_the_new_spellings():
    helps = {name: action.format_help() for name, action in build_parser()._subparsers._group_actions[0].choices.items()}
    assert "--processors" not in helps["pipeline"] and "--memory " not in helps["pipeline"] and "-P" not in helps["pipeline"]
    assert "--block-solver" in helps["hybrid"] and "--planner" not in helps["hybrid"]
    assert "--plan " not in helps["simulate"] and "PLAN" in helps["simulate"]
    for name in ("plan", "pipeline", "hybrid"):
        for option in ("--memory-limit", "--devices", "--precision", "--seed", "--quiet", "--time-limit"):
            assert option in helps[name], (name, option)
    for name in ("plan", "pipeline"):
        assert "--option" in helps[name]


def test_precision_is_a_checked_choice_everywhere():
    for argv in (["plan"], ["pipeline", "--model", MLP, "--devices", "2"],
                 ["hybrid", "--model", "gpt2", "--cluster", "v100x8-nvlink", "--batch", "8"]):
        with pytest.raises(SystemExit):
            parse(argv + ["--precision", "fp64"])
        assert parse(argv + ["--precision", "BF16"]).precision == "bf16"


def test_api_old_keywords_warn_and_give_the_same_answer():
    spec = "gpt2:layers=2,hidden=128,heads=2,head_dim=64,ffn=512,seq=64,positions=64,vocab=512"
    with pytest.warns(DeprecationWarning, match="processors"):
        old = api.pipeline(spec, "a100x8-80gb", processors=2, memory=40e9, planner="pipedream", schedule="1f1b*")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = api.pipeline(spec, "a100x8-80gb", devices=2, memory_limit=40e9, planner="pipedream", schedule="1f1b*")
    assert old.period_s == pytest.approx(new.period_s)
    with pytest.raises(InputError, match="devices"):
        api.pipeline(spec, "a100x8-80gb", devices=2, processors=3)


# ---------------------------------------------------------------------------------------------
# Planner tables
def test_planner_tables_one_signature_per_kind():
    from solver_plan.planner_tables import TABLES
    first = {"config": ["problem"], "pipeline": ["problem"], "schedule": ["problem", "allocation"],
             "hybrid": ["model", "cluster", "global_batch"]}
    # config planners take the budget type (issue 21, solver_plan/deadline.py), never seconds
    keywords = {"config": {"deadline", "seed", "warm_start"}, "pipeline": {"time_limit", "seed"},
                "schedule": {"time_limit"}, "hybrid": {"devices", "time_limit", "memory_limit", "fix", "deadline",
                                                       "precision"}}
    for kind, table in TABLES.items():
        rows = table()
        assert len({row.name for row in rows}) == len(rows) and all(row.kind == kind for row in rows)
        for row in rows:
            parameters = inspect.signature(row.func).parameters
            positional = [n for n, p in parameters.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
            assert positional == first[kind], (kind, row.name, positional)
            assert keywords[kind] <= set(parameters), (kind, row.name)


def test_no_planner_registers_itself_on_import():
    offenders = [p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / "solver_plan").rglob("*.py")
                 if re.search(r"^@register\(|^register\(", p.read_text(), re.M)]
    assert offenders == []
    code = ("import sys\nfrom solver_plan.planners import planners\nplanners('config')\n"
            "print(sorted(m for m in ('solver_plan.pipeline', 'solver_plan.hybrid', 'solver_plan.batch.cli') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_batch_kinds_and_suite_import_no_cycle():
    kinds = (REPO_ROOT / "solver_plan" / "batch" / "kinds.py").read_text()
    suite = "\n".join(p.read_text() for p in (REPO_ROOT / "solver_plan" / "suite").glob("*.py"))
    assert "solver_plan.batch" not in suite
    assert "inspect.signature" not in kinds and "import_module" not in kinds  # no probing for front doors


def test_public_types_are_the_modules_own():
    """The package exports the input, request, result and report types themselves (test_api checks
    that importing them loads no solver)."""
    import solver_plan
    from solver_plan.graph.ir import Graph
    from solver_plan.hybrid.search import HybridResult
    from solver_plan.pipeline.api import PipelineResult
    assert (solver_plan.Graph, solver_plan.PipelineResult, solver_plan.HybridResult) == (Graph, PipelineResult,
                                                                                        HybridResult)
    assert solver_plan.PlanRequest is PlanRequest and solver_plan.UNLIMITED == math.inf
    assert inspect.signature(api.hybrid).return_annotation != "Any"


def test_answer_takes_any_request_and_a_deadline():
    from solver_plan.deadline import Deadline
    report = api.answer(PlanRequest(MLP, planner="greedy", time_limit=None), Deadline(30))
    assert report.plan.status.has_solution
    with pytest.raises(InputError, match="answer"):
        api.answer("plan mlp")  # type: ignore[arg-type]
