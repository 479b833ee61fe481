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
"""
from __future__ import annotations

import math
from pathlib import Path

from solver_plan.cluster.model import Cluster, DeviceSpec, Link, LinkLevel
from solver_plan.errors import ClusterError, InputError
from solver_plan.resources import cluster_presets_dir
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


def _link(section: Section | None) -> Link | None:
    if section is None:
        return None
    bandwidth = parse_bandwidth(section.get("bandwidth", required=True), section.path("bandwidth"))
    latency = parse_seconds(section.get("latency", 0), section.path("latency"))
    section.close()
    return Link(bandwidth, latency)


def cluster_from_dict(data: object, where: str = "") -> Cluster:
    top = Section(data, where)
    name = top.string("name", "cluster")
    nodes = top.integer("nodes", 1, maximum=MAX_NODES)
    per_node = top.integer("devices_per_node", required=True, maximum=MAX_DEVICES_PER_NODE)
    if nodes * per_node > MAX_DEVICES:
        raise InputError(f"{nodes} nodes x {per_node} devices is more than {MAX_DEVICES} devices",
                         top.path("nodes"))
    dev = top.section("device", required=True)
    device = DeviceSpec(
        name=dev.string("name", "device"),
        peak_flops=parse_flops(dev.get("peak_flops", required=True), dev.path("peak_flops")),
        memory=parse_bytes(dev.get("memory", required=True), dev.path("memory")),
    )
    dev.close()
    links = top.section("links", required=True)
    intra = _link(links.section("intra_node", required=True))
    inter = _link(links.section("inter_node", required=nodes > 1))
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
    top.close()
    try:
        return Cluster(name, nodes, per_node, device, intra, inter, w_override, tuple(g_overrides))
    except ClusterError as exc:
        raise ClusterError(str(exc), where or None) from None


def load_cluster(path: str | Path) -> Cluster:
    data = load_yaml(path)
    return cluster_from_dict(data, str(path))


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.yaml"))


def resolve_cluster(spec: str, devices: int | None = None) -> Cluster:
    """A preset name or a YAML path; optionally restricted to the first `devices` devices."""
    path = Path(spec)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.exists():
            raise InputError("no such cluster file", spec)
        cluster = load_cluster(path)
    elif (PRESET_DIR / f"{spec}.yaml").exists():
        cluster = load_cluster(PRESET_DIR / f"{spec}.yaml")
    else:
        raise InputError(f"unknown cluster {spec!r}; presets: {', '.join(preset_names())} "
                         "(or give a YAML file)", "--cluster")
    return cluster if devices is None else cluster.first_devices(devices)
