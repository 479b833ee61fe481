"""PyTorch DTensor placements per operator of a per-operator plan.

Each operator's split dimensions (degree > 1) become the dimensions of its device mesh, in the
order of the operator's layout, over the devices the plan gives it (row-major). On each mesh
dimension a tensor is `Shard(axis)` when the dimension splits that axis of it, `Partial()` for an
output whose reduction dimension is split (partial sums, all-reduced), `Replicate()` otherwise.
Weights use PyTorch's layouts: Linear (out, in), Conv2d (out, in/groups, kh, kw), Embedding (vocab,
dim), norms (C,); a bias (out,) is `Shard(0)` on the mesh dimension that splits the output
features, `Replicate()` on the others. Moving tensors between operators' placements is DTensor's
`redistribute` when both use the same mesh; DTensor cannot redistribute across meshes ("Cross
device mesh comm not supported"), so `cross_mesh_edges` lists the edges whose two operators have
different meshes: there the tensor goes through `full_tensor()` and `distribute_tensor` onto the
consumer's mesh.
"""
from __future__ import annotations

import json

from solver_plan.errors import InputError

FORMAT = "solver-plan-dtensor"
VERSION = 1
# weight axis of each dimension that shards a weight, by operator type
WEIGHT_AXES = {"Linear": {"out": 0, "in": 1}, "Conv2d": {"out_channel": 0, "in_channel": 1},
               "Embedding": {"vocab": 0, "embedding": 1}, "BatchNorm": {"channel": 0}}
BIAS_DIMS = {"Linear": "out", "Conv2d": "out_channel"}  # the dimension that splits a bias (out,)


def _entry(entry, index: int) -> tuple[str, dict[str, int], list[int]]:
    """name, degrees and devices of one plan operator, or a one-line InputError naming it."""
    where = "plan"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise InputError(f"operators[{index}] is not an operator with a name", where)
    name = entry["name"]
    degrees, devices = entry.get("degrees"), entry.get("devices")
    if not isinstance(degrees, dict) or not all(isinstance(k, int) and not isinstance(k, bool) and k >= 1
                                                for k in degrees.values()):
        raise InputError(f"operator {name!r}: degrees must map dimension names to positive integers, "
                         f"got {degrees!r}", where)
    if devices is None:
        raise InputError(f"operator {name!r} has no devices (the dtensor export needs the devices of every "
                         "operator: plans written by solver-plan plan --out have them)", where)
    if not isinstance(devices, list) or not devices or not all(isinstance(x, int) and not isinstance(x, bool)
                                                               and x >= 0 for x in devices):
        raise InputError(f"operator {name!r}: devices must be a non-empty list of device ranks, got {devices!r}",
                         where)
    return name, degrees, devices


def _placement(axis, reduction: bool) -> str:
    if axis is not None:
        return f"Shard({axis})"
    return "Partial()" if reduction else "Replicate()"


def export_dtensor(d: dict, graph) -> str:
    """A per-operator plan dict as DTensor device meshes and placements per operator (module docstring); needs
    the `graph` the plan was made for. InputError without a graph or a solution.
    """
    if graph is None:
        raise InputError("the dtensor export needs the graph the plan was made for (tensor axes)", "--export")
    if d.get("status") not in ("OPTIMAL", "FEASIBLE", "TIME_LIMIT") or not d.get("operators"):
        raise InputError(f"the plan has no solution to export (status {d.get('status')!r})", "plan")
    from solver_plan.cost.dims import op_layout
    modules, lost = {}, []
    devices_used = set()
    if not isinstance(d["operators"], list):
        raise InputError("operators must be a list", "plan")
    for index, entry in enumerate(d["operators"]):
        name, degrees, devices = _entry(entry, index)
        try:
            op = graph.op(name)
        except KeyError:
            raise InputError(f"operator {name!r} of the plan is not in graph {graph.name!r}", "plan") from None
        layout = op_layout(op, graph)
        split = [i for i, dim in enumerate(layout.dims) if degrees.get(dim.name, 1) > 1]
        names = [layout.dims[i].name for i in split]
        # degrees beyond the layout's dimensions (e.g. "replica") hold copies: Replicate() on them
        copies = [name for name, k in degrees.items() if k > 1 and name not in layout.names]
        shape = [degrees[n] for n in names + copies]
        devices_used.update(devices)
        size = 1
        for k in shape:
            size *= k
        if size != len(devices):
            # the product of degrees is the number of shards; extra devices would hold copies
            lost.append(f"{op.name}: {len(devices)} devices for {size} shards")
        mesh = _reshape(devices[:size], shape)
        extra = ["Replicate()"] * len(copies)
        outputs = [[_placement(axes[i], layout.dims[i].kind == "reduction") for i in split] + extra
                   for axes in layout.output_axes]
        inputs = [[_placement(axes[i], False) for i in split] + extra for axes in layout.input_axes]
        module = {"type": op.op_type.value, "mesh": {"devices": mesh, "dim_names": names + copies},
                  "output_placements": outputs, "input_placements": inputs}
        weight_axes = WEIGHT_AXES.get(op.op_type.value)
        if op.params and weight_axes is not None:
            module["weight_placements"] = [_placement(weight_axes.get(n), False) for n in names] + extra
        elif op.params:
            module["weight_placements"] = ["Shard(0)" if n in layout.weight_dims else "Replicate()" for n in names] + extra
        if op.attr("bias", False) and op.op_type.value in BIAS_DIMS:
            bias_dim = BIAS_DIMS[op.op_type.value]
            module["bias_placements"] = ["Shard(0)" if n == bias_dim else "Replicate()" for n in names] + extra
        for i in split:
            dim = layout.dims[i]
            if dim.size % degrees[dim.name]:
                lost.append(f"{op.name}: {dim.name} of size {dim.size} split {degrees[dim.name]} ways: DTensor shards "
                            "unevenly (the last shard is smaller), the plan priced equal shards")
        modules[op.name] = module
    return json.dumps({"format": FORMAT, "version": VERSION, "model": d.get("model"),
                       "world_size": len(d.get("device_memory_bytes") or []) or (max(devices_used) + 1),
                       "modules": modules, "cross_mesh_edges": _cross_mesh_edges(d.get("edges") or [], modules),
                       "not_expressible": lost}, indent=1) + "\n"


def _cross_mesh_edges(edges, modules: dict) -> list[dict]:
    """Edges whose producer and consumer sit on different device meshes (DTensor's redistribute
    works within one mesh only)."""
    changes = []
    for edge in edges:
        if not isinstance(edge, dict):
            raise InputError("edges must be objects with src and dst", "plan")
        src, dst = modules.get(edge.get("src")), modules.get(edge.get("dst"))
        if src is None or dst is None:
            continue
        if src["mesh"]["devices"] != dst["mesh"]["devices"]:
            changes.append({"src": edge["src"], "dst": edge["dst"], "tensors": list(edge.get("tensors") or [])})
    return changes


def _reshape(flat: list, shape: list):
    if not shape:
        return flat[0] if flat else None
    step = len(flat) // shape[0]
    return [_reshape(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
