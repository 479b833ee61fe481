"""Import a PipeDream profile (`graph.txt`) into the IR with measured times attached.

File format (msr-fiddle/pipedream profiler): one node per line,
    node4 -- Conv2d(64, 64, ...) -- forward_compute_time=46.201, backward_compute_time=113.330, activation_size=1644167168.000, parameter_size=147712.000
then tab-indented edges `\tnodeA -- nodeB`. Times are milliseconds per minibatch, sizes bytes; a
multi-output node writes `activation_size=[6291456.0; 131072.0; 131072.0]`.

Conventions of the import:
- every node becomes an `OpType.PROFILED` operator named after the node, with attrs
  `output_shapes`, `flops` 0 (the profile has no FLOP counts), `params` = parameter_size / 4
  (fp32) and `description` (the layer string);
- `measured` = Measured(forward ms / 1000, backward ms / 1000) and `activation_bytes_override` =
  the activation size (the sum of a list), so byte counts are exact;
- one output tensor per activation value, of shape (batch, max(1, bytes // 4 // batch)) with
  batch = DEFAULT_BATCH (128) when not given: the shape is nominal, only the override carries the
  exact bytes; the batch only says how far the sample dimension can be split. 128 is the minibatch
  the image profiles were measured at (resnet50 node77, BatchNorm(512) at 28x28: 205,520,896 B =
  128 x 512 x 28 x 28 x 4). A consumer takes every output of each producer as inputs.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from solver_plan.errors import InputError
from solver_plan.graph.builder import GraphBuilder
from solver_plan.graph.ir import Graph, Measured
from solver_plan.graph.ops import OpType

_NODE_FORM = ("'nodeN -- <description> -- forward_compute_time=<ms>, backward_compute_time=<ms>, "
              "activation_size=<bytes or [b1; b2]>, parameter_size=<bytes>'")
_EDGE_FORM = "'<tab>nodeA -- nodeB'"
_STATS = ("forward_compute_time", "backward_compute_time", "activation_size", "parameter_size")
_NUMBER = r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?"
_BYTES_PER_ELEMENT = 4
DEFAULT_BATCH = 128


@dataclass(frozen=True)
class ProfileNode:
    """One node of a PipeDream profile (graph.txt): measured forward and backward milliseconds, activation
    sizes, parameter bytes, and the line it was read from.
    """
    name: str
    description: str
    forward_ms: float
    backward_ms: float
    activation_sizes: tuple[float, ...]
    parameter_bytes: float
    line: int = 0  # where the node is defined in its file (for messages)


def _number(text: str, where: str, key: str) -> float:
    if not re.fullmatch(_NUMBER, text.strip()):
        raise InputError(f"{key} must be a number, got {text.strip()!r}; expected {_NODE_FORM}", where)
    value = float(text)
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{key} must be a finite non-negative number, got {text.strip()}", where)
    return value


def _activation_sizes(text: str, where: str) -> tuple[float, ...]:
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        parts = [p for p in text[1:-1].split(";") if p.strip()]
        if not parts:
            raise InputError("activation_size list is empty", where)
        return tuple(_number(p, where, "activation_size") for p in parts)
    return (_number(text, where, "activation_size"),)


def _parse_stats(text: str, where: str) -> dict[str, str]:
    # Split on commas outside brackets: list values use ';' but be lenient about spacing.
    stats: dict[str, str] = {}
    for item in re.split(r",\s*(?![^\[]*\])", text.strip()):
        key, sep, value = item.partition("=")
        if not sep:
            raise InputError(f"cannot read statistic {item.strip()!r}; expected {_NODE_FORM}", where)
        stats[key.strip()] = value
    unknown = [k for k in stats if k not in _STATS]
    if unknown:
        raise InputError(f"unknown statistic {unknown[0]!r}; expected {_NODE_FORM}", where)
    missing = [k for k in _STATS if k not in stats]
    if missing:
        raise InputError(f"missing {', '.join(missing)}; expected {_NODE_FORM}", where)
    return stats


def _parse_node(line: str, where: str, number: int = 0) -> ProfileNode:
    name, sep, rest = line.partition(" -- ")
    description, sep2, stats_text = rest.rpartition(" -- ")
    if not sep or not sep2 or not re.fullmatch(r"\S+", name.strip()):
        raise InputError(f"cannot read node line; expected {_NODE_FORM}", where)
    stats = _parse_stats(stats_text, where)
    return ProfileNode(name.strip(), description.strip(),
                       _number(stats["forward_compute_time"], where, "forward_compute_time"),
                       _number(stats["backward_compute_time"], where, "backward_compute_time"),
                       _activation_sizes(stats["activation_size"], where),
                       _number(stats["parameter_size"], where, "parameter_size"), number)


def _parse_edge(line: str, where: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*(\S+)\s+--\s+(\S+)\s*", line)
    if not match:
        raise InputError(f"cannot read edge line; expected {_EDGE_FORM}", where)
    return match.group(1), match.group(2)


def parse_profile(path: Path) -> tuple[list[ProfileNode], list[tuple[str, str, int]]]:
    """Nodes in file order and edges (src, dst, line number)."""
    nodes: list[ProfileNode] = []
    edges: list[tuple[str, str, int]] = []
    try:
        from solver_plan.files import read_input_bytes  # regular files only: FIFOs, devices refused
        lines = read_input_bytes(path, "profile").decode("utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read the profile ({exc.strerror or exc})", str(path)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                         f"expected {_NODE_FORM}", str(path)) from None
    for number, line in enumerate(lines, start=1):
        where = f"{path}:{number}"
        if not line.strip():
            continue
        if line[0].isspace():
            src, dst = _parse_edge(line, where)
            edges.append((src, dst, number))
        else:
            nodes.append(_parse_node(line, where, number))
    if not nodes:
        raise InputError(f"no node lines found; expected {_NODE_FORM}", str(path))
    return nodes, edges


def _shape(size: float, batch: int) -> tuple[int, int]:
    return (batch, max(1, int(size) // _BYTES_PER_ELEMENT // batch))


def _predecessors(nodes, edges, path: Path) -> dict[str, list[str]]:
    known = {n.name for n in nodes}
    preds: dict[str, list[str]] = {n.name: [] for n in nodes}
    for src, dst, number in edges:
        for end in (src, dst):
            if end not in known:
                raise InputError(f"edge names unknown node {end!r}", f"{path}:{number}")
        if src not in preds[dst]:
            preds[dst].append(src)
    return preds


def _check_connected(nodes, edges, path: Path) -> None:
    """Every node of a multi-node profile has an edge: the profiler writes one per tensor, so a
    node without any means a truncated or hand-edited file (planned, it would run in parallel
    with everything and understate the step time)."""
    if len(nodes) < 2:
        return
    if not edges:
        raise InputError(f"{len(nodes)} nodes but no edge lines (a truncated file?); edges are written "
                         f"after the nodes as {_EDGE_FORM}", str(path))
    linked = {end for src, dst, _ in edges for end in (src, dst)}
    for node in nodes:
        if node.name not in linked:
            raise InputError(f"node {node.name!r} is connected to no other node (no edge line names it)",
                             f"{path}:{node.line}")


def _topological(nodes, preds, path: Path) -> list[ProfileNode]:
    """Nodes in an order where producers come first (stable with respect to node numbers)."""
    def key(node: ProfileNode):
        digits = re.sub(r"\D", "", node.name)
        return (int(digits) if digits else 0, node.name)
    pending = sorted(nodes, key=key)
    placed: set[str] = set()
    order: list[ProfileNode] = []
    while pending:
        ready = [n for n in pending if all(p in placed for p in preds[n.name])]
        if not ready:
            raise InputError(f"the edges form a cycle through {pending[0].name!r}", str(path))
        order.extend(ready)
        placed.update(n.name for n in ready)
        pending = [n for n in pending if n.name not in placed]
    return order


def load_pipedream_profile(path: str | Path, batch: int | None = None) -> Graph:
    """Read `graph.txt` (or a folder holding it) into a validated `Graph` of PROFILED operators."""
    path = Path(path)
    if path.is_dir():
        path = path / "graph.txt"
    if not path.exists():
        raise InputError("no such PipeDream profile", str(path))
    if batch is not None and (not isinstance(batch, int) or batch < 1):
        raise InputError(f"batch must be a positive integer, got {batch!r}", "batch")
    nodes, edges = parse_profile(path)
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            raise InputError(f"node {n.name!r} is defined twice", str(path))
        seen.add(n.name)
    preds = _predecessors(nodes, edges, path)
    _check_connected(nodes, edges, path)
    name = path.parent.name or path.stem
    builder = GraphBuilder(name)
    outputs: dict[str, tuple] = {}
    for node in _topological(nodes, preds, path):
        inputs = tuple(t for p in preds[node.name] for t in outputs[p])
        attrs = {"output_shapes": tuple(_shape(s, batch or DEFAULT_BATCH) for s in node.activation_sizes),
                 "flops": 0, "params": int(node.parameter_bytes) // _BYTES_PER_ELEMENT,
                 "description": node.description}
        outputs[node.name] = builder.add(
            OpType.PROFILED, inputs, attrs, name=node.name,
            measured=Measured(node.forward_ms / 1000.0, node.backward_ms / 1000.0),
            activation_bytes=float(sum(node.activation_sizes)))
    return builder.build()
