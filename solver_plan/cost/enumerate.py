"""Candidate parallel configurations of an operator: deterministic, capped.

Device counts are the powers of two up to the cluster size plus the cluster size itself. For a
count n every assignment of degrees (each dividing its dimension's size) multiplying to n is a
candidate, placed on aligned contiguous blocks of n devices (offset a multiple of n; at most
`max_placements` of them, spread evenly over the cluster). Candidates are ranked by placement (the
first block first), then by how many dimensions they split, then by more devices first, then by
degrees; the first `max_candidates` are kept. The single-device and data-parallel configurations
are always included.

Cheap operators (`REPLICABLE`: Input, element-wise, norms, pooling, softmax, loss, shape ops) also
get replicated configurations: every degree 1 and a `REPLICA` degree of n, the whole tensor on each
of n devices, on the same blocks (ranked as one split); replication on all devices is always
included. Megatron-LM runs these operators this way between tensor-parallel layers, so without them
tensor parallelism pays a gather at every cheap operator.

`all_devices=True` keeps only configurations on every device of the cluster (Alpa's intra-operator
ILP setting: each operator is split or replicated over the whole mesh).
"""
from __future__ import annotations

import math
from functools import lru_cache


from solver_plan.cost.config import REPLICA, ParallelConfig
from solver_plan.cost.dims import Dimension, op_dimensions
from solver_plan.errors import InputError
from solver_plan.graph.ir import Graph, Operator
from solver_plan.graph.ops import OpType

REPLICABLE = frozenset({OpType.INPUT, OpType.UNARY, OpType.BINARY, OpType.SOFTMAX, OpType.SOFTMAX_CE,
                        OpType.LAYERNORM, OpType.BATCHNORM, OpType.POOL2D, OpType.CONCAT, OpType.SPLIT,
                        OpType.RESHAPE, OpType.TRANSPOSE})

DEFAULT_MAX_CANDIDATES = 24  # configurations per operator (a request default, re-exported by requests.py)
DEFAULT_MAX_PLACEMENTS = 2


def device_counts(num_devices: int) -> tuple[int, ...]:
    """Device counts a configuration may use: the powers of two up to `num_devices`, and `num_devices` itself.
    """
    counts = {1 << i for i in range(num_devices.bit_length()) if (1 << i) <= num_devices}
    return tuple(sorted(counts | {num_devices}))


@lru_cache(maxsize=4096)  # pure; was rebuilt per degree assignment (0.2 s of a 1 s gpt3-175B@1024 build)
def placements(count: int, num_devices: int, max_placements: int) -> tuple[tuple[int, ...], ...]:
    """Up to `max_placements` aligned blocks of `count` devices, spread evenly, first block first."""
    blocks = num_devices // count
    chosen = min(blocks, max_placements)
    offsets = sorted({(i * blocks // chosen) * count for i in range(chosen)})
    return tuple(tuple(range(o, o + count)) for o in offsets)


def degree_assignments(dims: tuple[Dimension, ...], count: int) -> list[tuple[int, ...]]:
    """Every tuple of degrees (one per dimension, each dividing its size) whose product is `count`,
    the first dimension's degree ascending, then the next's, and so on."""
    return list(_degree_assignments(tuple(d.size for d in dims), count))


@lru_cache(maxsize=4096)  # pure; the candidates of an operator over 3,072 devices asked ~30,000 times
def _degree_assignments(sizes: tuple[int, ...], count: int) -> tuple[tuple[int, ...], ...]:
    if not sizes:
        return ((),) if count == 1 else ()
    result: list[tuple[int, ...]] = []
    for degree in _divisors(math.gcd(count, sizes[0])):  # the degrees dividing both, ascending
        result.extend((degree,) + tail for tail in _degree_assignments(sizes[1:], count // degree))
    return tuple(result)


def _divisors(n: int) -> list[int]:
    """The divisors of n >= 1, ascending (trial division up to sqrt(n))."""
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return small + [n // k for k in reversed(small) if k * k != n]


def _config(dims: tuple[Dimension, ...], degrees: tuple[int, ...], devices: tuple[int, ...]) -> ParallelConfig:
    return ParallelConfig(tuple((d.name, k) for d, k in zip(dims, degrees)), devices)


def replicated_config(dims: tuple[Dimension, ...], devices: tuple[int, ...]) -> ParallelConfig:
    """Every dimension of degree 1, a copy of the whole operator on each of `devices`."""
    return ParallelConfig(tuple((d.name, 1) for d in dims) + ((REPLICA, len(devices)),), tuple(devices))


def _check_at_least(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"expected an integer >= {minimum}, got {value!r}", name)


def _single(dims: tuple[Dimension, ...]) -> ParallelConfig:
    return _config(dims, (1,) * len(dims), (0,))


def _data_parallel(dims: tuple[Dimension, ...], num_devices: int) -> ParallelConfig:
    batch = next(d.size for d in dims if d.name == "sample")
    n = max(k for k in range(1, min(batch, num_devices) + 1) if batch % k == 0)
    return _config(dims, tuple(n if d.name == "sample" else 1 for d in dims), tuple(range(n)))


def single_device_config(op: Operator, graph: Graph) -> ParallelConfig:
    """All degrees 1, on device 0."""
    return _single(op_dimensions(op, graph))


def data_parallel_config(op: Operator, graph: Graph, num_devices: int) -> ParallelConfig:
    """Split `sample` by the largest divisor of the batch not above `num_devices`, on devices 0..n-1."""
    _check_at_least("num_devices", num_devices, 1)
    return _data_parallel(op_dimensions(op, graph), num_devices)


def enumerate_configs(op: Operator, graph: Graph, num_devices: int,
                      max_candidates: int = DEFAULT_MAX_CANDIDATES,
                      max_placements: int = DEFAULT_MAX_PLACEMENTS, *,
                      all_devices: bool = False) -> tuple[ParallelConfig, ...]:
    """Candidate `ParallelConfig`s of an operator on `num_devices` devices, at most `max_candidates` of them
    and `max_placements` placements per degree assignment; `all_devices` keeps only configurations that use
    the whole mesh. InputError for a limit that is not an integer at least its minimum.
    """
    _check_at_least("num_devices", num_devices, 1)
    _check_at_least("max_candidates", max_candidates, 2)  # room for the two required configurations
    _check_at_least("max_placements", max_placements, 1)
    replicable = op.op_type in REPLICABLE
    if all_devices:
        return _whole_mesh(op_dimensions(op, graph), num_devices, max_candidates, replicable)
    return _candidates(op_dimensions(op, graph), num_devices, max_candidates, max_placements, replicable)


@lru_cache(maxsize=10_000)
def _candidates(dims: tuple[Dimension, ...], num_devices: int, max_candidates: int,
                max_placements: int, replicable: bool = False) -> tuple[ParallelConfig, ...]:
    ranked = []
    for count in device_counts(num_devices):
        for degrees in degree_assignments(dims, count):
            split = sum(k > 1 for k in degrees)
            for place, devices in enumerate(placements(count, num_devices, max_placements)):
                ranked.append(((place, split, -count, degrees), degrees, devices))
        if replicable and count > 1:
            for place, devices in enumerate(placements(count, num_devices, max_placements)):
                ranked.append(((place, 1, -count, (0,) * len(dims)), None, devices))
    ranked.sort(key=lambda item: item[0])
    required = [_single(dims), _data_parallel(dims, num_devices)]
    if replicable and num_devices > 1:
        required.append(replicated_config(dims, tuple(range(num_devices))))
    chosen = list(dict.fromkeys(required))
    for _, degrees, devices in ranked:
        if len(chosen) >= max_candidates:
            break
        cfg = replicated_config(dims, devices) if degrees is None else _config(dims, degrees, devices)
        if cfg not in chosen:
            chosen.append(cfg)
    return tuple(chosen)


@lru_cache(maxsize=10_000)
def _whole_mesh(dims: tuple[Dimension, ...], num_devices: int, max_candidates: int,
                replicable: bool) -> tuple[ParallelConfig, ...]:
    """Configurations on devices 0..N-1 only: every degree assignment of N (fewest split dimensions
    first), plus replication for cheap operators; an operator no assignment fits (a batch not
    divisible by N, say) keeps its widest data-parallel configuration so the problem stays solvable."""
    devices = tuple(range(num_devices))
    assignments = sorted(degree_assignments(dims, num_devices), key=lambda d: (sum(k > 1 for k in d), d))
    chosen = []
    if replicable and num_devices > 1:
        chosen.append(replicated_config(dims, devices))
    chosen.extend(_config(dims, degrees, devices) for degrees in assignments)
    if not chosen:
        chosen.append(_data_parallel(dims, num_devices))
    return tuple(dict.fromkeys(chosen[:max(max_candidates, 1)]))
