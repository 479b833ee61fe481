"""Stages of unequal depth and interleaved chunks with any layer count.

A pipeline stage holds k_i blocks; the cut is searched (interop.py), so stages differ in depth
where the embedding (first stage) and the output layer and loss (last stage) make their ends
slower: Llama 3 405B's 126 layers on 16 stages run 7 on the first and the last stage and 8 on the
others (Dubey et al. 2024, section 3.3.2: "reduce one Transformer layer each from the first and the
last stages"). With the interleaved schedule a stage's k_i blocks are split into v chunks (virtual
stages) of floor(k_i / v) or ceil(k_i / v) blocks, the larger ones last (`chunk_layers`): the
embedding sits in chunk 0 of the first stage, and a warm-up holds each of the first v - 1 chunks p
times but the last one fewer (`held_layers`), so putting the extra blocks last keeps the in-flight
activations smallest. Every chunk holds at least one block: pp x v <= layers, the only condition
on the layer count (Megatron-core's --pipeline-model-parallel-layout and torchtitan's
pipeline_parallel_layers_per_stage place any count; the runtimes' older flags need p v | L).

Pipeline time of the interleaved schedule with stage times T_i per micro-batch (all v chunks):
m max_i T_i + (sum_i T_i - max_i T_i) / v: with equal stages (m + (p - 1)/v) T, Narayanan et al.
2021 section 2.2.2; the bubble is the fill and drain through every other stage once, each chunk
1/v of it, as 1F1B's sum_i T_i + (m - 1) max_i T_i is for v = 1.
"""
from __future__ import annotations


def chunk_layers(layers: int, v: int) -> tuple[int, ...]:
    """The v chunks of a stage of `layers` blocks: floor(k / v) each, the k mod v extra blocks on
    the last chunks."""
    q, extra = divmod(layers, v)
    return tuple([q] * (v - extra) + [q + 1] * extra)


def warmup_passes(stage: int, pp: int, v: int) -> int:
    """Chunk forwards stage `stage` runs before its first backward in Megatron's interleaved 1F1B:
    (v - 1) p + 2 (p - i - 1), plus the one in flight at its peak."""
    return (v - 1) * pp + 2 * (pp - stage - 1) + 1


def held_layers(layers: int, stage: int, pp: int, m: int, v: int) -> float:
    """Block-micro-batches of activations stage `stage` holds at its peak under interleaved 1F1B:
    the first min(warm-up, m v) chunk forwards (`warmup_passes`), the j-th on chunk (j // p) mod v
    (Megatron's order: p micro-batches through chunk 0, then through chunk 1, ...), each holding
    its chunk's blocks. With v | k this is k x min(m, warm-up / v), the equal-chunk figure of
    memory.in_flight_microbatches; non-decreasing in k (adding a block grows one chunk)."""
    chunks = chunk_layers(layers, v)
    passes = min(warmup_passes(stage, pp, v), m * v)
    groups, rest = divmod(passes, pp)  # `groups` whole rounds of p passes, group g on chunk g mod v
    rounds, partial = divmod(groups, v)
    return float(sum(chunk * (pp * (rounds + (j < partial)) + (rest if j == partial else 0))
                     for j, chunk in enumerate(chunks)))


def interleaved_pipeline_s(stage_times, m: int, v: int) -> float:
    """m max_i T_i + (sum_i T_i - max_i T_i) / v (module text)."""
    slowest = max(stage_times)
    return m * slowest + (sum(stage_times) - slowest) / v


def least_layers(schedule: str, v: int) -> int:
    """The fewest blocks a stage may hold: one per chunk (interleaved: v; ZB-V: its two)."""
    return v if schedule in ("interleaved", "zb-v") else 1


def layer_count_problem(layers: int, pins) -> str | None:
    """Why pinned pp (and virtual stages) cannot hold the model's `layers` blocks, naming the count
    (every stage needs a block, every interleaved chunk one: pp x v <= layers); None when they can."""
    pp, v = pins.get("pp"), pins.get("virtual_stages", 1)
    if pp is not None and pp > layers:
        return f"the model has {layers} layers, fewer than pp = {pp} stages (a stage holds at least one layer)"
    if v > 1 and (pp or 2) * v > layers:
        return (f"the model has {layers} layers, fewer than pp x virtual_stages = {pp or 2} x {v} = {(pp or 2) * v} "
                f"chunks (a chunk holds at least one layer; at most {layers // (pp or 2)} virtual stages)")
    return None


def default_split(rule: str, layers: int, pp: int, v: int, schedule: str = "1f1b") -> tuple[int, ...] | None:
    """Blocks per pipeline stage (all its v chunks) that a runtime runs when no split is given
    (`RuntimeProfile.default_stage_split`); None for "planned" (the planner's cut) and wherever the
    runtime has no default. "torchtitan" (its generate_split_points at d4c86e375, 2025-01; later
    versions count the embedding and the output layer as layers): over p v virtual stages, v = 1 for
    its single-stage schedules (1F1B, GPipe) and 2 for its multi-stage ones (no default for another v,
    nor for the V-shaped zero-bubble placement), base = L // (p v): the first base, the next ones
    base + 1 while L mod (p v) lasts, then base, the last the rest; virtual stage j on stage j mod p.
    Llama 3 405B, 126 layers on 8 stages: 15, 16 x 6, 15 (with v = 2 the same per stage; its chunks
    are then priced as `chunk_layers`, the larger last)."""
    single = schedule in ("1f1b", "gpipe") and v == 1
    if rule == "planned" or pp == 1 or not (single or (schedule == "interleaved" and v == 2)):
        return None
    stages = pp * v
    base, extra = divmod(layers, stages)
    if base < 1:
        return None
    sizes = [base] + [base + 1 if j < extra else base for j in range(stages - 2)]
    sizes.append(layers - sum(sizes))
    return tuple(sum(sizes[j] for j in range(i, stages, pp)) for i in range(pp))
