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

W of a block (`weight_grad_s`): one weight-gradient GEMM per forward GEMM (the cost model's dX, dW
rule), i.e. the block's forward less its attention core (no weights) and less its tensor-parallel
collectives (half of the block's, the forward's share: W needs none); of the embedding and the
output layer, a third of their time (forward, dX, dW).

Runtimes (`RUNNERS`): torch.distributed.pipelining's ScheduleInterleavedZeroBubble ("implementing
the ZB1P schedule in the paper"; torchtitan pipeline_parallel_schedule InterleavedZeroBubble) runs
ZB-H1; ZB-H2 runs in the authors' Megatron-LM fork (github.com/sail-sg/zero-bubble-pipeline-parallelism,
--enable-zb-runtime), which no runtime profile here describes. The unpinned search offers a
schedule only under a runtime profile that runs it; `--fix schedule=zb-h1|zb-h2` prices it under any
(what-if), and the plan lists which runtimes run it (`schedule_runtimes`).
"""
from __future__ import annotations

ZERO_BUBBLE = ("zb-h1", "zb-h2")
TORCH_ZB1P = "pipeline_parallel_schedule InterleavedZeroBubble (torch ScheduleInterleavedZeroBubble)"
RUNNERS = {
    "zb-h1": {"torchtitan": TORCH_ZB1P, "torchtitan-compile": TORCH_ZB1P,
              "zero-bubble-megatron": "sail-sg/zero-bubble-pipeline-parallelism --enable-zb-runtime"},
    "zb-h2": {"zero-bubble-megatron": "sail-sg/zero-bubble-pipeline-parallelism --enable-zb-runtime "
                                      "--zero-bubble-max-pending-backward 2p"},
}
W_SHARE = {"zb-h1": 2.0, "zb-h2": 3.0}


def runs(runtime, schedule: str) -> bool:
    """Whether a runtime profile runs `schedule` (every profile runs the others it is priced with)."""
    from solver_plan.runtime import resolve_runtime

    return schedule not in ZERO_BUBBLE or resolve_runtime(runtime).name in RUNNERS[schedule]


def schedule_runtimes(schedule: str) -> dict[str, str] | None:
    """For a zero-bubble schedule, the runtimes that run it and how; None for the others."""
    return dict(RUNNERS[schedule]) if schedule in ZERO_BUBBLE else None


def in_flight(pp: int, m: int, schedule: str) -> float:
    """Micro-batches a stage holds at its peak: p (ZB-H1, as 1F1B's first stage) or 2p - 1 (ZB-H2),
    at most m (module text)."""
    return float(min(m, pp if schedule == "zb-h1" else 2 * pp - 1))


def weight_grad_s(profile) -> float:
    """W of one block per micro-batch (module text)."""
    return max(0.0, profile.block_forward_s - profile.attention_forward_s - profile.tp_comm_s / 2.0)


def pipeline_s(stage_times, weight_times, m: int, schedule: str) -> float:
    """m max_i T_i + max(0, sum_i T_i - max_i T_i - c (p - 1)/p sum_i W_i) (module text)."""
    slowest, p = max(stage_times), len(stage_times)
    fill = sum(stage_times) - slowest - W_SHARE[schedule] * (p - 1) / p * sum(weight_times)
    return m * slowest + max(0.0, fill)
