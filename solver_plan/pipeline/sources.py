"""Chains from the three kinds of model input: PipeDream profiles (measured times), zoo graphs (times
from the cost model on one device) and the per-block profiles of ../shared/data/pipeline-blocks.

Zoo graphs: the cost model of `plan` and `hybrid` on one device, no parallelism inside a layer
(`CostModel.node` with a one-device configuration): forward + backward = its compute seconds
(roofline `cost.compute.compute_time` in the precision's compute dtype), split forward = total /
(1 + BACKWARD_FACTOR) as the cost model builds it; W = parameters x the precision's parameter bytes
(the working copy; `problem.WEIGHT_COPIES` counts versions and the gradient); activations = declared
bytes in the precision's activation dtype (`CostModel.activation_scale`). The precision is
`cost.precision.resolve_precision(requested, device, graph)`: auto is the device's default, and
profiles (measured times) keep their fp32 times and sizes.

Pipeline blocks (JSON with Tf, Tb, Tw ms and Mparams, Mf MB): `blocks` identical transformer
blocks; forward Tf, backward Tb + Tw; W = Mparams; each block keeps Mf for its backward; the tensor
crossing a cut is one block output, hidden x seq x 2 bytes (fp16, micro-batch of one sequence).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from solver_plan.errors import InputError
from solver_plan.graph.chain import (LayerChain, block_key, cut_dag, is_transformer, layer_groups, linearize,
                                     merge_layers)
from solver_plan.pipeline.cuts import best_order

MIB = 2.0 ** 20
BLOCK_KEYS = ("Tf", "Tb", "Tw", "Mparams", "Mf")


def zoo_costs(graph, cluster, precision=None):
    """(times, sizes, precision name) of `graph`'s operators under the cost model on one device of `cluster`, in
    `precision` (None/auto: the device's default), for `linearize` and `cut_dag`."""
    from solver_plan.cost.enumerate import single_device_config
    from solver_plan.cost.model import BACKWARD_FACTOR, CostModel
    from solver_plan.cost.precision import resolve_precision
    model = CostModel(cluster, precision=resolve_precision(precision, cluster.device, graph))
    parameter_bytes = model.precision.parameters.bytes

    def times(op):
        total = model.node(graph, op, single_device_config(op, graph)).compute_s
        forward = total / (1.0 + BACKWARD_FACTOR)
        return forward, total - forward

    def sizes(op):
        return float(op.params * parameter_bytes), float(op.activation_bytes * model.activation_scale(op))
    return times, sizes, model.precision.name


def chain_from_graph(graph, cluster, *, processors: int | None = None, bandwidth: float = math.inf,
                     memory: float | None = None, cut_inside_blocks: bool | None = None,
                     precision=None, deadline=None) -> LayerChain:
    """Measured times where the graph has them (profiles), else the cost model on one device.

    With `processors` (> 1) the layers are ordered so that the best chain of antichain cuts for a
    straight pipeline on that many processors (`pipeline.cuts.best_order`, with `bandwidth` and
    `memory`) is among the chain's cuts. Transformer models (attention inside `blockN` scopes) are cut
    between blocks only, each block one layer of the chain, unless `cut_inside_blocks` is true.
    `precision` (zoo graphs): as `--precision`; graphs with measured times (profiles) keep them.
    `deadline`: the command's clock, the safety net of the antichain search (`best_order`)."""
    times = sizes = None
    notes: list[str] = []
    if not graph.has_measured_times:
        times, sizes, name = zoo_costs(graph, cluster, precision)
        notes.append(f"layer times and sizes from the cost model in precision {name}")
    by_block = (not cut_inside_blocks) and is_transformer(graph)
    groups = layer_groups(graph, by_block)
    dag = cut_dag(graph, times, groups, sizes)
    if dag is None:  # blocks that feed each other both ways: cut anywhere
        by_block, groups = False, layer_groups(graph, False)
        dag = cut_dag(graph, times, groups, sizes)
        notes.append("blocks are not a chain of the graph: cuts inside blocks allowed")
    order = None
    if processors is not None and processors > 1:
        choice = best_order(dag, processors, bandwidth, memory, deadline=deadline)
        notes.append(choice.note)
        order = [n for name in choice.order for n in name.split("|")]
    chain = linearize(graph, times, order, sizes)
    if by_block:
        chain = merge_layers(chain, _spans(chain.layer_names))
        notes.append("cuts between transformer blocks only (--cut-inside-blocks to allow others)")
    return chain.with_notes(tuple(notes))


def _spans(names) -> list[tuple[int, int]]:
    """Consecutive runs of layers of one block (layers outside blocks alone)."""
    spans, first = [], 0
    for i in range(1, len(names) + 1):
        key = block_key(names[first])
        if i == len(names) or key is None or block_key(names[i]) != key:
            spans.append((first, i - 1))
            first = i
    return spans


def chain_from_profile(path, **order) -> LayerChain:
    """A PipeDream profile's chain; `order` as for `chain_from_graph` (processors, bandwidth, memory)."""
    from solver_plan.graph.importers import load_pipedream_profile
    return chain_from_graph(load_pipedream_profile(path), None, **order)


def chain_from_blocks(path, blocks: int = 16) -> LayerChain:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the pipeline-blocks JSON ({exc})", str(path)) from None
    if not isinstance(data, dict):
        raise InputError("expected a JSON object with Tf, Tb, Tw, Mparams, Mf and model", str(path))
    missing = [k for k in BLOCK_KEYS if not isinstance(data.get(k), (int, float))]
    if missing:
        raise InputError(f"has no per-block measurements {', '.join(missing)} (numbers expected: Tf, Tb, Tw in ms; "
                         f"Mparams, Mf in MB)", str(path))
    model = data.get("model")
    if not isinstance(model, dict) or not all(isinstance(model.get(k), int) for k in ("hidden_dim", "seq_len")):
        raise InputError("expected model.hidden_dim and model.seq_len (integers)", str(path))
    if not isinstance(blocks, int) or blocks < 1:
        raise InputError(f"the number of blocks must be a positive integer, got {blocks!r}", "--blocks")
    boundary = model["hidden_dim"] * model["seq_len"] * 2.0
    kept = data["Mf"] * MIB
    layers = tuple(f"block{i}" for i in range(blocks))
    return LayerChain(path.stem, layers, (data["Tf"] / 1e3,) * blocks, ((data["Tb"] + data["Tw"]) / 1e3,) * blocks,
                      (data["Mparams"] * MIB,) * blocks, (boundary,) * blocks, (boundary,) * blocks,
                      (max(0.0, kept - boundary),) * blocks, boundary)


def chain_from_model(model, cluster, blocks: int = 16, **order) -> LayerChain:
    """MODEL as every command takes it (a zoo spec or a PipeDream profile, via `resolve_model`), a
    pipeline-blocks JSON, or an already built `Graph` (Python callers); `order` as for
    `chain_from_graph` (processors, bandwidth, memory, cut_inside_blocks)."""
    from solver_plan.graph.importers.graph_file import is_model_document
    from solver_plan.graph.ir import Graph
    if isinstance(model, Graph):
        return chain_from_graph(model, cluster, **order)
    if Path(model).suffix == ".json" and not model.startswith("hf:") and not is_model_document(model):
        if not Path(model).exists():
            raise InputError("no such pipeline-blocks file", model)
        return chain_from_blocks(model, blocks)  # measured block times: no precision to apply
    from solver_plan.graph.resolve import resolve_model
    return chain_from_graph(resolve_model(model), cluster, **order)


# Layers kept (by merging neighbours) for planners whose cost grows fast with the chain length;
# MadPipe's coarsening is chosen from the time budget by `plan_pipeline` instead (pipeline/budget.py).
DEFAULT_MAX_LAYERS = {"exact-joint": 12}


def build_chain_problem(model, cluster, processors: int, *, memory: float | None = None,
                        bandwidth: float | None = None, no_comm: bool = False, planner: str | None = None,
                        max_layers: int | None = None, blocks: int = 16, cut_inside_blocks: bool = False,
                        dag_cuts: bool = True, precision=None, deadline=None):
    """The one way the CLI, batch jobs and the Python API make a `ChainProblem` from MODEL (a string
    or a `Graph`) and a cluster.

    Memory per processor defaults to the device memory. Bandwidth defaults to the slowest link
    between consecutive processors among the first `processors` devices (a pipeline crossing nodes
    pays the inter-node link); `no_comm` makes transfers free. The layers are ordered for the best
    antichain cuts on `processors` (`dag_cuts`), transformer blocks kept whole unless
    `cut_inside_blocks`. The chain is coarsened only to an explicit `max_layers` (or the planner's
    entry in DEFAULT_MAX_LAYERS); `plan_pipeline` coarsens for MadPipe from its time budget.
    `precision` (fp32, tf32, bf16, fp16, fp8, auto/None) prices zoo graphs as `plan` does
    (`zoo_costs`); profiles and pipeline-blocks files keep their measured times. `deadline`: the
    command's clock (building the chain counts against the time limit).
    """
    from solver_plan.graph.chain import coarsen
    from solver_plan.pipeline.problem import ChainProblem

    if isinstance(processors, bool) or not isinstance(processors, int) or processors < 1:
        raise InputError(f"must be a positive integer, got {processors}", "--processors")
    if processors > cluster.num_devices:
        raise InputError(f"{processors} processors but {cluster.name!r} has {cluster.num_devices} devices",
                         "--processors")
    if no_comm:
        bandwidth = math.inf
    elif bandwidth is None:
        bandwidth = min((cluster.bandwidth(p, p + 1) for p in range(processors - 1)), default=math.inf)
    memory = memory if memory is not None else cluster.device.memory
    chain = chain_from_model(model, cluster, blocks, processors=processors if dag_cuts else None,
                             bandwidth=bandwidth, memory=memory, cut_inside_blocks=cut_inside_blocks,
                             precision=precision, deadline=deadline)
    limit = max_layers if max_layers is not None else DEFAULT_MAX_LAYERS.get(planner or "")
    if limit is not None and len(chain) > limit:
        chain = coarsen(chain, limit)
    return ChainProblem(chain, processors, memory, bandwidth)
