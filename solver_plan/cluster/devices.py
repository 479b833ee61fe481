"""Known accelerators (data/hardware/devices.yaml): a cluster YAML naming one inherits its tables.

`known_device(name)` finds an entry by its name or an alias (case, spaces and underscores ignored);
`with_known_tables(device_mapping)` returns the YAML's device mapping with every key it leaves out
taken from the known entry (the YAML's own keys win), so
`device: {name: A100-SXM-80GB, peak_flops: 312TFLOPS, memory: 80GB}` is priced with the A100's
per-dtype peaks, HBM bandwidth and efficiency curves, not at 100% of one peak. `table_gaps(spec)`
names what a device still lacks; the loader warns with it (`DeviceTableWarning`).
"""
from __future__ import annotations

import functools
import re
import warnings

from solver_plan.resources import resource_dir
from solver_plan.yamlio import load_yaml

TABLE_KEYS = ("matrix_flops or vector_flops", "hbm_bandwidth", "matrix_efficiency", "memory_efficiency")


class DeviceTableWarning(UserWarning):
    """A device is priced without some of the tables the compute model uses."""


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", str(name)).upper()


@functools.lru_cache(maxsize=1)
def _entries() -> tuple[dict, ...]:
    path = resource_dir("data") / "hardware" / "devices.yaml"
    if not path.exists():
        return ()
    return tuple(load_yaml(path)["devices"])


def known_device_names() -> list[str]:
    """Names of the devices in the built-in device table, in table order."""
    return [e["name"] for e in _entries()]


def known_device(name) -> dict | None:
    """The devices.yaml entry (name, aliases, sources, table) whose name or alias is `name`."""
    if not isinstance(name, str):
        return None
    wanted = _key(name)
    for entry in _entries():
        if wanted in {_key(n) for n in [entry["name"], *entry.get("aliases", [])]}:
            return entry
    return None


def with_known_tables(device: object) -> object:
    """The device mapping with the known entry's table under it (the mapping's keys win); anything
    else (not a mapping, an unknown name) unchanged."""
    if not isinstance(device, dict):
        return device
    entry = known_device(device.get("name"))
    if entry is None:
        return device
    return {**entry["table"], **device}


def table_gaps(spec) -> list[str]:
    """Keys of TABLE_KEYS a `DeviceSpec` is priced without (empty: fully described)."""
    gaps = []
    if not spec.matrix_flops and not spec.vector_flops:  # SIMT-only devices (K80, P100) list vector peaks only
        gaps.append("matrix_flops")
    if spec.hbm_bandwidth is None:
        gaps.append("hbm_bandwidth")
    if not spec.matrix_efficiency:
        gaps.append("matrix_efficiency")
    if not spec.memory_efficiency:
        gaps.append("memory_efficiency")
    return gaps


def warn_gaps(spec, where: str) -> None:
    """Warn, naming the device, the file and the missing tables, when a device has gaps."""
    gaps = table_gaps(spec)
    if not gaps:
        return
    known = ", ".join(known_device_names())
    warnings.warn(f"{where}: device {spec.name!r} has no {', '.join(gaps)}: its kernels are priced at "
                  f"{'100% of peak_flops' if 'matrix_efficiency' in gaps else 'its peaks'}"
                  f"{' with no memory roofline' if 'hbm_bandwidth' in gaps else ''}; name a known device "
                  f"({known}) or give the tables", DeviceTableWarning, stacklevel=3)
