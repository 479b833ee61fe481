"""What every exporter reads from a hybrid plan dict, checked once (solver_plan/hybrid/plan.py
writes it: parallelism, global_batch, devices, stages with layer ranges). Expert-parallel plans
(`kind: moe-hybrid`, hybrid/moe_plan.py) are read into the same view with their expert folding in
`HybridView.experts` (export/moe_view.py)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from solver_plan.errors import InputError
from solver_plan.result import read_kind, read_schema_version

if TYPE_CHECKING:
    from solver_plan.hybrid.moe_model import MoEModel

WHERE = "plan"
SCHEMA_VERSION = 1  # of every plan JSON the exporters read (plan.v1, hybrid.v1)


def plan_kind(d: dict, notes: list[str] | None = None) -> str:
    """The plan's `kind` (the result envelope's: config, pipeline, hybrid, moe-hybrid). A plan
    written before the envelope is read by its keys (`result.read_kind`); the note saying so is
    appended to `notes` when given."""
    if not isinstance(d, dict):
        raise InputError("a plan is a JSON object", WHERE)
    try:
        reading = read_kind(d, "the plan")
    except ValueError as exc:
        raise InputError(f"not a solver-plan plan ({str(exc).removeprefix('the plan: ')}; expected a hybrid, "
                         "per-operator or pipeline plan JSON)", WHERE) from None
    if reading.kind == "batch-record":
        raise InputError("this is a batch record, not a plan: its plan is the record's 'plan'", WHERE)
    version = read_schema_version(d)
    if version is not None and version != SCHEMA_VERSION:
        raise InputError(f"unsupported schema_version {version!r} (this version reads {SCHEMA_VERSION})", WHERE)
    if reading.note is not None and notes is not None:
        notes.append(reading.note)
    return reading.kind


@dataclass(frozen=True)
class ExpertView:
    """What an expert-parallel plan (hybrid/moe_plan.py) adds to the view: the experts folded as
    etp x ep x edp over a stage's tp x cp x dp devices (Megatron-core's MoE parallel folding), the
    capacity factor (None: dropless), the routing and all-to-all overlap it was priced under, and
    the model read back with the planner's reader (`model`: hybrid/moe_model.MoEModel; `config`: the
    config.json's keys; both empty with `unreadable` saying why when the file is not here)."""
    ep: int
    etp: int
    edp: int
    capacity_factor: float | None
    routing: str
    dropped_fraction: float
    a2a_overlap: str
    model: MoEModel | None = None
    config: dict = field(default_factory=dict)
    unreadable: str | None = None
    notes: tuple[str, ...] = ()  # what every runtime loses of the plan (each exporter lists them)
    dispatcher: str = "alltoall"  # the token dispatcher priced (hybrid/moe.py DISPATCHERS)


@dataclass(frozen=True)
class HybridView:
    """What the exporters read of a hybrid plan dict, checked once: degrees, micro-batching, schedule,
    recomputation per stage, ZeRO, sequence and context parallelism, layers per stage, precision.
    """
    model: str
    devices: int
    global_batch: int
    dp: int
    tp: int
    pp: int
    micro_batch_size: int
    micro_batches: int
    virtual_stages: int
    recompute: str
    zero_stage: int
    sequence_parallel: bool
    schedule: str
    stage_layers: tuple[int, ...]
    block_configs: tuple
    # training precision the plan was priced in (`TrainingPrecision.name`: mixed-bf16, mixed-fp16,
    # mixed-fp8, fp32, tf32); None for plans written before plans carried it
    precision: str | None = None
    # each stage's recomputation (none / selective / full); with recompute "per-stage" they differ
    stage_recompute: tuple[str, ...] = ()
    cp: int = 1  # context parallelism: the sequence split over cp ranks
    dp_shard: int = 0  # ranks of a ZeRO shard group among the dp x cp replicas (hybrid sharding); 0: all
    # each stage's blocks under full recomputation (Megatron's --recompute-method block); () or
    # num_layers: all of a "full" stage's blocks
    recompute_blocks: tuple[int, ...] = ()
    # interleaved schedules: each stage's blocks per virtual stage (stages[].chunk_layers)
    chunk_layers: tuple[tuple[int, ...], ...] = ()
    # expert-parallel plans (moe-hybrid): the expert folding, routing and model; None for hybrid plans
    experts: ExpertView | None = None
    # host offload (parallelism.offload: none / optimizer / activations / both) and each stage's
    # blocks whose activations go to the host (stages[].offload_layers; 0 without activation offload)
    offload: str = "none"
    offload_layers: tuple[int, ...] = ()
    # the runtimes the plan says run its schedule and its offload (schedule_runtimes, offload_runtimes)
    schedule_runtimes: tuple[str, ...] = ()
    offload_runtimes: tuple[str, ...] = ()
    # the attention kernel family the plan was priced with where it is not its runtime's default
    # (parallelism.attention, hybrid/search.py attention_choices); "" the runtime's own
    attention: str = ""
    attention_setting: str = ""  # what tells the runtime to run it (the plan's attention_setting)
    runtime: str = ""  # the runtime profile the plan was priced for (the plan's `runtime`)

    def virtual_stage_layers(self) -> tuple[list[int], bool]:
        """Layers of the pp x virtual parts in model order (part k: virtual stage k // pp of stage
        k mod pp; ZB-V: part k < pp the first chunk of stage k, part k >= pp the second chunk of stage
        2 pp - 1 - k), and whether the plan said so (else: as even as the layers allow)."""
        parts = self.pp * self.virtual_stages
        if len(self.chunk_layers) == self.pp and all(len(c) == self.virtual_stages for c in self.chunk_layers):
            if self.schedule == "zb-v":  # the V: rank i holds part i (its first chunk) and part 2p - 1 - i
                return [self.chunk_layers[k][0] if k < self.pp else self.chunk_layers[parts - 1 - k][1]
                        for k in range(parts)], True
            return [self.chunk_layers[k % self.pp][k // self.pp] for k in range(parts)], True
        return [self.layers // parts + (1 if i < self.layers % parts else 0) for i in range(parts)], False

    @property
    def partial_recompute(self) -> bool:
        """Some fully recomputing stage recomputes only its first blocks."""
        return any(mode == "full" and blocks < layers for mode, blocks, layers in
                   zip(self.recompute_modes, self.recompute_blocks, self.stage_layers))

    @property
    def recompute_modes(self) -> tuple[str, ...]:
        """The recomputation of every stage (the plan-wide mode when stages do not say)."""
        if self.stage_recompute:
            return self.stage_recompute
        return (self.recompute,) * self.pp

    @property
    def strongest_recompute(self) -> str:
        """The most any stage recomputes: what a runtime with one setting for every stage must use
        so that no stage needs more memory than planned."""
        return max(self.recompute_modes, key=RECOMPUTE_ORDER.index)

    @property
    def layers(self) -> int:
        """Transformer layers of the model, summed over the stages."""
        return sum(self.stage_layers)

    @property
    def even_stages(self) -> bool:
        """Whether every stage holds the same number of layers."""
        return len(set(self.stage_layers)) == 1


PRECISIONS = ("mixed-bf16", "mixed-fp16", "mixed-fp8", "fp32", "tf32")
RECOMPUTE_ORDER = ("none", "selective", "full")  # least to most recomputation (and least memory)
# zb: zero-bubble (Qi et al. 2023); zb-v two chunks per rank in a V; zb-exact the project's exact
# periodic pattern (hybrid/exact_zb.py)
SCHEDULES = ("1f1b", "interleaved", "gpipe", "zb-h1", "zb-h2", "zb-v", "zb-exact")
OFFLOADS = ("none", "optimizer", "activations", "both")  # parallelism.offload (hybrid/offload.py)
EXPERT_KEYS = ("ep", "etp", "edp", "capacity")  # expert folding of hybrid/moe_cli.py plans


def _precision(value) -> str | None:
    if value is None:
        return None
    if value not in PRECISIONS:
        raise InputError(f"unknown precision {value!r} (expected one of {', '.join(PRECISIONS)})", WHERE)
    return value


def _stage_recompute(stages: list, plan_wide: str) -> tuple[str, ...]:
    """Each stage's recomputation: its own `recompute` key (solver_plan/hybrid/plan.py writes it),
    else the plan-wide mode; "per-stage" without stage keys is malformed."""
    modes = []
    for stage in stages:
        mode = stage.get("recompute", plan_wide)
        if mode not in RECOMPUTE_ORDER:
            raise InputError(f"stage {stage.get('index', len(modes))} recompute {mode!r} (expected one of "
                             f"{', '.join(RECOMPUTE_ORDER)})", WHERE)
        modes.append(mode)
    return tuple(modes)


def hybrid_view(d: dict) -> HybridView:
    """The `HybridView` of a hybrid plan dict; InputError when it has no solution or lacks a key
    (expert-parallel plans: moe_view.plan_view).
    """
    if d.get("status") not in ("OPTIMAL", "FEASIBLE", "TIME_LIMIT") or "parallelism" not in d:
        raise InputError(f"the plan has no solution to export (status {d.get('status')!r})", WHERE)
    p = d["parallelism"]
    if isinstance(p, dict) and any(key in p for key in EXPERT_KEYS):
        # expert keys in a plan that says it is not expert-parallel: its folding is not guessed
        raise InputError(f"{', '.join(k for k in EXPERT_KEYS if k in p)} in the parallelism of a plan of kind "
                         f"{d.get('kind', 'hybrid')!r}: expert-parallel plans say kind 'moe-hybrid'", WHERE)
    try:
        view = HybridView(
            str(d.get("model", "model")), int(d["devices"]), int(d["global_batch"]), int(p["dp"]), int(p["tp"]),
            int(p["pp"]), int(p["micro_batch_size"]), int(p["micro_batches"]), int(p.get("virtual_stages", 1)),
            str(p.get("recompute", "none")), int(p.get("zero_stage", 0)), bool(p.get("sequence_parallel", False)),
            str(p.get("schedule", "1f1b")), tuple(int(s["num_layers"]) for s in d["stages"]),
            tuple(d.get("block_configs") or ()), _precision(d.get("precision")),
            _stage_recompute(d["stages"], str(p.get("recompute", "none"))), int(p.get("cp", 1)),
            int(p.get("dp_shard", 0) or 0),
            tuple(int(s.get("recompute_blocks", s["num_layers"])) for s in d["stages"]),
            tuple(tuple(int(x) for x in s.get("chunk_layers") or ()) for s in d["stages"]),
            offload=str(p.get("offload", "none")),
            offload_layers=tuple(int(s.get("offload_layers", 0) or 0) for s in d["stages"]),
            schedule_runtimes=tuple(d.get("schedule_runtimes") or ()),
            offload_runtimes=tuple(d.get("offload_runtimes") or ()), attention=str(p.get("attention") or ""),
            attention_setting=str(d.get("attention_setting") or ""), runtime=str(d.get("runtime") or ""))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"malformed hybrid plan ({type(exc).__name__}: {exc})", WHERE) from None
    return check_view(view)


def attention_lost(v: HybridView, target: str) -> list[str]:
    """The comment line for a plan priced with an attention kernel other than its runtime's default: the
    exported flags do not choose the kernel; the line says which runtime's setting runs it (e.g. LLM
    Foundry's attn_impl) and that `target` picks its own."""
    if not v.attention:
        return []
    priced = v.runtime or "its runtime"
    how = f" ({priced}: {v.attention_setting})" if v.attention_setting else ""
    return [f"attention kernel {v.attention}: the plan was priced with it, which {priced} runs when configured "
            f"to{how}, not its default; {target} picks its own attention kernel (not set by this export)"]


def check_view(view: HybridView) -> HybridView:
    """The view's arithmetic: devices, schedule, batch and stages agree (InputError naming what differs)."""
    if view.dp * view.cp * view.tp * view.pp != view.devices:
        raise InputError(f"dp x cp x tp x pp = {view.dp * view.cp * view.tp * view.pp} != devices {view.devices}",
                         WHERE)
    if view.schedule not in SCHEDULES:
        raise InputError(f"unknown schedule {view.schedule!r} (expected one of {', '.join(SCHEDULES)})", WHERE)
    if view.offload not in OFFLOADS:
        raise InputError(f"unknown offload {view.offload!r} (expected one of {', '.join(OFFLOADS)})", WHERE)
    if view.dp * view.micro_batch_size * view.micro_batches != view.global_batch:
        raise InputError("dp x micro_batch_size x micro_batches != global_batch", WHERE)
    if len(view.stage_layers) != view.pp:
        raise InputError(f"{len(view.stage_layers)} stages for pp = {view.pp}", WHERE)
    return view


# The tensor-parallel layout Megatron-LM (and DeepSpeed AutoTP, torchtitan) give a transformer block
# (Shoeybi et al. 2019): the projections into attention and the MLP's first matrices column-parallel
# (split `out`), attention by heads, the projections back row-parallel (split `in`). Operator names
# of every family the planner builds blocks of: the zoo's GPT (q, k, v, out, fc1, fc2), the LLaMA
# family from config.json (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj: LLaMA,
# Mistral, Qwen2, Mixtral), T5 (wi, wo), and Mixtral's experts (one grouped convolution each, its
# `out_channel` the expert dimension: split by expert parallelism).
COLUMN_PARALLEL = ("q", "k", "v", "fc1", "q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "wi")
ROW_PARALLEL = ("out", "fc2", "o_proj", "down_proj", "wo")
RUNTIME_LAYOUT = {**{name: "out" for name in COLUMN_PARALLEL}, **{name: "in" for name in ROW_PARALLEL},
                  "attention": "heads", "experts_gate_up": "out_channel", "experts_down": "out_channel"}


def _parse_config(text: str) -> tuple[dict[str, int], int]:
    """'sequence=2,out=2@4' -> ({'sequence': 2, 'out': 2}, 4) (solver_plan/hybrid/stage_cost.py)."""
    splits, _, devices = text.partition("@")
    degrees = {}
    for part in splits.split(","):
        name, eq, degree = part.partition("=")
        if eq:
            degrees[name] = int(degree)
    return degrees, int(devices or 1)


def block_config_loss(view: HybridView, runtime: str) -> list[str]:
    """The planner chose a per-operator split of each block; a runtime applies its fixed layout.
    Nothing is lost when the two agree on every weight-bearing operator; else the differing
    operators are named."""
    if view.tp == 1:
        return []
    differing = []
    for entry in view.block_configs:
        try:
            operator, config = entry["operator"], entry["config"]
            planned = _parse_config(config)
        except (KeyError, TypeError, ValueError):
            return [f"block_configs unreadable: {runtime} applies its own tensor-parallel layout"]
        dim = RUNTIME_LAYOUT.get(operator.rsplit("/", 1)[-1])
        if dim is not None and planned != ({dim: view.tp}, view.tp):
            differing.append(f"{operator} planned {config}, {runtime} runs {dim}={view.tp}@{view.tp}")
    if not differing:
        return []
    shown = "; ".join(differing[:6]) + (f"; and {len(differing) - 6} more" if len(differing) > 6 else "")
    return [f"the planned per-operator split inside each block ({shown}): {runtime} applies its fixed "
            f"column/row tensor-parallel layout (the plan's step time assumed the planned split)"]


def refuse_schedule(view: HybridView, runtime: str, why: str) -> None:
    """InputError (one line, exit 2) for a schedule `runtime` cannot run, naming the runtimes the plan
    says run it (`schedule_runtimes`)."""
    runs = ", ".join(view.schedule_runtimes) or "none named in the plan"
    raise InputError(f"schedule {view.schedule}: {runtime} cannot run it ({why}); runtimes that run it: {runs}", WHERE)


def refuse_offload(view: HybridView, runtime: str, why: str) -> None:
    """InputError (one line, exit 2) for an offload `runtime` cannot express, naming the runtimes the
    plan says run it (`offload_runtimes`): exported without it the plan would not fit its memory."""
    runs = ", ".join(view.offload_runtimes) or "none named in the plan"
    raise InputError(f"offload {view.offload}: {runtime} cannot express it ({why}); runtimes that run it: {runs}",
                     WHERE)


def offloads_optimizer(view: HybridView) -> bool:
    """The plan keeps the optimizer shard (and a gradient copy) in host memory."""
    return view.offload in ("optimizer", "both")


def offloads_activations(view: HybridView) -> bool:
    """The plan keeps some blocks' activations in host memory (`offload_layers` per stage)."""
    return view.offload in ("activations", "both")
