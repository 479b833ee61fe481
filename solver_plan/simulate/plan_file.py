"""Plan JSON files (plan.py's layout) read back as a strategy, checked against the model and cluster.

Every problem is an `InputError` naming the file, the operator and the field: unknown or missing
operators, unknown dimensions, degrees that are not positive integers or do not divide their
dimension, devices out of range or repeated, device counts that differ from the degrees' product.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from solver_plan.cluster import Cluster
from solver_plan.cost.config import REPLICA, ParallelConfig
from solver_plan.cost.dims import op_dimensions
from solver_plan.cost.precision import TrainingPrecision, resolve_precision
from solver_plan.errors import InputError
from solver_plan.files import unique_keys
from solver_plan.graph.ir import Graph
from solver_plan.plan import SCHEMA_VERSION
from solver_plan.yamlio import read_text  # regular files only: a FIFO or /dev/zero is refused by name


def read_plan_json(path: str | Path) -> dict:
    """The plan JSON at `path` as a dict, InputError naming the file when it is not a plan."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such plan file", str(path))
    try:
        text = read_text(path, "plan JSON")
        if not text.strip():
            raise InputError("file is empty (expected a plan written by `solver-plan plan --out`)", str(path))
        data = json.loads(text, object_pairs_hook=lambda pairs: unique_keys(pairs, path))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", str(path)) from None
    except (OSError, RecursionError) as exc:
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc.strerror or str(exc)
        raise InputError(f"cannot read the plan ({why})", str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("operators"), list):
        raise InputError("expected an object with an 'operators' list (a plan written by `solver-plan plan --out`)",
                         str(path))
    _check_schema_version(data, str(path))
    return data


def _check_schema_version(data: dict, where: str) -> None:
    """Only layouts this version reads are accepted: a newer or unmarked file is refused, not guessed."""

    if "schema_version" not in data:
        raise InputError(f"missing 'schema_version' (plans written by `solver-plan plan --out` have "
                         f"schema_version {SCHEMA_VERSION})", where)
    version = data["schema_version"]
    if not _is_int(version):
        raise InputError(f"'schema_version' must be the integer {SCHEMA_VERSION}, got {version!r}", where)
    if version != SCHEMA_VERSION:
        raise InputError(f"unsupported schema_version {version} (this version reads schema_version "
                         f"{SCHEMA_VERSION}; {'re-plan with this version' if version > SCHEMA_VERSION else 'a malformed file?'})",
                         where)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_operator(entry, graph: Graph, cluster: Cluster, where: str) -> tuple[str, ParallelConfig]:
    """One "operators" entry of a plan as (operator name, configuration), checked against `graph` and
    `cluster`; InputError at `where` naming the field."""
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise InputError("each operator needs a string 'name'", where)
    name = entry["name"]
    if name not in graph.topological_order:
        raise InputError(f"unknown operator {name!r} (model {graph.name!r} has no such operator)", where)
    where = f"{where}: operator {name!r}"
    dims = op_dimensions(graph.op(name), graph)
    degrees = entry.get("degrees", {})
    if not isinstance(degrees, dict):
        raise InputError("'degrees' must map dimension names to degrees", f"{where} field 'degrees'")
    known = {d.name: d for d in dims}
    for dim, degree in degrees.items():
        if dim == REPLICA and _is_int(degree) and degree >= 1:  # identical copies (cost/config.py)
            continue
        if dim not in known:
            raise InputError(f"unknown dimension {dim!r}; {name!r} has {', '.join(known) or 'none'}",
                             f"{where} field 'degrees'")
        if not _is_int(degree) or degree < 1:
            raise InputError(f"degree of {dim!r} must be a positive integer, got {degree!r}", f"{where} field 'degrees'")
        if known[dim].size % degree:
            raise InputError(f"degree {degree} of {dim!r} does not divide its size {known[dim].size}",
                             f"{where} field 'degrees'")
    ordered = tuple((d.name, degrees.get(d.name, 1)) for d in dims)
    if degrees.get(REPLICA, 1) > 1:
        ordered += ((REPLICA, degrees[REPLICA]),)
    devices = entry.get("devices")
    if not isinstance(devices, list) or not devices or not all(_is_int(d) for d in devices):
        raise InputError("'devices' must be a non-empty list of device numbers", f"{where} field 'devices'")
    bad = [d for d in devices if not 0 <= d < cluster.num_devices]
    if bad:
        raise InputError(f"device {bad[0]} out of range: cluster {cluster.name!r} has devices "
                         f"0..{cluster.num_devices - 1}", f"{where} field 'devices'")
    if len(set(devices)) != len(devices):
        raise InputError("devices repeat", f"{where} field 'devices'")
    needed = math.prod(k for _, k in ordered)
    if needed != len(devices):
        raise InputError(f"the degrees multiply to {needed} but {len(devices)} devices are listed",
                         f"{where} field 'devices'")
    return name, ParallelConfig(ordered, tuple(devices))


def plan_precision(data: dict, graph: Graph, cluster: Cluster, where: str):
    """The `TrainingPrecision` a plan was priced in: its "precision" key (`TrainingPrecision.name`:
    fp32, tf32, mixed-bf16, ...), or for plans without one what `plan` uses by default
    (`resolve_precision(None, device, graph)`)."""
    name = data.get("precision")
    if name is None:
        return resolve_precision(None, cluster.device, graph)
    if not isinstance(name, str):
        raise InputError(f"'precision' must be a string such as mixed-bf16 or fp32, got {name!r}",
                         f"{where} field 'precision'")
    dtype = name.removeprefix("mixed-")
    precision = TrainingPrecision.parse(dtype, cluster.device, f"{where} field 'precision'")
    if precision.name != name:  # "mixed-fp32", "bf16": not a name `plan` writes
        raise InputError(f"unknown precision {name!r}; plans name fp32, tf32, mixed-bf16, mixed-fp16 or mixed-fp8",
                         f"{where} field 'precision'")
    return precision


def plan_runtime(data: dict, where: str):
    """The `RuntimeProfile` a plan was priced with: its "runtime" key, or for plans without one the
    default (megatron-core)."""
    from solver_plan.runtime import resolve_runtime

    name = data.get("runtime")
    if name is not None and not isinstance(name, str):
        raise InputError(f"'runtime' must be a runtime's name, got {name!r}", f"{where} field 'runtime'")
    return resolve_runtime(name, f"{where} field 'runtime'")


def load_plan_json(path: str | Path, graph: Graph, cluster: Cluster) -> dict[str, ParallelConfig]:
    """The strategy (operator name -> configuration) of a plan file, validated."""
    data = read_plan_json(path)
    strategy: dict[str, ParallelConfig] = {}
    for i, entry in enumerate(data["operators"]):
        name, cfg = parse_operator(entry, graph, cluster, f"{path}: operators[{i}]")
        if name in strategy:
            raise InputError(f"operator {name!r} appears twice", f"{path}: operators[{i}]")
        strategy[name] = cfg
    missing = [name for name in graph.topological_order if name not in strategy]
    if missing:
        raise InputError(f"no configuration for operator {missing[0]!r}"
                         + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""), f"{path}: operators")
    return strategy
