"""Zero-bubble pipeline schedules: the backward split into B (input gradients, on the critical path
between stages) and W (weight gradients, free to move later) (Qi et al., "Zero Bubble Pipeline
Parallelism", ICLR 2024, section 2).

Per stage and micro-batch T = F + B + W. With p equal stages and m micro-batches the handcrafted
schedules have the bubbles
- ZB-H1: (p - 1)(F + B - W), one third of 1F1B's when F = B = W, at 1F1B's peak activation
  memory (the W passes of the warm-up are delayed, so every stage holds as many micro-batches as
  the first: p, at most m);
- ZB-H2: (p - 1)(F + B - 2W), at least 0 (zero when F + B <= 2W), holding up to 2p - 1
  micro-batches (extra warm-up forwards fill the tail);
the paper's figures, priced here per stage as m max_i T_i + max(0, sum_i T_i - max_i T_i - c (p - 1)/p
sum_i W_i) with c = 2 (H1) or 3 (H2) (`pipeline_s`): for equal stages exactly the bubbles above; for
unequal ones the fill and drain of the other stages less the W work the schedule moves into them.
The sums are the same for every cut (W does not depend on recomputation), so the pipeline grows
with the slowest stage alone and interop.balanced_cut stays exact; per-stage recomputation is not
offered with these schedules (a stage's mode would change the bubble's W share through the cut).
The in-flight micro-batches (`in_flight`) are the first stage's peak for every stage (an upper
bound for the later ones).

ZB-V (the paper's section 6, "memory efficient zero bubble schedule"; torch's ScheduleZBVZeroBubble):
every rank holds two chunks (virtual stages, `V_CHUNKS`) placed in a V: the model's 2p chunks run
down the ranks 0 .. p - 1 and back up p - 1 .. 0, so rank i holds chunks i and 2p - 1 - i, and the
first rank holds both the embedding (chunk 0) and the output layer and loss (chunk 2p - 1)
(`head_stage`; a tied embedding needs no gradient all-reduce there). Every rank runs the same work in
the same order, and each of its two chunks holds p micro-batches at the peak (the warm-up runs p
forwards of each chunk before the first backward of that chunk), i.e. p micro-batches of the whole
stage on every rank: 1F1B's first stage, at most m. Its bubble with F = B = W is zero (the paper's
table: bubble rate 0, activation memory 1x of 1F1B, pipeline communication 2x); in general it is
the V's fill and drain through half-size chunks, (p - 1)(F + B + W) / 2 without the split (the
interleaved schedule with v = 2), less the W work moved into it as in ZB-H2 (c = 3), per chunk:
(p - 1)(F + B - 2W) / 2 for equal stages; for unequal ones
m max_i T_i + max(0, sum_i T_i - max_i T_i - 3 (p - 1)/p sum_i W_i) / 2 (`pipeline_s`). Each micro-batch
crosses every rank boundary twice per direction (2x the transfers, the plan's virtual_stages = 2).
The rank's blocks are its two chunks (stages.chunk_layers(k, 2)); its nominal layer range in the
plan is bookkeeping, as for the interleaved schedule.

W of a block (`weight_grad_s`): one weight-gradient GEMM per forward GEMM (the cost model's dX, dW
rule), i.e. the block's forward less its attention core (no weights) and less its tensor-parallel
collectives (half of the block's, the forward's share: W needs none); of the embedding and the
output layer, a third of their time (forward, dX, dW).

Runtimes (`RUNNERS`): torch.distributed.pipelining's ScheduleInterleavedZeroBubble ("implementing
the ZB1P schedule in the paper"; torchtitan pipeline_parallel_schedule InterleavedZeroBubble) runs
ZB-H1; ZB-H2 runs in the authors' Megatron-LM fork (github.com/sail-sg/zero-bubble-pipeline-parallelism,
--enable-zb-runtime), which no runtime profile here describes. ZB-V runs in torch's
ScheduleZBVZeroBubble (torchtitan pipeline_parallel_schedule ZBVZeroBubble, two stages per rank in
the V style) and the authors' fork (--zero-bubble-v-schedule); Megatron-core's own schedules
(1F1B, interleaved) have no V placement. The unpinned search offers a schedule only under a runtime
profile that runs it; `--fix schedule=zb-h1|zb-h2` prices it under any (what-if), and the plan lists
which runtimes run it (`schedule_runtimes`); `schedule=zb-v` is refused (`check_runtime`, InputError
naming --fix schedule) under a profile that cannot place two chunks in a V, since no plan of that
runtime has its memory layout (the loss on the first rank).
"""
from __future__ import annotations

from solver_plan.errors import InputError

ZERO_BUBBLE = ("zb-h1", "zb-h2", "zb-v")
V_CHUNKS = 2  # ZB-V: chunks per rank
EXACT = "zb-exact"  # the exact periodic schedule of hybrid/exact_zb.py
REFUSED_ELSEWHERE = ("zb-v", EXACT)  # pins refused under a runtime that cannot run them (`check_runtime`)
TORCH_CSV = ("parallelism.pipeline_parallel_schedule_csv (torch _PipelineScheduleRuntime: the plan's "
             "exact_schedule unrolled for m micro-batches as F / I / W actions per rank)")
TORCH_ZB1P = "pipeline_parallel_schedule InterleavedZeroBubble (torch ScheduleInterleavedZeroBubble)"
TORCH_ZBV = ("pipeline_parallel_schedule ZBVZeroBubble (torch ScheduleZBVZeroBubble; two stages per rank, "
             "V-style placement)")
RUNNERS = {
    "zb-h1": {"torchtitan": TORCH_ZB1P, "torchtitan-compile": TORCH_ZB1P,
              "torchtitan-compile-fp8-gather": TORCH_ZB1P,
              "zero-bubble-megatron": "sail-sg/zero-bubble-pipeline-parallelism --enable-zb-runtime"},
    "zb-h2": {"zero-bubble-megatron": "sail-sg/zero-bubble-pipeline-parallelism --enable-zb-runtime "
                                      "--zero-bubble-max-pending-backward 2p"},
    "zb-v": {"torchtitan": TORCH_ZBV, "torchtitan-compile": TORCH_ZBV, "torchtitan-compile-fp8-gather": TORCH_ZBV,
             "zero-bubble-megatron": "sail-sg/zero-bubble-pipeline-parallelism --zero-bubble-v-schedule"},
    EXACT: {"torchtitan": TORCH_CSV, "torchtitan-compile": TORCH_CSV, "torchtitan-compile-fp8-gather": TORCH_CSV},
}
W_SHARE = {"zb-h1": 2.0, "zb-h2": 3.0, "zb-v": 3.0}
FILL_SHARE = {"zb-h1": 1.0, "zb-h2": 1.0, "zb-v": 1.0 / V_CHUNKS}  # the fill and drain runs through chunks of 1/v


def check_runtime(runtime, schedule: str) -> None:
    """InputError naming --fix schedule when `schedule` is one that `runtime` cannot run and that is
    not priced as a what-if (ZB-V: module text), listing the runtimes that run it."""
    from solver_plan.runtime import resolve_runtime

    if schedule in REFUSED_ELSEWHERE and not runs(runtime, schedule):
        name = resolve_runtime(runtime).name
        why = ("two chunks per rank in a V, the loss on the first rank" if schedule == "zb-v"
               else "an arbitrary periodic pattern, given action by action")
        raise InputError(f"runtime {name} cannot run {schedule} ({why}); it runs in: "
                         f"{'; '.join(f'{k} ({v})' for k, v in RUNNERS[schedule].items())}. "
                         "Choose --runtime torchtitan or another schedule", "--fix schedule")


def head_stage(pp: int, schedule: str) -> int:
    """The stage holding the output layer and the loss: the first under ZB-V (the V returns to rank 0),
    else the last."""
    return 0 if schedule == "zb-v" else pp - 1


def runs(runtime, schedule: str) -> bool:
    """Whether a runtime profile runs `schedule` (every profile runs the others it is priced with)."""
    from solver_plan.runtime import resolve_runtime

    return schedule not in RUNNERS or resolve_runtime(runtime).name in RUNNERS[schedule]


def schedule_runtimes(schedule: str) -> dict[str, str] | None:
    """For a zero-bubble schedule, the runtimes that run it and how; None for the others."""
    return dict(RUNNERS[schedule]) if schedule in RUNNERS else None


def in_flight(pp: int, m: int, schedule: str) -> float:
    """Micro-batches a stage holds at its peak: p (ZB-H1, as 1F1B's first stage; ZB-V, p of each
    half-stage chunk) or 2p - 1 (ZB-H2), at most m (module text)."""
    return float(min(m, 2 * pp - 1 if schedule == "zb-h2" else pp))


def weight_grad_s(profile) -> float:
    """W of one block per micro-batch (module text)."""
    return max(0.0, profile.block_forward_s - profile.attention_forward_s - profile.tp_comm_s / 2.0)


def pipeline_s(stage_times, weight_times, m: int, schedule: str) -> float:
    """m max_i T_i + max(0, sum_i T_i - max_i T_i - c (p - 1)/p sum_i W_i) x f, with c = 2 (ZB-H1) or
    3 (ZB-H2, ZB-V) and f = 1, or 1/2 for ZB-V's half-stage chunks (module text); never less than
    one micro-batch's critical path, its forwards and input-gradient passes through every stage and
    the last weight-gradient pass (stage 0's, of a chunk under ZB-V): sum_i (T_i - W_i) + f W_0
    (`critical_path_s`; the paper's bubbles assume enough micro-batches to fill the warm-up, with
    fewer the handcrafted pattern cannot hide them; for ZB-H1 and one micro-batch the two agree)."""
    slowest, p = max(stage_times), len(stage_times)
    fill = sum(stage_times) - slowest - W_SHARE[schedule] * (p - 1) / p * sum(weight_times)
    return max(m * slowest + max(0.0, fill) * FILL_SHARE[schedule],
               critical_path_s(stage_times, weight_times, schedule))


def critical_path_s(stage_times, weight_times, schedule: str) -> float:
    """sum_i (T_i - W_i) + f W_0: one micro-batch alone through the pipeline (`pipeline_s`)."""
    return sum(stage_times) - sum(weight_times) + FILL_SHARE[schedule] * weight_times[0]
