"""`HybridPlan` and `HybridResult`: frozen values, JSON (the result envelope, result.py: schema_version 1,
kind "hybrid", objective the predicted step time) and table.

JSON keys are an interface (exporters to Megatron-LM / DeepSpeed / torchtitan read them): keep them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from solver_plan.hybrid.exact_zb import ExactSchedule
from solver_plan.hybrid.memory import StageMemory
from solver_plan.hybrid.offload import runtimes as offload_runtimes
from solver_plan.hybrid.schedule import StepTerms
from solver_plan.hybrid.space import Parallelism
from solver_plan.hybrid.zero_bubble import schedule_runtimes
from solver_plan.result import Envelope, Objective, Status, relative_gap, with_envelope

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage: blocks [first_layer, first_layer + layers) on `replicas` = dp x cp copies of
    a tp-device submesh (with context parallelism, each of a replica's cp ranks holds 1/cp of every
    sequence); devices are numbered tp-rank fastest, then cp rank, then dp replica, then stage
    (Megatron-core's order)."""
    index: int
    first_layer: int
    layers: int
    embedding: bool  # holds the token and position embeddings
    head: bool  # holds the final norm, output projection and loss
    first_device: int
    tp: int
    replicas: int
    block_s: float  # forward + backward of its blocks, per micro-batch
    recompute_s: float  # recomputation of its blocks, per micro-batch
    extra_s: float  # embedding and/or output layer, per micro-batch
    p2p_s: float  # its pipeline transfers, per micro-batch
    memory: StageMemory
    # per-operator configurations on one replica's submesh: (group, operator, configuration) with
    # group "embedding", "block" (every block of the stage alike: tying) or "head"
    configs: tuple[tuple[str, str, str], ...] = ()
    recompute: str = "none"  # this stage's recomputation (the plan's, or its own with "per-stage")
    forward_s: float = 0.0  # the forward part of block_s + recompute_s + extra_s (windows for overlapped sync)
    chunks: tuple[int, ...] = ()  # interleaved schedule: blocks of each of its v chunks (stages.chunk_layers)
    weight_grad_s: float = 0.0  # W: the weight-gradient part of block_s + extra_s (zero-bubble schedules)
    # partial recomputation: the first `recompute_blocks` of its blocks under full recomputation, the
    # rest under none (recompute "full"; Megatron's --recompute-method block --recompute-num-layers); None: all
    recompute_blocks: int | None = None
    # activation offload (hybrid/offload.py): blocks whose activations go to the host, and the exposed
    # seconds of their copies per micro-batch (in time_per_microbatch_s)
    offload_layers: int = 0
    offload_s: float = 0.0

    def __post_init__(self):
        if self.layers < 0 or self.tp < 1 or self.replicas < 1:
            raise ValueError(f"stage {self.index}: bad sizes")

    @property
    def time_per_microbatch_s(self) -> float:
        """Seconds of the stage per micro-batch: blocks + recomputation + embedding/head + pipeline transfers
        + exposed activation-offload copies."""
        return self.block_s + self.recompute_s + self.extra_s + self.p2p_s + self.offload_s

    @property
    def devices(self) -> tuple[int, int]:
        """[first, last] device numbers of the stage (all its replicas)."""
        return self.first_device, self.first_device + self.tp * self.replicas - 1

    def to_dict(self) -> dict:
        """JSON-ready dict of the stage: layers, submesh and devices, time terms, memory and configurations.
        """
        return {"index": self.index, "layers": [self.first_layer, self.first_layer + self.layers],
                "num_layers": self.layers, "embedding": self.embedding, "head": self.head,
                "recompute": self.recompute, "chunk_layers": list(self.chunks) or [self.layers],
                "recompute_blocks": (self.recompute_blocks if self.recompute_blocks is not None
                                     else self.layers if self.recompute == "full" else 0),
                "submesh": {"devices_per_replica": self.tp, "replicas": self.replicas,
                            "devices": list(self.devices),
                            "replica_0_devices": [self.first_device, self.first_device + self.tp - 1]},
                "time_per_microbatch_s": self.time_per_microbatch_s,
                "time_terms_s": {"blocks": self.block_s, "recompute": self.recompute_s,
                                 "embedding_and_head": self.extra_s, "p2p": self.p2p_s, "forward": self.forward_s,
                                 "weight_grad": self.weight_grad_s, "offload": self.offload_s},
                "offload_layers": self.offload_layers,
                "memory_bytes": self.memory.to_dict(),
                "operator_configs": [{"group": g, "operator": op, "config": cfg} for g, op, cfg in self.configs]}


@dataclass(frozen=True)
class HybridPlan:
    """A priced hybrid plan: the parallelism chosen, its pipeline stages, the step's terms (`StepTerms`),
    per-operator configurations of the blocks, model FLOPs, memory limit, precision and runtime.
    """
    model: str
    cluster: str
    devices: int
    global_batch: int
    parallelism: Parallelism
    stages: tuple[StagePlan, ...]
    terms: StepTerms
    block_configs: tuple[tuple[str, str], ...]  # per-operator configuration of every block (tied)
    model_flops_per_step: float
    memory_limit: float | None
    # training precision priced (`TrainingPrecision.name`: mixed-bf16, mixed-fp16, mixed-fp8, fp32, tf32)
    precision: str | None = None
    runtime: str | None = None  # the runtime profile priced (`solver_plan.runtime`: megatron-core, ...)
    # schedule zb-exact: the exact periodic pattern the pipeline term and the stages' in-flight memory follow
    exact_schedule: ExactSchedule | None = None

    def __post_init__(self):
        p = self.parallelism
        if p.devices != self.devices:
            raise ValueError(f"dp x cp x tp x pp = {p.devices} != {self.devices} devices")
        if p.dp * p.micro_batch_size * p.micro_batches != self.global_batch:
            raise ValueError("dp x micro-batch size x micro-batches must equal the global batch")
        if len(self.stages) != p.pp:
            raise ValueError(f"{len(self.stages)} stages for pp = {p.pp}")

    @property
    def step_time_s(self) -> float:
        """Predicted step time in seconds (`StepTerms.total`)."""
        return self.terms.total

    @property
    def memory_per_device_bytes(self) -> float:
        """Memory of the busiest device: the largest stage total."""
        return max(s.memory.total for s in self.stages)

    @property
    def peak_stage(self) -> StagePlan:
        """The stage with the most memory per device."""
        return max(self.stages, key=lambda s: s.memory.total)

    @property
    def tflops_per_device(self) -> float:
        """Achieved model TFLOP/s per device, model FLOPs per step / step time / devices."""
        return self.model_flops_per_step / self.step_time_s / self.devices / 1e12

    def attention_setting(self) -> str | None:
        """Where the plan runs an attention kernel other than its runtime's default: what tells the runtime
        to run it (`Kernels.attention_settings`, e.g. LLM Foundry's model.attn_config.attn_impl: flash);
        None for the default kernel."""
        from solver_plan.runtime import RUNTIMES, DEFAULT_RUNTIME

        kernel = self.parallelism.attention
        if not kernel:
            return None
        return RUNTIMES.get(self.runtime or "", DEFAULT_RUNTIME).attention_setting(kernel) or None

    def context_parallel(self) -> dict:
        """What the runtime must run for cp (hybrid/context_parallel.py): degree, the key/value
        exchange, and the load balancing (the sequence in 2 cp pieces, rank r holding r and 2 cp - 1 - r)."""
        from solver_plan.hybrid.context_parallel import method

        cp = self.parallelism.cp
        return {"degree": cp, "kv_exchange": method(self.runtime) if cp > 1 else None,
                "load_balance": "2cp-pieces" if cp > 1 else None}

    def to_dict(self) -> dict:
        """JSON-ready dict of the plan (what `export_plan` turns into runtime configs)."""
        return {"model": self.model, "cluster": self.cluster, "devices": self.devices,
                "global_batch": self.global_batch, "precision": self.precision, "runtime": self.runtime,
                "parallelism": self.parallelism.to_dict(),
                "attention_setting": self.attention_setting(),
                "context_parallel": self.context_parallel(),
                "schedule_runtimes": schedule_runtimes(self.parallelism.schedule),
                "exact_schedule": None if self.exact_schedule is None else self.exact_schedule.to_dict(),
                "offload_runtimes": offload_runtimes(self.parallelism.offload),
                "step_time_s": self.step_time_s,
                "step_terms_s": {"pipeline": self.terms.pipeline_s, "dp_sync": self.terms.dp_sync_s,
                                 "embedding_sync": self.terms.embedding_sync_s, "optimizer": self.terms.optimizer_s,
                                 "dp_sync_hidden": self.terms.dp_sync_hidden_s,
                                 "contention": self.terms.contention_s},
                "memory_per_device_bytes": int(round(self.memory_per_device_bytes)),
                "memory_limit_bytes": None if self.memory_limit is None else int(self.memory_limit),
                "model_flops_per_step": self.model_flops_per_step,
                "tflops_per_device": self.tflops_per_device,
                "stages": [s.to_dict() for s in self.stages],
                "block_configs": [{"operator": op, "config": cfg} for op, cfg in self.block_configs]}


@dataclass(frozen=True)
class HybridResult:
    """Answer of the hybrid planner: status, the best plan, bound, runtime, points priced and pruned, notes;
    when INFEASIBLE, the smallest memory per device some plan needs; block solves whose solver failed.
    """
    status: Status
    plan: HybridPlan | None
    lower_bound_s: float | None
    runtime_s: float
    evaluated: int = 0  # points of the space priced in full
    pruned: int = 0  # points dropped by a bound
    notes: tuple[str, ...] = field(default=())
    # INFEASIBLE: the smallest memory per device that some plan needs, and that plan
    needed_memory_bytes: float | None = None
    # one line per block solve whose solver failed (its fallback plan was priced); None: none failed
    solver_failure: str | None = None

    @property
    def step_time_s(self) -> float | None:
        """Predicted step time of the plan; None without a plan or when INFEASIBLE (the plan then shows what
        memory it needs).
        """
        return None if self.plan is None or self.status == Status.INFEASIBLE else self.plan.step_time_s

    @property
    def gap(self) -> float | None:
        """Relative gap between the step time and the lower bound (`relative_gap`)."""
        return relative_gap(self.step_time_s, self.lower_bound_s)

    @property
    def envelope(self) -> Envelope:
        """The result protocol's `Envelope` (kind "hybrid", objective the step time)."""
        return Envelope("hybrid", SCHEMA_VERSION, self.status, Objective("step_time", self.step_time_s),
                        self.lower_bound_s, self.runtime_s, self.notes, (self.solver_failure or "",))

    def to_dict(self) -> dict:
        """JSON-ready dict of the result: envelope first, then the plan's keys at the top level."""
        out = with_envelope(self.envelope, {
            "schema_version": SCHEMA_VERSION, "kind": "hybrid", "status": self.status.value,
            "step_time_s": self.step_time_s, "lower_bound_s": self.lower_bound_s, "gap": self.gap,
            "runtime_s": self.runtime_s, "evaluated": self.evaluated, "pruned": self.pruned,
            "notes": list(self.notes), "solver_failure": self.solver_failure})
        if self.needed_memory_bytes is not None:
            out["needed_memory_per_device_bytes"] = int(round(self.needed_memory_bytes))
        if self.plan is not None:
            plan = self.plan.to_dict()
            plan.pop("step_time_s")
            out.update(plan)
        return out

    def table(self) -> str:
        """Human report of the result: status and search counts, then the plan's parallelism, step terms and
        stages.
        """
        from solver_plan.units import format_bytes

        lines = [f"status: {self.status.value}   runtime: {self.runtime_s:.2f} s   "
                 f"evaluated {self.evaluated}, pruned {self.pruned}"]
        if self.needed_memory_bytes is not None:
            lines.append(f"smallest memory per device that fits: {format_bytes(self.needed_memory_bytes)} "
                         f"(plan below)")
        p = self.plan
        if p is not None:
            q = p.parallelism
            setting = p.attention_setting()
            bound = "-" if self.lower_bound_s is None else f"{self.lower_bound_s:.3f} s"
            gap = "" if self.gap is None else f" (gap {100 * self.gap:.2f}%)"
            lines += [f"model: {p.model}   cluster: {p.cluster}   devices: {p.devices}   global batch: {p.global_batch}"
                      + (f"   precision: {p.precision}" if p.precision else "")
                      + (f"   runtime: {p.runtime}" if p.runtime else ""),
                      f"step time: {p.step_time_s:.3f} s   lower bound: {bound}{gap}   "
                      f"{p.tflops_per_device:.1f} TFLOP/s per device   model FLOPs/step {p.model_flops_per_step:.3e}",
                      f"parallelism: dp={q.dp} cp={q.cp} tp={q.tp} pp={q.pp} micro_batch_size={q.micro_batch_size} "
                      f"micro_batches={q.micro_batches} schedule={q.schedule} virtual_stages={q.virtual_stages} "
                      f"recompute={q.recompute} zero_stage={q.zero_stage} sequence_parallel={q.sequence_parallel}"
                      + (f" offload={q.offload}" if q.offload != "none" else "")
                      + (f" attention={q.attention} (not the runtime's default kernel"
                         f"{f': set {setting}' if setting else ''})" if q.attention else ""),
                      f"step terms: pipeline {p.terms.pipeline_s:.3f} s, dp sync {p.terms.dp_sync_s:.3f} s "
                      f"({p.terms.dp_sync_hidden_s:.3f} s more hidden under compute, slowing it by "
                      f"{p.terms.contention_s:.3f} s), embedding sync {p.terms.embedding_sync_s:.4f} s, optimizer {p.terms.optimizer_s:.4f} s",
                      f"memory per device (largest): {format_bytes(p.memory_per_device_bytes)} (allocated "
                      f"{format_bytes(p.peak_stage.memory.allocated)}, reserved {format_bytes(p.peak_stage.memory.reserved)}"
                      f", + CUDA context and NCCL buffers)",
                      "stage  layers      devices          ms/micro-batch  weights+grads+optim  activations  total"
                      "  recompute"]
            runners = schedule_runtimes(q.schedule)
            if runners:
                lines.insert(len(lines) - 3, f"schedule {q.schedule} runs in: " + "; ".join(
                    f"{name} ({how})" for name, how in runners.items()))
            shown = p.stages if len(p.stages) <= 12 else p.stages[:6] + p.stages[-6:]
            for s in shown:
                m = s.memory
                lines.append(f"{s.index:>5}  {s.first_layer:>4}-{s.first_layer + s.layers - 1:<5} "
                             f"{s.devices[0]:>6}-{s.devices[1]:<8} {1e3 * s.time_per_microbatch_s:>14.2f}  "
                             f"{format_bytes(m.weights + m.gradients + m.optimizer):>19}  "
                             f"{format_bytes(m.activations + m.recompute_working):>11}  {format_bytes(m.total)}"
                             f"  {s.recompute}")
            if len(p.stages) > 12:
                lines.insert(len(lines) - 6, f"  ... {len(p.stages) - 12} more stages")
            lines.append("block configuration (every block): " +
                         "; ".join(f"{op} {cfg}" for op, cfg in p.block_configs))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)
