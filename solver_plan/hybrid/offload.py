"""Optimizer-state offloading to host memory (`offload` "optimizer"; ZeRO-Offload, Ren et al. 2021,
"ZeRO-Offload: Democratizing Billion-Scale Model Training"; Megatron-core's --optimizer-cpu-offload).

With offloading a device keeps its working weights and gradients; its shard of the optimizer state
(the fp32 master weights and Adam's moments: (m + 2 o) P_l bytes, P_l = the stage's parameters
/ t / the ZeRO shard group) lives in host memory with a host copy of the gradient shard (g P_l)
(`host_bytes`), and the optimizer step runs on the host's CPUs. Per step, for each stage:
- down: the gradient shard, g P_l bytes over the device's host link (PCIe, the cluster file's
  `host.device_bandwidth` per direction);
- the CPU step: P_l x `host.optimizer_s_per_param` (measured: torch AdamW foreach on 16 cores,
  0.92 ns per parameter, cluster/model.py);
- up: the updated working weights, w P_l bytes;
as the runtimes run them, the three pipelined over the gradient buckets (Megatron-core
--overlap-cpu-optimizer-d2h-h2d: each parameter group's copy down, step and copy up overlap the
other groups'; DeepSpeed copies each reduced bucket down during the backward and steps after): with
n equal pieces, (down + cpu + up) / n + (n - 1)/n max(down, cpu, up) (`step_s`), which replaces the
device's Adam kernel in the step (the `optimizer` term). The device saves its optimizer state; the
node's host memory must hold its devices' shards: devices per node x the largest stage's
`host_bytes` <= `host.memory_per_node` (every device of a node counted at the largest stage, an
upper bound).

Activation offload (`offload` "activations", or "both" with the optimizer's; Megatron-core's
--cpu-offloading --cpu-offloading-num-layers r, Transformer Engine's CPU offload context; Mist,
Zhu et al. 2025, searches the same kind of choice): the kept activations of r of the stage's k blocks
go to host memory as the forward moves on and come back for the backward. Megatron-core runs it only
without pipelining and without recomputation (TransformerConfig: "no support for Pipeline
parallelism with CPU offloading", "CPU offloading does not work when activation recomputation is
enabled") with 0 <= r < k, so the space holds it for pp = 1 and recompute none. Device: the
activations of k - r blocks plus one offloaded block in transit (the one being copied, or prefetched
for the backward): (k - r + 1) a per micro-batch in flight (`device_blocks`), a the kept bytes of a
block; host: r a. Time per micro-batch: r a bytes down during the forward and up during the backward,
each hidden under that pass's compute and exposed beyond it: max(0, r a / bw - forward) +
max(0, r a / bw - backward) (`activation_copy_s`). Time grows with r and memory falls, so each stage
takes the fewest r that fits the memory limit (`evaluate.offload_layers`); a point whose stage fits
with nothing offloaded is the plain point, and the activation mode is not priced for it.

Runtimes (`RUNNERS`): Megatron-core and NeMo (--optimizer-cpu-offload with the distributed optimizer,
so ZeRO >= 1), DeepSpeed (zero_optimization.offload_optimizer {device: cpu}, stages 1-3). Torchtitan's
FSDP2 CPUOffloadPolicy moves parameters and gradients too (another scheme, not priced here), and
Megatron-LM 2021 has none. The search offers offloading where the cluster file has a `host` section
and the runtime runs it; a pin elsewhere is refused (InputError naming --fix offload).
"""
from __future__ import annotations

from solver_plan.errors import InputError

MODES = ("none", "optimizer", "activations", "both")  # both: optimizer state and activations
MEGATRON = "--optimizer-cpu-offload --optimizer-offload-fraction 1.0 --overlap-cpu-optimizer-d2h-h2d " \
           "(--use-distributed-optimizer)"
RUNNERS = {"megatron-core": MEGATRON, "nemo": MEGATRON,
           "deepspeed": "zero_optimization.offload_optimizer: {device: cpu, pin_memory: true} (ZeRO-Offload)"}
ACTIVATIONS = "--cpu-offloading --cpu-offloading-num-layers r (TransformerConfig cpu_offloading_activations; pp 1)"
ACTIVATION_RUNNERS = {"megatron-core": ACTIVATIONS, "nemo": ACTIVATIONS}


def optimizer_offloaded(mode: str) -> bool:
    """Whether `mode` puts the optimizer state on the host."""
    return mode in ("optimizer", "both")


def activations_offloaded(mode: str) -> bool:
    """Whether `mode` puts activations on the host."""
    return mode in ("activations", "both")


def device_blocks(layers: int, offloaded: int) -> int:
    """Blocks of kept activations on the device with `offloaded` of `layers` on the host: the others
    and one in transit (module text)."""
    return layers - offloaded + 1 if offloaded else layers


def activation_copy_s(host, nbytes: float, forward_s: float, backward_s: float) -> float:
    """Exposed seconds per micro-batch of `nbytes` of activations down during the forward and up
    during the backward (module text)."""
    copy = nbytes / host.device_bandwidth
    return max(0.0, copy - forward_s) + max(0.0, copy - backward_s)


def runs(runtime, mode: str = "optimizer") -> bool:
    """Whether the runtime profile offloads as `mode` says, as priced here (module text)."""
    from solver_plan.runtime import resolve_runtime

    name = resolve_runtime(runtime).name
    return ((not optimizer_offloaded(mode) or name in RUNNERS)
            and (not activations_offloaded(mode) or name in ACTIVATION_RUNNERS))


def runtimes(mode: str) -> dict[str, str] | None:
    """For an offload mode other than none, the runtimes that run it and how (plan JSON
    `offload_runtimes`); None for none."""
    if mode == "none":
        return None
    names = [n for n in RUNNERS if runs(n, mode)]
    return {n: "; ".join(how for how, on in ((RUNNERS[n], optimizer_offloaded(mode)),
                                             (ACTIVATION_RUNNERS.get(n, ""), activations_offloaded(mode))) if on)
            for n in names}


def offered(cluster, runtime, pins) -> tuple[str, ...]:
    """The offload modes the space holds: the pin; else "optimizer" too where the cluster has a host
    section and the runtime runs it. InputError naming --fix offload for a pin that cannot run."""
    from solver_plan.runtime import resolve_runtime

    pinned = pins.get("offload")
    if pinned is not None and pinned != "none":
        if cluster.host is None:
            raise InputError("the cluster file has no host section (host memory per node, PCIe bandwidth per "
                             "device): nothing to offload to", "--fix offload")
        if not runs(runtime, pinned):
            raise InputError(f"runtime {resolve_runtime(runtime).name} does not offload {pinned} as priced; "
                             f"it runs in: {'; '.join(f'{k} ({v})' for k, v in (runtimes(pinned) or {}).items())}",
                             "--fix offload")
    if pinned is not None:
        return (pinned,)
    return tuple(m for m in MODES if m == "none" or (cluster.host is not None and runs(runtime, m)))


def host_bytes(local_params: float, state) -> float:
    """Host bytes of one device: its optimizer shard and a copy of its gradient shard,
    (m + 2 o + g) P_l (module text)."""
    return local_params * (state.optimizer + state.gradients)


def parts_s(host, local_params: float, state) -> tuple[float, float, float]:
    """(down, cpu, up) seconds of one device per step (module text)."""
    return (local_params * state.gradients / host.device_bandwidth, local_params * host.optimizer_s_per_param,
            local_params * state.weights / host.device_bandwidth)


def step_s(host, local_params: float, state, pieces: int) -> float:
    """The offloaded optimizer step of one device: down, CPU step and up pipelined over `pieces`
    buckets, (down + cpu + up) / n + (n - 1)/n max(down, cpu, up) (module text)."""
    parts = parts_s(host, local_params, state)
    n = max(1, pieces)
    return sum(parts) / n + (n - 1) / n * max(parts)


def fits_host(host, per_device_bytes: float, devices_per_node: int) -> bool:
    """Whether a node's host memory holds `devices_per_node` devices' `per_device_bytes`."""
    return devices_per_node * per_device_bytes <= host.memory_per_node
