"""The calibration CSV (docs/calibration-csv.md): one measured kernel or collective per row.

    op,shape,dtype,time_us[,group]
    matmul,m=4096 n=4096 k=4096,bf16,812.5
    all_reduce,bytes=268435456 devices=8,bf16,2950

Kernels (FLOPs and HBM bytes as the cost model counts them, in `dtype`):
- matmul m n k [batch]: 2 batch m n k FLOPs; batch (m k + k n + m n) elements moved (matrix units).
- conv2d n c h w k r s [stride pad groups]: output p x q = (h + 2 pad - r) / stride + 1 (likewise
  w); 2 n k p q (c / groups) r s FLOPs (counted directly); input + weights + output moved; narrow
  dimension min(c, k) / groups (`cost.kernels.channels_narrow`, so the fit learns the narrow curve).
- attention batch heads seq head_dim [kv_seq causal]: fused (flash) attention forward,
  4 batch heads seq kv_seq head_dim FLOPs (half when causal); q, k, v and the output moved.
- elementwise elements [reads writes]: one FLOP per element, (reads + writes) x elements moved
  (defaults 1 and 1; vector units).
- layernorm rows cols: 5 FLOPs per element (graph/ops.py), input and output moved.
- softmax rows cols: 5 FLOPs per element, input and output moved.
Collectives (`all_reduce`, `all_gather`, `reduce_scatter`, `all_to_all`, `broadcast`, `p2p`): bytes,
devices, [devices_per_node] (default: all on one node) as cost/collectives.py takes them. `group`
names rows that belong together for cross-validation (default: the file name).
"""
from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from solver_plan.calibrate.measurements import CollectiveMeasurement, Kernel, Measurement
from solver_plan.cost.collectives import KINDS as COLLECTIVES
from solver_plan.cost.kernels import channels_narrow
from solver_plan.cost.precision import Precision
from solver_plan.errors import InputError

COLUMNS = ("op", "shape", "dtype", "time_us")
OPTIONAL = ("group",)
SHAPES = {  # op: (required keys, optional keys with defaults)
    "matmul": (("m", "n", "k"), {"batch": 1}),
    "conv2d": (("n", "c", "h", "w", "k", "r", "s"), {"stride": 1, "pad": 0, "groups": 1}),
    "attention": (("batch", "heads", "seq", "head_dim"), {"kv_seq": 0, "causal": 0}),
    "elementwise": (("elements",), {"reads": 1, "writes": 1}),
    "layernorm": (("rows", "cols"), {}),
    "softmax": (("rows", "cols"), {}),
}
COLLECTIVE_SHAPE = (("bytes", "devices"), {"devices_per_node": 0})


def _shape(text: str, op: str, required, optional: dict, where: str) -> dict[str, int]:
    values: dict[str, int] = {}
    for item in re.split(r"[\s;]+", text.strip()):
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[0-9]+", value.strip()):
            raise InputError(f"shape entries are key=integer, got {item!r}", where)
        if key not in required and key not in optional:
            known = ", ".join(list(required) + list(optional))
            raise InputError(f"{op} has no shape key {key!r} (keys: {known})", where)
        values[key] = int(value)
    missing = [k for k in required if k not in values]
    if missing:
        raise InputError(f"{op} needs {', '.join(missing)} in its shape", where)
    for key, default in optional.items():
        values.setdefault(key, default)
    for key in required:
        if values[key] < 1:
            raise InputError(f"{key} must be at least 1, got {values[key]}", where)
    return values


def kernel_of(op: str, s: dict[str, int], dtype: Precision, where: str) -> Kernel:
    """The kernel a CSV row describes (module text for the formulas)."""
    b = dtype.bytes
    if op == "matmul":
        flops = 2.0 * s["batch"] * s["m"] * s["n"] * s["k"]
        moved = s["batch"] * (s["m"] * s["k"] + s["k"] * s["n"] + s["m"] * s["n"]) * b
        return Kernel(flops, float(moved), "matrix", dtype, where)
    if op == "conv2d":
        if s["stride"] < 1 or s["groups"] < 1 or s["c"] % s["groups"] or s["k"] % s["groups"]:
            raise InputError("stride and groups must be >= 1, and groups must divide c and k", where)
        p = (s["h"] + 2 * s["pad"] - s["r"]) // s["stride"] + 1
        q = (s["w"] + 2 * s["pad"] - s["s"]) // s["stride"] + 1
        if p < 1 or q < 1:
            raise InputError("the filter is larger than the padded input", where)
        flops = 2.0 * s["n"] * s["k"] * p * q * (s["c"] // s["groups"]) * s["r"] * s["s"]
        moved = (s["n"] * s["c"] * s["h"] * s["w"] + s["k"] * (s["c"] // s["groups"]) * s["r"] * s["s"]
                 + s["n"] * s["k"] * p * q) * b
        return Kernel(flops, float(moved), "matrix", dtype, where, channels_narrow(s["c"], s["k"], s["groups"]))
    if op == "attention":
        kv = s["kv_seq"] or s["seq"]
        flops = 4.0 * s["batch"] * s["heads"] * s["seq"] * kv * s["head_dim"] / (2 if s["causal"] else 1)
        moved = s["batch"] * s["heads"] * s["head_dim"] * (2 * s["seq"] + 2 * kv) * b
        return Kernel(flops, float(moved), "matrix", dtype, where)
    if op == "elementwise":
        return Kernel(float(s["elements"]), float((s["reads"] + s["writes"]) * s["elements"] * b), "vector", dtype, where)
    if op in ("layernorm", "softmax"):
        elements = s["rows"] * s["cols"]
        return Kernel(5.0 * elements, float(2 * elements * b), "vector", dtype, where)
    raise InputError(f"unknown op {op!r}", where)


def read_calibration_csv(path: str | Path) -> tuple[tuple[Measurement, ...], tuple[CollectiveMeasurement, ...]]:
    """Kernel and collective measurements of a calibration CSV (lines starting with # skipped)."""
    path = Path(path)
    try:
        from solver_plan.files import read_input_bytes  # regular files only: FIFOs, devices refused
        text = read_input_bytes(path, "calibration CSV").decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the calibration CSV ({exc})", str(path)) from None
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise InputError(f"no rows; expected a header {','.join(COLUMNS)}", str(path))
    reader = csv.reader([line for _, line in lines])
    header = [h.strip() for h in next(reader)]
    unknown = [h for h in header if h not in COLUMNS + OPTIONAL]
    missing = [c for c in COLUMNS if c not in header]
    if unknown or missing:
        raise InputError(f"header must name {', '.join(COLUMNS)} (optional: {', '.join(OPTIONAL)}); "
                         f"{'unknown ' + unknown[0] if unknown else 'missing ' + missing[0]}", f"{path}:{lines[0][0]}")
    kernels, collectives = [], []
    for (number, _), row in zip(lines[1:], reader):
        where = f"{path}:{number}"
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} fields, got {len(row)}", where)
        fields = {h: v.strip() for h, v in zip(header, row)}
        op = fields["op"].lower()
        try:
            time_us = float(fields["time_us"])
        except ValueError:
            raise InputError(f"time_us must be a number, got {fields['time_us']!r}", where) from None
        if not (math.isfinite(time_us) and time_us > 0):
            raise InputError(f"time_us must be positive, got {fields['time_us']!r}", where)
        group = fields.get("group") or path.stem
        if op in COLLECTIVES:
            s = _shape(fields["shape"], op, *COLLECTIVE_SHAPE, where)
            per_node = s["devices_per_node"] or s["devices"]
            collectives.append(CollectiveMeasurement(op, float(s["bytes"]), s["devices"], per_node,
                                                     time_us * 1e-6, where))
            continue
        if op not in SHAPES:
            raise InputError(f"unknown op {fields['op']!r}; expected one of "
                             f"{', '.join(list(SHAPES) + list(COLLECTIVES))}", where)
        dtype = Precision.parse(fields["dtype"], where)
        s = _shape(fields["shape"], op, *SHAPES[op], where)
        kernel = kernel_of(op, s, dtype, where)
        kernels.append(Measurement(f"{group}:{number}", group, op, (kernel,), time_us * 1e-6, where))
    return tuple(kernels), tuple(collectives)
