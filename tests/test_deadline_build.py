"""Building the problem is capped deterministically (a work budget from the instance and the
nominal time limit, decided before building); the wall clock only stops a build (no plan, a note
saying why), never changes what is built."""
from __future__ import annotations

import time

import numpy as np

from solver_plan.cluster import resolve_cluster
from solver_plan.deadline import Deadline
from solver_plan.graph.zoo import build_model
from solver_plan.intra import build
import pytest

from solver_plan import deadline as deadline_module
from solver_plan.intra.build import FEW_CANDIDATES, BuildStopped, build_config_problem, build_seconds, candidate_cap

GRAPH = build_model("mlp:layers=3,hidden=256,batch=64")
CLUSTER = resolve_cluster("v100x8-nvlink")


def _signature(problem):
    return [tuple(repr(cfg) for cfg in configs) for configs in problem.candidates]


def _slow_build(monkeypatch):
    """The whole problem, with the build's units of work made slow (monkeypatch): the full build is
    estimated at 4 s, over 25% of a 5 s limit, so a 5 s limit caps the candidates."""
    full = build_config_problem(GRAPH, CLUSTER)
    counts = np.array([len(c) for c in full.candidates])
    pairs = np.array([(GRAPH.topological_order.index(e.src), GRAPH.topological_order.index(e.dst))
                      for e in GRAPH.edges], dtype=np.int64)
    scale = 4.0 / build_seconds(counts, pairs, 48)
    monkeypatch.setattr(build, "S_PER_CANDIDATE", build.S_PER_CANDIDATE * scale)
    monkeypatch.setattr(build, "S_PER_EDGE_ENTRY", build.S_PER_EDGE_ENTRY * scale)
    return full


def test_same_limit_same_problem_however_much_time_was_already_spent(monkeypatch):
    full = _slow_build(monkeypatch)
    fresh = build_config_problem(GRAPH, CLUSTER, deadline=Deadline(None, parent=Deadline(5.0)))
    # as on a loaded machine: 2 s of the limit already gone before building starts
    late = build_config_problem(GRAPH, CLUSTER, deadline=Deadline(5.0, start=time.perf_counter() - 2.0))
    assert _signature(fresh) == _signature(late)
    assert sum(map(len, fresh.candidates)) < sum(map(len, full.candidates))
    assert fresh.notes and "candidates per operator" in fresh.notes[0]
    assert not any("wall clock" in note for note in fresh.notes + late.notes)


def test_the_wall_clock_stops_the_build_and_the_answer_says_why():
    """Past the deadline and its grace the build stops (TIME_LIMIT with the reason, its one plan
    validated), rather than going on with fewer candidates than the budget decided; within the
    grace it finishes the very problem the budget decided."""
    late = build_config_problem(GRAPH, CLUSTER, deadline=Deadline(10.0, start=time.perf_counter() - 10.5))
    assert _signature(late) == _signature(build_config_problem(GRAPH, CLUSTER, deadline=Deadline(10.0)))
    with pytest.raises(BuildStopped, match="time limit reached while building the problem"):
        build_config_problem(GRAPH, CLUSTER, deadline=Deadline(10.0, start=time.perf_counter() - 15.0))
    from solver_plan.deadline import CUT_SHORT_NOTE, time_budget
    from solver_plan.planning import answer_plan
    from solver_plan.requests import PlanRequest
    from solver_plan.result import Status
    report = answer_plan(PlanRequest(GRAPH, CLUSTER, "greedy"),
                         time_budget(10.0, start=deadline_module.clock() - 15.0))
    assert report.result.status is Status.TIME_LIMIT and report.result.assignment is not None
    assert len(report.plan.operators) == len(GRAPH.topological_order) and CUT_SHORT_NOTE in report.plan.notes
    assert any("while building the problem (0 of" in note for note in report.plan.notes)
    assert report.problem.capped_candidates == 1


class _FastClock:
    """The wall clock running `rate` times faster than the real one: the machine looks `rate`
    times slower (loaded)."""

    def __init__(self, rate: float):
        self.base, self.rate = time.perf_counter(), rate

    def __call__(self) -> float:
        return self.base + (time.perf_counter() - self.base) * self.rate


def test_a_loaded_machine_builds_the_same_problem_or_none(monkeypatch):
    """Under a clock 3x fast the build gives the very same candidates (and the same capped ones
    under a limit that caps them), or stops; never a different problem."""
    def signatures(limit):
        problem = build_config_problem(GRAPH, CLUSTER, deadline=Deadline(None, parent=Deadline(limit)))
        return _signature(problem), problem.notes, [m.tolist() for m in problem.edge_costs]

    _slow_build(monkeypatch)
    idle = [signatures(limit) for limit in (30.0, 5.0)]
    assert idle[1][0] != idle[0][0] and "candidates per operator" in idle[1][1][0]
    monkeypatch.setattr(deadline_module, "clock", _FastClock(3.0))
    assert [signatures(limit) for limit in (30.0, 5.0)] == idle


def test_the_cap_is_the_largest_that_fits_the_budget():
    rng = np.random.default_rng(0)
    counts = rng.integers(2, 49, size=200)
    pairs = np.array([(i, i + 1) for i in range(199)] + [(i, i + 7) for i in range(193)], dtype=np.int64)
    full = build_seconds(counts, pairs, 48)
    previous = FEW_CANDIDATES
    for budget in np.linspace(0.0, 1.2 * full, 12):
        cap = candidate_cap(counts, pairs, 48, budget)
        assert cap >= previous  # more budget never means fewer candidates
        if cap > FEW_CANDIDATES:
            assert build_seconds(counts, pairs, cap) <= budget
        if cap < 48:
            assert build_seconds(counts, pairs, cap + 1) > budget
        previous = cap
    assert candidate_cap(counts, pairs, 48, None) == 48


def test_nominal_limit_is_the_tightest_given_limit_not_what_is_left():
    outer = Deadline(10.0, start=time.perf_counter() - 5.0)
    assert Deadline(None, parent=Deadline(3.0, parent=outer)).nominal_s == 3.0
    assert outer.nominal_s == 10.0 and outer.child().nominal_s == 10.0
    assert Deadline(None).nominal_s is None


def test_a_configuration_hash_is_memoised_and_not_carried_to_another_process():
    """ParallelConfig memoises its hash (thousands of devices per configuration on the largest
    clusters); a pickled copy (a solver worker's) recomputes it, since string hashes differ between
    processes, and stays equal and interchangeable as a key."""
    import pickle
    from solver_plan.cost.config import ParallelConfig
    config = ParallelConfig((("sample", 4), ("out", 2)), tuple(range(8)))
    assert hash(config) == hash(config) and "_hash" in config.__dict__
    copy = pickle.loads(pickle.dumps(config))
    assert "_hash" not in copy.__dict__ and copy == config and {config: 1}[copy] == 1
    assert ParallelConfig((("sample", 4), ("out", 2)), tuple(range(8))) == config


def _two_node_problem(memory_limit, capped):
    from solver_plan.intra.problem import ConfigProblem
    cfgs = tuple(build_config_problem(GRAPH, CLUSTER).candidates[0][:2])
    return ConfigProblem(
        names=("a", "b"), candidates=(cfgs, cfgs), node_costs=(np.array([1.0, 2.0]), np.array([3.0, 1.0])),
        node_memory=(np.array([5.0, 4.0]), np.array([5.0, 4.0])),
        node_devices=(tuple(c.devices for c in cfgs), tuple(c.devices for c in cfgs)),
        edges=((0, 1),), edge_costs=(np.array([[0.0, 1.0], [1.0, 0.0]]),), num_devices=CLUSTER.num_devices,
        memory_limit=memory_limit, capped_candidates=capped)


@pytest.mark.parametrize("planner", ["milp", "greedy", "brute", "elimination"])
def test_a_proof_on_candidates_the_time_limit_capped_is_not_claimed_for_the_request(planner):
    """INFEASIBLE among the candidates built is TIME_LIMIT (more candidates may fit), OPTIMAL among
    them is FEASIBLE without a bound; the same problem built whole keeps its proofs."""
    from solver_plan.intra.solve import solve
    from solver_plan.result import Status
    assert build_config_problem(GRAPH, CLUSTER).capped_candidates is None
    tight = [solve(_two_node_problem(1.0, capped), planner) for capped in (None, 2)]
    assert tight[0].status is Status.INFEASIBLE
    assert tight[1].status is Status.TIME_LIMIT and tight[1].assignment is None
    assert "none fits among the at most 2 candidates per operator" in tight[1].notes[0]
    loose = [solve(_two_node_problem(None, capped), planner) for capped in (None, 2)]
    if loose[0].status is Status.OPTIMAL:
        assert loose[1].status is Status.FEASIBLE and loose[1].lower_bound is None
        assert loose[1].objective == loose[0].objective and any("optimal among" in n for n in loose[1].notes)


def test_a_capped_build_keeps_each_operators_least_memory_candidate_where_its_first_cannot_fit(monkeypatch):
    """The cap keeps the enumeration's first candidates; where no plan of theirs can fit the memory
    limit, each operator's least-memory candidate takes the last place: a memory-bound request keeps
    a plan that fits if the full problem's least-memory plan fits."""
    assert build.capped_choice([5.0, 4.0, 3.0, 1.0, 2.0], 3) == [0, 1, 3]
    assert build.capped_choice([5.0, 1.0, 3.0, 1.0], 3) == [0, 1, 2]
    full = _slow_build(monkeypatch)

    def capped(memory_limit):
        problem = build_config_problem(GRAPH, CLUSTER, memory_limit, deadline=Deadline(None, parent=Deadline(5.0)))
        assert problem.capped_candidates is not None
        return problem

    roomy = capped(None)  # no limit: the enumeration's first candidates
    for i, configs in enumerate(roomy.candidates):
        assert list(configs) == list(full.candidates[i][:len(configs)])
    least = sum(min(m[[0 in d for d in devs]], default=0.0) for m, devs in
                zip(roomy.node_memory, roomy.node_devices))  # device 0's floor over the first candidates
    tight = capped(0.5 * least)
    for i, configs in enumerate(tight.candidates):
        assert len(configs) <= tight.capped_candidates
        assert min(tight.node_memory[i]) == min(full.node_memory[i])
        assert list(configs[:len(configs) - 1]) == list(full.candidates[i][:len(configs) - 1])


def test_megatron_1T_on_3072_devices_capped_to_4_candidates_keeps_a_plan_that_fits():
    """Its first 4 candidates split q, k, v by input features (each device holding the whole output):
    device 0 needs at least 7.1 GB for two blocks. Under half of that, the capped build keeps each
    operator's least-memory candidate and a plan fits; the first 4 alone are no plan (TIME_LIMIT: the
    request's other candidates may fit, so not INFEASIBLE)."""
    from dataclasses import replace

    from solver_plan.graph.resolve import resolve_model
    from solver_plan.intra.solve import solve
    from solver_plan.result import Status
    graph, cluster = resolve_model("megatron-1T:layers=2"), resolve_cluster("a100-80gb-superpod", 3072)
    first = build_config_problem(graph, cluster, deadline=Deadline(100.0, nominal_s=0.01))
    floor = sum(min(m[[0 in d for d in devs]], default=0.0) for m, devs in zip(first.node_memory, first.node_devices))
    assert first.capped_candidates == 4 and floor > 7e9
    limit = 0.5 * floor
    kept = build_config_problem(graph, cluster, limit, deadline=Deadline(100.0, nominal_s=0.01))
    assert kept.capped_candidates == 4
    assert solve(kept, "greedy").status is Status.FEASIBLE
    assert solve(replace(first, memory_limit=limit), "greedy").status is Status.TIME_LIMIT


def test_memory_alone_is_the_memory_of_the_full_pricing():
    """`CostModel.node_memory` (what a capped build chooses by) gives every candidate the very bytes
    `CostModel.nodes` does, on a transformer (attention, weights, tied embedding) and an MLP."""
    from solver_plan.cost.enumerate import enumerate_configs
    from solver_plan.cost.model import CostModel
    from solver_plan.graph.resolve import resolve_model
    for graph, cluster in ((GRAPH, CLUSTER), (resolve_model("gpt2:layers=2,hidden=256,heads=4,seq=128,batch=8"),
                                              resolve_cluster("a100-80gb-superpod", 64))):
        for runtime in ("megatron-core", "megatron-2021"):  # fused and unfused attention
            model = CostModel(cluster, runtime=runtime)
            for name in graph.topological_order:
                op = graph.op(name)
                configs = enumerate_configs(op, graph, cluster.num_devices)
                assert model.node_memory(graph, op, configs) == [c.memory_bytes for c in model.nodes(graph, op, configs)]


def _clock_passing_after(monkeypatch, checks: int):
    """Deadline.overrun answers False for the first `checks` calls, then True: the wall clock
    passing at a chosen point of the build."""
    calls = {"n": 0}

    def overrun(self, grace_s=0.0):
        calls["n"] += 1
        return calls["n"] > checks

    monkeypatch.setattr(Deadline, "overrun", overrun)


def test_a_build_stopped_while_pricing_redistributions_answers_its_one_plan(monkeypatch):
    """The operators all costed, the clock passing during the redistributions: each operator's
    least-memory candidate, its edges priced one pair each, comes back as a validated TIME_LIMIT
    plan (never a proof); under a limit that plan does not fit, no plan and by how much."""
    from solver_plan.deadline import CUT_SHORT_NOTE, time_budget
    from solver_plan.planning import answer_plan
    from solver_plan.requests import PlanRequest
    from solver_plan.result import Status
    _clock_passing_after(monkeypatch, len(GRAPH.topological_order) + 1)  # one edge priced, then stopped
    report = answer_plan(PlanRequest(GRAPH, CLUSTER, "greedy"), time_budget(10.0))
    result, problem = report.result, report.problem
    assert result.status is Status.TIME_LIMIT and result.assignment == (0,) * len(GRAPH.topological_order)
    assert problem.capped_candidates == 1 and all(len(c) == 1 for c in problem.candidates)
    assert result.objective == pytest.approx(problem.objective(result.assignment))
    assert CUT_SHORT_NOTE in result.notes and any("one candidate per operator kept" in n for n in result.notes)
    full = build_config_problem(GRAPH, CLUSTER)  # what the same (uncapped) build would have made
    for i, configs in enumerate(problem.candidates):  # the least-memory candidate of each operator
        j = full.candidates[i].index(configs[0])
        assert full.node_memory[i][j] == min(full.node_memory[i]) == problem.node_memory[i][0]
        assert full.node_costs[i][j] == problem.node_costs[i][0]
    _clock_passing_after(monkeypatch, len(GRAPH.topological_order) + 1)
    tight = answer_plan(PlanRequest(GRAPH, CLUSTER, "greedy", memory_limit=1.0), time_budget(10.0))
    assert tight.result.status is Status.TIME_LIMIT and tight.result.assignment is None
    assert any("no plan: that one needs" in n for n in tight.result.notes)


def test_a_build_stopped_while_costing_operators_answers_its_one_plan(monkeypatch):
    """The clock passing after two operators are costed: every operator keeps its least-memory
    candidate of all it has, costed as the full build costs it; the plan is a validated TIME_LIMIT
    plan (never a proof)."""
    from solver_plan.deadline import CUT_SHORT_NOTE, time_budget
    from solver_plan.planning import answer_plan
    from solver_plan.requests import PlanRequest
    from solver_plan.result import Status
    _clock_passing_after(monkeypatch, 2)
    report = answer_plan(PlanRequest(GRAPH, CLUSTER, "greedy"), time_budget(10.0))
    result, problem = report.result, report.problem
    assert result.status is Status.TIME_LIMIT and result.assignment == (0,) * len(GRAPH.topological_order)
    assert problem.capped_candidates == 1 and all(len(c) == 1 for c in problem.candidates)
    assert result.objective == pytest.approx(problem.objective(result.assignment))
    assert CUT_SHORT_NOTE in result.notes and any("2 of" in n and "operators costed" in n for n in result.notes)
    full = build_config_problem(GRAPH, CLUSTER, max_candidates=10**6)  # every candidate
    for i, configs in enumerate(problem.candidates):
        j = full.candidates[i].index(configs[0])
        assert full.node_memory[i][j] == min(full.node_memory[i]) == problem.node_memory[i][0]
        assert full.node_costs[i][j] == problem.node_costs[i][0]
