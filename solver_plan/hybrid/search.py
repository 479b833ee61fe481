"""Front doors: `plan_hybrid` (search the space) and `evaluate` (price one pinned configuration).

Search: enumerate the outer space (space.py) agreeing with the pins; drop points whose memory floor
exceeds the limit; group the rest by (tp, micro-batch size), the key of the per-operator solve
(tying); solve a group's block only when its points' time bounds can still beat the incumbent; in
a group, price points in order of their bound and stop at the first bound >= incumbent. When every
point was priced or pruned by a valid bound, the incumbent is optimal over the space (given the
block profiles, each an optimal per-operator configuration): OPTIMAL with bound = step time. When
the deadline expires first: the best plan so far, TIME_LIMIT, and as bound the least bound of what
was left (a compute bound, model FLOPs / (devices x peak), for groups never solved).
"""
from __future__ import annotations

import heapq
import math
import time
from collections import defaultdict
from dataclasses import replace
from typing import Mapping

from solver_plan.cluster import Cluster
from solver_plan.deadline import DEFAULT_TIME_LIMIT_S, Deadline, time_budget
from solver_plan.errors import InputError
from solver_plan.hybrid.budget import STANDARD_PRICES, affords, enumerate_within, price_in_order
from solver_plan.hybrid.evaluate import Context, memory_floor, price, time_bound
from solver_plan.hybrid.floors import FLOOR_S_PER_POINT, MemoryFloors
from solver_plan.hybrid.memory import gradients_bytes, optimizer_bytes, precision_state, stage_weights_bytes
from solver_plan.hybrid.model import TransformerSpec, transformer_spec
from solver_plan.hybrid.offload import optimizer_offloaded
from solver_plan.hybrid.plan import HybridPlan, HybridResult
from solver_plan.hybrid.space import Parallelism, check_fix, enumerate_space, splits_whole_heads
from solver_plan.hybrid.stage_cost import BlockCoster
from solver_plan.result import Status

SEARCH_SHARE = 0.9  # of the time limit for the search; the rest for validation and output
MAX_MICRO_BATCH = 64  # micro-batch sizes searched (larger ones only add activation memory at this scale)


def _spec(model) -> TransformerSpec:
    return model if isinstance(model, TransformerSpec) else transformer_spec(model)


def _cluster(cluster, devices: int | None) -> Cluster:
    from solver_plan.cluster import resolve_cluster

    if isinstance(cluster, Cluster):
        return cluster if devices is None or devices == cluster.num_devices else cluster.first_devices(devices)
    return resolve_cluster(cluster, devices)


def _memory_limit(value, cluster: Cluster) -> float | None:
    if value == "device":  # less a planning margin (runtime.profiles.DEFAULT_MEMORY_MARGIN)
        from solver_plan.runtime.profiles import DEFAULT_MEMORY_MARGIN
        return cluster.device.memory * (1.0 - DEFAULT_MEMORY_MARGIN)
    if value is None or value == "none":
        return None
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise InputError(f"memory limit must be positive bytes, 'device' or 'none', got {value!r}", "--memory-limit")
    return float(value)


def resolve_hybrid_precision(precision, cluster: Cluster):
    """The `TrainingPrecision` a hybrid plan prices, resolved once with the cost core's rules
    (`cost.precision.resolve_precision`): fp32, tf32, bf16, fp16, fp8 (mixed), or auto/None = the
    device's default (mixed bf16 on A100/H100, mixed fp16 on V100, fp32 on K80/P100). A dtype the
    device has no units for is an InputError naming --precision."""
    from solver_plan.cost.precision import Precision, TrainingPrecision, resolve_precision

    if precision is not None and not isinstance(precision, (str, Precision, TrainingPrecision)):
        raise InputError(f"expected a precision name (fp32, tf32, bf16, fp16, fp8 or auto), got {precision!r}",
                         "--precision")
    resolved = resolve_precision(precision, cluster.device)
    if not cluster.device.supports(resolved.compute):
        raise InputError(f"{cluster.device.name} has no {resolved.compute.value} units; choose another precision "
                         f"(auto: {resolve_precision(None, cluster.device).name})", "--precision")
    return resolved


def _context(spec: TransformerSpec, cluster: Cluster, global_batch: int, limit, precision, runtime=None) -> Context:
    from solver_plan.runtime import resolve_runtime

    runtime = resolve_runtime(runtime)
    if precision.compute.value == "fp8" and not runtime.kernels.fp8_gemms:
        raise InputError(f"runtime {runtime.name} has no fp8 GEMMs; choose another precision or runtime", "--precision")
    from solver_plan.hybrid.memory import runtime_state
    return Context(spec, cluster, global_batch, limit, runtime_state(precision_state(precision), runtime),
                   precision.name, runtime)


# Largest global batch (sequences per step): 2**24 is 5,000x the largest published ones (Megatron's
# 3,072; PaLM's 2,048 x 2k tokens), and keeps the divisor enumeration and the cost core's products small.
MAX_GLOBAL_BATCH = 2**24


def check_global_batch(global_batch, where: str = "--batch") -> None:
    """Refuse a global batch that is not an integer from 1 to MAX_GLOBAL_BATCH (InputError at `where`)."""
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise InputError(f"must be a positive integer, got {global_batch!r}", where)
    if global_batch > MAX_GLOBAL_BATCH:
        raise InputError(f"must be at most {MAX_GLOBAL_BATCH}, got {global_batch}", where)


def _check_batch(global_batch) -> None:
    check_global_batch(global_batch, "--batch")


def compute_bound(ctx: Context, compute_scale: float = 1.0) -> float:
    """Model FLOPs per step over all devices at the matrix peak of the dtype that computes (no
    efficiency loss, no communication, no bubble), times min(1, compute_scale x the device's
    kernel_time_scale): a lower bound on every plan's step time, since every kernel of the cost core
    runs at most at that peak and is scaled by those factors. Without a precision in `ctx` the
    highest peak the device lists (valid for any dtype, loose for fp32: 16x on an A100)."""
    device = ctx.cluster.device
    peak = max([device.peak_flops] + [f for _, f in getattr(device, "matrix_flops", ()) or ()])
    if ctx.precision:
        dtype = ctx.precision.removeprefix("mixed-")  # TrainingPrecision.name: its compute dtype
        if device.supports(dtype):
            peak = device.peak(dtype, "matrix")
    scale = min(1.0, compute_scale * device.kernel_time_scale)
    return scale * ctx.spec.model_flops_per_step(ctx.global_batch) / (ctx.cluster.num_devices * peak)


def unrun_pins_note(runtime, pins: Mapping) -> str | None:
    """A note where pinned degrees or a pinned ZeRO stage are what `runtime` does not run
    (`RuntimeProfile.runs_layout`): priced all the same, as a what-if. None otherwise."""
    from solver_plan.runtime import resolve_runtime

    profile = resolve_runtime(runtime)
    asked = [f"{key}={pins[key]}" for key in ("tp", "pp", "cp") if key in pins
             and not profile.runs_layout({key: int(pins[key])}, None)]
    if "zero_stage" in pins and not profile.runs_layout({}, int(pins["zero_stage"])):
        asked.append(f"zero_stage={pins['zero_stage']}")
    if not asked:
        return None
    return (f"runtime {profile.name} does not run {', '.join(asked)} (it runs "
            f"{'/'.join(profile.dimensions) if profile.dimensions else 'data parallelism alone'}"
            f"{'' if profile.zero_stages is None else ', ZeRO ' + '/'.join(map(str, profile.zero_stages))}): "
            "priced all the same, as a what-if")


def plan_hybrid(model, cluster, global_batch: int, *, devices: int | None = None,
                time_limit: float | None = DEFAULT_TIME_LIMIT_S, memory_limit="device",
                fix: Mapping | None = None, planner: str = "milp", deadline: Deadline | None = None,
                validate: bool = True, compute_scale: float = 1.0, precision=None, runtime=None) -> HybridResult:
    """Best hybrid plan of `model` (zoo spec or TransformerSpec) on `cluster` (name, YAML path or
    Cluster; `devices` = its first N) for `global_batch` sequences per optimizer step (`_search`),
    with a note where `fix` pins what the runtime does not run (`unrun_pins_note`)."""
    result = _search(model, cluster, global_batch, devices=devices, time_limit=time_limit,
                     memory_limit=memory_limit, fix=fix, planner=planner, deadline=deadline, validate=validate,
                     compute_scale=compute_scale, precision=precision, runtime=runtime)
    note = unrun_pins_note(runtime, check_fix(fix or {}))
    return result if note is None else replace(result, notes=result.notes + (note,))


def _search(model, cluster, global_batch: int, *, devices: int | None = None,
            time_limit: float | None = DEFAULT_TIME_LIMIT_S, memory_limit="device",
            fix: Mapping | None = None, planner: str = "milp", deadline: Deadline | None = None,
            validate: bool = True, compute_scale: float = 1.0, precision=None, runtime=None) -> HybridResult:
    """Best hybrid plan of `model` (zoo spec or TransformerSpec) on `cluster` (name, YAML path or
    Cluster; `devices` = its first N) for `global_batch` sequences per optimizer step.
    `compute_scale` multiplies every kernel time of the cost core (1.0: its curves as they are; see
    docs/hybrid-accuracy.md for the value fitted on one measured layer). `precision`: the training
    precision (fp32, tf32, bf16, fp16, fp8; auto/None = the device's default, `resolve_hybrid_precision`):
    memory, bytes moved and the peak FLOP/s of the block solves follow it. `runtime`: the software
    stack's profile (name or `RuntimeProfile`; None = megatron-core, `solver_plan.runtime`)."""
    deadline = deadline or time_budget(time_limit)
    start = time.perf_counter()
    outer = deadline
    deadline = outer.share(SEARCH_SHARE)  # the rest validates, writes and prints
    spec = _spec(model)
    cluster = _cluster(cluster, devices)
    _check_batch(global_batch)
    pins = check_fix(fix or {})
    limit = _memory_limit(memory_limit, cluster)
    prec = resolve_hybrid_precision(precision, cluster)
    ctx = _context(spec, cluster, global_batch, limit, prec, runtime)
    pins = _cp_pins(spec, ctx.runtime, pins)
    pins, attentions = attention_choices(ctx.runtime, cluster, pins)
    from solver_plan.hybrid.zero_bubble import check_runtime
    check_runtime(ctx.runtime, pins.get("schedule", "1f1b"))  # zb-v: only where the runtime runs it
    from solver_plan.hybrid.offload import offered
    offload_modes = offered(cluster, ctx.runtime, pins)
    on_device = not any(optimizer_offloaded(m) for m in offload_modes)  # the optimizer state on the devices
    least = None if limit is None else state_floor(ctx, on_device)
    proof = None if least is None or limit is None or least <= limit else _state_reason(ctx, least, on_device)
    coster = BlockCoster(spec, cluster, planner, compute_scale, prec, ctx.runtime)
    first = None if proof is not None else _standard_incumbent(ctx, pins, offload_modes, coster, deadline)

    def stopped(why: str) -> HybridResult:  # the clock or the budget ended the search: the incumbent stands
        return _time_limit(ctx, first, compute_bound(ctx, compute_scale), start, why, validate)

    points = _points(spec, cluster, global_batch, pins, deadline, offload_modes, attentions)
    if points is None and proof is not None:  # proven all the same
        return _infeasible_by_state(proof, "the time limit was reached while enumerating the configurations", start)
    if points is None:  # the compute bound holds for every plan
        return stopped("time limit reached while enumerating the configurations")
    points = _runnable(ctx, points, pins)
    if not points:
        from solver_plan.hybrid.stages import layer_count_problem
        layer_note = layer_count_problem(spec.layers, pins)  # the likeliest reason first, naming the count
        return HybridResult(Status.INFEASIBLE, None, None, time.perf_counter() - start,
                            notes=((layer_note,) if layer_note else ()) + (
                                   f"no configuration of {cluster.num_devices} devices agrees with the pins "
                                   f"{pins or '{}'} and global batch {global_batch} (dp x cp x tp x pp must use every "
                                   "device, dp x micro-batch must divide the batch, tp must divide the heads and "
                                   "fit a node, 2 cp the sequence, ZeRO-2 only without pipelining, ZeRO-3 with it "
                                   "only for FSDP2 runtimes)",))
    bounds = None if limit is None else _state_bounds(ctx, points)
    if proof is not None:  # no point fits: the diagnosis bounds every point's memory
        return _diagnose_state_proof(ctx, points, bounds, coster, start, validate, deadline, proof)
    floors = MemoryFloors(ctx, points, bounds, deadline)
    groups: dict[tuple[int, int, str], list[int]] = defaultdict(list)
    for i, p in enumerate(points):
        if bounds is None or bounds[i] <= limit:
            groups[(p.tp, p.micro_batch_size, p.attention)].append(i)
    floor = compute_bound(ctx, compute_scale)
    best: HybridPlan | None = first
    evaluated, pruned = 0, len(points) - sum(map(len, groups.values()))
    open_bounds: list[float] = []
    # the incumbent's block profile counts towards the proof whether or not its group is visited
    ratios = [] if first is None else [coster.cached()[(first.parallelism.tp, first.parallelism.micro_batch_size,
                                                        first.parallelism.attention)].bound_ratio]
    # Larger tp and smaller micro-batches first: they tend to fit and give a good incumbent early.
    order = sorted(groups, key=lambda key: (-key[0], key[1]))
    timed_out = False
    for gi, key in enumerate(order):
        # the nominal budget decides how far the search goes (the same answer on a loaded machine);
        # the wall clock only stops it when the machine is slower than the estimates
        members = groups[key]
        if best is not None and floor >= best.step_time_s:
            pruned += len(members)
            continue
        solved = key in coster.cached()
        rank_s = len(members) * TIME_BOUND_S + (0.0 if solved else BLOCK_SOLVE_S)
        # the first block solve always runs (it carries the solver's imports); ranking is charged always
        affordable = affords(deadline, rank_s if gi else len(members) * TIME_BOUND_S)
        fitting = None if deadline.expired() or not affordable else floors.any_fits(members)
        if fitting is None:
            timed_out = True
            open_bounds += [floor] * (len(order) - gi)
            break
        if not fitting:  # no point of the group fits: its block is not solved
            pruned += len(members)
            continue
        profile = coster.profile(*key, deadline=deadline)
        deadline.spend(rank_s)
        ratios.append(profile.bound_ratio)
        ranked = sorted(((time_bound(ctx, points[i], profile), i) for i in members))
        pricer = _FloorFirst(ctx, profile, limit, deadline, floors)
        found = price_in_order(ranked, pricer, deadline, PRICE_S, best)
        best, evaluated = found.best, evaluated + pricer.priced
        if found.open_bound is not None:  # the rest of the group stays open
            timed_out = True
            open_bounds.append(found.open_bound)
            pruned += pricer.over
        else:
            pruned += len(ranked) - pricer.priced
    runtime = time.perf_counter() - start
    if best is None:
        if timed_out:
            return HybridResult(Status.TIME_LIMIT, None, min(open_bounds, default=floor), runtime, evaluated, pruned,
                                notes=("time limit reached before any configuration fitted",))
        every = floors.every()
        if every is None:
            return HybridResult(Status.TIME_LIMIT, None, floor, runtime, evaluated, pruned,
                                notes=("time limit reached while bounding the memory of the configurations",))
        return _infeasible(ctx, points, every, coster, start, validate, evaluated, pruned, deadline=deadline,
                           bounds=bounds)
    proven = all(r >= 1.0 for r in ratios)
    if timed_out:
        status, bound = Status.TIME_LIMIT, min([best.step_time_s] + open_bounds)
    elif proven:
        status, bound = Status.OPTIMAL, best.step_time_s
    else:
        status, bound = Status.FEASIBLE, floor
    notes = (f"{coster.solves} per-operator block solve(s) (tp, micro-batch, attention kernel) reused for all "
             f"{spec.layers} blocks", f"lower bound: {'optimum over the space' if status == Status.OPTIMAL else 'compute bound / open points'}")
    failure = "; ".join(dict.fromkeys(coster.solver_failures)) or None
    result = HybridResult(status, best, bound, runtime, evaluated, pruned, notes, solver_failure=failure)
    return _checked(result, ctx, validate)


def _runnable(ctx: Context, points: list[Parallelism], pins: Mapping) -> list[Parallelism]:
    """The points the runtime can run: ZeRO-3 with pp only on FSDP2 runtimes, zero-bubble schedules
    where the runtime runs them (or pinned), model-parallel dimensions and ZeRO stages the runtime has
    (`RuntimeProfile.runs_layout`; a pinned one stands: a what-if), offload where some stage's state
    fits the host memory."""
    from solver_plan.hybrid.evaluate import host_floor_fits
    from solver_plan.hybrid.fsdp import allowed
    from solver_plan.hybrid.zero_bubble import runs
    runtime = ctx.runtime
    restricted = runtime.dimensions is not None or runtime.zero_stages is not None  # else every layout runs
    return [p for p in points if allowed(runtime, p.zero_stage, p.pp)
            and (runs(runtime, p.schedule) or "schedule" in pins)
            and (not restricted or runtime.runs_layout(
                {key: getattr(p, key) for key in ("tp", "pp", "cp") if key not in pins},
                p.zero_stage if "zero_stage" not in pins else None))
            and host_floor_fits(ctx, p)]


def _time_limit(ctx: Context, best: HybridPlan | None, bound: float, start: float, why: str,
                validate: bool) -> HybridResult:
    """TIME_LIMIT before the space was searched: the standard layout's plan when one was priced
    (`_standard_incumbent`), with `bound` (the compute bound, true of every plan) for the gap."""
    if best is None:
        return HybridResult(Status.TIME_LIMIT, None, bound, time.perf_counter() - start, notes=(why,))
    notes = (why, "plan: the standard layout priced first (Megatron's: tp within a node, micro-batch 1, "
                  "sequence parallel, distributed optimizer), not searched beyond",
             "lower bound: compute bound (model FLOPs at the devices' peak)")
    return _checked(HybridResult(Status.TIME_LIMIT, best, min(bound, best.step_time_s), time.perf_counter() - start,
                                 1, 0, notes), ctx, validate)


STANDARD_SCHEDULES = ("1f1b", "interleaved")
STANDARD_RECOMPUTE = ("none", "selective", "full")


def standard_pins(ctx: Context, pins: Mapping, offloads: tuple[str, ...]) -> dict | None:
    """The pins of Megatron's standard layout (Narayanan et al. 2021) as the runtime runs it: the largest
    tensor-parallel degree within a node that the runtime runs (1 for a data-parallel-only stack),
    micro-batch 1, sequence parallelism, the distributed optimizer (ZeRO-1), or where the runtime has no
    ZeRO-1 its deepest sharding (FSDP's ZeRO-3: torchtitan, LLM Foundry), no context parallelism, hybrid
    sharding or offload; the user's pins override. Pipeline depth, schedule and recomputation are left to
    the search. None when no tensor-parallel degree is valid."""
    from solver_plan.hybrid.space import tp_degrees
    cluster, runtime = ctx.cluster, ctx.runtime
    tps = [t for t in tp_degrees(ctx.spec, cluster.devices_per_node, cluster.num_devices)
           if ("tp" not in pins or pins["tp"] == t) and ("tp" in pins or runtime.runs_layout({"tp": t}, None))]
    if not tps:
        return None
    tp = max(tps)
    stages = runtime.zero_stages
    zero = 1 if stages is None or 1 in stages else max(stages)
    standard = {"tp": tp, "micro_batch_size": 1, "sequence_parallel": tp > 1, "zero_stage": zero, "cp": 1,
                "dp_shard": 0, "offload": "none" if "none" in offloads else offloads[0]}
    return {**standard, **pins}


def _standard_incumbent(ctx: Context, pins: Mapping, offloads: tuple[str, ...], coster: BlockCoster,
                        deadline: Deadline) -> HybridPlan | None:
    """A first plan, cheaply and before the space is enumerated: the points of the standard layout
    (`standard_pins`: a few hundred at most) that fit by their memory floor, one block solve for
    their (tp, micro-batch), then up to STANDARD_PRICES of them priced in order of their time bound.
    The block profile is the one the search would solve (cached), so the plan is one of the space's
    and the search starts from it. Charged to the nominal budget like the search's own work; the
    wall clock stops it only once it has a plan. None when nothing fits or the budget does not cover
    the block solve."""
    from solver_plan.hybrid.space import enumerate_space
    fixed = standard_pins(ctx, pins, offloads)
    if fixed is None or not affords(deadline, BLOCK_SOLVE_S):
        return None
    offload = (fixed["offload"],)
    points = [p for p in enumerate_space(ctx.spec, ctx.cluster.num_devices, ctx.cluster.devices_per_node,
                                         ctx.global_batch, fixed, offload)
              if (p.schedule in STANDARD_SCHEDULES or "schedule" in pins)
              and (p.recompute in STANDARD_RECOMPUTE or "recompute" in pins)]
    points = _runnable(ctx, points, pins)
    deadline.spend(len(points) * (ENUMERATE_S_PER_POINT + FLOOR_S_PER_POINT))
    limit = ctx.memory_limit
    fits = [p for p in points if limit is None or memory_floor(ctx, p) <= limit]
    if not fits:
        return None
    # past the deadline too (a short solve, `stage_cost.BLOCK_SOLVE_FLOOR_S`, and milliseconds of
    # pricing): without this plan a short limit ends with none at all
    profile = coster.profile(fits[0].tp, fits[0].micro_batch_size, fits[0].attention, deadline=deadline)
    deadline.spend(BLOCK_SOLVE_S)
    ranked = sorted((time_bound(ctx, p, profile), i, p) for i, p in enumerate(fits))
    return price_in_order(((bound, par) for bound, _, par in ranked[:STANDARD_PRICES]),
                          _pricer(ctx, profile, limit, deadline), deadline, PRICE_S, until_plan=True).best


def _pricer(ctx: Context, profile, limit: float | None, deadline: Deadline):
    """`price` of a point with the group's block `profile`, charged to the nominal budget (`charged_price`)."""
    def priced(par: Parallelism) -> HybridPlan | None:
        return charged_price(ctx, par, profile, limit, deadline)
    return priced


def charged_price(ctx: Context, par: Parallelism, profile, limit: float | None, deadline: Deadline) -> HybridPlan | None:
    """`price` of a point, PRICE_S charged to the nominal budget and EXACT_SCHEDULE_S more for each
    exact zero-bubble schedule it solved (a zb-exact point, one per cut priced; exact_zb memoises
    them, so only new ones count). The memo lives as long as the process: a command (and each batch
    job, a forked worker) starts without it, while a second search in one Python process finds the
    first one's schedules solved and is charged less for them, so under a binding limit it may
    search further."""
    from solver_plan.hybrid.exact_zb import solves

    before = solves()
    plan = price(ctx, par, profile, limit)
    deadline.spend(PRICE_S + (solves() - before) * EXACT_SCHEDULE_S)
    return plan


class _FloorFirst:
    """The search's pricer of point i of `floors.points`: None without pricing where its memory floor
    exceeds the limit (counted in `over`), else `charged_price` (counted in `priced`)."""

    def __init__(self, ctx: Context, profile, limit: float | None, deadline: Deadline, floors: MemoryFloors):
        self.ctx, self.profile, self.limit, self.deadline, self.floors = ctx, profile, limit, deadline, floors
        self.priced = self.over = 0

    def __call__(self, i: int) -> HybridPlan | None:
        if not self.floors.fits(i):
            self.over += 1
            return None
        self.priced += 1
        return charged_price(self.ctx, self.floors.points[i], self.profile, self.limit, self.deadline)


# Nominal seconds the search loop is charged (shared 2-core machine): a block's per-operator solve
# (build and solve, 0.02-0.2 s by tp and planner, ~0.1 s on average; the first one, with the
# solver's imports, is always run) and a point's pricing (cut, stage choices, schedule: gpt3-175B on
# 1,024 A100s priced 1,604 points and solved 45 blocks in ~9 s in all at a quiet moment, ~3 ms a point).
BLOCK_SOLVE_S = 0.1
PRICE_S = 0.003
# A point's time bound (Llama 3 8B on 64 A100s, torchtitan: 25 us of CPU on the shared machine, 2,000
# points; 63 us before its sync and optimizer terms were memoised, evaluate._bound_terms), charged
# per point of a group before it is ranked, and one exact zero-bubble schedule
# (CP-SAT, 4 stages: ~30-40 ms; a zb-exact point prices one per cut, 63 ms a point measured there).
TIME_BOUND_S = 3e-5
EXACT_SCHEDULE_S = 0.04


def attention_choices(runtime, cluster: Cluster, pins: dict) -> tuple[dict, tuple[str, ...]]:
    """The pins with a pinned attention kernel checked and normalised ("" where it is the runtime's default),
    and the attention kernel families the search tries: the pinned one, else the runtime's default ("")
    and each other kernel it runs when configured to (`Kernels.attention_offered`) that the device has a
    measured efficiency for (`DeviceSpec.attention_efficiency`: an unmeasured kernel would be priced at the
    matrix curve, a guess the search must not prefer). InputError naming --fix attention for a kernel the
    runtime does not run or, not its default, the device has no measurement of."""
    from solver_plan.cost.compute import device_of

    device = device_of(cluster)
    measured = dict(device.attention_efficiency)
    default = runtime.kernels.attention_backend
    if "attention" not in pins:
        return pins, ("",) + tuple(k for k in runtime.kernels.attention_offered if k in measured)
    kernel = pins["attention"] or default  # "": the default (a plan's own parallelism, read back as pins)
    runtime.with_attention(kernel)  # InputError where the runtime does not run it
    if kernel != default and kernel not in measured:
        raise InputError(f"device {device.name} has no measured efficiency for attention kernel {kernel!r} "
                         f"(its attention_efficiency: {', '.join(measured) or 'none'})", "--fix attention")
    kernel = "" if kernel == default else kernel
    return {**pins, "attention": kernel}, (kernel,)


def _cp_pins(spec: TransformerSpec, runtime, pins: dict) -> dict:
    """The pins with cp = 1 added for a runtime that cannot run context parallelism (no fused
    attention); InputError for a pinned cp > 1 it cannot run or whose 2 cp pieces do not divide the
    sequence (context_parallel.py)."""
    from solver_plan.hybrid.context_parallel import supports

    cp = pins.get("cp", 1)
    if cp > 1 and not supports(runtime):
        raise InputError(f"runtime {runtime.name} has no fused attention, which context parallelism needs; "
                         "choose cp=1 or another runtime", "--fix cp")
    if cp > 1 and spec.seq % (2 * cp):
        raise InputError(f"the sequence ({spec.seq} tokens) does not split into 2 x cp = {2 * cp} equal pieces "
                         "(causal load balancing)", "--fix cp")
    return pins if supports(runtime) else {**pins, "cp": 1}


def unmeasured_attention_note(runtime, cluster: Cluster, kernel: str) -> str | None:
    """A note where the fused attention kernel a plan runs (`kernel`, "" the runtime's default) has no
    measured efficiency on the device: `cost.compute.attention_time` then prices it at the device's matrix
    curve, a guess the user should know of. None for a measured kernel or an unfused runtime (its
    attention is the graph's own GEMMs and passes)."""
    from solver_plan.cost.compute import device_of

    kernel = kernel or runtime.kernels.attention_backend
    if not runtime.kernels.flash_attention or not kernel:
        return None
    device = device_of(cluster)
    measured = dict(device.attention_efficiency)
    if kernel in measured:
        return None
    return (f"device {device.name} has no measured efficiency for the {kernel} attention kernel that {runtime.name} "
            f"runs: it is priced at the device's matrix efficiency curve, a guess (measured there: "
            f"{', '.join(measured) or 'no attention kernel'}; scripts/measure_device.py measures them)")


def _checked(result: HybridResult, ctx: Context, validate: bool) -> HybridResult:
    if result.plan is not None:
        note = unmeasured_attention_note(ctx.runtime, ctx.cluster, result.plan.parallelism.attention)
        result = result if note is None else replace(result, notes=result.notes + (note,))
    if not validate or result.plan is None:
        return result

    from solver_plan.hybrid.validate import validate_plan

    problems = validate_plan(result.plan, ctx.cluster, enforce_memory=result.status != Status.INFEASIBLE)
    if problems:
        return replace(result, status=Status.ERROR, notes=result.notes + tuple(f"validator: {p}" for p in problems))
    return replace(result, notes=result.notes + ("validator: step time and memory re-derived, agree",))


# Enumerating a point and checking the runtime runs it (`_runnable`): gpt3-175B on 64 A100s, 227,370
# points, 5.5 us + 5.3 us each (loaded 2-core machine).
ENUMERATE_S_PER_POINT = 1.1e-5


def _points(spec, cluster: Cluster, global_batch: int, pins: dict, deadline: Deadline,
            offloads: tuple[str, ...] = ("none",), attentions: tuple[str, ...] = ("",)) -> list[Parallelism] | None:
    """The space's points (micro-batches above MAX_MICRO_BATCH only when pinned; the offload modes
    `offloads`, the attention kernels `attentions`), ENUMERATE_S_PER_POINT each charged to the nominal budget; None when that budget is
    spent (a work limit: the same on a loaded machine) or the wall clock passes first (a batch
    with many divisors on many devices has 10^5 points and more)."""
    return enumerate_within(enumerate_space(spec, cluster.num_devices, cluster.devices_per_node, global_batch, pins,
                                            offloads, attentions), deadline, ENUMERATE_S_PER_POINT,
                            lambda p: p.micro_batch_size <= MAX_MICRO_BATCH or "micro_batch_size" in pins)


def _floors(ctx: Context, points: list[Parallelism], deadline: Deadline,
            bounds: list[float] | None = None) -> list[float] | None:
    """`memory_floor` of every point, or, where it is above the memory limit already, the point's
    `state_bound` (a lower bound of its floor, ~50x cheaper: the point is dropped either way, and the
    diagnosis needs only lower bounds of each point's least need to stop exactly), each floor charged
    (floors.MemoryFloors); None when the wall clock passes first."""
    bounds = bounds if bounds is not None else _state_bounds(ctx, points)
    return MemoryFloors(ctx, points, bounds, deadline).every()


def _diagnose_state_proof(ctx: Context, points: list[Parallelism], bounds: list[float], coster: BlockCoster,
                          start: float, validate: bool, deadline: Deadline, proof: str) -> HybridResult:
    """INFEASIBLE, proven by `state_floor` (`proof`) before any point is bounded, with the least memory
    a configuration needs (`_infeasible`) when bounding every point's memory fits DIAGNOSIS_SHARE of
    the budget left and the wall clock lets it finish; else the proof alone, saying why."""
    floor_s = _floors_seconds(bounds, ctx.memory_limit or 0.0)  # an estimate: decided by size
    if not _diagnosis_affordable(floor_s, deadline):
        return _infeasible_by_state(proof, f"bounding the memory of {len(points)} configurations takes about "
                                           f"{floor_s:.1f} s, over {DIAGNOSIS_SHARE:.0%} of the time budget left",
                                    start)
    floors = _floors(ctx, points, deadline, bounds)
    if floors is None:
        return _infeasible_by_state(proof, f"the time limit was reached while bounding the memory of {len(points)} "
                                           "configurations", start)
    return _infeasible(ctx, points, floors, coster, start, validate, deadline=deadline, proof=proof, bounds=bounds)


def state_bound(ctx: Context, par: Parallelism) -> float:
    """A lower bound on `memory_floor(ctx, par)` from the model state alone: every stage the floor
    looks at holds at least ceil(L / p) blocks, so at least k x block parameters / tp, whose
    weights, optimizer state and gradients (unless the runtime frees them at one micro-batch,
    `memory.gradients_at_peak`) the point shards as `memory_of` does (`memory.stage_weights_bytes`,
    `optimizer_bytes` unless offloaded, `gradients_bytes`); activations, buffers and the reserve only add."""
    k = -(-ctx.spec.layers // par.pp)
    params = k * ctx.spec.block_params / par.tp
    zero, state = par.state_zero, ctx.state
    freed = par.micro_batches == 1 and ctx.runtime.gradients_freed
    offloaded = optimizer_offloaded(par.offload)  # the optimizer state on the host (hybrid/offload.py)
    weights = stage_weights_bytes(ctx.spec, params, k, par.tp, par.shard, zero, zero != par.zero_stage, state,
                                  ctx.runtime)
    return (weights
            + (0.0 if offloaded else optimizer_bytes(params, par.shard, zero, state))
            + (0.0 if freed else gradients_bytes(params, par.shard, zero, state)))


def _state_bounds(ctx: Context, points: list[Parallelism]) -> list[float]:
    return [state_bound(ctx, p) for p in points]


STATE_BOUND_S = 3e-6  # a point's `state_bound` (1.5 us measured, loaded)


def _floors_seconds(bounds: list[float], limit: float) -> float:
    """Estimated seconds of `_floors`: an exact floor (FLOOR_S_PER_POINT) for the points whose
    state bound fits the limit, the bound alone for the others."""
    return sum(STATE_BOUND_S + (FLOOR_S_PER_POINT if bound <= limit else 0.0) for bound in bounds)


def state_floor(ctx: Context, optimizer_on_device: bool = True) -> float:
    """A lower bound on the busiest device's memory under every configuration (pigeonhole): every
    parameter's working weights, its optimizer state (master copy and moments) unless the space
    offloads it to the host (`optimizer_on_device` False: hybrid/offload.py), and its gradients
    unless the runtime frees them between steps (`gradients_freed`: at one micro-batch a stage's
    peak may come before they exist, `memory.gradients_at_peak`), are held by at least one device
    (ZeRO and tensor, pipeline and context parallelism divide them, never drop them), so some
    device of the N holds at least P x (w [+ o] [+ g]) / N bytes, P = the model's parameters
    (ParameterState bytes, cost/model_state.py). Costs nothing, so a limit below it is refused
    before any configuration is enumerated or bounded."""
    state = ctx.state.model
    per_parameter = (state.weights + (state.optimizer if optimizer_on_device else 0.0)
                     + (0.0 if ctx.runtime.gradients_freed else state.gradients))
    return ctx.spec.total_params * per_parameter / ctx.cluster.num_devices


def _state_reason(ctx: Context, least: float, optimizer_on_device: bool) -> str:
    """Why no configuration fits, by `state_floor` (the terms it counted named)."""
    terms = ["weights"] + ([] if ctx.runtime.gradients_freed else ["gradients"]) + (
        ["optimizer state"] if optimizer_on_device else [])
    named = terms[0] if len(terms) == 1 else ", ".join(terms[:-1]) + " and " + terms[-1]
    offloaded = "" if optimizer_on_device else " (the optimizer state offloaded to the host)"
    return (f"no configuration fits {(ctx.memory_limit or 0.0) / 1e9:.2f} GB per device: the {named} of "
            f"{ctx.spec.total_params / 1e9:,.1f} B parameters spread over all {ctx.cluster.num_devices} devices "
            f"already take {least / 1e9:.2f} GB on some device{offloaded}")


# Work estimate of the INFEASIBLE diagnosis (shared 2-core machine, megatron-1T:seq=1 on 64 A100s):
# a point's least memory (bisection on the limit) ~10 ms; its memory floor: floors.FLOOR_S_PER_POINT.
LEAST_MEMORY_S_PER_POINT = 1e-2
DIAGNOSIS_SHARE = 0.5  # of the nominal budget left, for bounding every point's memory before the diagnosis


def _diagnosis_affordable(floor_s: float, deadline: Deadline) -> bool:
    """Whether bounding every point's memory (the diagnosis's ranking; `floor_s`, its estimate)
    fits DIAGNOSIS_SHARE of the nominal budget left: decided by sizes and the budget, not the clock."""
    budget = deadline.nominal_left()
    return budget is None or floor_s <= DIAGNOSIS_SHARE * budget


def _diagnosis_points(deadline: Deadline | None) -> int | None:
    """How many points the diagnosis may search for their least memory within the nominal budget
    left (at least one; None: unlimited)."""
    budget = None if deadline is None else deadline.nominal_left()
    return None if budget is None else max(1, int(budget / LEAST_MEMORY_S_PER_POINT))


def _infeasible_by_state(proof: str, why: str, start: float) -> HybridResult:
    """INFEASIBLE proven by `state_floor` alone (`proof`, its `_state_reason`), without the least
    memory a configuration needs: `why` it was not searched (the budget, or the clock stopping the
    enumeration or the floors)."""
    return HybridResult(Status.INFEASIBLE, None, None, time.perf_counter() - start,
                        notes=(proof, f"the least memory a configuration needs was not searched: {why}"))


MAX_DOUBLINGS = 64  # 2**64 x the floor: a point that fits in no memory at all needs infinitely much


def _least_memory(ctx: Context, par: Parallelism, floor: float, deadline: Deadline | None = None) -> float:
    """The smallest per-device memory some cut of `par` fits in (bisection on the limit between the
    point's floor and what its time-optimal cut needs; relative precision 1e-9, or what was reached
    when `deadline` passes). math.inf for a point no memory fits (a stage with no block)."""
    from solver_plan.hybrid import interop
    from solver_plan.hybrid.evaluate import memory_of
    from solver_plan.hybrid.stages import least_layers

    L, least = ctx.spec.layers, least_layers(par.schedule, par.virtual_stages)
    # what evaluate.stage_caps does, with each stage's memory at k blocks computed once per call
    # instead of at every bisection step (the limit changes, the memory does not)
    caps_of = interop.monotone_caps if par.schedule == "interleaved" else interop.memory_caps
    known: dict[tuple[int, int], float] = {}

    def memory(stage: int, blocks: int) -> float:
        if (stage, blocks) not in known:
            known[stage, blocks] = memory_of(ctx, par, stage, blocks).total
        return known[stage, blocks]

    def fits(limit: float) -> bool:
        caps = caps_of(L, par.pp, memory, limit)
        return min(caps) >= least and sum(caps) >= L

    lo, hi = floor, max(floor, 1.0)
    for _ in range(MAX_DOUBLINGS):
        if fits(hi):
            break
        lo, hi = hi, hi * 2
    else:
        return math.inf
    while hi - lo > 1e-9 * hi and not (deadline is not None and deadline.expired()):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def _infeasible(ctx: Context, points, floors: list[float] | None, coster: BlockCoster, start: float,
                validate: bool, evaluated: int = 0, pruned: int = 0, *,
                deadline: Deadline | None = None, proof: str | None = None,
                bounds: list[float] | None = None) -> HybridResult:
    """No point fits: the point needing the least memory per device (exactly: points are visited in
    order of their memory floor until the floor exceeds the least need found), priced at that memory.
    At most `_diagnosis_points(deadline)` points are visited (the nominal budget decides); when
    that work limit or the wall clock (the safety net) stops it first, the least need among the
    points visited (said in a note, with `proof`, the `state_floor` reason, when that proves
    infeasibility on its own). `bounds`: each point's `state_bound`, as `_floors` used them
    (computed here when not given)."""
    best_par, best_need = None, math.inf
    floors = floors if floors is not None else [memory_floor(ctx, p) for p in points]
    # (floor, index, exact): `_floors` kept only a point's state bound where that exceeds the limit;
    # such a point gets its exact floor when it reaches the top, so points are visited in the order
    # of their exact floors (the bound is never above it) while only those reached are computed
    limit = ctx.memory_limit
    bounds = bounds if bounds is not None or limit is None else _state_bounds(ctx, points)
    heap = [(floor, i, limit is None or bounds[i] <= limit) for i, floor in enumerate(floors)]
    heapq.heapify(heap)
    visited, work, most = 0, 0.0, _diagnosis_points(deadline)
    while heap:
        floor, i, exact = heap[0]
        if floor >= best_need or (most is not None and work >= most) or (
                deadline is not None and deadline.expired()):
            break
        heapq.heappop(heap)
        if not exact:
            heapq.heappush(heap, (memory_floor(ctx, points[i]), i, True))
            work += FLOOR_S_PER_POINT / LEAST_MEMORY_S_PER_POINT
            continue
        need = _least_memory(ctx, points[i], floor, deadline)
        visited += 1
        work += 1
        if need < best_need:
            best_par, best_need = points[i], need
    cut_short = bool(heap) and heap[0][0] < best_need
    proven = proof is not None
    reason = (proof,) if proof is not None else ()
    if best_par is None:
        why = "time limit reached before" if cut_short else "no cut of the layers fits any memory in"
        return HybridResult(Status.TIME_LIMIT if cut_short and not proven else Status.INFEASIBLE, None, None,
                            time.perf_counter() - start, evaluated, pruned,
                            (f"no configuration fits {ctx.memory_limit / 1e9:.2f} GB per device; {why} "
                             "the least memory any needs was found",) + reason)
    profile = coster.profile(best_par.tp, best_par.micro_batch_size, best_par.attention, deadline=deadline)
    plan = price(ctx, best_par, profile, best_need * (1 + 1e-9)) or price(ctx, best_par, profile, None)
    limit = ctx.memory_limit
    if plan is None:  # offloaded: the nodes' host memory holds no cut's state (evaluate._host_fits)
        return HybridResult(Status.INFEASIBLE, None, None, time.perf_counter() - start, evaluated, pruned,
                            (f"no configuration fits {limit / 1e9:.2f} GB per device; the one needing the least "
                             "device memory offloads more optimizer state than the nodes' host memory holds",))
    note = (f"no configuration fits {limit / 1e9:.2f} GB per device; the least any needs is "
            f"{plan.memory_per_device_bytes / 1e9:.2f} GB (this plan)")
    if cut_short:
        note = (f"no configuration fits {limit / 1e9:.2f} GB per device; the least need found within the time "
                f"limit ({visited} of {len(points)} configurations examined, in order of their memory floor) is "
                f"{plan.memory_per_device_bytes / 1e9:.2f} GB (this plan)")
    result = HybridResult(Status.INFEASIBLE, plan, None, time.perf_counter() - start, evaluated, pruned,
                          (note,) + reason,
                          needed_memory_bytes=None if cut_short else plan.memory_per_device_bytes)
    return _checked(result, ctx, validate)


WHAT_IF_KEYS = ("dp", "tp", "pp", "micro_batch_size")  # what a what-if must be given (the rest has defaults)


def what_if(model, cluster, global_batch: int, *, devices: int | None = None, time_limit: float | None = None,
            memory_limit="device", fix: Mapping | None = None, deadline: Deadline | None = None, precision=None,
            planner: str = "milp", compute_scale: float = 1.0, runtime=None, validate: bool = True) -> HybridResult:
    """`evaluate` as a planner of kind "hybrid" (`solver-plan hybrid --what-if`, job planner `what-if`): the
    configuration `fix` pins, priced as the runtime runs it (its own layer split where it has one,
    `RuntimeProfile.default_stage_split`), not searched. `fix` gives dp, tp and pp and the micro-batch size at
    least (InputError naming --fix for the rest); `devices`, when given, must be the dp x cp x tp x pp it
    uses. One pricing: the time limit is not needed."""
    pins = check_fix(fix or {})
    missing = [key for key in WHAT_IF_KEYS if key not in pins]
    if missing:
        raise InputError(f"a what-if prices one given configuration: pin {', '.join(missing)} too (it takes "
                         f"{', '.join(WHAT_IF_KEYS)} and any of the other keys)", "--fix")
    used = pins["dp"] * pins.get("cp", 1) * pins["tp"] * pins["pp"]
    if devices is not None and devices != used:
        raise InputError(f"the pinned configuration uses dp x cp x tp x pp = {used} devices, not {devices}",
                         "--devices")
    return evaluate(model, cluster, global_batch, pins, memory_limit=memory_limit, planner=planner, validate=validate,
                    compute_scale=compute_scale, precision=precision, runtime=runtime)


def evaluate(model, cluster, global_batch: int, parallelism, *, memory_limit="device", planner: str = "milp",
             validate: bool = True, compute_scale: float = 1.0, precision=None, runtime=None) -> HybridResult:
    """What-if: the step time and memory of one fully given configuration (a Parallelism, or a dict
    with dp, tp, pp, micro_batch_size and optionally virtual_stages, recompute, zero_stage,
    sequence_parallel, schedule, cp, dp_shard, offload, attention) in `precision` (as `plan_hybrid`).
    tp must divide the heads, the key/value heads and the MLP width (InputError naming --fix tp). The cluster is restricted to
    dp x cp x tp x pp devices. Over the memory limit: INFEASIBLE with the plan and the memory it needs.
    The layers per stage are the runtime's own split where it has one (`RuntimeProfile.default_stage_split`:
    what the runtime's version the profile names runs given these settings alone), else the best cut."""
    start = time.perf_counter()
    spec = _spec(model)
    _check_batch(global_batch)
    if not isinstance(parallelism, Parallelism):
        values = check_fix(parallelism)
        missing = [k for k in ("dp", "tp", "pp", "micro_batch_size") if k not in values]
        if missing:
            raise InputError(f"evaluate needs {', '.join(missing)}", "parallelism")
        if global_batch % (values["dp"] * values["micro_batch_size"]):
            raise InputError(f"dp x micro_batch_size = {values['dp'] * values['micro_batch_size']} does not "
                             f"divide the global batch {global_batch}", "parallelism")
        v = values.get("virtual_stages", 2 if values.get("schedule") == "zb-v" else 1)
        parallelism = Parallelism(values["dp"], values["tp"], values["pp"], values["micro_batch_size"],
                                  global_batch // (values["dp"] * values["micro_batch_size"]), v,
                                  values.get("recompute", "none"), values.get("zero_stage", 0),
                                  values.get("sequence_parallel", False),
                                  values.get("schedule", "interleaved" if v > 1 else "1f1b"), values.get("cp", 1),
                                  values.get("dp_shard", 0), values.get("offload", "none"),
                                  values.get("attention", ""))
    if not splits_whole_heads(spec, parallelism.tp):
        kv = spec.kv_heads or spec.heads
        raise InputError(f"tp {parallelism.tp} must divide the {spec.heads} heads, the {kv} key/value heads and the "
                         f"MLP width {spec.ffn} (each rank holds whole heads and an equal MLP slice)", "--fix tp")
    cluster = _cluster(cluster, parallelism.devices)
    limit = _memory_limit(memory_limit, cluster)
    prec = resolve_hybrid_precision(precision, cluster)
    ctx = _context(spec, cluster, global_batch, limit, prec, runtime)
    if parallelism.attention:
        kernel = attention_choices(ctx.runtime, cluster, {"attention": parallelism.attention})[0]["attention"]
        parallelism = replace(parallelism, attention=kernel)
    _cp_pins(spec, ctx.runtime, {"cp": parallelism.cp})
    from solver_plan.hybrid.zero_bubble import check_runtime
    check_runtime(ctx.runtime, parallelism.schedule)
    from solver_plan.hybrid.offload import offered
    offered(cluster, ctx.runtime, {"offload": parallelism.offload})  # InputError where it cannot run
    from solver_plan.hybrid.fsdp import allowed
    if not allowed(ctx.runtime, parallelism.zero_stage, parallelism.pp):
        raise InputError(f"ZeRO-{parallelism.zero_stage} with pp > 1: runtime {ctx.runtime.name} pipelines only "
                         "ZeRO-0/1 (FSDP's ZeRO-3 with pp > 1 needs an FSDP2 runtime: torchtitan)", "--fix zero_stage")
    profile = BlockCoster(spec, cluster, planner, compute_scale, prec, ctx.runtime).profile(
        parallelism.tp, parallelism.micro_batch_size, parallelism.attention)
    # the layers each stage runs where the runtime splits them itself (no split is pinned): its default
    from solver_plan.hybrid.stages import default_split
    split = default_split(ctx.runtime.default_stage_split, spec.layers, parallelism.pp, parallelism.virtual_stages,
                          parallelism.schedule)
    plan = price(ctx, parallelism, profile, limit, layers=split)
    if plan is not None and split is not None and limit is not None and plan.memory_per_device_bytes > limit:
        plan = None  # a given cut is priced whatever its memory: over the limit it is infeasible, as a searched one
    status = Status.FEASIBLE
    notes = ["what-if evaluation of a given configuration"]
    unrun = unrun_pins_note(ctx.runtime, {"tp": parallelism.tp, "pp": parallelism.pp, "cp": parallelism.cp,
                                          "zero_stage": parallelism.zero_stage})
    if unrun is not None:
        notes.append(unrun)
    if plan is None:
        plan = price(ctx, parallelism, profile, None, layers=split)
        if plan is None:
            from solver_plan.hybrid.stages import layer_count_problem
            why = layer_count_problem(spec.layers, {"pp": parallelism.pp, "virtual_stages": parallelism.virtual_stages})
            host = (" or the nodes' host memory cannot hold the offloaded state" if parallelism.offload != "none"
                    else "")
            if parallelism.offload in ("activations", "both"):
                host += (" (activation offload is priced only where the stage does not fit without it: "
                         "under this memory limit it needs none, or even all but one block offloaded do not fit)")
            return HybridResult(Status.INFEASIBLE, None, None, time.perf_counter() - start,
                                notes=(why or f"no cut of the layers into these stages exists{host}",))
        status = Status.INFEASIBLE
        notes.append(f"needs {plan.memory_per_device_bytes / 1e9:.2f} GB per device, over the limit")
    result = HybridResult(status, plan, None, time.perf_counter() - start, 1, 0, tuple(notes),
                          needed_memory_bytes=plan.memory_per_device_bytes if status == Status.INFEASIBLE else None)
    return _checked(result, ctx, validate)
