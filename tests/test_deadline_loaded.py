"""Every planner gives the same answer on an idle machine and on one three times slower (issue 26):
work limits decided from the instance and the nominal limit, not the wall clock, decide what is
built and searched; the clock may only stop (and then the answer says so).

"Loaded" is a wall clock running 3x faster than the real one, injected as `deadline.clock`, which
every `Deadline` reads: each second of work looks like three. Small instances, with limits far
above what they need, so the clock never stops them: only what decides the answer is compared.
Covers the whole command for `plan` (building the problem included), the per-operator planners
on a built problem, the pipeline planners and the hybrid search with each block solver."""
from __future__ import annotations

import time

import pytest

from solver_plan import deadline as deadline_module
from solver_plan.deadline import CUT_SHORT_NOTE, time_budget
from solver_plan.intra.random_instances import random_problem
from solver_plan.intra.solve import solve
from solver_plan.planners import load_builtin_planners

load_builtin_planners()
LIMIT_S = 30.0
RATE = 3.0
SPENT = 0.4  # of the limit, gone before the loaded run starts


class _LoadedClock:
    """The wall clock RATE times faster than the real one: the machine looks RATE times slower."""

    def __init__(self, rate: float = RATE, read=time.perf_counter):
        self.read = read  # the real clock it speeds up (time.process_time: this process's CPU only)
        self.base, self.rate = read(), rate

    def __call__(self) -> float:
        return self.base + (self.read() - self.base) * self.rate


def _idle_and_loaded(monkeypatch, answer):
    """`answer(budget)` on an idle machine, then loaded with 40% of the limit already gone (as after a
    slow start-up): a rule reading the time left would decide differently; the nominal budget's do not."""
    idle = answer(time_budget(LIMIT_S))
    monkeypatch.setattr(deadline_module, "clock", _LoadedClock())
    return idle, answer(time_budget(LIMIT_S, start=deadline_module.clock() - SPENT * LIMIT_S))


# --- plan: the whole front door, building the problem under the command's budget included --------

PLAN_PLANNERS = ["greedy", "edge-drop", "elimination", "cpsat", "milp", "milp-load", "mcmc", "data-parallel"]


@pytest.mark.parametrize("planner", PLAN_PLANNERS)
def test_plan_gives_the_same_answer_loaded(monkeypatch, planner):
    from solver_plan.planning import answer_plan
    from solver_plan.requests import PlanRequest
    options = {"iterations": 300} if planner == "mcmc" else {}
    request = PlanRequest("mlp:layers=3,hidden=256,batch=32", "v100x8-nvlink", planner, time_limit=LIMIT_S,
                          seed=1, options=tuple(options.items()))

    def answer(budget):
        report = answer_plan(request, budget)
        result = report.result
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        return result.status, result.assignment, result.objective, result.lower_bound, report.problem.notes

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle[0].has_solution and loaded == idle


# --- per-operator planners on a problem whose size makes the budget decide ------------------------

DAG = random_problem(120, seed=7, shape="dag", memory_tightness=0.5)
CONFIG_PLANNERS = [("greedy", {}), ("edge-drop", {}), ("cpsat", {}), ("milp", {}), ("milp-load", {}),
                   ("mcmc", {"objective": "sum", "iterations": 800})]


@pytest.mark.parametrize("planner, options", CONFIG_PLANNERS, ids=[p for p, _ in CONFIG_PLANNERS])
def test_config_planners_give_the_same_answer_loaded(monkeypatch, planner, options):
    """Budgets of a few seconds: the nominal budget decides the optional passes and work limits."""
    problem = DAG if planner != "milp-load" else random_problem(30, seed=4, shape="dag", memory_tightness=0.5)

    def answer(budget):
        result = solve(problem, planner, budget, seed=2, **options)
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        return result.status, result.assignment, result.objective, result.lower_bound

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle[0].has_solution and loaded == idle


# --- pipeline planners ------------------------------------------------------------------------------

@pytest.mark.parametrize("planner, layers", [("pipedream", 6), ("madpipe", 6), ("exact-joint", 2)])
def test_pipeline_planners_give_the_same_answer_loaded(monkeypatch, planner, layers):
    from solver_plan.pipeline.answer import answer_pipeline
    from solver_plan.requests import PipelineRequest
    request = PipelineRequest(f"gpt2:layers={layers},seq=128,batch=4", "v100x8-nvlink", devices=2 if layers == 2 else 4,
                              planner=planner, time_limit=LIMIT_S)

    def answer(budget):
        result = answer_pipeline(request, budget).result
        allocation = result.allocation.allocation
        return result.status, result.period_s, result.lower_bound_s, repr(allocation)

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle[0].has_solution and loaded == idle


# --- the hybrid search with each block solver -------------------------------------------------------

@pytest.mark.parametrize("planner", ["greedy", "cpsat", "milp"])
def test_hybrid_search_gives_the_same_answer_loaded(monkeypatch, planner):
    from solver_plan.hybrid import plan_hybrid

    def answer(budget):
        result = plan_hybrid("gpt2:layers=2,seq=128", "v100x8-nvlink", 16, planner=planner,
                             deadline=budget)
        plan = result.plan
        return result.status, result.step_time_s, None if plan is None else plan.parallelism, result.lower_bound_s

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle[0].has_solution and loaded == idle


def test_a_short_budget_still_plans_the_standard_layout(monkeypatch):
    """Issue 26: when the budget ends the search before the space is enumerated, the answer is the
    standard layout priced first (TIME_LIMIT, a valid plan no better than the search's, the compute
    bound below it), and the same under a loaded clock."""
    from solver_plan.deadline import Deadline
    from solver_plan.hybrid import plan_hybrid, search
    from solver_plan.result import Status

    model, cluster = "gpt2:layers=2,seq=128", "v100x8-nvlink"
    searched = plan_hybrid(model, cluster, 16, planner="greedy", deadline=time_budget(LIMIT_S))
    monkeypatch.setattr(search, "ENUMERATE_S_PER_POINT", 1.0)  # no budget enumerates the space

    def answer(budget):
        result = plan_hybrid(model, cluster, 16, planner="greedy", deadline=Deadline(60.0, nominal_s=5.0))
        return result.status, result.step_time_s, result.plan and result.plan.parallelism, result.lower_bound_s, \
            result.notes

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    status, step, par, bound, notes = idle
    assert status is Status.TIME_LIMIT and par is not None and loaded == idle
    from solver_plan.cluster import resolve_cluster
    from solver_plan.hybrid.model import transformer_spec
    from solver_plan.hybrid.space import tp_degrees
    nodes = resolve_cluster(cluster)
    widest = max(tp_degrees(transformer_spec(model), nodes.devices_per_node, nodes.num_devices))  # within a node
    assert par.micro_batch_size == 1 and par.tp == widest and par.zero_stage == 1 and par.sequence_parallel
    assert bound <= searched.step_time_s <= step
    assert any("standard layout" in note for note in notes) and any("validator" in note for note in notes)


@pytest.mark.parametrize("runtime,tp,zero", [("llm-foundry", 1, 3), ("torchtitan", None, 3)])
def test_a_short_budget_plans_the_standard_layout_the_runtime_runs(monkeypatch, runtime, tp, zero):
    """A runtime without ZeRO-1 (FSDP: torchtitan, LLM Foundry) or without tensor parallelism (LLM Foundry)
    still gets the standard layout when the budget ends the search early: its deepest sharding and its
    widest tensor-parallel degree, a plan it runs, not none."""
    from solver_plan.deadline import Deadline
    from solver_plan.hybrid import plan_hybrid, search
    from solver_plan.result import Status
    from solver_plan.runtime import RUNTIMES

    monkeypatch.setattr(search, "ENUMERATE_S_PER_POINT", 1.0)  # no budget enumerates the space
    result = plan_hybrid("gpt2:layers=2,seq=128", "v100x8-nvlink", 16, planner="greedy", runtime=runtime,
                         deadline=Deadline(60.0, nominal_s=5.0))
    assert result.status is Status.TIME_LIMIT and result.plan is not None
    par = result.plan.parallelism
    assert par.zero_stage == zero and (tp is None or par.tp == tp) and par.micro_batch_size == 1
    assert RUNTIMES[runtime].runs_layout({"tp": par.tp, "pp": par.pp, "cp": par.cp}, par.zero_stage)
    assert any("standard layout" in note for note in result.notes)


@pytest.mark.parametrize("model,cluster,batch", [
    ("gpt2:layers=2,seq=128", "v100x8-nvlink", 16),  # the dense search
    ("data/hf-configs/qwen1.5-moe-a2.7b.json:seq=512,layers=4", "h100-4x8-ib", 64),  # the expert-parallel one
])
def test_hybrid_answer_says_when_the_clock_cut_it_short(monkeypatch, model, cluster, batch):
    """The hybrid front door marks an answer the wall clock (not the work budget) ended, for both
    searches: the note, and an unproven plan as TIME_LIMIT, never FEASIBLE; an idle run within its
    budget says nothing."""
    from solver_plan.hybrid.answer import answer_hybrid
    from solver_plan.hybrid.request import HybridRequest
    from solver_plan.resources import REPO_ROOT
    from solver_plan.result import Status
    monkeypatch.chdir(REPO_ROOT)  # the config.json path is the repository's
    request = HybridRequest(model, cluster, batch, devices=8, block_solver="greedy", time_limit=LIMIT_S)
    idle = answer_hybrid(request).result
    assert CUT_SHORT_NOTE not in idle.notes and idle.status in (Status.OPTIMAL, Status.FEASIBLE)
    monkeypatch.setattr(deadline_module, "clock", _LoadedClock(rate=1e5))  # each ms of work looks like 100 s
    cut = answer_hybrid(request).result
    assert CUT_SHORT_NOTE in cut.notes
    assert cut.status is not Status.FEASIBLE


# --- heuristics whose work budget binds: work counts, not the clock, stop them ----------------------
# (deadline.WorkMeter: greedy passes, repairs, local and forest search, mcmc's heuristics and proposals)

BINDING = random_problem(300, seed=3, shape="dag", memory_tightness=0.5)
# (planner, options, nominal budget, whether that budget binds: a plan worse than without one); at
# 0.6 s edge-drop's relaxation, repair and searches run (its forest rounds are counted against it)
BINDING_PLANNERS = [("greedy", {}, 0.02, True), ("edge-drop", {}, 0.6, False),
                    ("mcmc", {"objective": "sum"}, 0.05, True)]


@pytest.mark.parametrize("planner, options, nominal_s, binds", BINDING_PLANNERS,
                         ids=[p for p, *_ in BINDING_PLANNERS])
def test_a_binding_work_budget_gives_the_same_answer_loaded(monkeypatch, planner, options, nominal_s, binds):
    """A nominal budget far below what the heuristics would use (a wall clock of 30 s they never
    reach): the work budget stops them, at the same point on a loaded machine; with no budget they
    do more and find a plan at least as good (better where the budget binds)."""
    from solver_plan.deadline import Deadline

    def answer(budget):
        result = solve(BINDING, planner, Deadline(None, parent=budget, nominal_s=nominal_s), seed=2, **options)
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        return result.status, result.assignment, result.objective

    unlimited = solve(BINDING, planner, None, seed=2, **options)
    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle[0].has_solution and loaded == idle
    assert unlimited.objective < idle[2] if binds else unlimited.objective <= idle[2] + 1e-9


def test_heuristic_plans_stop_at_their_work_budget(monkeypatch):
    """`heuristic_plans` with a budget worth a few node visits: the same plans idle and loaded, fewer
    improvement steps than without a budget, and the whole budget used."""
    from solver_plan.deadline import Deadline
    from solver_plan.intra.greedy_plans import heuristic_plans
    nominal = []

    def answer(budget):
        deadline = Deadline(None, parent=budget, nominal_s=0.01)
        plans = heuristic_plans(BINDING, deadline)
        assert not deadline.cut_short
        nominal.append(deadline.nominal_left())
        return plans

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle and loaded == idle and nominal == [0.0, 0.0]
    free = heuristic_plans(BINDING, None)
    assert min(map(BINDING.objective, free)) < min(map(BINDING.objective, idle))  # the budget bound


def test_a_repair_that_may_make_the_only_fitting_plan_runs_without_budget():
    """Issue 26's lesson (branch s33-worksize): greedy breaks memory, the least-memory plan does too,
    and only the repair of the unconstrained greedy plan fits. With no work budget left that
    repair still runs (only the wall clock may stop it), so a plan comes back."""
    from solver_plan.deadline import Deadline
    from solver_plan.intra.greedy_plans import greedy_assignment, heuristic_plans, least_memory_plan
    problem = random_problem(20, seed=2, shape="dag", memory_tightness=0.2)
    assert not problem.memory_ok(greedy_assignment(problem))
    assert not problem.memory_ok(least_memory_plan(problem))
    deadline = Deadline(LIMIT_S, nominal_s=1e-9)
    plans = heuristic_plans(problem, deadline)
    assert plans and all(problem.memory_ok(plan) for plan in plans) and not deadline.cut_short
    assert solve(problem, "greedy", Deadline(LIMIT_S, nominal_s=1e-9)).status.has_solution


def test_no_repair_runs_where_no_plan_can_fit(monkeypatch):
    """Where each node's unavoidable bytes already overflow a device (the closed-form bound is above
    the limit), the repair that must otherwise run is skipped: no plan can fit, and its time is
    left to the diagnosis, which proves INFEASIBLE."""
    from solver_plan.intra import greedy_plans
    from solver_plan.intra.memory import closed_form_bound
    from solver_plan.result import Status
    problem = random_problem(30, seed=0, shape="dag", memory_tightness=0.3)
    problem = problem.with_memory_limit(0.9 * closed_form_bound(problem))

    def no_repair(*args, **kwargs):
        raise AssertionError("a repair ran where no plan can fit")

    monkeypatch.setattr(greedy_plans, "repair_memory", no_repair)
    assert greedy_plans.heuristic_plans(problem, time_budget(LIMIT_S)) == []
    assert solve(problem, "greedy", time_budget(LIMIT_S)).status is Status.INFEASIBLE


# --- the exact planners' Lagrangian under a work budget (issue 26, s35) -----------------------------
# (lagrangian.py, dual_ascent.reparametrise, pair_search, lagrangian_fixing.best_plan: WorkMeter counts)

def test_the_lagrangian_stops_at_its_work_budget_the_same_loaded(monkeypatch):
    """A nominal budget that pays for a few multiplier steps (a wall clock of 30 s they never reach):
    the same steps, bound, multipliers and plans idle and loaded, none cut short, and fewer steps and
    a weaker bound than without a budget."""
    from solver_plan.deadline import Deadline
    from solver_plan.intra.lagrangian import lagrangian_dual

    def answer(budget):
        deadline = Deadline(None, parent=budget, nominal_s=0.1)
        relaxation = lagrangian_dual(BINDING, deadline)
        assert not deadline.cut_short
        return relaxation.steps, relaxation.bound, relaxation.multipliers.tolist(), relaxation.plans

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert loaded == idle
    free = lagrangian_dual(BINDING, None)
    assert idle[0] < free.steps and idle[1] < free.bound


@pytest.mark.parametrize("planner", ["cpsat", "milp"])
def test_exact_planners_give_the_same_answer_on_a_much_slower_machine(monkeypatch, planner):
    """The flaky runs of the cpsat cases at load 6-8: the Lagrangian's diffusion and ascent were
    stopped by wall-clock shares (a fraction of the time left), so a slower machine found fewer
    steps, a different bound and a cut-short note. With a clock 16x slower and 40% of the limit gone
    (each of those shares then ends before its work: the test fails before s35's change, from 16x
    on; it passes now up to about 30x, where the work no longer fits the whole limit), the answer
    is the idle one. The clock reads this process's CPU time, so the machine's own load (a test
    suite beside it) does not move it."""
    problem = random_problem(150, seed=4, shape="dag", memory_tightness=0.5)

    def answer(budget):
        result = solve(problem, planner, budget, seed=3)
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        return result.status, result.assignment, result.objective, result.lower_bound

    idle = answer(time_budget(LIMIT_S))
    monkeypatch.setattr(deadline_module, "clock", _LoadedClock(rate=16.0, read=time.process_time))
    loaded = answer(time_budget(LIMIT_S, start=deadline_module.clock() - SPENT * LIMIT_S))
    assert idle[0].has_solution and loaded == idle


def test_a_diagnosis_out_of_time_still_proves_what_the_closed_form_bound_proves():
    """No wall clock left for the diagnosis: where the closed-form bound is above the limit the
    answer is INFEASIBLE (the bound proves it, in milliseconds) and not cut short, as with time;
    where it is not, TIME_LIMIT and cut short, as before."""
    from solver_plan.deadline import Deadline
    from solver_plan.intra.answer import Answer
    from solver_plan.intra.diagnose import diagnose
    from solver_plan.intra.memory import closed_form_bound
    from solver_plan.result import Status
    problem = random_problem(30, seed=0, shape="dag", memory_tightness=0.3)
    none_fit = problem.with_memory_limit(0.9 * closed_form_bound(problem))
    spent = Deadline(1e-3)
    time.sleep(2e-3)
    proved = diagnose(none_fit, spent, Answer(Status.TIME_LIMIT), "greedy")
    assert proved.status is Status.INFEASIBLE and not spent.cut_short
    assert proved.status is diagnose(none_fit, time_budget(LIMIT_S), Answer(Status.TIME_LIMIT), "greedy").status
    unproved = diagnose(problem, spent, Answer(Status.TIME_LIMIT), "greedy")
    assert unproved.status is Status.TIME_LIMIT and spent.cut_short


@pytest.mark.parametrize("planner", ["greedy", "edge-drop", "milp", "cpsat", "mcmc"])
def test_no_planner_searches_where_no_plan_can_fit(monkeypatch, planner):
    """Where the closed-form bound is above the limit no plan exists: the planner is not run (its
    search could only end at the clock, megatron-1T on 3,072 devices at 1 s) and the answer is
    INFEASIBLE with the bound, never cut short, idle or loaded."""
    from solver_plan.intra.memory import closed_form_bound
    from solver_plan.result import Status
    problem = random_problem(40, seed=1, shape="dag", memory_tightness=0.3)
    problem = problem.with_memory_limit(0.8 * closed_form_bound(problem))
    options = {"objective": "sum"} if planner == "mcmc" else {}

    def answer(budget):
        result = solve(problem, planner, budget, seed=2, **options)
        assert CUT_SHORT_NOTE not in result.notes, result.notes
        assert any("not run: no plan can fit" in note for note in result.notes), result.notes
        return result.status, result.assignment

    idle, loaded = _idle_and_loaded(monkeypatch, answer)
    assert idle == (Status.INFEASIBLE, None) == loaded
