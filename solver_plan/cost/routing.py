"""How a mixture-of-experts router spreads tokens over the experts, and what the busiest expert-parallel
rank receives: the input of every MoE term that depends on routing (hybrid/moe.py).

`ExpertLoad` is the share of the routed token copies each expert gets (shares sum to 1; a token
routed top-k counts k times). Forms (`parse_load`, the `routing` option):
- `uniform` (default): 1/E each, the balanced routing every planner we know assumes;
- `zipf:S`: share of expert e proportional to (e + 1)^-S, S >= 0 (S = 0 is uniform). Experts are
  placed on expert-parallel ranks in index order (Megatron-core places experts contiguously), so
  the hottest experts share rank 0: the worst placement of that skew;
- `histogram:c0/c1/...` or a list of E counts (a measured per-expert token histogram, e.g. from a
  router's tokens_per_expert logging), in expert order, normalised.
Capacity (GShard, Lepikhin et al. 2021; Switch, Fedus et al. 2022): with a capacity factor c each
expert takes at most c x (its balanced share) = c / E of the copies; the excess is dropped (the
token skips the expert through the residual; `dropped`), and the buffers are padded to capacity
(hybrid/moe.py prices c x the balanced work). Dropless routing (MegaBlocks, Gale et al. 2023;
Megatron-core's default, `--moe-expert-capacity-factor` unset) keeps every copy, so the busiest
rank gets all its experts' load.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from solver_plan.errors import InputError

MAX_SKEW = 8.0  # zipf exponents beyond this put ~all tokens on expert 0: surely a typo


@dataclass(frozen=True)
class ExpertLoad:
    """Shares of the routed token copies per expert (sum 1), and the routing's name."""
    shares: tuple[float, ...]
    name: str = "uniform"

    def __post_init__(self):
        if not self.shares or any(not (s >= 0 and math.isfinite(s)) for s in self.shares):
            raise InputError("expert shares must be finite and non-negative", "routing")
        if not math.isclose(sum(self.shares), 1.0, rel_tol=1e-9):
            raise InputError(f"expert shares must sum to 1, got {sum(self.shares)}", "routing")

    @property
    def experts(self) -> int:
        """Number of experts."""
        return len(self.shares)

    def kept(self, capacity_factor: float | None) -> tuple[float, ...]:
        """Shares processed per expert: min(share, c / E) with capacity factor c, all of them dropless."""
        if capacity_factor is None:
            return self.shares
        cap = capacity_factor / self.experts
        return tuple(min(s, cap) for s in self.shares)

    def dropped(self, capacity_factor: float | None) -> float:
        """Fraction of the routed copies dropped by the capacity (0 dropless)."""
        if capacity_factor is None:
            return 0.0
        return max(0.0, 1.0 - sum(self.kept(capacity_factor)))

    def rank_share(self, ep: int) -> float:
        """Share of the copies the busiest of `ep` expert-parallel ranks is routed (its E / ep
        contiguous experts' shares); 1 / ep when balanced, never less."""
        return sum(self.expert_shares_of_busiest_rank(ep))

    def expert_shares_of_busiest_rank(self, ep: int) -> tuple[float, ...]:
        """The shares of the busiest rank's experts (its grouped GEMM's per-expert token counts)."""
        return _busiest(self, ep)


@lru_cache(maxsize=1024)
def _busiest(load: ExpertLoad, ep: int) -> tuple[float, ...]:
    per_rank = load.experts // ep
    r = max(range(ep), key=lambda i: sum(load.shares[i * per_rank:(i + 1) * per_rank]))
    return load.shares[r * per_rank:(r + 1) * per_rank]


def uniform(experts: int) -> ExpertLoad:
    """`ExpertLoad` that sends an equal share of tokens to each of `experts` experts."""
    return ExpertLoad((1.0 / experts,) * experts, "uniform")


def zipf(experts: int, exponent: float) -> ExpertLoad:
    """Share of expert e proportional to (e + 1)^-exponent."""
    if not (isinstance(exponent, (int, float)) and 0 <= exponent <= MAX_SKEW):
        raise InputError(f"zipf exponent must be from 0 to {MAX_SKEW}, got {exponent!r}", "routing")
    raw = [(e + 1) ** -float(exponent) for e in range(experts)]
    total = sum(raw)
    return ExpertLoad(tuple(r / total for r in raw), f"zipf:{exponent:g}")


def histogram(counts, experts: int) -> ExpertLoad:
    """A measured per-expert token histogram, in expert order."""
    counts = list(counts)
    if len(counts) != experts:
        raise InputError(f"the histogram has {len(counts)} counts, the model {experts} experts", "routing")
    if any(isinstance(c, bool) or not isinstance(c, (int, float)) or not (c >= 0 and math.isfinite(c))
           for c in counts) or sum(counts) <= 0:
        raise InputError("histogram counts must be non-negative numbers, not all zero", "routing")
    total = float(sum(counts))
    return ExpertLoad(tuple(c / total for c in counts), "histogram")


def parse_load(value, experts: int) -> ExpertLoad:
    """An ExpertLoad from the `routing` option: None / 'uniform', 'zipf:S', 'histogram:c0/c1/...',
    a list of counts, or an ExpertLoad (checked against the expert count)."""
    if isinstance(value, ExpertLoad):
        if value.experts != experts:
            raise InputError(f"routing has {value.experts} experts, the model {experts}", "routing")
        return value
    if value is None or value == "uniform":
        return uniform(experts)
    if isinstance(value, (list, tuple)):
        return histogram(value, experts)
    if isinstance(value, str) and value.startswith("zipf:"):
        try:
            exponent = float(value[len("zipf:"):])
        except ValueError:
            exponent = math.nan
        return zipf(experts, exponent)
    if isinstance(value, str) and value.startswith("histogram:"):
        try:
            counts = [float(c) for c in value[len("histogram:"):].split("/")]
        except ValueError:
            raise InputError(f"histogram counts must be numbers separated by '/', got {value!r}", "routing") from None
        return histogram(counts, experts)
    raise InputError(f"expects uniform, zipf:S or histogram:c0/c1/..., got {value!r}", "routing")


def parse_capacity(value, where: str = "capacity") -> float | None:
    """'dropless' / None, or a capacity factor >= 1 (below 1 drops tokens even when balanced);
    InputError naming `where` otherwise."""
    if value is None or value == "dropless":
        return None
    try:
        factor = float(value)
    except (TypeError, ValueError):
        factor = math.nan
    if isinstance(value, bool) or not (1.0 <= factor <= 64.0):
        raise InputError(f"expects 'dropless' or a capacity factor from 1 to 64, got {value!r}", where)
    return factor
