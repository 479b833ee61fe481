"""The project's exact periodic zero-bubble schedule inside hybrid plans (schedule "zb-exact").

For a small pipeline (`MAX_STAGES` stages or fewer: a deterministic size rule; the CP-SAT model
grows with the stages, not with the micro-batches) the pipeline term is priced by the pipeline
package's exact periodic scheduler with each backward split into its input-gradient pass B and its
weight-gradient pass W (`pipeline.api.schedule_allocation(..., "exact-zb")`, its front door;
docs/pipeline-zero-bubble.md): the least period T under the device memory limit, the pattern
validated by the pipeline validator.

The chain given to it has one layer per stage, each stage on its own processor:
- F_i = the stage's forward (blocks, end layers) + half its transfers; B_i + W_i = the rest of its
  time per micro-batch (recomputation, input-gradient and weight-gradient passes, the other half of
  its transfers); the scheduler splits the backward with one weight share w for all stages, so w is
  the least W_i / (B_i + W_i) of the stages: a stage with more weight-gradient work runs the excess
  with its B (always allowed: a runtime may compute some weight gradients eagerly), so the pattern
  can run as priced;
- memory: the stage's bytes with one micro-batch in flight less one micro-batch's (`A_i`, what each
  further micro-batch in flight adds, hybrid/memory.py with an explicit in-flight count) as the
  static part, A_i per batch in flight, the transfers free (they are in the stage times), and M the
  device memory limit (without one: room for 2p micro-batches on every stage, more than any
  zero-bubble schedule holds). The scheduler counts a batch's bytes from F_i's start to W_i's end.

The step of m micro-batches follows the pattern: every operation of micro-batch j at its periodic
time, then each one moved as early as its dependencies and the previous operation on its stage allow,
in the pattern's order on that stage (`replay_s`). That keeps each stage's sequence of F starts and W
ends, so its in-flight micro-batches never exceed the pattern's peak (`in_flight`, at most m), and it
ends no later than the periodic times, (m - 1) T + the pattern's span. The plan carries the pattern
(`ExactSchedule.to_dict`), which hybrid/validate.py re-checks from its definitions.

Runtimes: torch.distributed.pipelining's _PipelineScheduleRuntime runs a schedule given action by
action (torchtitan `parallelism.pipeline_parallel_schedule_csv`: F, I (input gradient) and W actions
per rank), the only runtime here that runs an arbitrary pattern; the pattern unrolled for m
micro-batches is that table (the torchtitan export writes it, `export/schedule_csv.py`). Other runtimes cannot run it: a pin is
refused there (zero_bubble.check_runtime).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

MAX_STAGES = 4  # zb-exact is offered (and accepted) for pp <= this
TIME_LIMIT_S = 5.0  # nominal seconds per schedule, turned into CP-SAT work units by the pipeline package
ROOM_FACTOR = 2  # without a memory limit: room for 2p micro-batches a stage


@dataclass(frozen=True)
class ExactSchedule:
    """The exact periodic zero-bubble pattern of a plan's stages: period, the pattern's operations
    (name, kind F/B/W, stage, start in [0, T), duration, shift: micro-batch k - shift in period k),
    the weight share the backward was split with, the peak micro-batches each stage holds, and the
    scheduler's status (OPTIMAL: the least period at the tick resolution)."""
    period_s: float
    weight_share: float
    in_flight: tuple[int, ...]
    operations: tuple[tuple[str, str, int, float, float, int], ...]
    status: str

    def pipeline_s(self, micro_batches: int) -> float:
        """The step's pipeline term for m micro-batches (`replay_s`)."""
        return replay_s(self.operations, self.period_s, len(self.in_flight), micro_batches)

    def to_dict(self) -> dict:
        """JSON form (plan key `exact_schedule`)."""
        return {"period_s": self.period_s, "weight_share": self.weight_share, "in_flight": list(self.in_flight),
                "scheduler_status": self.status,
                "operations": [{"name": n, "kind": k, "stage": s, "start_s": t, "duration_s": d, "shift": h}
                               for n, k, s, t, d, h in self.operations]}


def dependencies(pp: int) -> list[tuple[str, str]]:
    """Same-micro-batch order of a chain of pp stages: F_i before F_{i+1}, F_{p-1} before B_{p-1},
    B_{i+1} before B_i, B_i before W_i."""
    deps = [(f"F{i}", f"F{i + 1}") for i in range(pp - 1)] + [(f"F{pp - 1}", f"B{pp - 1}")]
    deps += [(f"B{i + 1}", f"B{i}") for i in range(pp - 1)] + [(f"B{i}", f"W{i}") for i in range(pp)]
    return deps


def replay_s(operations, period: float, pp: int, m: int) -> float:
    """Makespan of m micro-batches run in the pattern's order on each stage, each operation as early
    as its same-micro-batch predecessors and the stage's previous operation allow (module text)."""
    rows = [(h * period + t, name, stage, d) for name, _, stage, t, d, h in operations]
    instances = sorted((j * period + at, name, stage, d, j) for at, name, stage, d in rows for j in range(m))
    before: dict[str, list[str]] = {}
    for a, z in dependencies(pp):
        before.setdefault(z, []).append(a)
    end: dict[tuple[str, int], float] = {}
    free = [0.0] * pp
    for _, name, stage, d, j in instances:  # the periodic times respect every dependency: a valid order
        start = max([free[stage]] + [end[a, j] for a in before.get(name, ())])
        end[name, j] = free[stage] = start + d
    return max(end.values())


def stage_passes(stage) -> tuple[float, float, float]:
    """(F, B, W) of a StagePlan per micro-batch (module text): F = forward + half the transfers,
    W = the weight-gradient part, B = the rest."""
    forward = stage.forward_s + stage.p2p_s / 2.0
    weight = stage.weight_grad_s
    return forward, stage.time_per_microbatch_s - forward - weight, weight


def schedule(passes: tuple[tuple[float, float, float], ...], static: tuple[float, ...],
             per_batch: tuple[float, ...], memory_limit: float | None) -> ExactSchedule | None:
    """The exact periodic zero-bubble schedule of stages with (F, B, W) seconds, static bytes and bytes
    per micro-batch in flight under `memory_limit` (module text); None when some stage cannot hold
    one micro-batch (no period helps) or the scheduler finds no valid pattern. Memoised: the search
    prices the same stages for many points.

    With one stage a processor the scheduler's memory row of stage i reads: its micro-batches in
    flight at most c_i = floor((M - static_i) / A_i), in the integer memory units it counts in
    (`in_flight_caps`), so the answer depends on the bytes only through the caps: the search's points
    that differ only in data parallelism and ZeRO (whose bytes change and whose F, B, W do not) mostly
    share them, and each (passes, caps) is solved once (`_capped`). The passes' pattern without a
    memory row (`free_pattern`, every cap ROOM_FACTOR x pp) is solved first; where it is proven
    (OPTIMAL: the least period of any pattern) and holds no more than the caps, it is this query's
    answer too -- a memory row only removes patterns, so none has a shorter period -- without a solve."""
    passes = tuple((float(f), float(b), float(w)) for f, b, w in passes)
    caps = in_flight_caps(tuple(map(float, static)), tuple(map(float, per_batch)), memory_limit)
    free = free_pattern(passes)
    if free is not None and free.status == "OPTIMAL" and all(k <= c for k, c in zip(free.in_flight, caps)):
        return free
    return _capped(passes, caps)


def in_flight_caps(static: tuple[float, ...], per_batch: tuple[float, ...],
                   memory_limit: float | None) -> tuple[int, ...]:
    """The most micro-batches each stage may hold under the scheduler's memory row, counted as
    pipeline/exact_schedule.py counts it (bytes rounded to its memory unit: the static part and a
    micro-batch's bytes up, the limit down), at most ROOM_FACTOR x pp (`free_pattern`'s room: more
    than any zero-bubble pattern holds); ROOM_FACTOR x pp everywhere without a limit."""
    from solver_plan.pipeline.ticks import limit_memory_units, memory_unit, to_memory_units

    room = ROOM_FACTOR * len(static)
    if memory_limit is None:
        return (room,) * len(static)
    unit = memory_unit(memory_limit)
    limit = limit_memory_units(memory_limit, unit)
    caps = []
    for fixed, batch in zip(static, per_batch):
        base, stored = to_memory_units(fixed, unit), to_memory_units(batch, unit)
        caps.append(room if stored == 0 else max(-1, min(room, (limit - base) // stored)))
    return tuple(caps)


def _capped(passes, caps: tuple[int, ...]) -> ExactSchedule | None:
    """`_schedule` of the canonical instance with these caps: stage i static C - c_i, one unit a
    micro-batch, limit C = max(caps) (one byte a memory unit: the scheduler's row is then exactly
    count_i <= c_i)."""
    if min(caps) < 1:
        return None  # some stage cannot hold one micro-batch: no period helps
    top = max(caps)
    return _schedule(passes, tuple(float(top - c) for c in caps), (1.0,) * len(caps), float(top))


@lru_cache(maxsize=4096)
def free_pattern(passes: tuple[tuple[float, float, float], ...]) -> ExactSchedule | None:
    """The passes' exact pattern with no memory limit: each micro-batch one unit of bytes and room
    for ROOM_FACTOR x pp of them on every stage (more than any zero-bubble pattern holds), so its
    `in_flight` is each stage's peak count, whatever the stages' bytes."""
    return _capped(passes, (ROOM_FACTOR * len(passes),) * len(passes))


def solves() -> int:
    """How many exact schedules this process has solved (memoised ones not counted again): the
    search charges each to its nominal budget."""
    return _schedule.cache_info().misses


@lru_cache(maxsize=4096)
def _schedule(passes, static, per_batch, memory_limit) -> ExactSchedule | None:
    from solver_plan.pipeline.allocation import Allocation, Stage
    from solver_plan.pipeline.api import schedule_allocation
    from solver_plan.pipeline.chain import LayerChain
    from solver_plan.pipeline.memory import DEFAULT_STATE
    from solver_plan.pipeline.problem import ChainProblem

    pp = len(passes)
    shares = [w / (b + w) if b + w > 0 else 0.0 for _, b, w in passes]
    share = min(shares)
    if memory_limit is None:
        memory_limit = max(s + ROOM_FACTOR * pp * a for s, a in zip(static, per_batch))
    factor = DEFAULT_STATE.weight_factor  # the chain's weights are bytes / factor: its static bytes are ours
    chain = LayerChain("hybrid-stages", tuple(f"stage{i}" for i in range(pp)), tuple(f for f, _, _ in passes),
                       tuple(b + w for _, b, w in passes), tuple(s / factor for s in static),
                       (0.0,) * pp, (0.0,) * pp, per_batch)
    problem = ChainProblem(chain, pp, memory_limit, math.inf, DEFAULT_STATE)
    allocation = Allocation(tuple(Stage(i, i, i) for i in range(pp)))
    result = schedule_allocation(problem, allocation, "exact-zb", weight_share=min(share, 1.0 - 1e-12),
                                 time_limit=TIME_LIMIT_S)
    if not result.valid or result.pattern is None or result.validation is None:
        return None
    pattern = result.pattern
    operations = tuple((op.name, op.kind, op.stage, t, op.duration, h)
                       for op, t, h in zip(pattern.ops.operations, pattern.start, pattern.shift)
                       if op.kind in ("F", "B", "W"))
    peaks = result.validation.peak_memory
    in_flight = tuple(max(1, round((peaks[i] - static[i]) / per_batch[i])) if per_batch[i] > 0 else 1
                      for i in range(pp))
    return ExactSchedule(pattern.period, share, in_flight, operations, result.status.value)
