"""`Plan`: a configuration result decoded to operators, with its cost breakdown; JSON and table.

JSON layout (schema_version 1, stable keys): the result envelope (result.py: kind "config",
schema_version, status, objective {name, value, unit, meaning}, bound, gap, runtime_s, notes,
solver_failures), then model, cluster, planner, status, objective_s,
lower_bound_s, gap, runtime_s, memory_limit_bytes, notes, device_memory_bytes (per device),
operators [{name, type, degrees {dim: degree}, devices, compute_s, comm_bytes, sync_bytes, comm_s,
sync_s, memory_bytes}], edges [{src, dst, tensors, redistribution_bytes, redistribution_s}].
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.cluster import Cluster
from solver_plan.cost.model import CostModel
from solver_plan.graph.ir import Graph
from solver_plan.intra.problem import ConfigProblem
from solver_plan.jsontext import shared
from solver_plan.result import CONFIG_SCHEMA_VERSION, ConfigResult, Envelope, Objective, Status, with_envelope
from solver_plan.units import format_bytes, format_seconds

SCHEMA_VERSION = CONFIG_SCHEMA_VERSION


@dataclass(frozen=True)
class OperatorPlan:
    """One operator of a per-operator plan: its configuration (degrees, devices) and its costs: compute
    seconds, collective bytes q_c and gradient-sync bytes q_p with their seconds, memory per used device.
    """
    name: str
    op_type: str
    degrees: tuple[tuple[str, int], ...]
    devices: tuple[int, ...]
    compute_s: float
    comm_bytes: float  # q_c
    sync_bytes: float  # q_p
    comm_s: float
    sync_s: float
    memory_bytes: float  # on each device it uses


@dataclass(frozen=True)
class EdgePlan:
    """One edge of a per-operator plan: the tensors it carries and their redistribution, q_r bytes and
    seconds.
    """
    src: str
    dst: str
    tensors: tuple[str, ...]
    redistribution_bytes: float  # q_r
    redistribution_s: float


@dataclass(frozen=True)
class Plan:
    """A per-operator plan as reported: status, objective (its kind in `objective_kind`), bound, gap, runtime,
    memory limit and per-device memory, and each operator's and edge's costs; `to_dict()` is the plan JSON.
    """
    model: str
    cluster: str
    planner: str
    status: Status
    objective_s: float | None
    lower_bound_s: float | None
    gap: float | None
    runtime_s: float
    memory_limit_bytes: float | None
    notes: tuple[str, ...]
    device_memory_bytes: tuple[float, ...]
    operators: tuple[OperatorPlan, ...]
    edges: tuple[EdgePlan, ...]
    # Most configurations any operator could choose from (enumeration caps them): what OPTIMAL is
    # optimal over. Not part of the JSON layout.
    candidates_kept: int | None = None
    # `TrainingPrecision.name` the plan was priced in ("mixed-bf16", "fp32"); `simulate --plan`
    # re-prices with it. None: unknown (plans from before the field).
    precision: str | None = None
    # One line naming the planner's solver and why it failed, when the plan is the fallback it
    # returned instead (`ConfigResult.solver_failure`); None when the solver answered.
    solver_failure: str | None = None
    # What objective_s measures (result.OBJECTIVE_KINDS: "sum" of operator costs, or "load")
    objective_kind: str = "sum"
    # The runtime whose kernels priced the plan (`RuntimeProfile.name`: attention fused or not, its
    # kernel family); `simulate --plan` re-prices with it. None: unknown (plans from before the field).
    runtime: str | None = None

    @property
    def objective(self) -> Objective:
        """The plan's `Objective`: its value and which measure it is (`objective_kind`)."""
        return Objective(self.objective_kind, self.objective_s)

    @property
    def envelope(self) -> Envelope:
        """The result protocol's `Envelope` of this plan (kind "config")."""
        return Envelope("config", SCHEMA_VERSION, self.status, self.objective, self.lower_bound_s, self.runtime_s,
                        self.notes, (self.solver_failure or "",))

    def to_dict(self) -> dict:
        """JSON-ready dict of the plan (the CLI's --out file), with the envelope's keys first. Equal
        device lists are one list object (`jsontext.shared`: the writer encodes each once; a plan over
        thousands of devices repeats a few), so do not change them in place."""
        pool: dict[tuple, list] = {}
        return with_envelope(self.envelope, {
            "schema_version": SCHEMA_VERSION, "model": self.model, "cluster": self.cluster,
            "planner": self.planner, "status": self.status.value, "objective_s": self.objective_s,
            "lower_bound_s": self.lower_bound_s, "gap": self.gap, "runtime_s": self.runtime_s,
            "memory_limit_bytes": self.memory_limit_bytes, "precision": self.precision, "runtime": self.runtime,
            "notes": list(self.notes),
            "solver_failure": self.solver_failure,
            "device_memory_bytes": list(self.device_memory_bytes),
            "operators": [{
                "name": op.name, "type": op.op_type, "degrees": dict(op.degrees), "devices": shared(tuple(op.devices), pool),
                "compute_s": op.compute_s, "comm_bytes": op.comm_bytes, "sync_bytes": op.sync_bytes,
                "comm_s": op.comm_s, "sync_s": op.sync_s, "memory_bytes": op.memory_bytes,
            } for op in self.operators],
            "edges": [{
                "src": e.src, "dst": e.dst, "tensors": list(e.tensors),
                "redistribution_bytes": e.redistribution_bytes, "redistribution_s": e.redistribution_s,
            } for e in self.edges],
        })


def decode_plan(graph: Graph, cluster: Cluster, problem: ConfigProblem, result: ConfigResult,
                cost_model: CostModel) -> Plan:
    """Turn a result on a problem built by `build_config_problem` into a per-operator plan."""
    operators: list[OperatorPlan] = []
    edges: list[EdgePlan] = []
    device_memory: tuple[float, ...] = ()
    if result.assignment is not None:
        chosen = {problem.names[i]: problem.candidates[i][c] for i, c in enumerate(result.assignment)}
        for name in graph.topological_order:
            op, cfg = graph.op(name), chosen[name]
            cost = cost_model.node(graph, op, cfg)
            operators.append(OperatorPlan(name, op.op_type.value, cfg.degrees, cfg.devices, cost.compute_s,
                                          cost.q_c, cost.q_p, cost.comm_s, cost.sync_s, cost.memory_bytes))
        by_pair: dict[tuple[str, str], list] = {}
        for edge in graph.edges:
            by_pair.setdefault((edge.src, edge.dst), []).append(edge)
        index = {name: i for i, name in enumerate(problem.names)}
        for (src, dst), group in by_pair.items():
            u, v = index[src], index[dst]
            cu, cv = result.assignment[u], result.assignment[v]
            # the candidate lists' matrices, as built (memoised by the cost model): one pair at a
            # time took seconds on large clusters
            priced = [cost_model.edge_matrices(graph, e, problem.candidates[u], problem.candidates[v]) for e in group]
            edges.append(EdgePlan(src, dst, tuple(e.tensor for e in group),
                                  float(sum(q_r[cu, cv] for q_r, _ in priced)),
                                  float(sum(seconds[cu, cv] for _, seconds in priced))))
        device_memory = tuple(float(x) for x in problem.device_memory(result.assignment))
    return Plan(graph.name, cluster.name, result.planner, result.status, result.objective, result.lower_bound,
                result.gap, result.runtime_s, problem.memory_limit, result.notes, device_memory,
                tuple(operators), tuple(edges), max((len(c) for c in problem.candidates), default=None),
                cost_model.precision.name, result.solver_failure, result.objective_kind, cost_model.runtime.name)


def _fmt_optional_seconds(value: float | None) -> str:
    return "-" if value is None else format_seconds(value)


def _status_text(plan: Plan) -> str:
    """OPTIMAL says what it is optimal over: the candidates enumeration kept, not every split."""
    if plan.status is Status.OPTIMAL and plan.candidates_kept:
        return f"OPTIMAL (optimal over the at most {plan.candidates_kept} candidates kept per operator)"
    return plan.status.value


def render_plan(plan: Plan, max_rows: int = 40) -> str:
    """A readable summary: headline figures, then one row per operator (grouped when long). Times
    and data volumes sit in separate columns and are never added together."""
    gap = "-" if plan.gap is None else f"{100 * plan.gap:.2f}%"
    lines = [
        f"model {plan.model} | cluster {plan.cluster} | planner {plan.planner}",
        f"status {_status_text(plan)} | objective {_fmt_optional_seconds(plan.objective_s)} "
        f"({plan.objective.label}) | "
        f"bound {_fmt_optional_seconds(plan.lower_bound_s)} | gap {gap} | solved in {format_seconds(plan.runtime_s)}",
    ]
    if plan.solver_failure:
        lines.append(f"SOLVER FAILED: {plan.solver_failure}; the plan below is the fallback")
    for note in plan.notes:
        lines.append(f"note: {note}")
    if not plan.operators:
        return "\n".join(lines)
    header = (f"{'operator':<34} {'type':<12} {'split':<28} {'compute':>10} {'comm':>10} {'sync':>10} "
              f"{'comm data':>10} {'sync data':>10} {'memory/dev':>11}")
    lines += ["", header, "-" * len(header)]
    rows = plan.operators
    shown = rows if len(rows) <= max_rows else rows[: max_rows // 2] + rows[-max_rows // 2:]
    for i, op in enumerate(shown):
        if len(rows) > max_rows and i == max_rows // 2:
            lines.append(f"... {len(rows) - max_rows} more operators (see --out JSON) ...")
        split = " ".join(f"{d}={k}" for d, k in op.degrees if k > 1) or "replica"
        split += f" @{len(op.devices)}"
        lines.append(f"{op.name[:34]:<34} {op.op_type[:12]:<12} {split[:28]:<28} {format_seconds(op.compute_s):>10} "
                     f"{format_seconds(op.comm_s):>10} {format_seconds(op.sync_s):>10} "
                     f"{format_bytes(op.comm_bytes):>10} {format_bytes(op.sync_bytes):>10} {format_bytes(op.memory_bytes):>11}")
    lines.append("")
    lines.append(f"redistribution over {len(plan.edges)} edges: "
                 f"{format_seconds(sum(e.redistribution_s for e in plan.edges))} moving "
                 f"{format_bytes(sum(e.redistribution_bytes for e in plan.edges))}; "
                 f"compute {format_seconds(sum(o.compute_s for o in plan.operators))}, "
                 f"comm {format_seconds(sum(o.comm_s for o in plan.operators))}, "
                 f"sync {format_seconds(sum(o.sync_s for o in plan.operators))}")
    mem = plan.device_memory_bytes
    limit = "" if plan.memory_limit_bytes is None else f" (limit {format_bytes(plan.memory_limit_bytes)})"
    if len(mem) <= 8:
        lines.append("memory per device" + limit + ": " + ", ".join(f"d{i} {format_bytes(m)}" for i, m in enumerate(mem)))
    elif mem:
        busiest = max(range(len(mem)), key=mem.__getitem__)
        used = sum(1 for m in mem if m > 0)
        lines.append(f"memory per device{limit}: busiest d{busiest} {format_bytes(mem[busiest])}, "
                     f"least {format_bytes(min(mem))}; {used} of {len(mem)} devices used")
    return "\n".join(lines)
