"""The built-in planners, one explicit table per kind (`planners.TABLES` loads a kind's table on first
use, so a `plan` command never imports the pipeline or hybrid packages).

A new planner is one function with its kind's call signature (planners.py) and one row here.
"""
from __future__ import annotations

from solver_plan.planners import PlannerInfo


def config_planners() -> tuple[PlannerInfo, ...]:
    """Kind "config": plan(problem, *, deadline=None, seed=0, warm_start=None, **options) -> ConfigResult."""
    from solver_plan.intra import baselines, brute, cpsat, edge_drop, elimination, greedy, milp, reference
    from solver_plan.simulate import mcmc, milp_load

    def row(name, func, description, *, exact=False, options=(), **more) -> PlannerInfo:
        return PlannerInfo(name, "config", func, exact, description, options=options, **more)
    return (
        row("milp", milp.plan_milp, "one-hot MILP (HiGHS by default, CBC via PuLP), LP relaxation first; "
                                    "root-LP (or Lagrangian) bound and reduced-cost fixing under a binding memory limit",
            exact=True, options=("backend", "relax_first", "lagrangian", "root_lp"), check_values=milp.check_milp_options,
            memory_free_first=milp.memory_free_first),
        row("cpsat", cpsat.plan_cpsat, "one-hot model in OR-Tools CP-SAT, hinted by the heuristic; under a binding "
                                       "memory limit on the candidates the Lagrangian leaves open, with its bound",
            exact=True, options=("workers", "lagrangian"), check_values=cpsat.check_cpsat_options),
        row(milp_load.NAME, milp_load.plan_milp_load,
            "one-hot MILP minimising the busiest device / critical path (load objective), not the sum",
            exact=True, options=("relax_first",), simplify=False, objective="load"),
        row("elimination", elimination.plan_elimination,
            "DeePa node/edge elimination; exact remainder solve on non-series-parallel graphs", exact=True),
        row("brute", brute.plan_brute, "exhaustive enumeration for tiny instances (test oracle)", exact=True,
            options=("max_plans",)),
        row("greedy", greedy.plan_greedy, "SMSG greedy by decreasing vertex importance, then single-node improvement",
            options=("refine",)),
        row("edge-drop", edge_drop.plan_edge_drop,
            "delete the cheapest residual edges until the graph folds: a plan and a proven bound"),
        row("data-parallel", baselines.plan_data_parallel,
            "every operator split over the sample dimension on all devices", simplify=False),
        row("single-device", baselines.plan_single_device, "the whole model on device 0", simplify=False),
        row("mcmc", mcmc.plan_mcmc, "FlexFlow MCMC over single-operator changes, scored by the execution simulator "
                                    "(objective=sum: by the cost model)",
            options=("iterations", "objective", "beta", "simulation"), check_values=mcmc.check_mcmc_options,
            simplify=False),
    ) + tuple(row(f"reference-{solver}", getattr(reference, f"plan_reference_{solver}"),
                  f"reference: plain one-hot MILP (Alpa / PyTorch AutoParallel) in PuLP + {label}, nothing simplified",
                  exact=True, simplify=False)
              for solver, label in (("cbc", "CBC"), ("highs", "HiGHS")))


def pipeline_planners() -> tuple[PlannerInfo, ...]:
    """Kind "pipeline": plan(problem, *, time_limit=None, seed=0, **options) -> AllocationResult."""
    from solver_plan.pipeline import exact_joint, madpipe, pipedream_dp
    return _rows("pipeline", (
        ("pipedream", pipedream_dp.plan, False, "PipeDream contiguous DP minimising the period (memory filter on "
                                                "by default)"),
        ("madpipe", madpipe.plan, False, "MadPipe-DP: memory-aware DP with one special processor "
                                         "(non-contiguous stages)"),
        ("exact-joint", exact_joint.plan, True, "CP-SAT joint allocation + schedule for small chains (proven "
                                                "optimal period)")))


def schedule_planners() -> tuple[PlannerInfo, ...]:
    """Kind "schedule": schedule(problem, allocation, *, period=None, time_limit=None, **options) -> ScheduleResult."""
    from solver_plan.pipeline import exact_schedule, exact_schedule_split, milp_schedule, onef1b
    return _rows("schedule", (
        ("1f1b*", onef1b.schedule, False, "1F1B* grouping schedule (MadPipe 4.1), memory-optimal for contiguous "
                                          "allocations"),
        ("exact", exact_schedule.schedule, True, "CP-SAT periodic schedule of an allocation, period minimised by "
                                                 "bisection"),
        ("exact-milp", milp_schedule.schedule, True, "MILP (CBC) periodic schedule of an allocation in real time, "
                                                     "bisection on T"),
        (exact_schedule_split.NAME, exact_schedule_split.schedule, True,
         "CP-SAT periodic schedule with the backward split into B and W (zero-bubble), period minimised by "
         "bisection under the memory limit")))


def _rows(kind: str, rows) -> tuple[PlannerInfo, ...]:
    """(name, function, exact, description) rows of a kind whose planners declare no option names."""
    return tuple(PlannerInfo(name, kind, func, exact, description) for name, func, exact, description in rows)


def hybrid_planners() -> tuple[PlannerInfo, ...]:
    """Kind "hybrid": plan(model, cluster, global_batch, *, devices=None, time_limit=..., memory_limit="device",
    fix=None, deadline=None, precision=None, **options) -> HybridResult (options: planner, the block
    solver; compute_scale; runtime). Job files give the global batch as the option `batch`."""
    from solver_plan.hybrid import baselines
    from solver_plan.hybrid.search import plan_hybrid, what_if

    def row(name, func, description, exact=False) -> PlannerInfo:
        return PlannerInfo(name, "hybrid", func, exact, description, options=HYBRID_JOB_OPTIONS,
                           check_values=_check_hybrid_values)
    return (
        row("hybrid", plan_hybrid, "data x tensor x pipeline search with tied per-operator block solves", True),
        row("data-parallel", baselines.data_parallel, "baseline: pure data parallel, ZeRO stage as needed"),
        row("megatron-rule", baselines.megatron_rule, "baseline: tp = GPUs per node, smallest pipeline that fits"),
        row("what-if", what_if, "prices the configuration fix pins (dp, tp, pp, micro_batch_size at least) as the "
                                "runtime runs it; no search"),
    )


# a hybrid job's options (batch/kinds.py); routing and a2a_overlap: mixtures of experts only (batch/jobfile.py)
HYBRID_JOB_OPTIONS = ("batch", "fix", "compute_scale", "runtime", "routing", "a2a_overlap")


def _check_hybrid_values(options: dict) -> None:
    """A job's `runtime` option names a runtime profile (solver_plan/runtime), checked when the jobs load."""
    if "runtime" in options:
        from solver_plan.runtime import resolve_runtime
        resolve_runtime(options["runtime"], "runtime")


TABLES = {"config": config_planners, "pipeline": pipeline_planners, "schedule": schedule_planners,
          "hybrid": hybrid_planners}
