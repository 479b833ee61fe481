"""Host input pipeline of image training: how many images per second the CPU loader can deliver.

Frameworks decode and augment training images on the host in loader worker processes (PyTorch's
DataLoader with `num_workers` per GPU, NVIDIA's ResNet-50 recipe with `data_backend: pytorch`).
When the GPUs consume images faster than those workers produce them, the step waits for the
loader and throughput is capped by the host, whatever the GPU plan. The bound:

    images/s = nodes x min(workers per node, cores per node - devices per node) x images per core-second

- workers per node = workers per device x devices per node (the job's setting);
- each device's training process keeps one core busy (its Python dispatch loop and pin-memory
  thread), so the workers share the remaining physical cores; a worker is single-threaded, so
  more workers than cores add nothing; SMT siblings are not counted (no measured SMT gain);
- images per core-second: the decode-crop-resize-flip transform measured on one core
  (scripts/measure_input_pipeline.py; data/measurements/input-pipeline-*.yaml).

The step of a data-parallel plan is then max(the GPU step, global batch / bound).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from solver_plan.errors import InputError


@dataclass(frozen=True)
class HostInputPipeline:
    """A CPU loader: `workers_per_device` workers per GPU on hosts of `cpu_cores_per_node`
    physical cores, each core transforming `images_per_core_s` images per second."""

    workers_per_device: int
    cpu_cores_per_node: int
    images_per_core_s: float

    def __post_init__(self) -> None:
        if not (isinstance(self.workers_per_device, int) and self.workers_per_device >= 1):
            raise InputError(f"workers_per_device must be an integer >= 1, got {self.workers_per_device!r}",
                             "input_pipeline.workers_per_device")
        if not (isinstance(self.cpu_cores_per_node, int) and self.cpu_cores_per_node >= 1):
            raise InputError(f"cpu_cores_per_node must be an integer >= 1, got {self.cpu_cores_per_node!r}",
                             "input_pipeline.cpu_cores_per_node")
        if not (math.isfinite(self.images_per_core_s) and self.images_per_core_s > 0):
            raise InputError(f"images_per_core_s must be a positive number, got {self.images_per_core_s!r}",
                             "input_pipeline.images_per_core_s")

    def busy_cores(self, devices_per_node: int) -> int:
        """Cores decoding on one node: min(workers per node, cores per node - devices per node).
        Zero when the training processes alone fill the host."""
        workers = self.workers_per_device * devices_per_node
        return max(0, min(workers, self.cpu_cores_per_node - devices_per_node))

    def images_per_s(self, devices_per_node: int, nodes: int = 1) -> float:
        """The bound of the module docstring, in images per second for the whole job."""
        return nodes * self.busy_cores(devices_per_node) * self.images_per_core_s

    def bound_for(self, devices: int, devices_per_node: int) -> tuple[float, int, int]:
        """(images/s, devices on each node, nodes) for a job of `devices` GPUs packed onto nodes of
        `devices_per_node` (the first node filled first, as the presets number devices)."""
        per_node = min(devices, devices_per_node)
        nodes = -(-devices // per_node)
        return self.images_per_s(per_node, nodes), per_node, nodes

    def step_s(self, gpu_step_s: float, global_batch: int, devices_per_node: int, nodes: int = 1) -> float:
        """max(gpu_step_s, global_batch / bound): the step when the loader can be the bottleneck."""
        bound = self.images_per_s(devices_per_node, nodes)
        return math.inf if bound <= 0 else max(gpu_step_s, global_batch / bound)


def measured_images_per_core_s(path: str | Path) -> float:
    """The median images per second of a record written by scripts/measure_input_pipeline.py."""
    where = str(path)
    try:
        record = yaml.safe_load(Path(path).read_text())
        value = record["images_per_second"]["decode_crop_resize_flip"]["median"]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise InputError(f"not an input-pipeline measurement record ({exc})", where) from None
    if not (isinstance(value, (int, float)) and value > 0):
        raise InputError(f"images_per_second.decode_crop_resize_flip.median must be positive, got {value!r}", where)
    return float(value)


# Under data/: the committed record (one AMD EPYC Zen 3 core of the build machine, not your host).
DEFAULT_MEASUREMENT = "measurements/input-pipeline-epyc-zen3.yaml"
MAX_WORKERS, MAX_CORES, MAX_RATE = 1024, 4096, 1e6  # sanity limits of the command-line form


def parse_host_loader(text: str, where: str = "--host-loader") -> HostInputPipeline:
    """`workers=8,cores=40[,images_per_core=310]` -> HostInputPipeline; the per-core rate defaults
    to the committed measurement (data/measurements/input-pipeline-epyc-zen3.yaml)."""
    from solver_plan.keyvalues import parse_key_values
    values = parse_key_values(text, where, "workers=N,cores=N[,images_per_core=X]")
    unknown = sorted(set(values) - {"workers", "cores", "images_per_core"})
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r} (keys: workers, cores, images_per_core)", where)
    for key in ("workers", "cores"):
        if key not in values:
            raise InputError(f"missing key {key!r} (form: workers=N,cores=N[,images_per_core=X])", where)

    def number(key: str, kind):
        try:
            return kind(values[key])
        except ValueError:
            raise InputError(f"{key} expects {'an integer' if kind is int else 'a number'}, got {values[key]!r}",
                             where) from None

    workers, cores = number("workers", int), number("cores", int)
    if not (1 <= workers <= MAX_WORKERS and 1 <= cores <= MAX_CORES):
        raise InputError(f"workers must be 1..{MAX_WORKERS} and cores 1..{MAX_CORES}, got workers={workers}, "
                         f"cores={cores}", where)
    if "images_per_core" in values:
        rate = number("images_per_core", float)
        if not (math.isfinite(rate) and 0 < rate <= MAX_RATE):
            raise InputError(f"images_per_core must be a positive number up to {MAX_RATE:g}, "
                             f"got {values['images_per_core']!r}", where)
    else:
        from solver_plan.data import data_dir
        rate = measured_images_per_core_s(data_dir() / DEFAULT_MEASUREMENT)
    return HostInputPipeline(workers, cores, rate)


def image_batch(graph) -> int | None:
    """The minibatch of an image graph: the first dimension of its first model input when that
    input is a 4-d (N, C, H, W) image tensor; None for any other model (the loader's rate is one
    of JPEG decoding, meaningless for tokens or features)."""
    from solver_plan.graph.ops import OpType
    for op in graph:
        if op.op_type == OpType.INPUT and op.outputs:
            shape = op.outputs[0].shape
            return int(shape[0]) if len(shape) == 4 else None
    return None
