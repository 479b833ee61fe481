"""The outer choices of a hybrid plan, `--fix` pins, and their enumeration.

A `Parallelism` is one point: dp x tp x pp devices, micro-batch size (micro-batches follow from the
global batch), virtual stages, recomputation, ZeRO stage, sequence parallelism and schedule.
Enumeration yields every valid point of the space that agrees with the pins; the search prunes
them by cheap lower bounds before pricing any.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Iterator, Mapping

from solver_plan.cost.model_state import ZERO_STAGES
from solver_plan.errors import InputError
from solver_plan.keyvalues import parse_key_values
from solver_plan.hybrid.fsdp import state_zero
from solver_plan.hybrid.memory import RECOMPUTE_MODES, SCHEDULES
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.hybrid.exact_zb import MAX_STAGES as EXACT_MAX_STAGES
from solver_plan.hybrid.offload import MODES as OFFLOAD_MODES
from solver_plan.hybrid.zero_bubble import V_CHUNKS

FIX_KEYS = ("dp", "tp", "pp", "micro_batch_size", "virtual_stages", "recompute", "zero_stage",
            "sequence_parallel", "schedule", "cp", "dp_shard", "offload", "attention")
INT_KEYS = ("dp", "tp", "pp", "micro_batch_size", "virtual_stages", "zero_stage", "cp", "dp_shard")
ZERO_OR_MORE = ("zero_stage", "dp_shard")  # the integer keys that may be 0


@dataclass(frozen=True)
class Parallelism:
    """One point of the hybrid space: dp x cp x tp x pp degrees, micro-batch size and count, virtual stages,
    recomputation, ZeRO stage, sequence parallelism, schedule, the ZeRO shard group size, offload, and the
    attention kernel family the runtime is set to run.
    """
    dp: int
    tp: int
    pp: int
    micro_batch_size: int
    micro_batches: int
    virtual_stages: int = 1
    recompute: str = "none"
    zero_stage: int = 0
    sequence_parallel: bool = False
    schedule: str = "1f1b"
    cp: int = 1  # context parallel: the sequence split over cp ranks (hybrid/context_parallel.py)
    dp_shard: int = 0  # ranks of a ZeRO shard group (hybrid sharding, hybrid/fsdp.py); 0: all dp x cp
    offload: str = "none"  # "optimizer": optimizer state and step on the host (hybrid/offload.py)
    # the fused attention kernel family the runtime runs, one of RuntimeProfile.attention_kernels; "": the
    # runtime's default (RuntimeProfile.with_attention; search.attention_choices)
    attention: str = ""

    def __post_init__(self):
        for key in ("dp", "tp", "pp", "micro_batch_size", "micro_batches", "virtual_stages", "cp"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"must be a positive integer, got {value!r}", key)
        if self.recompute not in RECOMPUTE_MODES:
            raise InputError(f"must be one of {', '.join(RECOMPUTE_MODES)}, got {self.recompute!r}", "recompute")
        if self.zero_stage not in ZERO_STAGES:
            raise InputError(f"must be 0, 1, 2 or 3, got {self.zero_stage!r}", "zero_stage")
        if self.schedule not in SCHEDULES:
            raise InputError(f"must be one of {', '.join(SCHEDULES)}, got {self.schedule!r}", "schedule")
        if self.schedule == "zb-v":
            if self.virtual_stages != V_CHUNKS or self.pp == 1:
                raise InputError(f"schedule zb-v runs {V_CHUNKS} chunks per rank (virtual_stages {V_CHUNKS}) on pp > 1",
                                 "virtual_stages")
        elif (self.schedule == "interleaved") != (self.virtual_stages > 1):
            raise InputError("virtual_stages > 1 goes with schedule interleaved or zb-v (and only with them)",
                             "virtual_stages")
        if self.sequence_parallel and self.tp == 1:
            raise InputError("sequence parallelism needs tp > 1", "sequence_parallel")
        if self.schedule == "zb-exact" and not 1 < self.pp <= EXACT_MAX_STAGES:
            raise InputError(f"schedule zb-exact (the exact periodic scheduler) takes 2 to {EXACT_MAX_STAGES} "
                             f"pipeline stages, got pp {self.pp}", "schedule")
        if self.schedule.startswith("zb-") and self.recompute == "per-stage":
            raise InputError("zero-bubble schedules take one recomputation mode for all stages (none, selective "
                             "or full)", "recompute")
        if self.offload not in OFFLOAD_MODES:
            raise InputError(f"must be one of {', '.join(OFFLOAD_MODES)}, got {self.offload!r}", "offload")
        if not isinstance(self.attention, str):
            raise InputError(f"must be an attention kernel family name, got {self.attention!r}", "attention")
        if self.offload in ("optimizer", "both") and self.zero_stage == 0:
            raise InputError("offloading the optimizer state offloads the distributed optimizer's shard: needs "
                             "zero_stage >= 1", "offload")
        if self.offload in ("activations", "both") and (self.pp > 1 or self.recompute != "none"):
            raise InputError("activation offload runs without pipelining and without recomputation (pp 1, "
                             "recompute none; Megatron-core's CPU offloading)", "offload")
        if not isinstance(self.dp_shard, int) or isinstance(self.dp_shard, bool) or self.dp_shard < 0:
            raise InputError(f"must be a non-negative integer, got {self.dp_shard!r}", "dp_shard")
        if self.dp_shard and (self.replicas % self.dp_shard or self.zero_stage == 0):
            raise InputError(f"a shard group of {self.dp_shard} needs ZeRO (zero_stage >= 1) and must divide dp x cp "
                             f"= {self.replicas}", "dp_shard")

    @property
    def devices(self) -> int:
        """Devices the point uses, dp x cp x tp x pp."""
        return self.dp * self.cp * self.tp * self.pp

    @property
    def replicas(self) -> int:
        """Ranks holding the same weights (one per dp and cp rank): the gradient reduce and ZeRO group."""
        return self.dp * self.cp

    @property
    def shard(self) -> int:
        """Ranks a ZeRO shard group holds (fsdp.shard_degree)."""
        return self.dp_shard or self.replicas

    @property
    def replicate(self) -> int:
        """Shard groups (hybrid sharding: > 1)."""
        return self.replicas // self.shard

    @property
    def state_zero(self) -> int:
        """The ZeRO stage whose memory and traffic the point has (fsdp.state_zero: ZeRO-3 with pp > 1
        gathers once a step)."""
        return state_zero(self.zero_stage, self.pp)

    def to_dict(self) -> dict:
        """JSON-ready dict of every field."""
        return asdict(self)


def parse_fix(text: str | None) -> dict:
    """'tp=8,pp=8,recompute=full' -> {'tp': 8, 'pp': 8, 'recompute': 'full'}; InputError naming the
    bad key or value."""
    if text is None or not text.strip():
        return {}
    pins = parse_key_values(text, "--fix", "KEY=VALUE,KEY=VALUE")
    for key in pins:
        if key not in FIX_KEYS:
            raise InputError(f"unknown key {key!r} (keys: {', '.join(FIX_KEYS)})", "--fix")
    return check_fix(pins)


def check_fix(pins: Mapping) -> dict:
    """Pins (from the CLI as strings, from Python or YAML as values) converted and checked."""
    out: dict = {}
    for key, value in pins.items():
        if key not in FIX_KEYS:
            raise InputError(f"unknown key {key!r} (keys: {', '.join(FIX_KEYS)})", "--fix")
        where = f"--fix {key}"
        if key in INT_KEYS:
            try:
                number = int(value) if not isinstance(value, bool) else None
            except (TypeError, ValueError):
                number = None
            if number is None or str(value).strip() != str(number) or number < (0 if key in ZERO_OR_MORE else 1):
                raise InputError(f"expects a {'non-negative' if key in ZERO_OR_MORE else 'positive'} integer, "
                                 f"got {value!r}", where)
            if key == "zero_stage" and number not in ZERO_STAGES:
                raise InputError(f"expects 0, 1, 2 or 3, got {value!r}", where)
            out[key] = number
        elif key == "sequence_parallel":
            text = str(value).strip().lower()
            if text not in ("true", "false", "1", "0", "yes", "no"):
                raise InputError(f"expects true or false, got {value!r}", where)
            out[key] = text in ("true", "1", "yes")
        elif key == "offload":
            if value not in OFFLOAD_MODES:
                raise InputError(f"expects one of {', '.join(OFFLOAD_MODES)}, got {value!r}", where)
            out[key] = value
        elif key == "attention":  # whether the runtime runs it: search.attention_choices
            if not isinstance(value, str):
                raise InputError(f"expects an attention kernel family (e.g. flash2, cudnn), got {value!r}", where)
            out[key] = value.strip()  # "": the runtime's default (what a plan's parallelism says for it)
        elif key == "recompute":
            if value not in RECOMPUTE_MODES:
                raise InputError(f"expects one of {', '.join(RECOMPUTE_MODES)}, got {value!r}", where)
            out[key] = value
        else:
            if value not in SCHEDULES:
                raise InputError(f"expects one of {', '.join(SCHEDULES)}, got {value!r}", where)
            out[key] = value
    return out


def _divisors(n: int) -> list[int]:
    """Divisors of n in increasing order, in O(sqrt n) (a global batch of 10^12 took hours in O(n))."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def tp_degrees(spec: TransformerSpec, devices_per_node: int, devices: int) -> list[int]:
    """Tensor-parallel degrees: dividing the heads, the key/value heads (grouped-query attention:
    Megatron needs t | kv_heads) and the MLP width, inside one node (the per-operator solve runs on a
    submesh of at most one node; dp and pp are the outer dimensions)."""
    limit = min(devices_per_node, devices)
    return [t for t in _divisors(limit) if splits_whole_heads(spec, t) and devices % t == 0]


def splits_whole_heads(spec: TransformerSpec, tp: int) -> bool:
    """Whether `tp` divides the heads, the key/value heads and the MLP width: each tensor-parallel rank
    holds whole heads and an equal MLP slice."""
    kv = spec.kv_heads or spec.heads
    return spec.heads % tp == 0 and kv % tp == 0 and spec.ffn % tp == 0


def enumerate_space(spec: TransformerSpec, devices: int, devices_per_node: int, global_batch: int,
                    pins: Mapping | None = None, offloads: tuple[str, ...] = ("none",),
                    attentions: tuple[str, ...] = ("",)) -> Iterator[Parallelism]:
    """Every valid Parallelism using all `devices` that agrees with `pins`:
    dp x cp x tp x pp = devices (cp: context_parallel.cp_degrees); pp <= layers; micro-batch size b
    with dp x b dividing the global batch (m = B / (dp b)); interleaving with v > 1 needs p v <= layers
    (a block a chunk: stages.py), m divisible by p and p > 1 (Megatron's conditions); sequence
    parallel only with tp > 1; ZeRO shard groups (fsdp.searched_shards); zero-bubble schedules with
    pp > 1 and one recomputation mode; the offload modes `offloads` (offload.offered: the cluster's
    host and the runtime decide), optimizer offload with ZeRO >= 1; the attention kernels `attentions`
    (search.attention_choices: what the runtime runs and the device has measured; "" its default)."""
    from solver_plan.hybrid.context_parallel import cp_degrees

    pins = dict(pins or {})
    for tp in tp_degrees(spec, devices_per_node, devices):
        if "tp" in pins and pins["tp"] != tp:
            continue
        for cp in cp_degrees(spec, devices // tp, pins.get("cp")):  # dp x cp x tp x pp = devices
            for pp in _divisors(devices // (tp * cp)):
                if pp > spec.layers or ("pp" in pins and pins["pp"] != pp):
                    continue
                dp = devices // (tp * cp * pp)
                if ("dp" in pins and pins["dp"] != dp) or global_batch % dp:
                    continue
                for b in _divisors(global_batch // dp):
                    if "micro_batch_size" in pins and pins["micro_batch_size"] != b:
                        continue
                    m = global_batch // (dp * b)
                    yield from _inner(spec, pins, dp, tp, pp, b, m, cp, devices_per_node, offloads, attentions)


def _inner(spec, pins, dp, tp, pp, b, m, cp=1, devices_per_node=1, offloads=("none",),
           attentions=("",)) -> Iterator[Parallelism]:
    from solver_plan.hybrid.fsdp import searched_shards

    schedules = []
    for schedule in SCHEDULES:
        if "schedule" in pins and pins["schedule"] != schedule:
            continue
        if schedule == "1f1b" or (schedule in ("gpipe", "zb-h1", "zb-h2") and pp > 1) or (
                schedule == "zb-exact" and 1 < pp <= EXACT_MAX_STAGES):
            schedules += [(schedule, 1)] if pins.get("virtual_stages", 1) == 1 else []
        elif schedule == "zb-v" and 1 < pp <= m and V_CHUNKS * pp <= spec.layers:  # two chunks a rank, a block
            # each; m >= p micro-batches fill the V's warm-up (zero_bubble.py; pins may go lower)
            schedules += [(schedule, V_CHUNKS)] if pins.get("virtual_stages", V_CHUNKS) == V_CHUNKS else []
        elif schedule == "interleaved" and pp > 1 and m % pp == 0:
            for v in range(2, spec.layers // pp + 1):  # any layer count: one block a chunk at least (stages.py)
                if pins.get("virtual_stages", v) == v:
                    schedules.append((schedule, v))
    recomputes = [pins["recompute"]] if "recompute" in pins else list(RECOMPUTE_MODES)
    zeros = [pins["zero_stage"]] if "zero_stage" in pins else list(ZERO_STAGES)
    sps = [pins["sequence_parallel"]] if "sequence_parallel" in pins else ([False, True] if tp > 1 else [False])
    attentions = (pins["attention"],) if "attention" in pins else attentions
    for (schedule, v), recompute, zero, sp in itertools.product(schedules, recomputes, zeros, sps):
        if sp and tp == 1:
            continue
        if recompute == "per-stage" and schedule.startswith("zb-"):
            continue  # zero_bubble.py: uniform recomputation only
        if zero == 2 and pp > 1:
            continue  # with pipelining only FSDP's ZeRO-3, gathered once a step (fsdp.py; the search
            # drops it for runtimes without FSDP2, fsdp.allowed)
        shards = [pins["dp_shard"]] if "dp_shard" in pins else searched_shards(dp * cp, tp, devices_per_node, zero)
        for shard, offload, attention in itertools.product(shards, offloads, attentions):
            if (shard and ((dp * cp) % shard or zero == 0)) or (offload in ("optimizer", "both") and zero == 0):
                continue
            if offload in ("activations", "both") and (pp > 1 or recompute != "none"):
                continue  # offload.py: Megatron-core's CPU offloading
            yield Parallelism(dp, tp, pp, b, m, v, recompute, zero, sp, schedule, cp, shard, offload, attention)
