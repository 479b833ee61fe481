"""Execute a DTensor export on CPU processes (gloo) and compare with one process: the proof that
the placements of a per-operator plan compute the model.

`run_dtensor_export(export_text, graph, world_size)` spawns `world_size` processes. Each builds
every module's `DeviceMesh`, distributes each weight and bias with the exported placements, moves
every activation to the consumer's planned input placements and runs the operator on DTensors, then
brings its output to the planned output placements. Within one mesh a move is DTensor's
`redistribute`; across meshes (which DTensor refuses: "Cross device mesh comm not supported") the
value is gathered with `full_tensor()` and becomes a replicated DTensor of the consumer's mesh that
is then redistributed, all differentiable. The loss is summed over the batch; the logits and every
weight's and bias's gradient are compared with a plain single-process run on the same weights
(float64 throughout).

Operators run: Input (features, or token / position ids), Linear, Embedding, LayerNorm (and its
RMS form), Binary add/mul, Unary activations (dropout as identity), Attention (heads, grouped
key/value heads, causal as GPT's) and SoftmaxCrossEntropy (on the gathered logits, on a mesh of
every rank: the loss of its planned split is not exercised): the zoo's mlp and gpt2. Every
operator must span every rank (plans of `solver-plan plan --all-devices`, Alpa's setting); a plan
with operators on part of the ranks, or another operator, is an InputError naming it. Needs torch.
"""
from __future__ import annotations

import json
import os
import tempfile

from solver_plan.errors import InputError

SUPPORTED = ("Input", "Linear", "Embedding", "LayerNorm", "Binary", "Unary", "Attention", "SoftmaxCrossEntropy")
ACTIVATIONS = ("relu", "gelu", "tanh", "sigmoid", "dropout", "identity")


def _check(graph) -> None:
    for op in graph:
        kind = op.op_type.value
        if kind not in SUPPORTED or (kind == "Unary" and op.attr("kind") not in ACTIVATIONS) or \
                (kind == "Binary" and op.attr("kind") not in ("add", "mul")):
            raise InputError(f"operator {op.name!r} ({kind}) is not executed by the DTensor runner "
                             f"(it runs {', '.join(SUPPORTED)})", "graph")


def _values(graph, seed: int) -> dict:
    """Deterministic weights, inputs and labels (every process makes the same)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    f64 = torch.float64
    values, id_range = {}, {}
    for op in graph:
        if op.op_type.value == "Embedding":
            id_range[op.inputs[0]] = min(id_range.get(op.inputs[0], 1 << 30), op.attr("num_embeddings"))
    for op in graph:
        kind, name = op.op_type.value, op.name
        if kind == "Linear":
            fan_in, fan_out = op.attr("in_features"), op.attr("out_features")
            if not op.attr("tied_to"):  # a tied output projection uses the embedding's table
                values[f"{name}.weight"] = torch.randn(fan_out, fan_in, generator=g, dtype=f64) / fan_in ** 0.5
            if op.attr("bias", False):
                values[f"{name}.bias"] = torch.randn(fan_out, generator=g, dtype=f64) * 0.1
        elif kind == "Embedding":
            values[f"{name}.weight"] = torch.randn(op.attr("num_embeddings"), op.attr("embedding_dim"), generator=g,
                                                   dtype=f64)
        elif kind == "LayerNorm":
            width = op.output.shape[-1]
            values[f"{name}.weight"] = 1 + 0.1 * torch.randn(width, generator=g, dtype=f64)
            if not op.attr("rms", False):
                values[f"{name}.bias"] = 0.1 * torch.randn(width, generator=g, dtype=f64)
        elif kind == "Input" and name in id_range:
            shape = op.output.shape
            if name == "positions":
                values[name] = torch.arange(shape[-1]).expand(*shape).contiguous()
            else:
                values[name] = torch.randint(0, id_range[name], shape, generator=g)
        elif kind == "Input":
            values[name] = torch.randn(*op.output.shape, generator=g, dtype=f64)
        elif kind == "SoftmaxCrossEntropy":
            logits = graph.tensor(op.inputs[0]).shape
            values[f"{name}.labels"] = torch.randint(0, logits[-1], logits[:-1], generator=g)
    return values


def _attention(q, k, v, heads: int, kv_heads: int, causal_mask):
    """Scaled dot-product attention on (N, S, H) projections, written in matrix products (which
    DTensor shards by sample, sequence or heads); `causal_mask` (S, S) is 0 / -inf."""
    n, s, hidden = q.shape
    d = hidden // heads
    q = q.view(n, s, heads, d).transpose(1, 2)
    k = k.view(n, k.shape[1], kv_heads, d).transpose(1, 2)
    v = v.view(n, v.shape[1], kv_heads, d).transpose(1, 2)
    if kv_heads != heads:
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = q @ k.transpose(-1, -2) / d ** 0.5 + causal_mask
    return (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, s, hidden)


def _run_op(op, ins, params, constant, tie):
    """One operator on (D)Tensors: `params[name]` its weights, `constant(t, op)` a tensor made
    compatible with op's inputs (a DTensor replicated on op's mesh, or the tensor itself),
    `tie(weight, op)` a tied weight brought to op's weight placements."""
    import torch
    import torch.nn.functional as F
    kind, name = op.op_type.value, op.name
    if kind == "Linear":
        tied = op.attr("tied_to")
        weight = tie(params[f"{tied}.weight"], op) if tied else params[f"{name}.weight"]
        return F.linear(ins[0], weight, params.get(f"{name}.bias"))
    if kind == "Embedding":
        return F.embedding(ins[0], params[f"{name}.weight"])
    if kind == "LayerNorm":
        width = (op.output.shape[-1],)
        if op.attr("rms", False):
            return F.rms_norm(ins[0], width, params[f"{name}.weight"])
        return F.layer_norm(ins[0], width, params[f"{name}.weight"], params[f"{name}.bias"])
    if kind == "Binary":
        return ins[0] + ins[1] if op.attr("kind") == "add" else ins[0] * ins[1]
    if kind == "Unary":
        return {"relu": F.relu, "gelu": F.gelu, "tanh": torch.tanh, "sigmoid": torch.sigmoid}.get(
            op.attr("kind"), lambda t: t)(ins[0])
    if kind == "Attention":
        s = op.output.shape[1]
        mask = torch.full((s, s), float("-inf"), dtype=torch.float64).triu(1)
        heads = op.attr("heads")
        return _attention(*ins[:3], heads, op.attr("kv_heads") or heads, constant(mask, op))
    raise AssertionError(kind)


def _forward(graph, values: dict, params: dict, move, place_output, constant, tie):
    """One forward pass in topological order; `move(tensor, op, i)` brings a producer's output to
    op's planned input i, `place_output(tensor, op)` to op's planned output."""
    import torch.nn.functional as F
    outputs, producer_of, loss, logits = {}, {}, None, None
    for op in graph:
        for t in op.outputs:
            producer_of[t.name] = op.name
    for op in graph:
        ins = [move(outputs[producer_of[name]], op, i) for i, name in enumerate(op.inputs)]
        if op.op_type.value == "Input":
            outputs[op.name] = place_output(values[op.name], op)
        elif op.op_type.value == "SoftmaxCrossEntropy":  # summed over the batch
            logits = ins[0]
            full = logits.full_tensor() if hasattr(logits, "full_tensor") else logits
            loss = F.cross_entropy(full.flatten(0, -2), values[f"{op.name}.labels"].flatten(), reduction="sum")
            outputs[op.name] = loss
        else:
            outputs[op.name] = place_output(_run_op(op, ins, params, constant, tie), op)
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
        modules = json.loads(export_text)["modules"]
        meshes = {}
        for name, module in modules.items():
            devices = torch.tensor(module["mesh"]["devices"])
            meshes[name] = DeviceMesh("cpu", devices.reshape(-1) if devices.dim() == 0 else devices)
        loss_op = next(op for op in graph if op.op_type.value == "SoftmaxCrossEntropy")
        if meshes[loss_op.name].mesh.numel() != world_size:
            raise InputError("the DTensor runner needs the loss on every rank", "plan")
        values = _values(graph, seed)
        params = {}
        for op in graph:
            module, mesh = modules[op.name], meshes[op.name]
            for part, key in (("weight", "weight_placements"), ("bias", "bias_placements")):
                name = f"{op.name}.{part}"
                if name in values:
                    placements = _placements(module.get(key) or module.get("weight_placements") or [])
                    params[name] = torch.nn.Parameter(distribute_tensor(values[name].clone(), mesh, placements))

        def to(tensor, op, placements):
            mesh = meshes[op.name]
            if isinstance(tensor, DTensor) and tensor.device_mesh.mesh.tolist() == mesh.mesh.tolist():
                return tensor.redistribute(mesh, placements)
            # across meshes (DTensor refuses): the full value, the same on every rank, becomes a
            # replicated DTensor of the consumer's mesh, then is redistributed; all differentiable
            full = tensor.full_tensor() if isinstance(tensor, DTensor) else tensor
            replicated = DTensor.from_local(full, mesh, [Replicate()] * mesh.ndim, run_check=False)
            return replicated.redistribute(mesh, placements)

        def move(tensor, op, index):
            return to(tensor, op, _placements(modules[op.name]["input_placements"][index]))

        def place_output(tensor, op):
            return to(tensor, op, _placements(modules[op.name]["output_placements"][0]))

        def constant(tensor, op):
            mesh = meshes[op.name]
            return DTensor.from_local(tensor, mesh, [Replicate()] * mesh.ndim, run_check=False)

        def tie(weight, op):
            return to(weight, op, _placements(modules[op.name].get("weight_placements") or []))

        loss, logits = _forward(graph, values, params, move, place_output, constant, tie)
        loss.backward()
        full_logits = logits.full_tensor()
        grads = {name: p.grad.full_tensor() if p.grad is not None else None for name, p in params.items()}
        # the reference: the same weights in one process, plain tensors
        ref_params = {name: torch.nn.Parameter(values[name].clone()) for name in params}
        same = lambda t, op: t  # noqa: E731
        ref_loss, ref_logits = _forward(graph, values, ref_params, lambda t, op, i: t, same, same, same)
        ref_loss.backward()
        missing = sorted(n for n, gr in grads.items() if gr is None)
        mine = {"gradients": max((float((gr - ref_params[n].grad).abs().max()) for n, gr in grads.items()
                                  if gr is not None), default=0.0),
                "checked": sorted(n for n, gr in grads.items() if gr is not None), "missing": missing}
        gathered = [None] * world_size
        dist.all_gather_object(gathered, mine)
        if rank == 0:
            diff = {"loss": abs(loss.item() - ref_loss.item()),
                    "logits": (full_logits - ref_logits).abs().max().item(),
                    "gradients": max(r["gradients"] for r in gathered),
                    "parameters": sorted({n for r in gathered for n in r["checked"]}),
                    "missing_gradients": sorted({n for r in gathered for n in r["missing"]})}
            with open(result_path, "w") as handle:
                json.dump(diff, handle)
    finally:
        dist.destroy_process_group()


def run_dtensor_export(export_text: str, graph, world_size: int | None = None, seed: int = 0) -> dict:
    """Largest |difference| of the loss, the logits and any gradient between the DTensor run of the
    export on `world_size` gloo processes and one process (float64 throughout), and the parameters
    whose gradients were compared."""
    import torch.multiprocessing as mp
    _check(graph)
    doc = json.loads(export_text)
    world_size = world_size or doc["world_size"]
    for name, module in doc["modules"].items():
        # a mesh on some ranks only: the gradient's way back to it is a collective that the ranks
        # outside never reach in their autograd graphs (the run would hang), so it is refused
        if len(json.dumps(module["mesh"]["devices"]).replace("[", "").replace("]", "").split(",")) != world_size:
            raise InputError(f"module {name!r} runs on a part of the {world_size} ranks: the DTensor runner executes "
                             "plans whose operators each span every rank (solver-plan plan --all-devices)", "plan")
    with tempfile.TemporaryDirectory() as folder:
        init_file, result_path = os.path.join(folder, "init"), os.path.join(folder, "result.json")
        mp.spawn(_worker, args=(world_size, init_file, export_text, graph, seed, result_path), nprocs=world_size,
                 join=True)
        with open(result_path) as handle:
            return json.load(handle)
