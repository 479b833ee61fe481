"""`ParallelConfig`: how one operator is split — a degree per named dimension, and the devices used.

The product of the degrees equals the number of devices. Device `devices[i]` holds the tile whose
multi-index is the i-th in row-major order over `degrees` (first dimension varies slowest).
A degree on `REPLICA` (not a dimension of any operator) makes that many identical copies: each
copy runs the whole tile, so nothing is communicated among them (Megatron runs Input, ReLU and the
loss this way beside tensor-parallel layers).
"""
from __future__ import annotations

import math
from dataclasses import dataclass


REPLICA = "replica"


@dataclass(frozen=True)
class ParallelConfig:
    """One parallel configuration of an operator: the degree each dimension is split by, and the devices that
    hold its tiles (product of degrees = number of devices; the devices are distinct).
    """
    degrees: tuple[tuple[str, int], ...]  # (dimension name, degree), in the operator's dimension order
    devices: tuple[int, ...]

    def __post_init__(self):
        if math.prod(d for _, d in self.degrees) != len(self.devices):
            raise ValueError(f"degrees {self.degrees} do not multiply to {len(self.devices)} devices")
        if len(set(self.devices)) != len(self.devices):
            raise ValueError(f"devices repeat in {self.devices}")

    def __hash__(self) -> int:
        # memoised: the devices may number thousands (3,072 on megatron-1T's cluster) and the cost
        # model keys its caches on configurations: building megatron-1T@3072 hashed 28 k of them,
        # 0.35 s of a 3.6 s profiled build
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.degrees, self.devices))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # string hashes differ between processes (a solver worker's): the memoised hash stays here
        return {key: value for key, value in self.__dict__.items() if key != "_hash"}

    @property
    def num_devices(self) -> int:
        """Number of devices the configuration uses."""
        return len(self.devices)

    def degree(self, dim: str) -> int:
        """The degree dimension `dim` is split by; 1 when not split."""
        for name, degree in self.degrees:
            if name == dim:
                return degree
        return 1

    @property
    def replicas(self) -> int:
        """Identical copies of each tile (the `REPLICA` degree)."""
        return self.degree(REPLICA)

    @property
    def num_shards(self) -> int:
        """Distinct tiles: devices / replicas (what divides the work)."""
        return self.num_devices // self.replicas

    @property
    def degree_map(self) -> dict[str, int]:
        """Degrees as a {dimension name: degree} dict."""
        return dict(self.degrees)

    def tile_index(self, position: int) -> tuple[int, ...]:
        """Multi-index (one coordinate per dimension) of the tile held by devices[position]."""
        index = []
        for _, degree in reversed(self.degrees):
            index.append(position % degree)
            position //= degree
        return tuple(reversed(index))

    def label(self) -> str:
        """Short human label, e.g. "batch=4 out=2 @ d0-d7" ("replica" when nothing is split)."""
        split = [f"{name}={deg}" for name, deg in self.degrees if deg > 1] or ["replica"]
        devs = self.devices
        if len(devs) > 2 and devs == tuple(range(devs[0], devs[0] + len(devs))):
            where = f"d{devs[0]}-d{devs[-1]}"
        else:
            where = ",".join(f"d{d}" for d in devs)
        return f"{' '.join(split)} @ {where}"
