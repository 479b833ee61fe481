"""Model specs of generated problems: `FAMILY:key=value,...`, parsed and validated at the boundary.

Keys (all optional except `nodes`):
- nodes: number of operators (2 .. 20,000)
- candidates: candidates per operator, one number or a range `6-30` (each node draws its count
  uniformly from the range); at most 2 x (2 x devices - 1), the distinct (device block, split) pairs
- seed: the generator's seed (>= 0); equal specs give equal problems, bit for bit
- memory: `none` (no limit), `binding` (the per-node cheapest plan breaks it, spreading every node
  fits) or `infeasible` (below the least possible peak, provably)
- devices: 2, 4, 8, 16, 32 or 64 (default 8)
"""
from __future__ import annotations

from dataclasses import dataclass

from solver_plan.errors import InputError
from solver_plan.keyvalues import parse_key_values

FAMILIES = ("random-dag", "series-parallel", "skip-chain")
MEMORY_LEVELS = ("none", "binding", "infeasible")
DEVICE_COUNTS = (2, 4, 8, 16, 32, 64)
MAX_NODES = 20_000
# Generated problems carry their own devices: their jobs name no cluster, and their records this one.
GENERATED_CLUSTER = "generated"


@dataclass(frozen=True)
class ProblemSpec:
    """A parsed, validated generated-problem spec (see the module text for each key)."""
    family: str
    nodes: int
    min_candidates: int
    max_candidates: int
    seed: int = 0
    memory: str = "none"
    devices: int = 8

    def __post_init__(self):
        where = "model spec"
        if self.family not in FAMILIES:
            raise InputError(f"unknown problem family {self.family!r}; expected one of {', '.join(FAMILIES)}", where)
        if not 2 <= self.nodes <= MAX_NODES:
            raise InputError(f"nodes must be in 2..{MAX_NODES}, got {self.nodes}", where)
        if self.devices not in DEVICE_COUNTS:
            raise InputError(f"devices must be one of {DEVICE_COUNTS}, got {self.devices}", where)
        most = max_candidates(self.devices)
        if not 2 <= self.min_candidates <= self.max_candidates <= most:
            raise InputError(f"candidates must be a range within 2..{most} on {self.devices} devices, got "
                             f"{self.min_candidates}-{self.max_candidates}", where)
        if self.seed < 0:
            raise InputError(f"seed must be >= 0, got {self.seed}", where)
        if self.memory not in MEMORY_LEVELS:
            raise InputError(f"memory must be one of {', '.join(MEMORY_LEVELS)}, got {self.memory!r}", where)


def max_candidates(devices: int) -> int:
    """Aligned power-of-two device blocks (2 x devices - 1 of them) times two split dimensions."""
    return 2 * (2 * devices - 1)


def is_problem_spec(spec: str) -> bool:
    """Whether a MODEL spec names a generated problem (its prefix is a family)."""
    return isinstance(spec, str) and spec.split(":", 1)[0].strip() in FAMILIES


def parse_problem_spec(spec: str) -> ProblemSpec:
    """`random-dag:nodes=100,candidates=6-30,seed=1,memory=binding` -> ProblemSpec (InputError if bad)."""
    family, _, rest = spec.partition(":")
    family = family.strip()
    where = "model spec"
    values = parse_key_values(rest, where, f"{family}:key=value,key=value")
    unknown = sorted(set(values) - {"nodes", "candidates", "seed", "memory", "devices"})
    if unknown:
        raise InputError(f"{family} has no option {unknown[0]!r} (options: nodes, candidates, seed, memory, "
                         "devices)", where)
    if "nodes" not in values:
        raise InputError(f"{spec!r} needs nodes=N", where)
    low, high = _range(values.get("candidates", "6-30"), where)
    return ProblemSpec(family, _integer(values["nodes"], "nodes", where), low, high,
                       seed=_integer(values.get("seed", "0"), "seed", where), memory=values.get("memory", "none"),
                       devices=_integer(values.get("devices", "8"), "devices", where))


def check_problem_spec(spec: str) -> None:
    """InputError unless `spec` is a valid generated-problem spec; builds nothing."""
    parse_problem_spec(spec)


def _integer(text: str, key: str, where: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise InputError(f"{key} must be an integer, got {text!r}", where) from None


def _range(text: str, where: str) -> tuple[int, int]:
    low, dash, high = text.partition("-")
    low_value = _integer(low, "candidates", where)
    return low_value, _integer(high, "candidates", where) if dash else low_value
