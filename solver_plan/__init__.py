"""solver-plan: plans for training deep networks on accelerator clusters."""
__version__ = "0.1.0"

# The Python API (solver_plan/api.py, docs/api.md), imported on first use (PEP 562) so that
# `import solver_plan` stays cheap and never loads a solver (highspy must not be imported early).
# `plan`, `pipeline` and `hybrid` are also subpackages of solver_plan, whose import would replace a
# package attribute of that name: the functions are `solver_plan.api.plan|pipeline|hybrid`, and
# here `plan_operators`, `plan_pipeline`, `plan_hybrid`.
_API = {"load_model": "load_model", "load_cluster": "load_cluster", "export_plan": "export_plan",
        "plan_operators": "plan", "plan_pipeline": "pipeline", "plan_hybrid": "hybrid", "answer": "answer",
        "Plan": "Plan", "Status": "Status", "InputError": "InputError", "UNLIMITED": "UNLIMITED",
        # the inputs, requests, results and reports of the questions above
        "Graph": "Graph", "Cluster": "Cluster", "PipelineResult": "PipelineResult", "HybridResult": "HybridResult",
        "MoEResult": "MoEResult", "PlanRequest": "PlanRequest", "PipelineRequest": "PipelineRequest",
        "HybridRequest": "HybridRequest", "PlanReport": "PlanReport", "PipelineReport": "PipelineReport",
        "HybridReport": "HybridReport"}
__all__ = sorted(_API) + ["api"]


def _builtin_planner_tables():
    """The built-in planners, one table per kind (planner_tables.py). The package is the composition
    root: it hands the registry (planners.py, low in the layers) this loader, so the registry never
    imports the planner modules above it; imported on first use of a kind."""
    from solver_plan.planner_tables import TABLES
    return TABLES


from solver_plan import planners as _planners  # noqa: E402 (after the loader it is handed)

_planners.set_table_source(_builtin_planner_tables)


def __getattr__(name: str):
    if name in _API:
        from solver_plan import api
        value = getattr(api, _API[name])
        globals()[name] = value
        return value
    raise AttributeError(f"module 'solver_plan' has no attribute {name!r}")
