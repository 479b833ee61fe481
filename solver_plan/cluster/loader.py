"""Cluster YAML -> `Cluster`, with errors naming file and key path; presets in configs/clusters/.

```yaml
name: dgx1-v100
nodes: 1
devices_per_node: 8
device: {name: V100-SXM2-16GB, peak_flops: 125TFLOPS, memory: 16GB}
links:
  intra_node: {bandwidth: 150GB/s, latency: 8us}
  inter_node: {bandwidth: 100Gb/s, latency: 5us}   # required when nodes > 1
hardware: {w: 8e-15, g_intra_node: 6.7e-12, g_inter_node: 8e-11}   # optional overrides
```
A device named as one of data/hardware/devices.yaml's known devices (A100-SXM-80GB, H100-SXM-80GB,
H200-SXM-141GB, B200-SXM-180GB, B200-GB200, MI300X, or an alias) inherits every key below that the
YAML leaves out (cluster/devices.py); a device still without peaks per dtype, HBM bandwidth or
efficiency curves is priced with a `DeviceTableWarning` naming what is missing.
Optional device keys for the compute model (cost/compute.py; `peak_flops` may then be left out:
it defaults to the matrix peak of the device's default compute dtype):
`matrix_flops: {bf16: 312TFLOPS, ...}`, `vector_flops: {fp32: 19.5TFLOPS, ...}`,
`hbm_bandwidth: 2039GB/s`, `matrix_efficiency` / `vector_efficiency: [[GFLOP, fraction], ...]`,
`memory_efficiency: [[MB, fraction], ...]` (thresholds decreasing to 0), `launch_overhead: 5us`,
`narrow_efficiency: [[elements, fraction], ...]` (matrix kernels by their smallest GEMM dimension,
relative to a wide one; usually written by `solver-plan calibrate`),
`kernel_time_scale: 1.09` (a calibrated factor on every kernel's time; default 1),
`attention_efficiency: {flash2: 0.35, cudnn: 0.6}` (fused attention kernels' achieved fraction of the
16-bit matrix peak, by kernel family; cost/compute.py attention_time), `dtype_efficiency: {fp8: 0.85}`
(a factor on the matrix efficiency curve for that dtype's GEMMs), `fp8_scaling: tensor | block` (how
the tensor cores scale fp8 operands: one scale per tensor, or hardware block scales as Blackwell's MX
formats; default tensor), `host_cpu: x86 | grace` (the CPU that issues the device's kernels: default
x86; grace on the GH200 / GB200 superchips), `sm_count` and `collective_ctas` (the device's SMs and the
CTAs one NCCL collective holds on it: the contention of overlapped communication, hybrid/contention.py;
default 0, not known).
Optional link keys: `efficiency` (achieved fraction of bandwidth in collectives, default 1),
`p2p_efficiency` (achieved fraction for one point-to-point copy: redistribution, pipeline stage
transfers, the simulator's transfers; default: `efficiency`) and, on inter_node, `nics_per_node`
(bandwidth is then per NIC; default: one NIC per device).
Optional `gradient_sync: {scheme: ring | parameter_server, copy_bandwidth: {intra_node: 4GB/s,
inter_node: 1GB/s}}`: the runtime's gradient synchronisation (cluster/sync.py; default ring).
Optional `host: {memory_per_node: 2TB, device_bandwidth: 64GB/s, optimizer_ns_per_param: 0.92}`: host
memory per node, each device's host link per direction (PCIe) and, optionally, nanoseconds per
parameter of one device's Adam step on the host CPU (default: the measured
`model.DEFAULT_CPU_ADAM_S_PER_PARAM`), for offloading (`Host`; absent: not offered).
"""
from __future__ import annotations

import math
from pathlib import Path

from solver_plan.cluster.devices import warn_gaps, with_known_tables
from solver_plan.cluster.model import FP8_SCALINGS, HOST_CPUS, Cluster, DeviceSpec, Host, Link, LinkLevel
from solver_plan.cluster.sync import SYNC_SCHEMES, GradientSync
from solver_plan.dtypes import Precision, default_dtype
from solver_plan.errors import ClusterError, InputError
from solver_plan.resources import cluster_presets_dir
from solver_plan.suggest import did_you_mean
from solver_plan.units import parse_bandwidth, parse_bytes, parse_flops, parse_seconds
from solver_plan.yamlio import Section, load_yaml

PRESET_DIR = cluster_presets_dir()  # configs/clusters of the checkout or of the installed package
# Far beyond any cluster planned here (the largest preset has 32 devices; tests go to 4,096
# nodes) but small enough that a typo such as `nodes: 1000000000` is refused, not planned.
MAX_NODES = 65_536
MAX_DEVICES_PER_NODE = 1_024
MAX_DEVICES = 1_048_576


def _positive_number(section: Section, key: str) -> float | None:
    value = section.get(key)
    if value is None:
        return None
    try:  # YAML reads 8e-15 (no dot) as a string
        number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    except ValueError:
        number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise InputError(f"expected a positive finite number, got {value!r}", section.path(key))
    return number


def _fraction(section: Section, key: str, default: float | None) -> float | None:
    value = _positive_number(section, key)
    if value is None:
        return default
    if value > 1:
        raise InputError(f"expected a fraction in (0, 1], got {value!r}", section.path(key))
    return value


def _link(section: Section | None, inter: bool = False) -> Link | None:
    if section is None:
        return None
    bandwidth = parse_bandwidth(section.get("bandwidth", required=True), section.path("bandwidth"))
    latency = parse_seconds(section.get("latency", 0), section.path("latency"))
    efficiency = _fraction(section, "efficiency", 1.0)
    p2p_efficiency = _fraction(section, "p2p_efficiency", None)  # None: the collective figure
    nics = section.integer("nics_per_node") if inter else None
    section.close()
    return Link(bandwidth, latency, efficiency, nics, p2p_efficiency)


def _dtype_flops(section: Section, key: str) -> tuple[tuple[str, float], ...]:
    table = section.section(key)
    if table is None:
        return ()
    result = []
    for dtype in list(table.data):
        Precision.parse(dtype, table.path(str(dtype)))
        result.append((Precision.parse(dtype).value, parse_flops(table.get(dtype), table.path(str(dtype)))))
    table.close()
    return tuple(result)


def _curve(section: Section, key: str) -> tuple[tuple[float, float], ...]:
    value = section.get(key)
    if value is None:
        return ()
    where = section.path(key)
    if not isinstance(value, list) or not value:
        raise InputError("expected a list of [size, efficiency] pairs", where)
    curve = []
    for i, pair in enumerate(value):
        ok = isinstance(pair, list) and len(pair) == 2 and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in pair)
        if not ok or pair[0] < 0 or not 0 < pair[1] <= 1:
            raise InputError(f"expected [size >= 0, efficiency in (0, 1]], got {pair!r}", f"{where}[{i}]")
        curve.append((float(pair[0]), float(pair[1])))
    return tuple(curve)


def _scale(dev: Section, key: str) -> float:
    value = dev.get(key, 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and 0.1 <= value <= 10):
        raise InputError(f"expected a number between 0.1 and 10, got {value!r}", dev.path(key))
    return float(value)


def _attention_curves(dev: Section) -> tuple[tuple[str, tuple[tuple[float, float], ...]], ...]:
    """`attention_efficiency: {cudnn: [[8192, 0.49], [2048, 0.35], [0, 0.26]], flash2: 0.3}`: per fused
    kernel family a curve over the query length in tokens (as `_curve`), or one fraction for every
    length (a flat curve)."""
    table = dev.section("attention_efficiency")
    if table is None:
        return ()
    out = []
    for backend in list(table.data):
        value = table.get(backend)
        curve = _curve(table, backend) if isinstance(value, list) else ((0.0, _fraction(table, backend, None)),)
        out.append((str(backend), curve))
    table.close()
    return tuple(out)


def _fractions(dev: Section, key: str) -> tuple[tuple[str, float], ...]:
    """A mapping of names to fractions in (0, 1]: `attention_efficiency: {flash2: 0.35, cudnn: 0.6}`
    (fused attention kernel family -> fraction), `dtype_efficiency: {fp8: 0.85}`."""
    table = dev.section(key)
    if table is None:
        return ()
    out = []
    for backend in list(table.data):
        out.append((str(backend), _fraction(table, backend, None)))
    table.close()
    return tuple(out)


def _fp8_scaling(dev: Section) -> str:
    """`fp8_scaling: tensor | block` (default tensor; DeviceSpec.fp8_scaling)."""
    value = dev.string("fp8_scaling", "tensor")
    if value not in FP8_SCALINGS:
        raise InputError(f"expected one of {', '.join(FP8_SCALINGS)}, got {value!r}", dev.path("fp8_scaling"))
    return value


def _host_cpu(dev: Section) -> str:
    """`host_cpu: x86 | grace` (default x86; DeviceSpec.host_cpu)."""
    value = dev.string("host_cpu", "x86")
    if value not in HOST_CPUS:
        raise InputError(f"expected one of {', '.join(HOST_CPUS)}, got {value!r}", dev.path("host_cpu"))
    return value


def _device(dev: Section) -> DeviceSpec:
    dev.data = with_known_tables(dev.data)  # a known device's tables (data/hardware/devices.yaml) under the YAML's keys
    name = dev.string("name", "device")
    memory = parse_bytes(dev.get("memory", required=True), dev.path("memory"))
    matrix, vector = _dtype_flops(dev, "matrix_flops"), _dtype_flops(dev, "vector_flops")
    peak = dev.get("peak_flops", required=not (matrix or vector))
    if peak is None and dev.has("peak_flops"):  # `peak_flops:` with nothing after it
        raise InputError("missing value (expected a compute rate such as 312TFLOPS)", dev.path("peak_flops"))
    hbm = dev.get("hbm_bandwidth")
    extra = dict(
        matrix_flops=matrix, vector_flops=vector,
        hbm_bandwidth=None if hbm is None else parse_bandwidth(hbm, dev.path("hbm_bandwidth")),
        matrix_efficiency=_curve(dev, "matrix_efficiency"), vector_efficiency=_curve(dev, "vector_efficiency"),
        memory_efficiency=_curve(dev, "memory_efficiency"), narrow_efficiency=_curve(dev, "narrow_efficiency"),
        launch_overhead=parse_seconds(dev.get("launch_overhead", 0), dev.path("launch_overhead")),
        kernel_time_scale=_scale(dev, "kernel_time_scale"),
        attention_efficiency=_attention_curves(dev),
        dtype_efficiency=tuple((Precision.parse(k, dev.path("dtype_efficiency")).value, v)
                               for k, v in _fractions(dev, "dtype_efficiency")),
        fp8_scaling=_fp8_scaling(dev), host_cpu=_host_cpu(dev),
        sm_count=dev.integer("sm_count", 0, minimum=0), collective_ctas=dev.integer("collective_ctas", 0, minimum=0))
    dev.close()
    try:
        if peak is None:  # the peak of what the device runs by default
            probe = DeviceSpec(name, 1.0, memory, matrix, vector)
            peak = probe.peak(default_dtype(probe))
        else:
            peak = parse_flops(peak, dev.path("peak_flops"))
        return DeviceSpec(name, peak, memory, **extra)
    except ClusterError as exc:
        raise ClusterError(str(exc), dev.where) from None


def _gradient_sync(section: Section | None) -> GradientSync:
    if section is None:
        return GradientSync()
    scheme = section.string("scheme", "ring")
    if scheme not in SYNC_SCHEMES:
        raise InputError(f"expected one of {', '.join(SYNC_SCHEMES)}, got {scheme!r}", section.path("scheme"))
    rates = {}
    copy = section.section("copy_bandwidth")
    if copy is not None:
        if scheme != "parameter_server":
            raise InputError("copy_bandwidth applies to scheme parameter_server only", section.path("copy_bandwidth"))
        for level in ("intra_node", "inter_node"):
            if copy.get(level) is not None:
                rates[f"{level}_bandwidth"] = parse_bandwidth(copy.get(level), copy.path(level))
        copy.close()
    section.close()
    return GradientSync(scheme, **rates)


def _host(section: Section | None) -> Host | None:
    """`host: {memory_per_node: 2TB, device_bandwidth: 64GB/s[, optimizer_ns_per_param: 0.92]}` (the first
    two required in the section)."""
    if section is None:
        return None
    memory = parse_bytes(section.get("memory_per_node", required=True), section.path("memory_per_node"))
    bandwidth = parse_bandwidth(section.get("device_bandwidth", required=True), section.path("device_bandwidth"))
    ns = section.get("optimizer_ns_per_param")
    if ns is not None and (isinstance(ns, bool) or not isinstance(ns, (int, float))):
        raise ClusterError(f"{section.path('optimizer_ns_per_param')}: expected nanoseconds per parameter, got {ns!r}")
    section.close()
    try:
        return Host(memory, bandwidth, *(() if ns is None else (ns / 1e9,)))
    except ClusterError as exc:
        raise ClusterError(str(exc), section.where) from None


def cluster_from_dict(data: object, where: str = "") -> Cluster:
    """Validated `Cluster` from a parsed cluster YAML document; `where` names the source in InputError paths.
    """
    top = Section(data, where)
    name = top.string("name", "cluster")
    nodes = top.integer("nodes", 1, maximum=MAX_NODES)
    per_node = top.integer("devices_per_node", required=True, maximum=MAX_DEVICES_PER_NODE)
    if nodes * per_node > MAX_DEVICES:
        raise InputError(f"{nodes} nodes x {per_node} devices is more than {MAX_DEVICES} devices",
                         top.path("nodes"))
    device = _device(top.section("device", required=True))
    links = top.section("links", required=True)
    intra = _link(links.section("intra_node", required=True))
    inter = _link(links.section("inter_node", required=nodes > 1), inter=True)
    links.close()
    w_override, g_overrides = None, []
    hardware = top.section("hardware")
    if hardware is not None:
        w_override = _positive_number(hardware, "w")
        for key, level in (("g_intra_node", LinkLevel.INTRA_NODE), ("g_inter_node", LinkLevel.INTER_NODE)):
            value = _positive_number(hardware, key)
            if value is not None:
                g_overrides.append((level, value))
        hardware.close()
    sync = _gradient_sync(top.section("gradient_sync"))
    host = _host(top.section("host"))
    top.close()
    if w_override is None:  # a hand-calibrated s/FLOP replaces the compute model's tables
        warn_gaps(device, where or name)
    try:
        return Cluster(name, nodes, per_node, device, intra, inter, w_override, tuple(g_overrides), sync, host)
    except ClusterError as exc:
        raise ClusterError(str(exc), where or None) from None


def load_cluster(path: str | Path) -> Cluster:
    """`Cluster` from a cluster YAML file (see `cluster_from_dict`)."""
    data = load_yaml(path)
    return cluster_from_dict(data, str(path))


def preset_names() -> list[str]:
    """Names of the bundled cluster presets (the YAML files of the preset folder), sorted."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def resolve_cluster(spec: str, devices: int | None = None) -> Cluster:
    """A preset name or a YAML path; optionally restricted to the first `devices` devices."""
    if not isinstance(spec, str) or not spec.strip():  # '' would be the current folder, not the default
        raise InputError("empty cluster name (expected a preset such as v100x8-nvlink, or a YAML file)", "--cluster")
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise InputError("no such cluster file", spec)
        cluster = load_cluster(path)
    elif (PRESET_DIR / f"{spec}.yaml").exists():
        cluster = load_cluster(PRESET_DIR / f"{spec}.yaml")
    else:
        raise InputError(f"unknown cluster {spec!r}{did_you_mean(spec, preset_names())}; "
                         f"presets: {', '.join(preset_names())} "
                         "(or give a YAML file)", "--cluster")
    return cluster if devices is None else cluster.first_devices(devices)
