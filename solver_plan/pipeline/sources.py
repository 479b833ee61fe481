"""Chains from the three kinds of model input: PipeDream profiles (measured times), zoo graphs (times
from the cost model on one device) and the per-block profiles of ../shared/data/pipeline-blocks.

Zoo graphs: the cost model of `plan` and `hybrid` on one device, no parallelism inside a layer
(`CostModel.node` with a one-device configuration): forward + backward = its compute seconds
(roofline `cost.compute.compute_time` in the precision's compute dtype), split forward = total /
(1 + BACKWARD_FACTOR) as the cost model builds it; W = parameters x the precision's parameter bytes
(the working copy); activations = declared bytes in the precision's activation dtype
(`CostModel.activation_scale`). The precision is `cost.precision.resolve_precision(requested,
device, graph)`: auto is the device's default, and profiles (measured times) keep their fp32 times
and sizes. Model state (`pipeline.memory`): the resolved precision's bytes per parameter with the
optimizer (default Adam), per parameter of W (`graph_state`, `blocks_state`): so a profile planned with
`--precision bf16` keeps its measured fp32 times and activations, and 16 B of Adam state per
parameter (W / 4 parameters).

Pipeline blocks (JSON with Tf, Tb, Tw ms and Mparams, Mf MB): `blocks` identical transformer
blocks; forward Tf, backward Tb + Tw; W = Mparams; each block keeps Mf for its backward; the tensor
crossing a cut is one block output, hidden x seq x 2 bytes (fp16, micro-batch of one sequence).
Mparams is the fp32 size of a block's parameters (default.json: 48.05 MiB for the 12.6 M
parameters of a hidden-1024 block, 4.0 B each), so W is in fp32 there and auto is fp32 as for
profiles.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from solver_plan.cost.enumerate import single_device_config
from solver_plan.cost.model import BACKWARD_FACTOR, CostModel
from solver_plan.cost.precision import Precision, TrainingPrecision, resolve_precision
from solver_plan.errors import InputError
from solver_plan.files import read_input_bytes  # regular files only: FIFOs, devices refused
from solver_plan.graph.importers import load_pipedream_profile
from solver_plan.graph.importers.graph_file import is_model_document
from solver_plan.graph.ir import Graph
from solver_plan.graph.resolve import resolve_model
from solver_plan.pipeline.chain import (LayerChain, block_key, coarsen, cut_dag, is_transformer, layer_groups,
                                        linearize, merge_layers)
from solver_plan.pipeline.cuts import best_order
from solver_plan.pipeline.memory import DEFAULT_OPTIMIZER, ModelState, check_optimizer, model_state
from solver_plan.pipeline.problem import ChainProblem
from solver_plan.units import MIB

BLOCK_KEYS = ("Tf", "Tb", "Tw", "Mparams", "Mf")


def zoo_costs(graph, cluster, precision=None):
    """(times, sizes, precision name) of `graph`'s operators under the cost model on one device of `cluster`, in
    `precision` (None/auto: the device's default), for `linearize` and `cut_dag`."""
    model = CostModel(cluster, precision=resolve_precision(precision, cluster.device, graph))
    parameter_bytes = model.precision.parameters.bytes

    def times(op):
        total = model.node(graph, op, single_device_config(op, graph)).compute_s
        forward = total / (1.0 + BACKWARD_FACTOR)
        return forward, total - forward

    def sizes(op):
        return float(op.params * parameter_bytes), float(op.activation_bytes * model.activation_scale(op))
    return times, sizes, model.precision.name


MEASURED_WEIGHT_BYTES = float(Precision.FP32.bytes)  # profiles and block files were measured in fp32


def graph_state(graph, cluster, precision=None, optimizer: str = DEFAULT_OPTIMIZER) -> ModelState:
    """Model state of `graph`'s chain: the precision `--precision` resolves to (auto: the device's
    default; fp32 for graphs with measured times), with `optimizer`; W in the precision's parameter
    dtype for zoo graphs (as `zoo_costs` prices them), in the declared dtype for measured graphs."""
    resolved = resolve_precision(precision, None if cluster is None else cluster.device, graph)
    weight = None
    if graph.has_measured_times:
        params = sum(op.params for op in graph)
        weight = sum(op.param_bytes for op in graph) / params if params else MEASURED_WEIGHT_BYTES
    return model_state(resolved, optimizer, weight)


def blocks_state(precision=None, optimizer: str = DEFAULT_OPTIMIZER) -> ModelState:
    """Model state of a pipeline-blocks chain: W in fp32 (Mparams, module docstring); auto is fp32."""
    resolved = (TrainingPrecision.fp32() if precision is None or str(precision).strip().lower() == "auto"
                else TrainingPrecision.parse(precision, None, "--precision"))
    return model_state(resolved, optimizer, MEASURED_WEIGHT_BYTES)


def chain_from_graph(graph, cluster, *, processors: int | None = None, bandwidth: float = math.inf,
                     memory: float | None = None, cut_inside_blocks: bool | None = None,
                     precision=None, deadline=None, optimizer: str = DEFAULT_OPTIMIZER) -> LayerChain:
    """Measured times where the graph has them (profiles), else the cost model on one device.

    With `processors` (> 1) the layers are ordered so that the best chain of antichain cuts for a
    straight pipeline on that many processors (`pipeline.cuts.best_order`, with `bandwidth` and
    `memory`) is among the chain's cuts. Transformer models (attention inside `blockN` scopes) are cut
    between blocks only, each block one layer of the chain, unless `cut_inside_blocks` is true.
    `precision` (zoo graphs): as `--precision`; graphs with measured times (profiles) keep them.
    `deadline`: the command's clock, the safety net of the antichain search (`best_order`).
    `optimizer`: with the precision, the model state `best_order`'s memory filter charges."""
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
        factor = graph_state(graph, cluster, precision, optimizer).weight_factor if memory is not None else None
        choice = best_order(dag, processors, bandwidth, memory, deadline=deadline, state_factor=factor)
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
    return chain_from_graph(load_pipedream_profile(path), None, **order)


def chain_from_blocks(path, blocks: int = 16) -> LayerChain:
    """A chain of `blocks` identical transformer blocks from a pipeline-blocks JSON (Tf, Tb, Tw in ms,
    Mparams, Mf in MB; see the module text)."""
    path = Path(path)
    try:
        data = json.loads(read_input_bytes(path, "pipeline-blocks JSON"))
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
    `chain_from_graph` (processors, bandwidth, memory, cut_inside_blocks, precision, optimizer)."""
    return chain_and_state(model, cluster, blocks, **order)[0]


def chain_and_state(model, cluster, blocks: int = 16, **order) -> tuple[LayerChain, ModelState]:
    """`chain_from_model` and the model state its W stands for (`graph_state`, `blocks_state`)."""
    precision, optimizer = order.get("precision"), order.get("optimizer", DEFAULT_OPTIMIZER)
    if not isinstance(model, Graph):
        if Path(model).suffix == ".json" and not model.startswith("hf:") and not is_model_document(model):
            if not Path(model).exists():
                raise InputError("no such pipeline-blocks file", model)
            # measured block times: the precision sets the model state only
            return chain_from_blocks(model, blocks), blocks_state(precision, optimizer)
        model = resolve_model(model)
    return chain_from_graph(model, cluster, **order), graph_state(model, cluster, precision, optimizer)


# Layers kept (by merging neighbours) for planners whose cost grows fast with the chain length;
# MadPipe's coarsening is chosen from the time budget by `plan_pipeline` instead (pipeline/budget.py).
def build_chain_problem(model, cluster, processors: int, *, memory: float | None = None,
                        bandwidth: float | None = None, no_comm: bool = False, planner: str | None = None,
                        max_layers: int | None = None, blocks: int = 16, cut_inside_blocks: bool = False,
                        dag_cuts: bool = True, precision=None, deadline=None, optimizer: str = DEFAULT_OPTIMIZER):
    """The one way the CLI, batch jobs and the Python API make a `ChainProblem` from MODEL (a string
    or a `Graph`) and a cluster.

    Memory per processor defaults to the device memory. Bandwidth defaults to the slowest link
    between consecutive processors among the first `processors` devices (a pipeline crossing nodes
    pays the inter-node link); `no_comm` makes transfers free. The layers are ordered for the best
    antichain cuts on `processors` (`dag_cuts`), transformer blocks kept whole unless
    `cut_inside_blocks`. The chain is coarsened only to an explicit `max_layers`; `plan_pipeline`
    coarsens for MadPipe (from its time budget) and exact-joint (`EXACT_JOINT_LAYERS`) itself, so
    bounds and the PipeDream baseline stay those of the full chain.
    `precision` (fp32, tf32, bf16, fp16, fp8, auto/None) prices zoo graphs as `plan` does
    (`zoo_costs`); profiles and pipeline-blocks files keep their measured times. Stage memory
    charges the model state of that precision and `optimizer` (adam, sgd-momentum, sgd, or
    pipedream: PipeDream's 3 x weights; `pipeline.memory`). `deadline`: the command's clock
    (building the chain counts against the time limit).
    """

    optimizer = check_optimizer(optimizer)  # before any work
    if isinstance(processors, bool) or not isinstance(processors, int) or processors < 1:
        raise InputError(f"must be a positive integer, got {processors}", "devices")
    if processors > cluster.num_devices:
        raise InputError(f"{processors} processors but {cluster.name!r} has {cluster.num_devices} devices",
                         "devices")
    if no_comm:
        bandwidth = math.inf
    elif bandwidth is None:
        bandwidth = min((cluster.bandwidth(p, p + 1) for p in range(processors - 1)), default=math.inf)
    memory = memory if memory is not None else cluster.device.memory
    chain, state = chain_and_state(model, cluster, blocks, processors=processors if dag_cuts else None,
                                   bandwidth=bandwidth, memory=memory, cut_inside_blocks=cut_inside_blocks,
                                   precision=precision, deadline=deadline, optimizer=optimizer)
    if max_layers is not None and len(chain) > max_layers:
        chain = coarsen(chain, max_layers)
    return ChainProblem(chain, processors, memory, bandwidth, state)
