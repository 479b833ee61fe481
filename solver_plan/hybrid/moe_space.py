"""The outer choices of an expert-parallel plan (moe_plan.py), `--fix` pins and their enumeration.

A `MoEPoint` is one configuration: dp x tp x cp x pp devices for the attention, folded into
etp x ep x edp for the experts (hybrid/moe.py), micro-batch size (micro-batches follow from the
global batch), virtual stages, recomputation, distributed optimizer and capacity factor.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from typing import Mapping

from solver_plan.cost.routing import parse_capacity
from solver_plan.errors import InputError
from solver_plan.hybrid.moe import DISPATCHERS
from solver_plan.hybrid.moe_model import MoEModel

FIX_KEYS = ("dp", "tp", "cp", "pp", "ep", "etp", "micro_batch_size", "virtual_stages", "recompute", "zero_stage",
            "capacity", "dispatcher")
INT_KEYS = ("dp", "tp", "cp", "pp", "ep", "etp", "micro_batch_size", "virtual_stages", "zero_stage")
RECOMPUTE = ("none", "selective", "full")
# ZeRO stages searched: 0, 1 (the distributed optimizer: optimizer state over dp x cp, the experts' over
# edp), 2 (gradients sharded too, with pp = 1: reduce-scatter + all-gather, ZeRO-1's traffic; with a
# pipeline every micro-batch would reduce its gradients, which no runtime does, as in hybrid/space.py)
# and 3 (ZeRO-3 / FSDP: weights sharded too, each layer's gathered per micro-batch under the previous
# layer's compute, as hybrid/fsdp.py prices the dense path; with pp > 1 only for FSDP2 runtimes, which
# gather once a step: ZeRO-1's memory and traffic, fsdp.state_zero).
ZERO_STAGES = (0, 1, 2, 3)
ZERO_WORDS = "0, 1, 2 or 3"
MAX_MICRO_BATCH = 16  # searched (MoE runs use 1-4; larger ones only add activation memory)
# context parallelism is searched while each rank keeps at least this many tokens of a sequence (it
# pays for long sequences: Megatron's guidance is CP for 8k and longer; any cp when pinned)
MIN_TOKENS_PER_CP_RANK = 2048


@dataclass(frozen=True)
class MoEPoint:
    """One point of the expert-parallel space: attention degrees dp x tp x cp x pp, expert degrees ep x etp
    (edp derived), micro-batching, virtual stages, recomputation, ZeRO stage and expert capacity.
    """
    dp: int
    tp: int
    pp: int
    ep: int
    etp: int
    micro_batch_size: int
    micro_batches: int
    virtual_stages: int = 1
    recompute: str = "none"
    zero_stage: int = 1  # 0: plain data parallel, 1: distributed optimizer, 2: gradients sharded too (pp = 1), 3: FSDP
    capacity_factor: float | None = None  # None: dropless
    cp: int = 1  # context parallelism: the sequence split over cp devices (ring attention)
    dispatcher: str = "alltoall"  # the token dispatcher (moe.DISPATCHERS): how dispatch and combine move tokens

    @property
    def devices(self) -> int:
        """Devices the point uses, dp x tp x cp x pp."""
        return self.dp * self.tp * self.cp * self.pp

    @property
    def state_zero(self) -> int:
        """The ZeRO stage whose memory and traffic the point has (fsdp.state_zero: ZeRO-3 with pp > 1
        gathers once a step, ZeRO-1's)."""
        from solver_plan.hybrid.fsdp import state_zero

        return state_zero(self.zero_stage, self.pp)

    @property
    def shards(self) -> int:
        """Devices one sequence's tokens are split over on the attention side: tp x cp."""
        return self.tp * self.cp

    @property
    def edp(self) -> int:
        """Expert data-parallel degree: the dp x tp x cp ranks of a stage divided among ep x etp expert
        shards.
        """
        return self.dp * self.tp * self.cp // (self.ep * self.etp)

    @property
    def schedule(self) -> str:
        """Pipeline schedule: "interleaved" with virtual stages, else "1f1b"."""
        return "interleaved" if self.virtual_stages > 1 else "1f1b"

    def to_dict(self) -> dict:
        """JSON-ready dict of the point, with edp, schedule and capacity ("dropless" or the factor)."""
        return {**asdict(self), "edp": self.edp, "schedule": self.schedule,
                "capacity": "dropless" if self.capacity_factor is None else self.capacity_factor}


def check_fix(pins: Mapping | str | None) -> dict:
    """Pins from `--fix ep=8,etp=1,...` text or a mapping, converted and checked (InputError naming the key)."""
    if pins is None:
        return {}
    if isinstance(pins, str):
        from solver_plan.keyvalues import parse_key_values
        pins = parse_key_values(pins, "--fix", "KEY=VALUE,KEY=VALUE") if pins.strip() else {}
    out = {}
    for key, value in pins.items():
        where = f"--fix {key}"
        if key not in FIX_KEYS:
            raise InputError(f"unknown key {key!r} (keys: {', '.join(FIX_KEYS)})", "--fix")
        if key in INT_KEYS:
            number = None if isinstance(value, bool) else _int(value)
            if number is None or number < (0 if key == "zero_stage" else 1) or (key == "zero_stage" and number > 3):
                raise InputError(f"expects a {ZERO_WORDS if key == 'zero_stage' else 'positive integer'}, got {value!r}",
                                 where)
            out[key] = number
        elif key in ("recompute", "dispatcher"):
            choices = RECOMPUTE if key == "recompute" else DISPATCHERS
            if value not in choices:
                raise InputError(f"expects one of {', '.join(choices)}, got {value!r}", where)
            out[key] = value
        else:
            out[key] = parse_capacity(value, where)
    check_dispatch(out.get("dispatcher", "alltoall"), out.get("capacity"), "--fix")
    return out


def check_dispatch(dispatcher: str, capacity: float | None, where: str) -> None:
    """A deduplicating dispatcher runs dropless only (Megatron-core's flex dispatcher refuses
    --moe-pad-expert-input-to-capacity): with a capacity factor, an InputError naming both, not a
    space left empty and answered INFEASIBLE."""
    if dispatcher != "alltoall" and capacity is not None:
        raise InputError(f"dispatcher={dispatcher} runs dropless (Megatron-core's flex dispatcher refuses "
                         f"--moe-pad-expert-input-to-capacity): drop capacity={capacity:g} or pin "
                         "dispatcher=alltoall", where)


def _int(value) -> int | None:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if str(value).strip() == str(number) else None


def _divisors(n: int) -> list[int]:
    """The divisors of n, ascending, in O(sqrt n) (a global batch may be 2**24)."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def standard_pins(model: MoEModel, devices: int, devices_per_node: int, pins: Mapping) -> dict:
    """The pins of the layout Megatron-core's MoE recipes use (the Megatron-Bridge 25.11 rows of
    data/published/moe-runs.yaml: tp 1 in 8 of 9, cp 1 in all, micro-batch 1 in 7 of 9, the
    distributed optimizer; ep 8 on the 8-GPU B200 and H100 nodes in 4 of 5 rows, 32-64 inside the
    GB200 NVL72 domains): no tensor, expert-tensor or context parallelism, expert parallelism within
    a node (the largest divisor of the experts up to the devices of a node), micro-batch 1, ZeRO-1;
    pipeline depth, virtual stages and recomputation left to the search. The user's pins override."""
    ep = max(d for d in _divisors(model.experts) if d <= min(devices, devices_per_node))
    return {"tp": 1, "etp": 1, "cp": 1, "ep": ep, "micro_batch_size": 1, "zero_stage": 1, **pins}


def enumerate_points(model: MoEModel, devices: int, devices_per_node: int, global_batch: int, pins: Mapping,
                     capacities=(None,)):
    """Every point agreeing with the pins: tp | heads within a node, cp with 2 cp | seq (Megatron's
    load-balanced causal split) and seq / cp >= MIN_TOKENS_PER_CP_RANK unless pinned, pp <= layers,
    dp x b | batch, ep | experts with ep x etp | tp x cp x dp, etp | tp and f_e, virtual stages with
    p v <= layers and m divisible by p (Megatron's interleaving condition), ZeRO-2 with pp = 1; the
    dispatcher pinned (default alltoall), a deduplicating one only dropless (Megatron-core's flex
    dispatcher refuses --moe-pad-expert-input-to-capacity)."""
    get = pins.get
    dispatcher = get("dispatcher", "alltoall")  # a pin, not searched: the runtime's dispatcher is the user's
    for tp, cp in itertools.product(_divisors(min(devices, devices_per_node)), _divisors(devices)):
        if model.heads % tp or devices % (tp * cp) or get("tp", tp) != tp or get("cp", cp) != cp:
            continue
        if cp > 1 and (model.seq % (2 * cp) or ("cp" not in pins and model.seq < cp * MIN_TOKENS_PER_CP_RANK)):
            continue
        for pp in _divisors(devices // (tp * cp)):
            if pp > model.layers or get("pp", pp) != pp:
                continue
            dp = devices // (tp * cp * pp)
            if get("dp", dp) != dp or global_batch % dp:
                continue
            for ep, etp in itertools.product(_divisors(model.experts), _divisors(tp)):
                if ((tp * cp * dp) % (ep * etp) or model.expert_ffn % etp or get("ep", ep) != ep
                        or get("etp", etp) != etp):
                    continue
                for b in _divisors(global_batch // dp):
                    if get("micro_batch_size", b) != b or (b > MAX_MICRO_BATCH and "micro_batch_size" not in pins):
                        continue
                    m = global_batch // (dp * b)
                    vs = [1] + ([v for v in range(2, model.layers // pp + 1) if m % pp == 0
                                 and (model.layers % (pp * v) == 0 or get("virtual_stages") == v)] if pp > 1 else [])
                    for v, r, z, c in itertools.product(vs, RECOMPUTE, ZERO_STAGES, capacities):
                        if get("virtual_stages", v) != v or get("recompute", r) != r or get("zero_stage", z) != z:
                            continue
                        if z == 2 and pp > 1:  # ZeRO-2 with pp = 1 only (ZERO_STAGES)
                            continue
                        if dispatcher != "alltoall" and c is not None:  # the flex dispatcher pads to no capacity
                            continue
                        yield MoEPoint(dp, tp, pp, ep, etp, b, m, v, r, z, c, cp, dispatcher)


# --- pricing ------------------------------------------------------------------------------------------
