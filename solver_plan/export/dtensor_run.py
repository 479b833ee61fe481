"""Execute a DTensor export on CPU processes (gloo) and compare with one process: the proof that
the placements of a per-operator plan compute the model.

`run_dtensor_export(export_text, graph, world_size)` spawns `world_size` processes. Each builds
every module's `DeviceMesh`, distributes each Linear's weight and bias with the exported
placements, moves every activation to the consumer's planned input placements (DTensor's
`redistribute` within one mesh; across meshes, which DTensor refuses, through `full_tensor()`, a
replicated `DTensor.from_local` on the consumer's mesh and `redistribute`: all differentiable),
runs the operator on DTensors,
and brings its output to the planned output placements. The loss is summed over the batch; the
forward output (the logits) and every weight's and bias's gradient are compared with a plain
single-process run on the same weights. Returns the largest absolute differences.

Supported operators: Input, Linear, Unary (relu, gelu, tanh, sigmoid; dropout as identity) and
SoftmaxCrossEntropy (computed on the gathered logits: the loss of its planned split is not
exercised) -- the zoo's `mlp`. Anything else is an InputError naming it. Needs torch.
"""
from __future__ import annotations

import json
import os
import tempfile

from solver_plan.errors import InputError

SUPPORTED = ("Input", "Linear", "Unary", "SoftmaxCrossEntropy")
ACTIVATIONS = ("relu", "gelu", "tanh", "sigmoid", "dropout", "identity")


def _check(graph) -> None:
    for op in graph:
        if op.op_type.value not in SUPPORTED or (op.op_type.value == "Unary" and op.attr("kind") not in ACTIVATIONS):
            raise InputError(f"operator {op.name!r} ({op.op_type.value}) is not executed by the DTensor runner "
                             f"(it runs {', '.join(SUPPORTED)})", "graph")


def _weights(graph, seed: int) -> dict:
    """Deterministic weights, input and labels (every process makes the same)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    values = {}
    for op in graph:
        if op.op_type.value == "Linear":
            fan_in, fan_out = op.attr("in_features"), op.attr("out_features")
            values[f"{op.name}.weight"] = torch.randn(fan_out, fan_in, generator=g, dtype=torch.float64) / fan_in ** 0.5
            if op.attr("bias", False):
                values[f"{op.name}.bias"] = torch.randn(fan_out, generator=g, dtype=torch.float64) * 0.1
        elif op.op_type.value == "Input":
            values[op.name] = torch.randn(*op.output.shape, generator=g, dtype=torch.float64)
        elif op.op_type.value == "SoftmaxCrossEntropy":
            logits = graph.tensor(op.inputs[0]).shape
            values[f"{op.name}.labels"] = torch.randint(0, logits[-1], logits[:-1], generator=g)
    return values


def _unary(kind: str, x):
    import torch.nn.functional as F
    return {"relu": F.relu, "gelu": F.gelu, "tanh": F.tanh, "sigmoid": F.sigmoid}.get(kind, lambda t: t)(x)


def _forward(graph, values: dict, params: dict, move, place_output):
    """One forward pass over the graph's operators (topological order); `move(tensor, op)` brings a
    producer's output to op's planned input, `place_output(tensor, op)` to op's planned output."""
    import torch.nn.functional as F
    outputs, producer_of, loss, logits = {}, {}, None, None
    for op in graph:
        for t in op.outputs:
            producer_of[t.name] = op.name
    for op in graph:
        kind = op.op_type.value
        ins = [move(outputs[producer_of[name]], op) for name in op.inputs]
        if kind == "Input":
            out = place_output(values[op.name], op, source=True)
        elif kind == "Linear":
            out = place_output(F.linear(ins[0], params[f"{op.name}.weight"], params.get(f"{op.name}.bias")), op)
        elif kind == "Unary":
            out = place_output(_unary(op.attr("kind"), ins[0]), op)
        else:  # SoftmaxCrossEntropy: summed over the batch
            logits = ins[0]
            full = logits.full_tensor() if hasattr(logits, "full_tensor") else logits
            loss = F.cross_entropy(full, values[f"{op.name}.labels"], reduction="sum")
            out = loss
        outputs[op.name] = out
    return loss, logits


def _placements(texts):
    """Placement objects; an unsplit operator (no mesh dimension) is Replicate() on its one device."""
    from torch.distributed.tensor import Partial, Replicate, Shard
    return [Replicate() if t == "Replicate()" else Partial() if t == "Partial()" else Shard(int(t[6:-1]))
            for t in texts] or [Replicate()]


def _worker(rank: int, world_size: int, init_file: str, export_text: str, graph, seed: int, result_path: str):
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, distribute_tensor
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    try:
        doc = json.loads(export_text)
        modules = doc["modules"]
        meshes = {name: DeviceMesh("cpu", torch.tensor(m["mesh"]["devices"]).reshape(-1) if not m["mesh"]["dim_names"]
                                   else torch.tensor(m["mesh"]["devices"])) for name, m in modules.items()}
        values = _weights(graph, seed)
        params = {}
        for op in graph:
            if op.op_type.value != "Linear":
                continue
            module, mesh = modules[op.name], meshes[op.name]
            for part, key in (("weight", "weight_placements"), ("bias", "bias_placements")):
                name = f"{op.name}.{part}"
                if name in values:
                    placements = _placements(module.get(key) or ["Replicate()"] * mesh.ndim)
                    params[name] = torch.nn.Parameter(distribute_tensor(values[name].clone(), mesh, placements))

        def same_mesh(a, b) -> bool:
            return a.mesh.tolist() == b.mesh.tolist()

        def to(tensor, op, placements):
            mesh = meshes[op.name]
            if isinstance(tensor, DTensor) and same_mesh(tensor.device_mesh, mesh):
                return tensor.redistribute(mesh, placements)
            # across meshes (DTensor refuses): the full value, the same on every rank, is a
            # replicated DTensor of the consumer's mesh, then redistributed; both steps are
            # differentiable, so gradients come back whole
            full = tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
            replicated = DTensor.from_local(full, mesh, [Replicate()] * mesh.ndim, run_check=False)
            return replicated.redistribute(mesh, placements)

        def move(tensor, op):
            return to(tensor, op, _placements(modules[op.name]["input_placements"][0]))

        def place_output(tensor, op, source=False):
            return to(tensor, op, _placements(modules[op.name]["output_placements"][0]))

        loss, logits = _forward(graph, values, params, move, place_output)
        loss.backward()
        full_logits = logits.full_tensor() if isinstance(logits, DTensor) else logits
        grads = {name: p.grad.full_tensor() for name, p in params.items()}
        # the reference: the same weights in one process, plain tensors
        ref_params = {name: torch.nn.Parameter(values[name].clone()) for name in params}
        ref_loss, ref_logits = _forward(graph, values, ref_params, lambda t, op: t, lambda t, op, source=False: t)
        ref_loss.backward()
        if rank == 0:
            diff = {"loss": abs(loss.item() - ref_loss.item()),
                    "logits": float((full_logits - ref_logits).abs().max()),
                    "gradients": max(float((grads[n] - ref_params[n].grad).abs().max()) for n in grads),
                    "parameters": sorted(grads)}
            with open(result_path, "w") as handle:
                json.dump(diff, handle)
    finally:
        dist.destroy_process_group()


def run_dtensor_export(export_text: str, graph, world_size: int | None = None, seed: int = 0) -> dict:
    """Largest |difference| of the loss, the logits and any gradient between the DTensor run of the
    export on `world_size` gloo processes and one process (float64 throughout)."""
    import torch.multiprocessing as mp
    _check(graph)
    doc = json.loads(export_text)
    world_size = world_size or doc["world_size"]
    with tempfile.TemporaryDirectory() as folder:
        init_file, result_path = os.path.join(folder, "init"), os.path.join(folder, "result.json")
        mp.spawn(_worker, args=(world_size, init_file, export_text, graph, seed, result_path), nprocs=world_size,
                 join=True)
        with open(result_path) as handle:
            return json.load(handle)
