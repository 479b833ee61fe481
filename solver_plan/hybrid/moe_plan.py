"""Expert-parallel hybrid plans of a mixture of experts: dp x cp x tp x pp for the attention, folded
into etp x ep x edp for the experts (hybrid/moe.py), searched jointly with the micro-batch, the
virtual stages, recomputation, the distributed optimizer and the capacity factor, under the given
routing.

    plan_moe(model, cluster, global_batch, fix={"ep": 8, "etp": 1}, routing="zipf:0.5",
             capacity="dropless", a2a_overlap="none", precision=None, runtime=None)

Points (moe_space.py) are priced in closed form (moe_price.py). Search: first the standard layout
(`moe_space.standard_pins`, Megatron-core's MoE recipes: tp 1, ep within a node, micro-batch 1,
ZeRO-1; at most STANDARD_PRICES points priced) as the incumbent; then every point agreeing with the
pins, in order of a valid lower bound of its step time (total stage work over p stages through the
pipeline formula), its memory floor computed when it is reached (over the limit: dropped) and the
rest priced, stopping at the first bound >= the incumbent: OPTIMAL over the space (of this cost
model) when it finishes. Every unit of work is charged a fixed estimate to the nominal budget
(hybrid/budget.py), which decides how far the search goes, the same on an idle or a loaded
machine; when it cannot pay for the next step: TIME_LIMIT with the best plan so far (the standard
layout at least) and the least open bound. The wall clock only stops the search (TIME_LIMIT; the
hybrid front door, answer.py, adds the note that it was cut short). ZeRO-3 / FSDP is searched with pp = 1, and with pp > 1 for FSDP2
runtimes (fsdp.allowed). Not searched: ZeRO-2 with a pipeline, per-stage recomputation, DualPipe's
bubble (its a2a overlap is "full"); context parallelism leaving fewer than MIN_TOKENS_PER_CP_RANK tokens per
rank unless pinned.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping

from solver_plan.cost.routing import parse_capacity
from solver_plan.deadline import DEFAULT_TIME_LIMIT_S, GRACE_S, Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.hybrid import fsdp, moe
from solver_plan.hybrid.budget import STANDARD_PRICES, Priced, affords, enumerate_within, map_within, price_in_order
from solver_plan.hybrid.moe_price import Context, MoEPlan, make_context, memory_floor, price, time_bound
from solver_plan.hybrid.moe_space import (FIX_KEYS, MoEPoint, check_dispatch, check_fix, enumerate_points,
                                          standard_pins)
from solver_plan.result import Envelope, Objective, Status, with_envelope

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
             runtime=None, time_limit: float | None = DEFAULT_TIME_LIMIT_S,
             deadline: Deadline | None = None) -> MoEResult:
    """Best expert-parallel plan of `model` (a MoE config.json spec or MoEModel) on `cluster` for
    `global_batch` sequences, priced under `routing` (uniform, zipf:S, histogram:...) with `capacity`
    ('dropless' or a factor; a pinned `fix` capacity wins) and `a2a_overlap` (none, shared-expert,
    full). `fix`: pins of dp, tp, cp, pp, ep, etp, micro_batch_size, virtual_stages, recompute,
    zero_stage (0/1/2/3), capacity, dispatcher (alltoall, the default; deepep, hybridep: moe.py).
    `deadline`: a caller's budget (a command's), else `time_limit`'s.
    The nominal budget decides how far the search goes (module docstring); the wall clock only stops it."""
    start = time.perf_counter()
    deadline = (deadline or time_budget(time_limit)).share(SEARCH_SHARE)  # the rest: robustness, output
    cluster = _cluster(cluster, devices)
    ctx = make_context(model, cluster, global_batch, memory_limit, routing, precision, runtime, a2a_overlap)
    pins = check_fix(fix)
    capacities = (pins.pop("capacity"),) if "capacity" in pins else (parse_capacity(capacity),)
    check_dispatch(pins.get("dispatcher", "alltoall"), capacities[0], "capacity")  # the capacity argument's
    if "ep" in pins and ctx.model.experts % pins["ep"]:
        raise InputError(f"ep ({pins['ep']}) must divide the experts ({ctx.model.experts})", "--fix ep")
    if "etp" in pins and ctx.model.expert_ffn % pins["etp"]:
        raise InputError(f"etp ({pins['etp']}) must divide the expert width ({ctx.model.expert_ffn})", "--fix etp")
    limit = ctx.memory_limit
    standard = _standard_incumbent(ctx, pins, capacities, deadline)
    first = standard.best

    def stopped(why: str) -> MoEResult:  # the budget or the clock: the incumbent stands
        return _stopped(standard, why, start)

    runnable = (lambda p: fsdp.allowed(ctx.runtime, p.zero_stage, p.pp))  # ZeRO-3 with pp: FSDP2 only
    points = enumerate_within(enumerate_points(ctx.model, cluster.num_devices, cluster.devices_per_node,
                                               global_batch, pins, capacities), deadline, ENUMERATE_S_PER_POINT,
                              runnable)
    if points is None:
        return stopped("time limit reached while enumerating the configurations")
    if not points:
        return MoEResult(Status.INFEASIBLE, None, None, time.perf_counter() - start,
                         notes=(f"no configuration of {cluster.num_devices} devices agrees with the pins {pins} and "
                                f"global batch {global_batch}",))
    rank_s = len(points) * BOUND_S_PER_POINT
    if not affords(deadline, rank_s):  # decided by size and budget
        return stopped(f"ranking {len(points)} configurations by their time bound takes about {rank_s:.1f} s, more "
                       "than the time budget left: no configuration searched beyond the standard layout (a longer "
                       "--time-limit searches them)")
    bounds = map_within(points, lambda p: time_bound(ctx, p), deadline)
    if bounds is None:
        return stopped(f"time limit reached while bounding the step time of {len(points)} configurations")
    deadline.spend(rank_s)
    floors: dict[int, float] = {}  # memory floors of the points reached, computed when reached
    evaluated = 0

    def priced(i: int) -> MoEPlan | None:
        nonlocal evaluated
        if limit is not None:
            deadline.spend(FLOOR_S_PER_POINT)
            floors[i] = memory_floor(ctx, points[i])
            if floors[i] > limit:
                return None
        deadline.spend(PRICE_S)
        evaluated += 1
        return price(ctx, points[i], limit)

    # in order of the time bound (ties by enumeration order): no point is priced that a search bounding
    # every point's memory first would not price (the same order; the standard incumbent prunes earlier)
    found = price_in_order(sorted((bound, i) for i, bound in enumerate(bounds)), priced, deadline, PRICE_S, first)
    best, open_bound = found.best, found.open_bound
    runtime_s = time.perf_counter() - start
    pruned = len(points) - evaluated
    over = sum(floor > limit for floor in floors.values()) if limit is not None else 0
    if open_bound is not None:  # stopped by the budget or the clock
        if best is None:
            return MoEResult(Status.TIME_LIMIT, None, open_bound, runtime_s, evaluated, pruned,
                             ("time limit reached before any configuration fitted",))
        return MoEResult(Status.TIME_LIMIT, best, min(open_bound, best.step_time_s), runtime_s, evaluated, pruned,
                         ("time limit reached; bound: the least bound of the points left",) + _standard_note(best, first))
    if best is None:  # every point reached: none fits
        least = min(floors.values()) if floors else None
        note = ("no configuration fits the memory limit" + (f"; the least memory floor is {least / 1e9:.2f} GB"
                                                             if least is not None else ""))
        return MoEResult(Status.INFEASIBLE, None, None, runtime_s, evaluated, pruned, (note,))
    return MoEResult(Status.OPTIMAL, best, best.step_time_s, runtime_s, evaluated, pruned,
                     (f"{len(points)} configurations, {len(floors)} of them bounded in memory ({over} over the "
                      f"memory floor), {evaluated} priced; the others' time bound exceeds the plan's step time",)
                     + _standard_note(best, first))


SEARCH_SHARE = 0.9  # of the time limit for the search; the rest prices the plan under other routings and prints
# Nominal seconds charged to the budget per unit of work (CPU time on the shared 2-core machine,
# DeepSeek-V3 on 2,048 H100s and Qwen3-235B-A22B on 256): enumerating a point and checking the
# runtime runs it 3.0 us; its time bound 33-39 us before moe_price memoised the layer costs' shared
# parts (e87a54a), 8-10 us since (87,849 DeepSeek-V3@2048 bounds in 0.73-0.85 s), charged at 15 us;
# its memory floor (up to 6 stage memories) 25-46 us; pricing it (the cut's bisection, its stages and
# schedule) ~10 ms.
ENUMERATE_S_PER_POINT = 4e-6
BOUND_S_PER_POINT = 1.5e-5
FLOOR_S_PER_POINT = 5e-5
PRICE_S = 0.01
STANDARD_NOTE = ("plan: the standard layout priced first (Megatron-core's MoE recipes: tp 1, ep within a node, "
                 "micro-batch 1, distributed optimizer, where the pins leave them free)")


def _standard_incumbent(ctx: Context, pins: dict, capacities: tuple, deadline: Deadline) -> Priced[MoEPlan]:
    """A first plan, cheaply and before the space is enumerated: the points of the standard layout
    (`moe_space.standard_pins`: tens at most) that fit by their memory floor, up to STANDARD_PRICES
    of them priced in order of their time bound (the budget stops it only once it has a plan, the
    wall clock only then and GRACE_S past the deadline: its 16 prices, ~0.16 s, are worth finishing
    late, since the first point's plan may be far from the layout's best). Charged to the nominal
    budget as the search's own work; its best is None when nothing fits."""
    cluster = ctx.cluster
    fixed = standard_pins(ctx.model, cluster.num_devices, cluster.devices_per_node, pins)
    points = [p for p in enumerate_points(ctx.model, cluster.num_devices, cluster.devices_per_node,
                                          ctx.global_batch, fixed, capacities)
              if fsdp.allowed(ctx.runtime, p.zero_stage, p.pp)]
    deadline.spend(len(points) * (ENUMERATE_S_PER_POINT + BOUND_S_PER_POINT + FLOOR_S_PER_POINT))
    limit = ctx.memory_limit
    fits = [p for p in points if limit is None or memory_floor(ctx, p) <= limit]
    ranked = sorted((time_bound(ctx, p), i) for i, p in enumerate(fits))

    def priced(i: int) -> MoEPlan | None:
        deadline.spend(PRICE_S)
        return price(ctx, fits[i], limit)

    return price_in_order(ranked[:STANDARD_PRICES], priced, deadline, PRICE_S, until_plan=True, grace_s=GRACE_S)


def _standard_note(best: MoEPlan, first: MoEPlan | None) -> tuple[str, ...]:
    return (STANDARD_NOTE + ", not beaten by the configurations searched",) if best is first else ()


def _stopped(standard: Priced[MoEPlan], why: str, start: float) -> MoEResult:
    """TIME_LIMIT before the space was searched: the standard layout's plan when one was priced, no
    bound (none holds for every plan before the points' time bounds are known)."""
    runtime_s = time.perf_counter() - start
    if standard.best is None:
        return MoEResult(Status.TIME_LIMIT, None, None, runtime_s, standard.priced, notes=(why,))
    return MoEResult(Status.TIME_LIMIT, standard.best, None, runtime_s, standard.priced, 0,
                     (why, STANDARD_NOTE + ", not searched beyond"))


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
    dispatcher = pins.get("dispatcher", "alltoall")  # with a capacity: refused by moe_space.check_fix
    p = MoEPoint(pins["dp"], pins["tp"], pins["pp"], pins["ep"], pins.get("etp", 1), pins["micro_batch_size"],
                 global_batch // (pins["dp"] * pins["micro_batch_size"]), pins.get("virtual_stages", 1),
                 pins.get("recompute", "none"), pins.get("zero_stage", 1), pins.get("capacity"), cp, dispatcher)
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
