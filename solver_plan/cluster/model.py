"""The `Cluster` value: nodes x devices per node, one device type, two link levels.

Hardware numbers: `w` is seconds per FLOP (1 / peak FLOP/s unless overridden), `g` seconds per
byte on a link level (1 / bandwidth unless overridden). Costs of a group of devices use the
slowest level the group spans, so a configuration crossing nodes pays inter-node bandwidth.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from solver_plan.errors import ClusterError


class LinkLevel(enum.IntEnum):
    SAME_DEVICE = 0
    INTRA_NODE = 1
    INTER_NODE = 2


@dataclass(frozen=True)
class Link:
    bandwidth: float  # bytes per second
    latency: float = 0.0  # seconds per message

    def __post_init__(self):
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ClusterError(f"link bandwidth must be positive, got {self.bandwidth}")
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise ClusterError(f"link latency must be non-negative, got {self.latency}")


@dataclass(frozen=True)
class DeviceSpec:
    name: str
    peak_flops: float  # FLOP per second
    memory: float  # bytes

    def __post_init__(self):
        if self.peak_flops <= 0 or self.memory <= 0:
            raise ClusterError(f"device {self.name!r}: peak_flops and memory must be positive")


@dataclass(frozen=True)
class Cluster:
    name: str
    nodes: int
    devices_per_node: int
    device: DeviceSpec
    intra_node: Link
    inter_node: Link | None = None
    w_override: float | None = None
    g_overrides: tuple[tuple[LinkLevel, float], ...] = field(default=())

    def __post_init__(self):
        if self.nodes < 1 or self.devices_per_node < 1:
            raise ClusterError(f"cluster {self.name!r}: nodes and devices_per_node must be >= 1")
        if self.nodes > 1 and self.inter_node is None:
            raise ClusterError(f"cluster {self.name!r}: {self.nodes} nodes need an inter_node link")

    # --- topology -------------------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        return self.nodes * self.devices_per_node

    def node_of(self, device: int) -> int:
        return device // self.devices_per_node

    def level(self, a: int, b: int) -> LinkLevel:
        if a == b:
            return LinkLevel.SAME_DEVICE
        if self.node_of(a) == self.node_of(b):
            return LinkLevel.INTRA_NODE
        return LinkLevel.INTER_NODE

    def group_level(self, devices) -> LinkLevel:
        """The slowest level that links some pair of the given devices."""
        devices = tuple(devices)
        if len(devices) <= 1:
            return LinkLevel.SAME_DEVICE
        nodes = {self.node_of(d) for d in devices}
        return LinkLevel.INTER_NODE if len(nodes) > 1 else LinkLevel.INTRA_NODE

    def link(self, level: LinkLevel) -> Link | None:
        if level == LinkLevel.INTRA_NODE:
            return self.intra_node
        if level == LinkLevel.INTER_NODE:
            return self.inter_node
        return None

    # --- hardware numbers -----------------------------------------------------------------
    @property
    def w(self) -> float:
        """Seconds per FLOP on one device."""
        return self.w_override if self.w_override is not None else 1.0 / self.device.peak_flops

    def g(self, level: LinkLevel) -> float:
        """Seconds per byte on a link level (0 on the same device)."""
        if level == LinkLevel.SAME_DEVICE:
            return 0.0
        for lvl, value in self.g_overrides:
            if lvl == level:
                return value
        link = self.link(level)
        if link is None:  # single node asked for inter-node: cannot happen with valid devices
            raise ClusterError(f"cluster {self.name!r} has no {level.name.lower()} link")
        return 1.0 / link.bandwidth

    def g_between(self, a: int, b: int) -> float:
        return self.g(self.level(a, b))

    def g_group(self, devices) -> float:
        return self.g(self.group_level(devices))

    def bandwidth(self, a: int, b: int) -> float:
        level = self.level(a, b)
        return math.inf if level == LinkLevel.SAME_DEVICE else 1.0 / self.g(level)

    def latency(self, a: int, b: int) -> float:
        link = self.link(self.level(a, b))
        return 0.0 if link is None else link.latency

    def group_latency(self, devices) -> float:
        link = self.link(self.group_level(devices))
        return 0.0 if link is None else link.latency

    # --- derived clusters -----------------------------------------------------------------
    def first_devices(self, count: int) -> "Cluster":
        """The cluster restricted to its first `count` devices (whole nodes, or part of one)."""
        if count < 1 or count > self.num_devices:
            raise ClusterError(f"--devices must be in 1..{self.num_devices} for {self.name!r}, got {count}")
        if count <= self.devices_per_node:
            nodes, per_node = 1, count
        elif count % self.devices_per_node == 0:
            nodes, per_node = count // self.devices_per_node, self.devices_per_node
        else:
            raise ClusterError(
                f"--devices {count} on {self.name!r}: use at most {self.devices_per_node} "
                f"(one node) or a multiple of {self.devices_per_node} (whole nodes)")
        return Cluster(f"{self.name}[:{count}]", nodes, per_node, self.device, self.intra_node,
                       self.inter_node if nodes > 1 else None, self.w_override, self.g_overrides)

    def describe(self) -> str:
        from solver_plan.units import format_bytes
        text = (f"{self.name}: {self.nodes} node(s) x {self.devices_per_node} {self.device.name} "
                f"({self.device.peak_flops / 1e12:.1f} TFLOP/s, {format_bytes(self.device.memory)}); "
                f"intra-node {self.intra_node.bandwidth / 1e9:.1f} GB/s")
        if self.inter_node is not None:
            text += f", inter-node {self.inter_node.bandwidth / 1e9:.2f} GB/s"
        return text
