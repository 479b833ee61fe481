"""Time of one transformer block (and of the embedding and output layers) on a tensor-parallel
submesh for one micro-batch, from the per-operator planner (tying: one solve per submesh size and
micro-batch size, reused for every block of every stage).

The block is the project's own graph of the model with one layer and batch = micro-batch size
(`TransformerSpec.block_spec`: the zoo's GPT, or the Hugging Face importer's graph for a config.json), built by `intra.build.build_config_problem` on
`Cluster.first_devices(tp)` and solved by `intra.solve.solve`. The sample dimension is pinned to 1:
data parallelism is the outer dp (priced once per step by schedule.py), so the submesh runs model
parallelism only, and only tensor-parallel configurations (every operator on all tp devices, weight
matrices split t ways, as the memory terms assume; see `_tensor_parallel`): Megatron's column/row
pattern is one point of that space; which weight dimension each matrix splits and how the operators
between them are laid out (sequence splits, replication) is the per-operator solver's choice.

Times of the chosen configuration:
- compute: the cost model's roofline time of each operator (`compute_time` with the device's
  efficiency curves; backward = 2 kernels of the forward's size; the attention core as the
  runtime's kernel runs it, `cost.attention`, the definition the per-operator path uses too: a
  causal fused kernel at the device's measured efficiency for that kernel family, or an unfused one
  with the scores' HBM passes), fp8 casts (`fp8_cast_s`) and eager normalisation / rotary passes
  (`norm_rope_s`), times a calibration factor `compute_scale`;
- communication: the cost model's collectives and redistributions of that configuration (in the
  training precision's bytes: the cost model narrows the graph's fp32 tensors itself), less what
  the runtime hides under the GEMMs (`tp_overlap_exposed_s`).
Both follow the training precision given to `BlockCoster` (`CostModel(precision=...)`: the peak of
the compute dtype, tensors in the activation dtype).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from solver_plan.cluster import Cluster
from solver_plan.deadline import Deadline
from solver_plan.graph.ops import OpType
from solver_plan.hybrid.model import TransformerSpec
from solver_plan.result import Status

BLOCK_SCOPE = "block0/"
BLOCK_SOLVE_FLOOR_S = 0.2  # a block solve gets at least this, even past the deadline: every plan needs it


@dataclass(frozen=True)
class BlockProfile:
    """Seconds per micro-batch on one tp-device submesh (forward + backward unless named)."""
    tp: int
    micro_batch: int
    block_s: float
    block_forward_s: float  # one block's forward: what full recomputation repeats
    attention_forward_s: float  # the attention core's forward: what selective recomputation repeats
    embed_s: float  # token + position embeddings (first stage)
    head_s: float  # final norm, output projection, loss (last stage)
    tp_comm_s: float  # part of block_s spent in the submesh's collectives and redistributions (exposed, after overlap)
    status: Status  # of the per-operator solve
    bound_ratio: float  # intra lower bound / intra objective (1.0 when proven optimal)
    # what selective recomputation repeats: the attention core's forward (Megatron), or half the block's
    # forward (torchtitan's every-other-matmul policy); None: attention_forward_s
    selective_s: float | None = None
    configs: tuple[tuple[str, str], ...] = field(default=())  # (operator, configuration) of the block
    embed_configs: tuple[tuple[str, str], ...] = field(default=())  # of the embeddings (first stage)
    head_configs: tuple[tuple[str, str], ...] = field(default=())  # of norm, output layer, loss (last stage)
    # adding one micro-batch's weight gradients into the accumulated ones, where the runtime runs it as
    # its own kernel (`grad_accumulate_s`): paid by every micro-batch after the first
    grad_accumulate_s: float = 0.0
    # preparing the block's gradient for its reduction, where the runtime does it as kernels of their own
    # (`grad_reduce_prep_s`): paid by every micro-batch whose gradients are reduced
    grad_reduce_prep_s: float = 0.0
    # forward seconds that full recomputation does not repeat: the block's tail after its last tensor saved
    # for backward, where the runtime's checkpoint stops early (`recompute_tail_s`); 0 otherwise
    recompute_skip_s: float = 0.0

    @property
    def selective_forward_s(self) -> float:
        """Seconds selective recomputation repeats per block (the runtime's policy)."""
        return self.attention_forward_s if self.selective_s is None else self.selective_s

    @property
    def full_recompute_s(self) -> float:
        """Seconds full recomputation repeats per block: its forward, less the tail an early-stopping
        checkpoint does not run (`recompute_skip_s`)."""
        return self.block_forward_s - self.recompute_skip_s

    def repeated_forward_s(self, mode: str) -> float:
        """Forward seconds recomputation `mode` repeats per block: none 0, selective
        `selective_forward_s`, full `full_recompute_s`."""
        return {"none": 0.0, "selective": self.selective_forward_s, "full": self.full_recompute_s}[mode]


def _config_text(cfg) -> str:
    parts = [f"{name}={deg}" for name, deg in cfg.degrees if deg > 1]
    return (",".join(parts) or "replicated") + f"@{len(cfg.devices)}"


WEIGHT_OPS = (OpType.LINEAR, OpType.CONV2D, OpType.EMBEDDING)


def _tensor_parallel(op, cfg, graph, tp: int, column_row: bool = False) -> bool:
    """Whether `cfg` is a tensor-parallel configuration of `op` on the tp-device submesh, as the
    stage's memory terms assume (memory.stage_params: weights / t): it uses all tp devices (a
    configuration on fewer leaves the others idle while the plan counts them, the interop engineer's
    report of q, k, v and attention on 1 of 4 devices), and a weight matrix (linear, grouped
    convolution = experts, embedding table) has its weights split t ways, not replicated. Norm
    scales may stay replicated (Megatron replicates them; 2h per norm). `column_row`: the runtime
    splits each weight matrix along one dimension only (`RuntimeProfile.tensor_parallel`: Megatron's
    column- and row-parallel layers), so a split of both (out=4, in=2) is no configuration it runs."""
    from solver_plan.cost.dims import op_layout

    if tp == 1:
        return True
    if len(cfg.devices) != tp:
        return False
    if op.op_type not in WEIGHT_OPS or op.params == 0:
        return True
    degrees = [cfg.degree(name) for name in op_layout(op, graph).weight_dims]
    return math.prod(degrees) == tp and not (column_row and sum(1 for d in degrees if d > 1) > 1)


def _restrict(problem, graph, tp: int, column_row: bool = False):
    """The problem restricted to candidates that do not split the sample dimension (dp is outer) and
    are tensor parallel over the whole submesh as the runtime runs it (`_tensor_parallel`); an
    operator with no such candidate keeps the sample-free ones (and all of them if none)."""
    from solver_plan.intra.problem import ConfigProblem

    keep = []
    for name, cands in zip(problem.names, problem.candidates):
        op = graph.op(name)
        free = [c for c, cfg in enumerate(cands) if cfg.degree("sample") == 1]
        idx = [c for c in free if _tensor_parallel(op, cands[c], graph, tp, column_row)]
        keep.append(np.array(idx or free or range(len(cands)), dtype=int))
    return ConfigProblem(
        names=problem.names, candidates=tuple(tuple(c[i] for i in k) for c, k in zip(problem.candidates, keep)),
        node_costs=tuple(a[k] for a, k in zip(problem.node_costs, keep)),
        node_memory=tuple(a[k] for a, k in zip(problem.node_memory, keep)),
        node_devices=tuple(tuple(d[i] for i in k) for d, k in zip(problem.node_devices, keep)),
        edges=problem.edges, edge_costs=tuple(m[np.ix_(keep[u], keep[v])] for (u, v), m in
                                              zip(problem.edges, problem.edge_costs)),
        num_devices=problem.num_devices, memory_limit=None, name=problem.name, context=problem.context)


def fp8_cast_s(cluster: Cluster, graph, op, cfg, cost_model, runtime) -> tuple[float, float]:
    """(forward, backward) seconds of the casts around a Linear's fp8 GEMM (`cost.kernels.fp8_cast_bytes`
    on this device's input and output tiles, memory-bound), when the compute dtype is fp8 and the
    runtime runs fp8 GEMMs; nothing otherwise."""
    from solver_plan.cost.compute import memory_time
    from solver_plan.cost.kernels import fp8_cast_bytes

    if op.op_type != OpType.LINEAR or cost_model.precision.compute.value != "fp8" or not runtime.kernels.fp8_gemms:
        return 0.0, 0.0
    shards = cfg.num_shards
    inputs = math.prod(graph.tensor(op.inputs[0]).shape) / shards
    outputs = math.prod(op.outputs[0].shape) / shards
    forward, backward = fp8_cast_bytes(inputs, outputs, cost_model.precision.activations.bytes)
    return memory_time(cluster.device, forward), memory_time(cluster.device, backward)


def _compute_s(cluster: Cluster, cost_model, graph, op, cfg, scale: float = 1.0,
               runtime=None) -> tuple[float, float]:
    """(forward, backward) compute seconds of `op` under `cfg`, times `scale`: the cost model's
    roofline time (forward kernel + backward of two kernels its size, `CostModel.compute_seconds`,
    the one source of kernel times) split 1 : 2; the attention core as the runtime's kernel runs it
    (`CostModel.attention_seconds`, i.e. `cost.attention`: a causal fused kernel at the device's
    measured efficiency, the scores' HBM passes of an unfused one), the loss as the runtime's kernels
    move its logits (`CostModel.loss_seconds`), plus fp8 casts (`fp8_cast_s`).
    The cost model carries `runtime`'s kernels (`BlockCoster` builds it so)."""
    from solver_plan.runtime import resolve_runtime

    runtime = resolve_runtime(runtime)
    forward_casts, backward_casts = fp8_cast_s(cluster, graph, op, cfg, cost_model, runtime)
    if op.op_type == OpType.ATTENTION:
        forward, backward = cost_model.attention_seconds(graph, op, cfg)
    elif (loss := cost_model.loss_seconds(graph, op, cfg)) is not None:  # the runtime's counted loss kernels
        forward, backward = loss
    else:
        one = cost_model.node(graph, op, cfg).compute_s / 3.0
        forward, backward = one, 2.0 * one
    return scale * (forward + forward_casts), scale * (backward + backward_casts)


def norm_rope_s(cluster: Cluster, spec: TransformerSpec, b: int, tp: int, runtime,
                element_bytes: float = 2.0) -> tuple[float, float]:
    """(forward, backward) seconds per block of what the graph's fused-norm pricing leaves out
    (`cost.kernels.norm_rope_bytes`): eager fp32 RMSNorm passes over both norms' s b h / t inputs
    and rotary embeddings over q and k (s b (a d + kv d) / t, rotary models only), memory-bound."""
    from solver_plan.cost.compute import memory_time
    from solver_plan.cost.kernels import norm_rope_bytes

    scale = element_bytes / 2.0  # the byte counts are for 16-bit activations
    norms = 2.0 * spec.seq * b * spec.hidden / tp
    rope = 0.0 if spec.learned_positions else spec.seq * b * (spec.attn_width + spec.kv_width) / tp
    forward, backward = norm_rope_bytes(norms, rope, runtime.kernels.fused_norm_rope)
    return memory_time(cluster.device, forward * scale), memory_time(cluster.device, backward * scale)


def grad_accumulate_s(cluster: Cluster, spec: TransformerSpec, tp: int, gradient_bytes: float, runtime) -> float:
    """Seconds per block and micro-batch (after the first) of adding the new weight gradients into the
    accumulated ones, where the runtime runs that as a separate kernel (`Kernels.grad_accumulation_add`:
    autograd's AccumulateGrad, param.grad += new): it reads both and writes one, 3 g P / t HBM bytes for
    the block's P / t parameters on a device in the gradient dtype (g bytes), memory-bound on the vector
    unit (`compute_time`); 0 where the weight-gradient GEMM accumulates into the buffer itself
    (Megatron's gradient_accumulation_fusion) or the runtime does not declare it."""
    from solver_plan.cost.compute import compute_time

    if not runtime.kernels.grad_accumulation_add:
        return 0.0
    return compute_time(cluster, 0.0, 3.0 * gradient_bytes * spec.block_params / tp, unit="vector")


def grad_reduce_prep_s(cluster: Cluster, spec: TransformerSpec, tp: int, runtime) -> float:
    """Seconds per block and micro-batch of the memory-bound kernels the runtime runs on a block's
    unsharded gradient before reducing it (`Kernels.grad_reduce_prep_bytes`, FSDP1: flatten, cast to
    the reduce dtype, pre-divide): that many HBM bytes for each of the block's P / t parameters on a
    device, on the vector unit (`compute_time`). They run on FSDP's post-backward stream beside the next
    block's backward; as elementwise kernels that fill the SMs they take their time from it, so the term
    is added to the backward, not hidden. 0 where the runtime declares none."""
    from solver_plan.cost.compute import compute_time

    per_param = runtime.kernels.grad_reduce_prep_bytes
    if per_param <= 0:
        return 0.0
    return compute_time(cluster, 0.0, per_param * spec.block_params / tp, unit="vector")


def train_metric_s(cluster: Cluster, spec: TransformerSpec, micro_batch: int, tp: int, runtime) -> float:
    """Seconds per micro-batch, on the stage holding the output layer, of the training metrics the
    runtime computes from the logits outside the loss (`Kernels.metric_bytes_per_logit`: Composer's
    train metrics, two eager fp32 cross entropies for LLM Foundry): memory-bound passes of that many
    HBM bytes over the b s V / t logit elements of a device (the vocabulary split over t), priced on the
    vector unit (`compute_time`); 0 where the runtime declares none."""
    from solver_plan.cost.compute import compute_time

    per_logit = runtime.kernels.metric_bytes_per_logit
    if per_logit <= 0:
        return 0.0
    return compute_time(cluster, 0.0, per_logit * micro_batch * spec.seq * spec.vocab / tp, unit="vector")


def tp_overlap_exposed_s(tp_comm_s: float, gemm_s: float, tp: int, runtime, device=None) -> float:
    """Tensor-parallel communication left on the critical path. Without overlap, all of it. With
    Transformer Engine's userbuffers overlap (`--tp-comm-overlap`, NeMo's tp_comm_overlap), each
    all-gather / reduce-scatter is split into t chunks pipelined with the chunks of its GEMM: the
    first chunk cannot hide (1/t of the communication), the rest hides under the GEMMs as far as
    their time reaches: c / t + max(0, c (t - 1) / t - g), c the block's communication, g its GEMM
    time (TE userbuffers, transformer_engine/pytorch/module/base.py initialize_ub; Wang et al. 2022,
    "Overlap communication with dependent computation via decomposition"). With the `device`, the
    hidden part's userbuffers kernels also slow the GEMMs under them (hybrid/contention.py): + hidden x
    TE_USERBUFFERS_SMS / SMs."""
    from solver_plan.hybrid import contention

    if tp <= 1 or not runtime.overlap.tp_comm or tp_comm_s <= 0:
        return tp_comm_s
    exposed = tp_comm_s / tp + max(0.0, tp_comm_s * (tp - 1) / tp - gemm_s)
    share = contention.tp_overlap_share(device) if device is not None else 0.0
    return exposed + contention.slowdown_s(tp_comm_s - exposed, share)


class BlockCoster:
    """Memoised block profiles of one model on one cluster: `profile(tp, b, attention)` solves at most once."""

    def __init__(self, spec: TransformerSpec, cluster: Cluster, planner: str = "milp", compute_scale: float = 1.0,
                 precision=None, runtime=None):
        """`precision`: the training precision the blocks run in (a `TrainingPrecision` or a name;
        None = the device's default): the cost model's peak FLOP/s is that of its compute dtype and
        its tensors and collectives are in its activation dtype. `runtime`: the `RuntimeProfile` (or
        name; None = megatron-core) whose kernels and tensor-parallel overlap price the block."""
        from solver_plan.runtime import resolve_runtime

        if not (isinstance(compute_scale, (int, float)) and math.isfinite(compute_scale) and compute_scale > 0):
            from solver_plan.errors import InputError
            raise InputError(f"must be a positive number, got {compute_scale!r}", "compute_scale")
        self.spec, self.cluster, self.planner = spec, cluster, planner
        self.precision = precision
        self.runtime = resolve_runtime(runtime)
        self.compute_scale = float(compute_scale)
        self._cache: dict[tuple[int, int, str], BlockProfile] = {}
        self.solves = 0
        self.solver_failures: list[str] = []  # block solves whose solver failed (a fallback plan was used)

    def profile(self, tp: int, micro_batch: int, attention: str = "", deadline: Deadline | None = None) -> BlockProfile:
        """The `BlockProfile` of one transformer block on `tp` devices for `micro_batch` sequences with the
        runtime's attention kernel family `attention` ("": its default; RuntimeProfile.with_attention),
        solved once per (tp, micro_batch, attention) and then cached.
        """
        key = (tp, micro_batch, attention)
        if key not in self._cache:
            self._cache[key] = self._solve(tp, micro_batch, attention, deadline or Deadline(None))
            self.solves += 1
        return self._cache[key]

    def cached(self) -> dict[tuple[int, int, str], BlockProfile]:
        """A copy of the profiles solved so far, by (tp, micro_batch, attention)."""
        return dict(self._cache)

    def _solve(self, tp: int, b: int, attention: str, deadline: Deadline) -> BlockProfile:
        runtime = self.runtime.with_attention(attention)  # the kernel family the point runs
        from solver_plan.graph.resolve import resolve_model
        from solver_plan.intra.build import build_config_problem
        from solver_plan.intra.solve import solve

        graph = resolve_model(self.spec.block_spec(b))  # a zoo spec or a config.json with layers=1
        submesh = self.cluster.first_devices(tp)
        from solver_plan.cost.model import CostModel

        cost_model = CostModel(submesh, precision=self.precision, runtime=runtime)
        problem = _restrict(build_config_problem(graph, submesh, cost_model=cost_model), graph, tp,
                            runtime.tensor_parallel == "column-row")
        left = deadline.remaining()
        # an expired deadline still gets a short solve: the block profile is needed for any plan; its
        # nominal budget (the solver's work limits) stays the caller's, so the clock does not change the answer
        result = solve(problem, self.planner, deadline if left is None or left >= BLOCK_SOLVE_FLOOR_S
                       else Deadline(BLOCK_SOLVE_FLOOR_S, nominal_s=deadline.nominal_left()))
        if result.solver_failure:  # never silently replaced: the hybrid result reports it
            self.solver_failures.append(f"block solve (tp={tp}, micro-batch={b}): {result.solver_failure}")
        if result.assignment is None:  # no plan from the solver: the replicated-free fallback is all on one shard
            raise RuntimeError(f"per-operator solve of the block on {tp} devices gave no plan: {result.notes}")
        cost_model = problem.context[2]
        scope = self.spec.block_scope
        group = {}
        for i, name in enumerate(problem.names):
            group[i] = "block" if name.startswith(scope) else ("head" if _after_block(problem.names, i, scope) else "embed")
        total = {"block": 0.0, "embed": 0.0, "head": 0.0}
        forward = {"block": 0.0, "embed": 0.0, "head": 0.0}
        comm = gemm = 0.0
        attention_forward = 0.0
        configs = {"block": [], "embed": [], "head": []}
        block_forwards: dict[str, float] = {}
        for i, name in enumerate(problem.names):
            cfg = problem.candidates[i][result.assignment[i]]
            op = graph.op(name)
            fwd, bwd = _compute_s(submesh, cost_model, graph, op, cfg, self.compute_scale, runtime)
            if group[i] == "block":
                block_forwards[name] = fwd
            node = cost_model.node(graph, op, cfg)
            collectives = node.comm_s + node.sync_s
            total[group[i]] += fwd + bwd + collectives
            forward[group[i]] += fwd + node.comm_s / 2
            if group[i] == "block":
                comm += collectives
                if op.op_type == OpType.LINEAR:
                    gemm += fwd + bwd
                if op.op_type == OpType.ATTENTION:
                    attention_forward += fwd
            configs[group[i]].append((name[len(scope):] if group[i] == "block" else name, _config_text(cfg)))
        for (u, v), matrix in zip(problem.edges, problem.edge_costs):
            seconds = float(matrix[result.assignment[u], result.assignment[v]])
            total[group[v]] += seconds
            forward[group[v]] += seconds / 2
            if group[v] == "block":
                comm += seconds
        shared_s, shared_forward_s = _shared_input_savings(graph, problem, result.assignment, cost_model, scope)
        scattered_s = _reduce_scatter_savings(graph, problem, result.assignment, submesh, cost_model, scope)
        total["block"] -= shared_s + scattered_s
        forward["block"] -= shared_forward_s + scattered_s
        comm -= shared_s + scattered_s
        eager_forward, eager_backward = norm_rope_s(submesh, self.spec, b, tp, runtime,
                                                    cost_model.precision.activations.bytes)
        total["block"] += self.compute_scale * (eager_forward + eager_backward)
        forward["block"] += self.compute_scale * eager_forward
        total["head"] += self.compute_scale * train_metric_s(submesh, self.spec, b, tp, runtime)
        exposed = tp_overlap_exposed_s(comm, gemm, tp, runtime, submesh.device)
        total["block"] -= comm - exposed
        forward["block"] -= (comm - exposed) / 2.0  # forward was booked half the communication (above)
        comm = exposed
        ratio = 1.0
        if result.status != Status.OPTIMAL:
            ratio = (result.lower_bound / result.objective) if (result.lower_bound and result.objective) else 0.0
        # torchtitan's op-level policy recomputes every second matmul and the element-wise ops: half the forward
        selective = forward["block"] / 2.0 if runtime.kernels.selective_policy == "every-other-matmul" else None
        accumulate = self.compute_scale * grad_accumulate_s(submesh, self.spec, tp, cost_model.precision.gradients.bytes,
                                                            runtime)
        prep = self.compute_scale * grad_reduce_prep_s(submesh, self.spec, tp, runtime)
        skip = recompute_tail_s(graph, scope, block_forwards) if runtime.kernels.recompute_early_stop else 0.0
        return BlockProfile(tp, b, total["block"], forward["block"], attention_forward, total["embed"], total["head"],
                            comm, result.status, max(0.0, min(1.0, ratio)), selective, tuple(configs["block"]),
                            tuple(configs["embed"]), tuple(configs["head"]), accumulate, prep,
                            min(skip, max(0.0, forward["block"])))


def recompute_tail_s(graph, scope: str, forward_s: dict[str, float]) -> float:
    """Forward compute seconds of a block that an early-stopping checkpoint does not recompute:
    torch.utils.checkpoint's non-reentrant checkpoint (early stop, its default since torch 2.1) stops the
    recomputation as soon as it has packed as many tensors as the forward saved. Autograd packs an
    operator's inputs before it runs the operator's kernel and its output after, so walking the block
    back from its end (which operators save what: `cost.activations.saves_input`, `saves_own_output`):
    T_tail = the forward seconds `forward_s` of the operators after the block's last saving one, plus that
    one's own when it saves its inputs (a pre-norm decoder block: the last projection, fc2 / down_proj,
    and the residual add). Compute only: the tensor-parallel reduction of that projection's output, also
    skipped, stays booked with the block's communication."""
    from solver_plan.cost.activations import saves_input, saves_own_output

    tail = 0.0
    for name in reversed([n for n in graph.topological_order if n.startswith(scope)]):
        op = graph.op(name)
        if saves_input(op):  # packed before its kernel: the kernel is not run
            return tail + forward_s.get(name, 0.0)
        if saves_own_output(op):  # packed after its kernel: the kernel runs, the stop follows it
            return tail
        tail += forward_s.get(name, 0.0)
    return tail


def _reduce_scatter_savings(graph, problem, assignment, cluster: Cluster, cost_model, scope: str) -> float:
    """Forward seconds the cost model counts more than the runtime pays where an operator's partial
    sums (a split reduction dimension: Megatron's row-parallel linear) feed a consumer that keeps
    only its 1/k share of them on the same k devices (a sequence-split residual or norm). The cost
    model all-reduces the partial output at the operator (`CostModel` forward collective) and the
    consumer's slice is free; the runtime reduce-scatters instead (Korthikanti et al. 2022, section
    4.2.2: with sequence parallelism the g operator is a reduce-scatter; DTensor's Partial -> Shard),
    so all-reduce - reduce-scatter of the output is taken back, once per operator. The backward's
    all-gather stays on the edge, as the cost model prices it."""
    from solver_plan.cost.collectives import collective_time
    from solver_plan.cost.dims import op_layout
    from solver_plan.cost.tiles import box_volume, tile_boxes

    saved = 0.0
    done: set[int] = set()
    consumers: dict[int, list[int]] = {}
    for u, v in problem.edges:
        consumers.setdefault(u, []).append(v)
    for u, targets in consumers.items():
        name = problem.names[u]
        if not name.startswith(scope):
            continue
        op = graph.op(name)
        cfg = problem.candidates[u][assignment[u]]
        layout = op_layout(op, graph)
        group = math.prod(cfg.degree(layout.names[i]) for i in layout.reduction_dims)
        if group <= 1 or len(cfg.devices) != group or not op.outputs:
            continue
        tensor = op.outputs[0]
        for v in targets:
            consumer = graph.op(problem.names[v])
            if tensor.name not in consumer.inputs or u in done:
                continue
            cfg_v = problem.candidates[v][assignment[v]]
            if set(cfg_v.devices) != set(cfg.devices):
                continue
            layout_v = op_layout(consumer, graph)
            axes = layout_v.input_axes[consumer.inputs.index(tensor.name)]
            share = float(box_volume(tile_boxes(cfg_v, layout_v.names, axes, tensor.shape)).max())
            if share * group != math.prod(tensor.shape):  # the consumer keeps 1/k of the sums on each device
                continue
            nbytes = math.prod(tensor.shape) * cost_model.element_bytes(tensor.dtype_bytes)
            per_node = min(group, cluster.devices_per_node)
            saved += max(0.0, collective_time(cluster, "all_reduce", nbytes, group, per_node)
                         - collective_time(cluster, "reduce_scatter", nbytes, group, per_node))
            done.add(u)
    return saved


def _shared_input_savings(graph, problem, assignment, cost_model, scope: str) -> tuple[float, float]:
    """(seconds, of which forward) the cost model counts more than once for sibling operators of the
    block: operators of one type and one configuration reading the same tensor (q, k and v of the
    attention; gate and up of a SwiGLU MLP). Their input gradients are partial sums that are added
    locally and all-reduced once (Megatron's conjugate f operator sits once before the attention and
    once before the MLP; its QKV linear is one fused GEMM), and the tensor is redistributed to that
    layout once; the cost model prices each consumer's input-gradient all-reduce
    (`CostModel.node` with and without input gradients) and each edge on its own, so all but one
    consumer's are taken back here."""
    index = {name: i for i, name in enumerate(problem.names)}
    groups: dict[tuple, list[int]] = {}
    for i, name in enumerate(problem.names):
        if not name.startswith(scope):
            continue
        op = graph.op(name)
        if not op.inputs:
            continue
        cfg = problem.candidates[i][assignment[i]]
        groups.setdefault((op.inputs[0], op.op_type, cfg), []).append(i)
    edge_s = {(u, v): float(m[assignment[u], assignment[v]]) for (u, v), m in zip(problem.edges, problem.edge_costs)}
    saved = saved_forward = 0.0
    for (tensor, _, cfg), members in groups.items():
        if len(members) < 2:
            continue
        for i in members[1:]:
            op = graph.op(problem.names[i])
            with_grads = cost_model.node(graph, op, cfg).comm_s
            without = cost_model._node(graph, op, cfg, tuple(False for _ in op.inputs)).comm_s
            saved += max(0.0, with_grads - without)  # backward only
            source = graph.producer(tensor)
            u = index.get(source.name) if source is not None else None
            if u is not None and (u, i) in edge_s and (u, members[0]) in edge_s:
                dup = min(edge_s[(u, i)], edge_s[(u, members[0])])
                saved += dup
                saved_forward += dup / 2
    return saved, saved_forward


def _after_block(names, i, scope: str = BLOCK_SCOPE) -> bool:
    return any(n.startswith(scope) for n in names[:i])
