"""Planner registry: every planner of a kind shares one interface, so tests and comparisons can run
all of them on the same instance.

Kinds and their call signatures (one per kind):
- "config": plan(problem: ConfigProblem, *, deadline: Deadline | None = None, seed: int = 0,
  warm_start: tuple[int, ...] | None = None, **options) -> ConfigResult (the budget type, never
  seconds: solver_plan/deadline.py)
- "pipeline": plan(problem: ChainProblem, *, time_limit=None, seed=0, **options) -> AllocationResult
- "schedule": schedule(problem: ChainProblem, allocation, *, period=None, time_limit=None, **options)
  -> ScheduleResult
- "hybrid": plan(model, cluster, global_batch, *, devices=None, time_limit=..., memory_limit="device",
  fix=None, deadline=None, precision=None, **options) -> HybridResult

The built-in planners are listed in one explicit table per kind (`planner_tables.py`), loaded on
first use of that kind, so a `plan` command does not pay for importing the pipeline or hybrid
packages (ortools, pandas: seconds). `register` adds a planner at run time (tests, extensions).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

from solver_plan.errors import InputError

KINDS = ("config", "pipeline", "schedule", "hybrid")
OBJECTIVES = ("sum", "load")


@dataclass(frozen=True)
class PlannerInfo:
    """A registered planner: name, kind, the function, whether it proves optimality, a one-line description,
    whether it takes a simplified problem, the options it reads and what its objective measures.
    """
    name: str
    kind: str
    func: Callable
    exact: bool  # proves optimality (reports a bound equal to its objective when it finishes)
    description: str
    # False for planners whose answer is defined on the original problem (baselines, planners that
    # simulate the original graph): the front door must not hand them a simplified problem.
    simplify: bool = True
    # Names of the options the planner reads; None = not declared (not checked).
    options: tuple[str, ...] | None = None
    # What the reported objective measures: "sum" (ConfigProblem.objective) or "load" (the busiest
    # device / critical path, intra/load_objective.py); the validator recomputes the same one.
    objective: str = "sum"
    # Checks option values (raises InputError), so bad values are refused before any work.
    check_values: Callable[[dict], None] | None = None
    # Whether the front door first plans without the memory limit where it could bind, given
    # (problem, deadline, options); None: it does (intra/simplified.py). False for a planner whose own
    # relaxation already tells when the limit does not bind (milp's root LP).
    memory_free_first: Callable[..., bool] | None = None

    def check_options(self, options, where: str = "options") -> None:
        """A misspelt option would be ignored silently: refuse names the planner does not read;
        then the planner's own value checks, if it declares them."""
        if self.options is not None:
            unknown = sorted(set(options) - set(self.options))
            if unknown:
                known = ", ".join(self.options) or "none"
                raise InputError(f"planner {self.name!r} has no option {unknown[0]!r} (options: {known})", where)
        if self.check_values is not None:
            try:
                self.check_values(dict(options))
            except InputError as exc:  # name where the value came from, then the option
                message = str(exc)[len(f"{exc.where}: "):] if exc.where else str(exc)
                raise InputError(message, f"{where} {exc.where}" if exc.where else where) from None


_REGISTRY: dict[str, dict[str, PlannerInfo]] = {kind: {} for kind in KINDS}
_loaded_kinds: set[str] = set()


def register(name: str, kind: str = "config", *, exact: bool = False, description: str = "",
             simplify: bool = True, options: tuple[str, ...] | None = None, objective: str = "sum",
             check_values: Callable[[dict], None] | None = None):
    """Decorator that registers a planner function under `name` and `kind` (ValueError for an unknown kind or
    objective, or a name registered twice with another function); the description defaults to the first
    line of the function's docstring.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown planner kind {kind!r}")
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}")

    def decorator(func: Callable) -> Callable:
        existing = _REGISTRY[kind].get(name)
        if existing is not None and existing.func is not func:
            raise ValueError(f"planner {name!r} of kind {kind!r} registered twice")
        summary = description or (func.__doc__ or "").strip().split("\n")[0]
        _REGISTRY[kind][name] = PlannerInfo(name, kind, func, exact, summary, simplify,
                                            None if options is None else tuple(options), objective, check_values)
        return func
    return decorator


_table_source: Callable[[], Mapping[str, Callable[[], Iterable[PlannerInfo]]]] | None = None


def set_table_source(source: Callable[[], Mapping[str, Callable[[], Iterable[PlannerInfo]]]]) -> None:
    """Hand the registry the loader of the built-in tables (kind -> function listing its
    `PlannerInfo`s); `solver_plan/__init__.py` does, so this module imports nothing above it."""
    global _table_source
    _table_source = source


def load_builtin_planners(*kinds: str) -> None:
    """Load the built-in tables of `kinds` (every kind when none is given), each once; nothing when
    no table source was handed in (a bare registry)."""
    if _table_source is None:
        return
    tables = _table_source()
    for kind in kinds or KINDS:
        if kind in _loaded_kinds:
            continue
        _loaded_kinds.add(kind)
        for info in tables[kind]():
            _REGISTRY[kind].setdefault(info.name, info)


def planners(kind: str = "config") -> dict[str, PlannerInfo]:
    """The registered planners of `kind` by name, sorted, after loading the built-in ones."""
    if kind not in KINDS:
        raise ValueError(f"unknown planner kind {kind!r}")
    load_builtin_planners(kind)
    return dict(sorted(_REGISTRY[kind].items()))


def get_planner(name: str, kind: str = "config", where: str = "--planner") -> PlannerInfo:
    """The planner `name` of `kind`; InputError at `where` naming the available ones (with a did-you-mean)
    when unknown.
    """
    available = planners(kind)
    if name not in available:
        noun = "scheduler" if kind == "schedule" else "planner"
        from solver_plan.suggest import did_you_mean
        raise InputError(f"unknown {noun} {name!r}{did_you_mean(name, available)}; available: {', '.join(available)}",
                         where)
    return available[name]
