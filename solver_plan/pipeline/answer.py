"""Front door of the pipeline question: a `PipelineRequest` -> `PipelineReport` (the chain planned and
the best plan, compared with the PipeDream + 1F1B* baseline by `plan_pipeline`), for the command
line, the Python API and batch jobs alike."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from solver_plan.deadline import Deadline
from solver_plan.errors import InputError
from solver_plan.requests import PipelineRequest

if TYPE_CHECKING:  # the planners load when a request is answered, not when the command line is built
    from solver_plan.pipeline.api import PipelineResult
    from solver_plan.pipeline.problem import ChainProblem

DEFAULT_BLOCKS = 16
MAX_BLOCKS = 512  # 4x the deepest published transformer (megatron-1T: 128 blocks); the pipedream DP is O(blocks^2 P)


@dataclass(frozen=True)
class PipelineReport:
    """`problem`: the full chain built for the request (the result's may be merged for its planner)."""
    request: PipelineRequest
    problem: ChainProblem
    result: PipelineResult


def answer_pipeline(request: PipelineRequest, deadline: Deadline | None = None) -> PipelineReport:
    """Plan `request`; its time limit counts from now within a caller's `deadline` (a command's)."""
    from solver_plan.pipeline.api import plan_pipeline
    from solver_plan.planners import get_planner
    get_planner(request.planner, "pipeline", "planner").check_options(request.option_dict(), "options")
    get_planner(request.schedule, "schedule", "schedule")
    deadline = Deadline(request.time_limit, parent=deadline) if request.time_limit is not None else deadline
    problem = chain_for(request, deadline)
    options = {**({"seed": request.seed} if request.seed else {}), **request.option_dict()}
    result = plan_pipeline(problem, request.planner, request.schedule, planner_options=options, deadline=deadline,
                           max_layers=request.max_layers if request.planner == "madpipe" else None)
    return PipelineReport(request, problem, result)


def chain_for(request: PipelineRequest, deadline: Deadline | None = None) -> ChainProblem:
    """The chain problem of `request` at full granularity (MadPipe is coarsened by `plan_pipeline`,
    after the baseline)."""
    from solver_plan.cluster import Cluster, resolve_cluster
    from solver_plan.pipeline.sources import build_chain_problem
    model = request.model
    blocks = DEFAULT_BLOCKS
    if isinstance(model, str):
        blocks = check_blocks(model, request.blocks)
        check_blocks_file(model)
    cluster = request.cluster if isinstance(request.cluster, Cluster) else resolve_cluster(request.cluster)
    return build_chain_problem(model, cluster, request.devices, memory=request.memory_limit,
                               bandwidth=request.bandwidth, no_comm=request.no_comm, planner=request.planner,
                               max_layers=None if request.planner == "madpipe" else request.max_layers,
                               blocks=blocks, cut_inside_blocks=request.cut_inside_blocks,
                               precision=request.precision, deadline=deadline, optimizer=request.optimizer)


def check_blocks(model: str, blocks: int | None) -> int:
    """`blocks` only means something for a pipeline-blocks JSON; bounded so a typo cannot hang the DPs."""
    from pathlib import Path

    if blocks is None:
        return DEFAULT_BLOCKS
    if Path(model).suffix != ".json":
        raise InputError(f"{blocks} blocks apply only to a pipeline-blocks JSON model, not {model!r}", "blocks")
    if not 1 <= blocks <= MAX_BLOCKS:
        raise InputError(f"must be between 1 and {MAX_BLOCKS}, got {blocks}", "blocks")
    return blocks


def check_blocks_file(model: str) -> bool:
    """A pipeline-blocks JSON checked at the boundary: readable, finite non-negative measurements
    (Tf positive), positive integer shapes. (sources.chain_from_blocks reads only the types.)
    False when MODEL is not a pipeline-blocks JSON (not .json, or a model file)."""
    from pathlib import Path

    from solver_plan.files import read_json
    from solver_plan.pipeline.sources import BLOCK_KEYS
    if Path(model).suffix != ".json" or model.startswith("hf:") or not Path(model).exists():
        return False
    data = read_json(model, "pipeline-blocks JSON")
    from solver_plan.graph.importers.graph_file import FORMAT
    from solver_plan.graph.importers.hf import looks_like_hf_config
    if isinstance(data, dict) and (data.get("format") == FORMAT or looks_like_hf_config(data)):
        return False  # a model file (sources.chain_from_model sends it to resolve_model)
    shape = data.get("model") if isinstance(data, dict) else None
    for key in BLOCK_KEYS if isinstance(data, dict) else ():
        value = data.get(key)
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value < 0 or (key == "Tf" and value == 0)):
            raise InputError(f"{key} must be a finite number {'> 0' if key == 'Tf' else '>= 0'}, got {value!r}", model)
    for key in ("hidden_dim", "seq_len") if isinstance(shape, dict) else ():
        value = shape.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"model.{key} must be a positive integer, got {value!r}", model)
    return True
