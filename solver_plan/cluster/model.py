"""The `Cluster` value: nodes x devices per node, one device type, two link levels.

Hardware numbers: `w` is seconds per FLOP (1 / peak FLOP/s unless overridden), `g` the achieved
seconds per byte one device moves on a link level: 1 / (bandwidth per device x link efficiency)
unless overridden; `g_p2p` the same for one point-to-point copy, at the link's `p2p_efficiency`
(a measured peer-to-peer copy rate; the collective `efficiency` where none is given). Between nodes a device's bandwidth is its share of the node's NICs:
nics_per_node x NIC bandwidth / devices_per_node (each GPU its own NIC on DGX-class nodes).

The device carries what the compute model needs (`cost/compute.py`): peak FLOP/s per dtype on the
matrix (tensor-core) and vector units, HBM bandwidth, achieved-efficiency curves and a kernel
launch overhead. All are optional: a device given by one `peak_flops` runs every dtype at that
peak, at 100% efficiency, with no memory roofline (the behaviour of the first cost model).
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from solver_plan.cluster.sync import GradientSync
from solver_plan.dtypes import default_precision_name
from solver_plan.errors import ClusterError
from solver_plan.units import format_bytes


class LinkLevel(enum.IntEnum):
    """How two devices are linked: the same device, the same node, or different nodes (slowest last)."""
    SAME_DEVICE = 0
    INTRA_NODE = 1
    INTER_NODE = 2


@dataclass(frozen=True)
class Link:
    """One level of interconnect in the alpha-beta model: bandwidth (beta = 1 / (bandwidth x efficiency)),
    latency (alpha) per message, and the NICs that share it between nodes.
    """
    bandwidth: float  # bytes per second (inter-node: per NIC)
    latency: float = 0.0  # seconds per message (alpha of the alpha-beta model)
    efficiency: float = 1.0  # achieved fraction of `bandwidth` (NCCL bus bandwidth / link rate)
    nics_per_node: int | None = None  # inter-node only; None: one per device
    # Achieved fraction of `bandwidth` for one point-to-point copy between two devices (CUDA's
    # p2pBandwidthLatencyTest), which can differ from a collective's bus-bandwidth fraction;
    # None: `efficiency` (so a link given one figure prices both alike).
    p2p_efficiency: float | None = None

    def __post_init__(self):
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ClusterError(f"link bandwidth must be positive, got {self.bandwidth}")
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise ClusterError(f"link latency must be non-negative, got {self.latency}")
        if not (math.isfinite(self.efficiency) and 0 < self.efficiency <= 1):
            raise ClusterError(f"link efficiency must be in (0, 1], got {self.efficiency}")
        if self.p2p_efficiency is not None and not (
                isinstance(self.p2p_efficiency, (int, float)) and not isinstance(self.p2p_efficiency, bool)
                and math.isfinite(self.p2p_efficiency) and 0 < self.p2p_efficiency <= 1):
            raise ClusterError(f"link p2p_efficiency must be in (0, 1], got {self.p2p_efficiency!r}")
        if self.nics_per_node is not None and (isinstance(self.nics_per_node, bool) or
                                               not isinstance(self.nics_per_node, int) or self.nics_per_node < 1):
            raise ClusterError(f"nics_per_node must be a positive integer, got {self.nics_per_node!r}")

    @property
    def point_to_point_efficiency(self) -> float:
        """Achieved fraction of `bandwidth` for a point-to-point copy: `p2p_efficiency`, else `efficiency`."""
        return self.efficiency if self.p2p_efficiency is None else self.p2p_efficiency


Curve = tuple[tuple[float, float], ...]  # (threshold, efficiency), thresholds descending


def _check_curve(name: str, curve: Curve) -> None:
    thresholds = [t for t, _ in curve]
    if thresholds != sorted(thresholds, reverse=True) or len(set(thresholds)) != len(thresholds):
        raise ClusterError(f"{name}: thresholds must be strictly decreasing, got {thresholds}")
    if curve and thresholds[-1] != 0:
        raise ClusterError(f"{name}: the last threshold must be 0 (covers every size), got {thresholds[-1]}")
    for t, e in curve:
        if not (math.isfinite(t) and t >= 0 and math.isfinite(e) and 0 < e <= 1):
            raise ClusterError(f"{name}: entries must be [size >= 0, efficiency in (0, 1]], got {[t, e]}")


FP8_SCALINGS = ("tensor", "block")  # DeviceSpec.fp8_scaling
HOST_CPUS = ("x86", "grace")  # DeviceSpec.host_cpu


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator: peak FLOP/s per dtype on its matrix and vector units, memory, HBM bandwidth and the
    achieved-fraction curves that the compute roofline (`cost/compute.py`) reads.
    """
    name: str
    peak_flops: float  # FLOP per second: the peak of the default compute dtype (or of every dtype)
    memory: float  # bytes
    matrix_flops: tuple[tuple[str, float], ...] = ()  # (dtype name, FLOP/s) of the matrix units
    vector_flops: tuple[tuple[str, float], ...] = ()  # (dtype name, FLOP/s) of the vector units
    hbm_bandwidth: float | None = None  # bytes per second; None: no memory roofline
    matrix_efficiency: Curve = ()  # (GFLOP per operation, achieved fraction of peak)
    vector_efficiency: Curve = ()
    memory_efficiency: Curve = ()  # (MB per operation, achieved fraction of HBM bandwidth)
    launch_overhead: float = 0.0  # seconds per kernel
    # (smallest GEMM dimension in elements, achieved fraction relative to a wide GEMM of the same
    # FLOPs): tile quantisation and low reuse of narrow matrix kernels (cost/compute.py)
    narrow_efficiency: Curve = ()
    # Calibrated factor on every kernel's time (1: the curves as published). Fitted from a measured
    # layer time (scripts/hybrid_vs_published.py on data/published/hybrid.yaml's `calibrate` entries).
    kernel_time_scale: float = 1.0
    # (fused attention kernel family, curve of (query length in tokens, achieved fraction of the
    # 16-bit matrix peak over forward and backward)): "flash2", "cudnn" (runtime.profiles
    # Kernels.attention_backend); measured kernel facts (data/hardware/devices.yaml, data/device/): a
    # fused kernel's efficiency rises with the sequence (more key blocks per query tile), not with the
    # head count or batch. One number in the YAML is a flat curve ((0, x),). A family not listed
    # runs at the matrix efficiency curve
    attention_efficiency: tuple[tuple[str, Curve], ...] = ()
    # (dtype, factor on the matrix efficiency curve for that dtype's GEMMs): e.g. fp8 GEMMs reach a
    # smaller fraction of their doubled peak than 16-bit ones; a dtype not listed: factor 1
    dtype_efficiency: tuple[tuple[str, float], ...] = ()
    # How the device's tensor cores scale fp8 operands: "tensor" (one scale per tensor: Hopper, Ada,
    # MI300X; Transformer Engine's delayed / current scaling) or "block" (hardware block scales, the
    # OCP MX formats: Blackwell's 5th-generation tensor cores, on which NVIDIA's fp8 recipes run
    # MXFP8). It decides the fp8 training recipe a runtime uses there (hybrid/moe_host.expert_recipe)
    fp8_scaling: str = "tensor"
    # The CPU that issues the device's kernels: "x86" (DGX / HGX hosts) or "grace" (NVIDIA's Grace,
    # the CPU of the GH200 / GB200 superchips). It decides the host's seconds per issued kernel
    # (hybrid/moe_host.HOST_CPU_FACTOR)
    host_cpu: str = "x86"
    # Streaming multiprocessors (AMD: compute units) of the device, from its datasheet; 0: not known.
    # With `collective_ctas`, the share of the device a concurrent communication kernel holds
    # (hybrid/contention.py)
    sm_count: int = 0
    # CTAs (one per channel, each resident on its own SM) a NCCL collective launches on the device in
    # its usual topology (8 GPUs on NVLink switches, a NIC per GPU); 0: not known (no contention
    # priced for the collectives)
    collective_ctas: int = 0

    def __post_init__(self):
        if not (self.peak_flops > 0 and self.memory > 0):
            raise ClusterError(f"device {self.name!r}: peak_flops and memory must be positive")
        for table in (self.matrix_flops, self.vector_flops):
            for dtype, flops in table:
                if not (isinstance(dtype, str) and math.isfinite(flops) and flops > 0):
                    raise ClusterError(f"device {self.name!r}: peak of {dtype!r} must be positive, got {flops}")
        if self.hbm_bandwidth is not None and not (math.isfinite(self.hbm_bandwidth) and self.hbm_bandwidth > 0):
            raise ClusterError(f"device {self.name!r}: hbm_bandwidth must be positive, got {self.hbm_bandwidth}")
        for name in ("matrix_efficiency", "vector_efficiency", "memory_efficiency", "narrow_efficiency"):
            _check_curve(f"device {self.name!r} {name}", getattr(self, name))
        if not (math.isfinite(self.launch_overhead) and self.launch_overhead >= 0):
            raise ClusterError(f"device {self.name!r}: launch_overhead must be non-negative")
        for backend, curve in self.attention_efficiency:
            if not isinstance(backend, str):
                raise ClusterError(f"device {self.name!r}: attention_efficiency keys must be kernel families")
            _check_curve(f"device {self.name!r} attention_efficiency of {backend!r}", curve)
        for dtype, fraction in self.dtype_efficiency:
            if not (isinstance(dtype, str) and math.isfinite(fraction) and 0 < fraction <= 1):
                raise ClusterError(f"device {self.name!r}: dtype_efficiency of {dtype!r} must be in (0, 1], "
                                   f"got {fraction}")
        if self.fp8_scaling not in FP8_SCALINGS:
            raise ClusterError(f"device {self.name!r}: fp8_scaling must be one of {', '.join(FP8_SCALINGS)}, "
                               f"got {self.fp8_scaling!r}")
        if self.host_cpu not in HOST_CPUS:
            raise ClusterError(f"device {self.name!r}: host_cpu must be one of {', '.join(HOST_CPUS)}, "
                               f"got {self.host_cpu!r}")
        if not (isinstance(self.sm_count, int) and isinstance(self.collective_ctas, int)
                and self.sm_count >= 0 and 0 <= self.collective_ctas <= max(self.sm_count, 0)
                and (self.collective_ctas == 0 or self.sm_count > 0)):
            raise ClusterError(f"device {self.name!r}: sm_count and collective_ctas must be integers >= 0, "
                               f"collective_ctas at most sm_count, got {self.sm_count} and {self.collective_ctas}")
        if not (math.isfinite(self.kernel_time_scale) and 0.1 <= self.kernel_time_scale <= 10):
            raise ClusterError(f"device {self.name!r}: kernel_time_scale must be between 0.1 and 10, "
                               f"got {self.kernel_time_scale}")

    def peak(self, dtype, unit: str = "matrix") -> float:
        """Peak FLOP/s of `dtype` ("bf16" or a `Precision`) on the matrix or vector units.

        Matrix work falls back to the vector units when the device has no matrix unit for the
        dtype (fp32 GEMMs on a V100 run on the CUDA cores); a device without tables runs every
        dtype at `peak_flops`. A dtype the device has no units for raises `ClusterError`."""
        key = str(getattr(dtype, "value", dtype))
        if not self.matrix_flops and not self.vector_flops:
            return self.peak_flops
        matrix, vector = dict(self.matrix_flops), dict(self.vector_flops)
        if unit == "matrix" and key in matrix:
            return matrix[key]
        if key in vector:
            return vector[key]
        if unit == "vector" and key in matrix:  # no separate vector figure: element-wise at the matrix peak
            return matrix[key]
        known = sorted(set(matrix) | set(vector))
        raise ClusterError(f"device {self.name!r} has no {key} units (it has: {', '.join(known)})")

    def supports(self, dtype) -> bool:
        """Whether the device has a peak rate for `dtype` (a `Precision` or dtype name)."""
        try:
            self.peak(dtype)
        except ClusterError:
            return False
        return True


# Seconds per parameter of an Adam(W) step on the host CPU for one device's process: measured on the
# lent H100 machine, torch.optim.AdamW(foreach=True) over 16 cores, 0.92 ns at 134M parameters (0.97 at
# 16M; data/device/h100-2026-11-26/optimizer.csv, the `cpu` rows); a DGX node gives each of its 8
# devices 14-16 cores, so the figure stands for a device's share of the node's CPUs.
DEFAULT_CPU_ADAM_S_PER_PARAM = 0.92e-9


@dataclass(frozen=True)
class Host:
    """A node's host memory and each device's host link, the room and the path for offloading
    optimizer state or activations (ZeRO-Offload, Mist): bytes of host memory per node (shared by its
    devices), bytes per second per device in one direction (PCIe), and the seconds per parameter of
    one device's optimizer step on the host's CPUs (its share of the node's cores)."""
    memory_per_node: float
    device_bandwidth: float
    optimizer_s_per_param: float = DEFAULT_CPU_ADAM_S_PER_PARAM

    def __post_init__(self):
        for name in ("memory_per_node", "device_bandwidth", "optimizer_s_per_param"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise ClusterError(f"host {name} must be a positive finite number, got {value!r}")

    def as_yaml(self) -> dict:
        """The cluster YAML `host` value that loads back to this."""
        return {"memory_per_node": float(self.memory_per_node), "device_bandwidth": float(self.device_bandwidth),
                "optimizer_ns_per_param": float(self.optimizer_s_per_param * 1e9)}


@dataclass(frozen=True)
class Cluster:
    """A homogeneous cluster: `nodes` x `devices_per_node` identical devices, the intra- and inter-node links,
    gradient synchronisation scheme, optional host memory, and the YAML's `hardware` overrides of the
    per-FLOP (w) and per-byte (g) costs.
    """
    name: str
    nodes: int
    devices_per_node: int
    device: DeviceSpec
    intra_node: Link
    inter_node: Link | None = None
    w_override: float | None = None
    g_overrides: tuple[tuple[LinkLevel, float], ...] = field(default=())
    gradient_sync: GradientSync = field(default=GradientSync())
    host: Host | None = None  # None: the cluster file gives no host memory or PCIe figures

    def __post_init__(self):
        if self.nodes < 1 or self.devices_per_node < 1:
            raise ClusterError(f"cluster {self.name!r}: nodes and devices_per_node must be >= 1")
        if self.nodes > 1 and self.inter_node is None:
            raise ClusterError(f"cluster {self.name!r}: {self.nodes} nodes need an inter_node link")

    # --- topology -------------------------------------------------------------------------
    @property
    def num_devices(self) -> int:
        """Total devices, nodes x devices per node."""
        return self.nodes * self.devices_per_node

    def node_of(self, device: int) -> int:
        """Index of the node that holds device `device` (devices are numbered node by node)."""
        return device // self.devices_per_node

    def level(self, a: int, b: int) -> LinkLevel:
        """The link level between devices `a` and `b`."""
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
        """The `Link` of a level; None on the same device, or between nodes of a one-node cluster."""
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

    def device_bandwidth(self, level: LinkLevel) -> float:
        """Nominal bytes per second one device can move on a level: the intra-node link, or its
        share of the node's NICs (nics_per_node x NIC bandwidth / devices_per_node)."""
        link = self.link(level)
        if link is None:  # single node asked for inter-node: cannot happen with valid devices
            raise ClusterError(f"cluster {self.name!r} has no {level.name.lower()} link")
        if level == LinkLevel.INTER_NODE and link.nics_per_node is not None:
            return link.bandwidth * link.nics_per_node / self.devices_per_node
        return link.bandwidth

    def g(self, level: LinkLevel) -> float:
        """Achieved seconds per byte one device moves on a link level (0 on the same device):
        1 / (device_bandwidth x link efficiency), or the YAML's `hardware` override."""
        return self._seconds_per_byte(level, "efficiency")

    def g_p2p(self, level: LinkLevel) -> float:
        """Achieved seconds per byte of one point-to-point copy on a link level (0 on the same
        device): 1 / (device_bandwidth x link p2p_efficiency), or the YAML's `hardware` override
        (which sets both rates). Used by redistribution, pipeline stage transfers and the
        simulator's transfer tasks; collectives keep `g` (NCCL's bus bandwidth is a different,
        lower fraction of the link). Source of the one preset figure: p100-4x4.yaml
        (data/published/interconnect.yaml)."""
        return self._seconds_per_byte(level, "point_to_point_efficiency")

    def g_gradient_copy(self, level: LinkLevel) -> float:
        """Seconds per byte of one parameter-server gradient copy on link `level`: the gradient
        sync's copy bandwidth where given, else the link's point-to-point rate (`g_p2p`: each
        gradient copy into the owner is one peer-to-peer copy, not a collective)."""
        sync = self.gradient_sync
        rate = sync.intra_node_bandwidth if level == LinkLevel.INTRA_NODE else sync.inter_node_bandwidth
        return self.g_p2p(level) if rate is None else 1.0 / rate

    def _seconds_per_byte(self, level: LinkLevel, efficiency: str) -> float:
        if level == LinkLevel.SAME_DEVICE:
            return 0.0
        for lvl, value in self.g_overrides:
            if lvl == level:
                return value
        return 1.0 / (self.device_bandwidth(level) * getattr(self.link(level), efficiency))

    def alpha(self, level: LinkLevel) -> float:
        """Latency per message (one step of a collective) on a link level."""
        link = self.link(level)
        return 0.0 if link is None or level == LinkLevel.SAME_DEVICE else link.latency

    def g_between(self, a: int, b: int) -> float:
        """Achieved seconds per byte between devices `a` and `b` (`g` of their link level)."""
        return self.g(self.level(a, b))

    def g_group(self, devices) -> float:
        """Achieved seconds per byte on the slowest link inside a device group (`g` of `group_level`)."""
        return self.g(self.group_level(devices))

    def bandwidth(self, a: int, b: int) -> float:
        """Achieved bytes per second of a point-to-point copy from a to b (`g_p2p`)."""
        level = self.level(a, b)
        return math.inf if level == LinkLevel.SAME_DEVICE else 1.0 / self.g_p2p(level)

    def latency(self, a: int, b: int) -> float:
        """Per-message latency (alpha) in seconds between devices `a` and `b`; 0 on the same device."""
        link = self.link(self.level(a, b))
        return 0.0 if link is None else link.latency

    def group_latency(self, devices) -> float:
        """Per-message latency (alpha) in seconds of the slowest link inside a device group."""
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
                       self.inter_node if nodes > 1 else None, self.w_override, self.g_overrides,
                       self.gradient_sync, self.host)

    def describe(self) -> str:
        """One-line human summary: devices, peak rate, default precision, memory, link bandwidths, host."""
        hbm = "" if self.device.hbm_bandwidth is None else f", HBM {self.device.hbm_bandwidth / 1e9:.0f} GB/s"
        text = (f"{self.name}: {self.nodes} node(s) x {self.devices_per_node} {self.device.name} "
                f"({self.device.peak_flops / 1e12:.1f} TFLOP/s, default {default_precision_name(self.device)}, "
                f"{format_bytes(self.device.memory)}{hbm}); "
                f"intra-node {self.intra_node.bandwidth / 1e9:.1f} GB/s")
        if self.intra_node.p2p_efficiency is not None:  # a measured copy rate, unlike collectives'
            text += f" (point-to-point copies at {self.intra_node.p2p_efficiency:.1%})"
        if self.inter_node is not None:
            text += f", inter-node {self.inter_node.bandwidth / 1e9:.2f} GB/s"
            if self.inter_node.nics_per_node is not None:
                text += f" x {self.inter_node.nics_per_node} NICs per node"
        if self.host is not None:
            text += (f"; host {format_bytes(self.host.memory_per_node)} per node, "
                     f"{self.host.device_bandwidth / 1e9:.0f} GB/s per device to it")
        if self.gradient_sync.owner_based:  # FlexFlow's runtime (cluster/sync.py), not NCCL's ring
            text += "; gradient sync through parameter owners after the backward pass"
        return text
