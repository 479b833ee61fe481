"""`ChainProblem`: a chain of layers to pipeline on P identical processors of memory M, linked
pairwise at bandwidth beta (bytes/s; math.inf means free transfers).

Stage quantities use 0-based inclusive layer ranges [first, last]. Memory of a normal processor
holding layers k..l with g batches in flight (MadPipe 4.2.1, generalised to DAG cuts, with the
model state of the training precision and optimizer instead of the paper's 3 W):
    f W(k..l) + g * abar(k, l) + 2 (a_{k-1} [k > 0] + a_l [l < L-1]),
f = `state.weight_factor` (`pipeline.memory`): state bytes per parameter / bytes per parameter of
W, e.g. 16 / 2 = 8 for mixed-precision Adam on bf16 weights, 16 / 4 = 4 for fp32 Adam, 3 for
PipeDream's rule. `state_memory` is the one place the pipeline charges weights.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import accumulate

from solver_plan.errors import InputError
from solver_plan.pipeline.chain import LayerChain
from solver_plan.pipeline.memory import DEFAULT_STATE, ModelState

BUFFER_COPIES = 2  # a send/receive buffer for the activation and its gradient


def _prefix(values) -> tuple[float, ...]:
    return (0.0, *accumulate(values))


@dataclass(frozen=True)
class ChainProblem:
    """A chain to pipeline on `processors` identical processors of `memory` bytes linked at `bandwidth`,
    with per-range sums precomputed (see the module text for the memory rule)."""
    chain: LayerChain
    processors: int
    memory: float  # bytes per processor
    bandwidth: float  # bytes per second; math.inf for free transfers
    state: ModelState = DEFAULT_STATE  # model state per byte of W (precision and optimizer)
    _sums: dict = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self):
        where = f"pipeline problem for {self.chain.name!r}"
        if isinstance(self.processors, bool) or not isinstance(self.processors, int) or self.processors < 1:
            raise InputError(f"the number of processors must be a positive integer, got {self.processors!r}", where)
        if self.processors > len(self.chain):
            raise InputError(f"{self.processors} processors but the chain has only {len(self.chain)} layers; "
                             f"use at most {len(self.chain)} processors", where)
        if not (isinstance(self.memory, (int, float)) and self.memory > 0 and math.isfinite(self.memory)):
            raise InputError(f"memory must be a positive number of bytes, got {self.memory!r}", where)
        if not (isinstance(self.bandwidth, (int, float)) and self.bandwidth > 0):
            raise InputError(f"bandwidth must be positive (bytes/s, inf for free transfers), got {self.bandwidth!r}", where)
        if not isinstance(self.state, ModelState):
            raise InputError(f"state must be a pipeline.memory.ModelState, got {self.state!r}", where)
        c = self.chain
        object.__setattr__(self, "_sums", {
            "u": _prefix(f + b for f, b in zip(c.forward_s, c.backward_s)),
            "uf": _prefix(c.forward_s), "ub": _prefix(c.backward_s), "w": _prefix(c.weight_bytes),
            "inner": _prefix(c.inner), "out": _prefix(c.output)})

    # --- layers ------------------------------------------------------------------------------
    @property
    def layers(self) -> int:
        """Layers of the chain (L)."""
        return len(self.chain)

    @property
    def name(self) -> str:
        """The chain's (model's) name."""
        return self.chain.name

    def with_(self, **changes) -> "ChainProblem":
        """A copy with `changes` applied (dataclasses.replace)."""
        from dataclasses import replace
        return replace(self, **changes)

    def cut(self, i: int) -> float:
        """Bytes crossing the cut after layer i (i = -1: the input)."""
        return self.chain.input_bytes if i < 0 else self.chain.cut[i]

    def comm_time(self, i: int) -> float:
        """One transfer (forward activation or backward gradient) across the cut after layer i."""
        return 0.0 if math.isinf(self.bandwidth) else self.cut(i) / self.bandwidth

    def comm_load(self, i: int) -> float:
        """C(i) = 2 a_i / beta: both directions of the cut after layer i on one link."""
        return 2.0 * self.comm_time(i)

    # --- stages (inclusive layer ranges) -------------------------------------------------------
    def _range_sum(self, key: str, first: int, last: int) -> float:
        """Sum of a per-layer quantity over layers first..last, from its prefix sums."""
        sums = self._sums[key]
        return sums[last + 1] - sums[first]

    def load(self, first: int, last: int) -> float:
        """U(first, last): forward plus backward seconds of layers first..last."""
        return self._range_sum("u", first, last)

    def forward_time(self, first: int, last: int) -> float:
        """Forward seconds of layers first..last."""
        return self._range_sum("uf", first, last)

    def backward_time(self, first: int, last: int) -> float:
        """Backward seconds of layers first..last."""
        return self._range_sum("ub", first, last)

    def weights(self, first: int, last: int) -> float:
        """W(first, last): weight bytes of layers first..last."""
        return self._range_sum("w", first, last)

    def state_memory(self, first: int, last: int) -> float:
        """Model state of layers first..last: f W (weights, gradients, master copy, optimizer moments;
        `pipeline.memory.state_bytes_per_parameter` per parameter)."""
        return self.state.weight_factor * self.weights(first, last)

    def stored(self, first: int, last: int) -> float:
        """abar: bytes kept per batch in flight by a stage of layers first..last."""
        inner, out = self._sums["inner"], self._sums["out"]
        return self.cut(first - 1) + inner[last + 1] - inner[first] + out[last] - out[first]

    def buffers(self, first: int, last: int) -> float:
        """Communication buffers of a stage whose neighbours are on other processors."""
        before = self.cut(first - 1) if first > 0 else 0.0
        after = self.cut(last) if last < self.layers - 1 else 0.0
        return BUFFER_COPIES * (before + after)

    def stage_memory(self, first: int, last: int, in_flight: float) -> float:
        """M(k, l, g) of MadPipe 4.2.1 for a stage alone on a normal processor."""
        return (self.state_memory(first, last) + in_flight * self.stored(first, last)
                + self.buffers(first, last))

    def stage_memory_from(self, first: int, in_flight: float):
        """M(first, l, in_flight) for every l >= first, as a numpy vector (the same formula as
        `stage_memory`, for the DPs)."""
        s = self._arrays()
        w = s["w"][first + 1:] - s["w"][first]
        inner = s["inner"][first + 1:] - s["inner"][first]
        out = s["out"][first:-1] - s["out"][first]
        after = s["cut_after"][first:]
        before = self.cut(first - 1) if first > 0 else 0.0
        return self.state.weight_factor * w + in_flight * (self.cut(first - 1) + inner + out) + BUFFER_COPIES * (before + after)

    def loads_from(self, first: int):
        """U(first, l) for every l >= first, as a numpy vector."""
        u = self._arrays()["u"]
        return u[first + 1:] - u[first]

    def _arrays(self) -> dict:
        """The prefix sums as numpy arrays (built once, for the vectorised DPs)."""
        if "np" not in self._sums:
            import numpy as np
            arrays = {key: np.asarray(values, dtype=float) for key, values in self._sums.items()}
            arrays["cut_after"] = np.asarray(self.chain.cut[:-1] + (0.0,), dtype=float)  # nothing after the last
            self._sums["np"] = arrays
        return self._sums["np"]

    @property
    def total_load(self) -> float:
        """U: forward plus backward seconds of the whole chain."""
        return self.load(0, self.layers - 1)

    @property
    def load_bound(self) -> float:
        """max(total load / processors, the heaviest single layer's load): no period is shorter,
        whatever the cuts (every layer's load is carried by some processor)."""
        return max(self.total_load / self.processors, max(self.load(i, i) for i in range(self.layers)))

    @property
    def total_comm(self) -> float:
        """Sum of C(i) over every cut: the link time of one batch if every cut crossed processors."""
        return sum(self.comm_load(i) for i in range(self.layers - 1))
