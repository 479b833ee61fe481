"""Expert-parallel hybrid plans of a mixture of experts: dp x cp x tp x pp for the attention, folded
into etp x ep x edp for the experts (hybrid/moe.py), searched jointly with the micro-batch, the
virtual stages, recomputation, the distributed optimizer and the capacity factor, under the given
routing.

    plan_moe(model, cluster, global_batch, fix={"ep": 8, "etp": 1}, routing="zipf:0.5",
             capacity="dropless", a2a_overlap="none", precision=None, runtime=None)

Points (moe_space.py) are priced in closed form (moe_price.py). Search: every point agreeing with
the pins; points whose memory floor exceeds the limit dropped; the rest priced in order of a valid
lower bound (total stage work over p stages through the pipeline formula), stopping at the first
bound >= the incumbent: OPTIMAL over the space (of this cost model) when it finishes, TIME_LIMIT with
the least open bound otherwise. ZeRO-3 / FSDP is searched with pp = 1, and with pp > 1 for FSDP2
runtimes (fsdp.allowed). Not searched: ZeRO-2 with a pipeline, per-stage recomputation, DualPipe's
bubble (its a2a overlap is "full"); context parallelism leaving fewer than MIN_TOKENS_PER_CP_RANK tokens per
rank unless pinned.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

from solver_plan.cost.routing import parse_capacity
from solver_plan.deadline import DEFAULT_TIME_LIMIT_S, time_budget
from solver_plan.errors import InputError
from solver_plan.hybrid import fsdp, moe
from solver_plan.hybrid.moe_price import Context, MoEPlan, make_context, memory_floor, price, time_bound
from solver_plan.hybrid.moe_space import FIX_KEYS, MoEPoint, check_fix, enumerate_points
from solver_plan.result import Envelope, Objective, Status, with_envelope

CHECK_EVERY = 256  # points enumerated between two looks at the clock
SCHEMA_VERSION = 1  # the result JSON (docs/schemas/moe-hybrid.v1.schema.json)


@dataclass(frozen=True)
class MoEResult:
    """Answer of the expert-parallel planner: status, the best `MoEPlan` (None without one), bound, runtime,
    points priced and pruned, notes.
    """
    status: Status
    plan: MoEPlan | None
    lower_bound_s: float | None
    runtime_s: float
    evaluated: int = 0
    pruned: int = 0
    notes: tuple[str, ...] = field(default=())

    @property
    def step_time_s(self) -> float | None:
        """Predicted step time of the plan in seconds; None without a plan."""
        return None if self.plan is None else self.plan.step_time_s

    @property
    def envelope(self) -> Envelope:
        """The result protocol's `Envelope` (kind "moe-hybrid", objective the step time)."""
        return Envelope("moe-hybrid", SCHEMA_VERSION, self.status, Objective("step_time", self.step_time_s),
                        self.lower_bound_s, self.runtime_s, self.notes)

    def to_dict(self) -> dict:
        """JSON-ready dict of the result, envelope first, with the plan."""
        return with_envelope(self.envelope, {
            "status": self.status.value, "step_time_s": self.step_time_s, "lower_bound_s": self.lower_bound_s,
            "runtime_s": self.runtime_s, "evaluated": self.evaluated, "pruned": self.pruned,
            "notes": list(self.notes), "plan": None if self.plan is None else self.plan.to_dict()})


def _cluster(cluster, devices):
    from solver_plan.hybrid.search import _cluster as resolve

    return resolve(cluster, devices)


def plan_moe(model, cluster, global_batch: int, *, devices: int | None = None, fix=None, routing=None,
             capacity="dropless", a2a_overlap: str = "none", memory_limit="device", precision=None,
             runtime=None, time_limit: float | None = DEFAULT_TIME_LIMIT_S) -> MoEResult:
    """Best expert-parallel plan of `model` (a MoE config.json spec or MoEModel) on `cluster` for
    `global_batch` sequences, priced under `routing` (uniform, zipf:S, histogram:...) with `capacity`
    ('dropless' or a factor; a pinned `fix` capacity wins) and `a2a_overlap` (none, shared-expert,
    full). `fix`: pins of dp, tp, cp, pp, ep, etp, micro_batch_size, virtual_stages, recompute,
    zero_stage (0/1/2/3), capacity."""
    start = time.perf_counter()
    deadline = time_budget(time_limit)
    cluster = _cluster(cluster, devices)
    ctx = make_context(model, cluster, global_batch, memory_limit, routing, precision, runtime, a2a_overlap)
    pins = check_fix(fix)
    capacities = (pins.pop("capacity"),) if "capacity" in pins else (parse_capacity(capacity),)
    if "ep" in pins and ctx.model.experts % pins["ep"]:
        raise InputError(f"ep ({pins['ep']}) must divide the experts ({ctx.model.experts})", "--fix ep")
    if "etp" in pins and ctx.model.expert_ffn % pins["etp"]:
        raise InputError(f"etp ({pins['etp']}) must divide the expert width ({ctx.model.expert_ffn})", "--fix etp")
    points, floors = [], []
    for index, point in enumerate(enumerate_points(ctx.model, cluster.num_devices, cluster.devices_per_node,
                                                   global_batch, pins, capacities)):
        if index % CHECK_EVERY == 0 and deadline.expired():
            return MoEResult(Status.TIME_LIMIT, None, None, time.perf_counter() - start,
                             notes=("time limit reached while enumerating the configurations",))
        points.append(point)
    points = [p for p in points if fsdp.allowed(ctx.runtime, p.zero_stage, p.pp)]  # ZeRO-3 with pp: FSDP2 only
    if not points:
        return MoEResult(Status.INFEASIBLE, None, None, time.perf_counter() - start,
                         notes=(f"no configuration of {cluster.num_devices} devices agrees with the pins {pins} and "
                                f"global batch {global_batch}",))
    limit = ctx.memory_limit
    fits = points
    if limit is not None:
        for index, point in enumerate(points):
            if index % CHECK_EVERY == 0 and deadline.expired():
                return MoEResult(Status.TIME_LIMIT, None, None, time.perf_counter() - start,
                                 notes=(f"time limit reached while bounding the memory of {len(points)} "
                                        "configurations",))
            floors.append(memory_floor(ctx, point))
        fits = [p for p, f in zip(points, floors) if f <= limit]
    ranked = sorted((time_bound(ctx, p), i, p) for i, p in enumerate(fits))
    best, evaluated, open_bound, timed_out = None, 0, None, False
    for position, (bound, _, point) in enumerate(ranked):
        if best is not None and bound >= best.step_time_s:
            break
        if deadline.expired():
            timed_out, open_bound = True, bound
            break
        plan = price(ctx, point, limit)
        evaluated += 1
        if plan is not None and (best is None or plan.step_time_s < best.step_time_s):
            best = plan
    runtime_s = time.perf_counter() - start
    pruned = len(points) - evaluated
    if best is None:
        status = Status.TIME_LIMIT if timed_out else Status.INFEASIBLE
        least = min(floors) if floors else None
        note = ("no configuration fits the memory limit" + (f"; the least memory floor is {least / 1e9:.2f} GB"
                                                             if least is not None else ""))
        return MoEResult(status, None, open_bound, runtime_s, evaluated, pruned, (note,))
    if timed_out:
        return MoEResult(Status.TIME_LIMIT, best, min(open_bound, best.step_time_s), runtime_s, evaluated, pruned,
                         ("time limit reached; bound: the least bound of the points left",))
    return MoEResult(Status.OPTIMAL, best, best.step_time_s, runtime_s, evaluated, pruned,
                     (f"{len(points)} configurations, {len(points) - len(fits)} over the memory floor, "
                      f"{evaluated} priced",))


def evaluate_moe(model, cluster, global_batch: int, point: Mapping, *, routing=None, a2a_overlap: str = "none",
                 memory_limit="device", precision=None, runtime=None) -> MoEPlan | None:
    """What-if: the plan of one pinned configuration (dp, tp, pp, ep, micro_batch_size and optionally
    cp, etp, virtual_stages, recompute, zero_stage, capacity), over the memory limit or not (its
    memory is in the plan); None when no cut of the layers into its stages exists."""
    pins = check_fix(point)
    missing = [k for k in ("dp", "tp", "pp", "ep", "micro_batch_size") if k not in pins]
    if missing:
        raise InputError(f"needs {', '.join(missing)}", "point")
    cp = pins.get("cp", 1)
    devices = pins["dp"] * pins["tp"] * cp * pins["pp"]
    cluster = _cluster(cluster, devices)
    ctx = make_context(model, cluster, global_batch, memory_limit, routing, precision, runtime, a2a_overlap)
    moe.check_folding(ctx.model, pins["tp"] * cp * pins["dp"], pins["ep"], pins.get("etp", 1))
    if pins.get("zero_stage", 1) == 2 and pins["pp"] > 1:
        raise InputError("ZeRO-2 with a pipeline (pp > 1) is not priced: each micro-batch would reduce-scatter its "
                         "gradients", "--fix zero_stage")
    if not fsdp.allowed(ctx.runtime, pins.get("zero_stage", 1), pins["pp"]):
        raise InputError(f"ZeRO-3 with a pipeline (pp > 1) needs an FSDP2 runtime (torchtitan); {ctx.runtime.name} "
                         "does not run it", "--fix zero_stage")
    if global_batch % (pins["dp"] * pins["micro_batch_size"]):
        raise InputError("dp x micro_batch_size must divide the global batch", "point")
    if ctx.model.seq % (2 * cp) and cp > 1:
        raise InputError(f"2 cp ({2 * cp}) must divide the sequence ({ctx.model.seq})", "--fix cp")
    p = MoEPoint(pins["dp"], pins["tp"], pins["pp"], pins["ep"], pins.get("etp", 1), pins["micro_batch_size"],
                 global_batch // (pins["dp"] * pins["micro_batch_size"]), pins.get("virtual_stages", 1),
                 pins.get("recompute", "none"), pins.get("zero_stage", 1), pins.get("capacity"), cp)
    return price(ctx, p, None)


def skew_robustness(model, cluster, global_batch: int, plan: MoEPlan, loads, *, a2a_overlap=None, precision=None,
                    runtime=None) -> list[tuple[str, float]]:
    """(routing, step time) of the given plan's configuration under other routings: how much a plan
    chosen for one distribution slows down under skew it was not given."""
    out = []
    point = {k: v for k, v in plan.point.to_dict().items() if k in FIX_KEYS}
    point["capacity"] = "dropless" if plan.point.capacity_factor is None else plan.point.capacity_factor
    for load in loads:
        priced = evaluate_moe(model, cluster, global_batch, point, routing=load,
                              a2a_overlap=a2a_overlap or plan.a2a_overlap, memory_limit=None,
                              precision=precision, runtime=runtime)
        out.append((priced.routing, priced.step_time_s))
    return out


def brute_force(ctx: Context, points) -> MoEPlan | None:
    """Every point priced (tests: the search's pruning loses nothing)."""
    best = None
    for p in points:
        plan = price(ctx, p, ctx.memory_limit)
        if plan is not None and (best is None or plan.step_time_s < best.step_time_s):
            best = plan
    return best
