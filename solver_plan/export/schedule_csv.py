"""A plan's exact periodic zero-bubble pattern (`exact_schedule`, hybrid/exact_zb.py) unrolled for its
micro-batches as the schedule CSV torch.distributed.pipelining's `_PipelineScheduleRuntime` loads
(torchtitan `parallelism.pipeline_parallel_schedule_csv`, read by `_load_csv` in its "compute_only"
format): one row per pipeline rank, each cell one compute action `{stage}{F|I|W}{micro-batch}` as
torch's `_Action.from_str` parses it (F forward, I the input-gradient pass, the plan's B; W the
weight-gradient pass). Stage i runs on rank i (one stage a rank).

Each rank's actions are in the order the plan's step replays them (exact_zb.replay_s): micro-batch j
of an operation with start t and shift h at (j + h) T + t, sorted by that time (ties as replay_s
breaks them); the periodic times respect every same-micro-batch dependency, so the order is one the
runtime can execute (torch's `_validate_schedule` and its send/receive lowering check it again).
"""
from __future__ import annotations

import csv
import io

from solver_plan.errors import InputError
from solver_plan.export.common import WHERE

ACTION = {"F": "F", "B": "I", "W": "W"}  # the plan's pass kinds -> torch's _ComputationType letters


def exact_schedule_rows(d: dict, pp: int, micro_batches: int) -> list[list[str]]:
    """Per rank, its compute actions in execution order (module docstring); InputError when the plan
    has no readable `exact_schedule` for pp stages."""
    try:
        pattern = d["exact_schedule"]
        period = float(pattern["period_s"])
        operations = [(str(o["name"]), str(o["kind"]), int(o["stage"]), float(o["start_s"]), float(o["duration_s"]),
                       int(o["shift"])) for o in pattern["operations"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(f"schedule zb-exact without a readable exact_schedule ({type(exc).__name__}: {exc})",
                         WHERE) from None
    kinds = {(stage, kind) for _, kind, stage, _, _, _ in operations}
    wanted = {(stage, kind) for stage in range(pp) for kind in ACTION}
    if kinds != wanted or len(operations) != len(wanted):
        raise InputError(f"exact_schedule: expected one F, B and W operation for each of {pp} stages", WHERE)
    instances = sorted(((j + shift) * period + start, name, stage, duration, j, kind)
                       for name, kind, stage, start, duration, shift in operations for j in range(micro_batches))
    rows: list[list[str]] = [[] for _ in range(pp)]
    for _, _, stage, _, j, kind in instances:
        rows[stage].append(f"{stage}{ACTION[kind]}{j}")
    return rows


def csv_text(rows: list[list[str]]) -> str:
    """The rows as CSV text (csv.writer, as torch's `_dump_csv` writes them)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()
