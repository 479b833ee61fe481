"""PipeDream profiles (data/pipedream-profiles/<model>/graph.txt) as calibration measurements.

Each layer gives two measurements, its forward and its backward time (V100, fp32, minibatch 128
for the image models), with kernels derived from the layer text and the profile's sizes (bytes;
fp32, so elements = bytes / 4). A = output bytes (the first output for multi-output layers),
I = input bytes (the producers' outputs), P = parameter bytes, E = A / 4 output elements.
- Conv2d(cin, cout, kernel_size=(kh, kw), groups=g): forward one matrix kernel,
  `cost.kernels.conv_kernel` (the cost model's definition): 2 E (cin / g) kh kw FLOPs (/ 2.25 for
  3x3 stride-1 ungrouped in fp32: Winograd) moving I' + P + A bytes with I' = I x max(1, kh kw /
  stride^2) (input read per filter tap); backward the same kernel twice (input gradient and weight
  gradient; no input gradient when the input is the model input).
- Linear(in_features=a, out_features=b): rows r = E / b; 2 r a b FLOPs, kernels as Conv2d.
- LSTM(a, h[, bidirectional=True]) with d directions: r = E / (h d) rows (sequence x batch);
  forward 2 r 4h (a + h) d FLOPs on the matrix units plus the gate element-wise work (a vector
  kernel over the 4 gates: 8 r 4h d bytes); backward twice the matrix FLOPs, the same gate work.
  Composite modules (GNMT's EmuBidirLSTM, RecurrentAttention, Classifier) add up the LSTMs and
  Linears named inside them (EmuBidirLSTM: only its bidirectional LSTM, which it emulates).
- element-wise and memory-bound layers, one vector kernel each (FLOPs per element, bytes;
  `cost.kernels.ELEMENTWISE`, shared with the cost model):
  BatchNorm2d forward (8, 3A: a statistics pass reading x, a pass reading x and writing y),
  backward (10, 5A); ReLU (1, 2A) / (1, 3A); Add (1, 3A) / none (the gradient passes through);
  Concat (0, 2A) / (0, 2A); MaxPool2d and AvgPool2d (k^2, I + A) / (k^2, 2A + I); Dropout (2, 2.25A:
  a one-byte mask) / (1, 2.25A); Embedding (0, 2A) / (1, 2A + P: dense weight gradient).
- Size, View, __getitem__, inputs: no kernel.
A layer measured at 0 ms whose work is not zero (ResNet's in-place Add) ran inside the timing of
its only consumer (PipeDream times module calls, and a functional `+=` is not one): its kernels are
added to that consumer's forward measurement. Layers with no kernel, or measured at 0 with no
single consumer, are left out (the fraction of the step time they cover is reported). Input nodes
are data loading (timed at up to 0.6 s in some profiles) and count in no total. The profiler adds
a fixed time to every layer (about 0.27 ms to each forward pass: no forward takes less), so
measurements carry `overhead="pipedream forward"` / `"pipedream backward"`, fitted as nuisance
parameters (never written to a cluster).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from solver_plan.calibrate.measurements import Kernel, Measurement
from solver_plan.cost.kernels import ELEMENTWISE, WINOGRAD_SAVING, conv_kernel, elementwise_kernels
from solver_plan.cost.precision import Precision
from solver_plan.graph.importers.pipedream import ProfileNode, parse_profile

FP32 = Precision.FP32
__all__ = ["WINOGRAD_SAVING", "LayerWork", "layer_work", "profile_measurements"]  # WINOGRAD_SAVING: cost/kernels.py
_INT = r"(\d+)"


@dataclass(frozen=True)
class LayerWork:
    """Kernels of one layer's forward and backward pass; `kind` names its layer type."""
    kind: str
    forward: tuple[Kernel, ...]
    backward: tuple[Kernel, ...]


def _kind(description: str) -> str:
    match = re.match(r"[A-Za-z_0-9]+", description)
    return match.group(0) if match else "?"


def _matrix(flops, nbytes, where, narrow=0.0):
    return Kernel(float(flops), float(nbytes), "matrix", FP32, where, float(narrow))


def _vector(flops, nbytes, where):
    return Kernel(float(flops), float(nbytes), "vector", FP32, where)


def _lstm_flops(text: str, rows_bytes: float) -> tuple[float, float]:
    """(matrix FLOPs, gate bytes) of the forward pass of the LSTMs named in `text`."""
    lstms = re.findall(r"LSTM\(" + _INT + r", " + _INT + r"(, bidirectional=True)?", text)
    if "EmuBidirLSTM" in text:  # it emulates the bidirectional LSTM with two one-way layers
        lstms = [entry for entry in lstms if entry[2]] or lstms[:1]
    flops = gate_bytes = 0.0
    for a, h, bidir in lstms:
        a, h, d = int(a), int(h), 2 if bidir else 1
        rows = rows_bytes / 4 / (h * d)
        flops += 2 * rows * 4 * h * (a + h) * d
        gate_bytes += 8 * rows * 4 * h * d
    return flops, gate_bytes


def _linear_flops(text: str, out_bytes: float, first_only: bool) -> float:
    linears = re.findall(r"in_features=" + _INT + r", out_features=" + _INT, text)
    flops = 0.0
    for a, b in (linears[:1] if first_only else linears):
        a, b = int(a), int(b)
        rows = out_bytes / 4 / b if first_only else out_bytes / 4 / max(int(x) for _, x in linears)
        flops += 2 * rows * a * b
    return flops


def layer_work(node: ProfileNode, input_bytes: float, input_is_model_input: bool, where: str) -> LayerWork | None:
    """The kernels of one profile layer (see the module text); None for layers with no work."""
    text = node.description
    kind = _kind(text)
    A = float(node.activation_sizes[0]) if node.activation_sizes else 0.0
    I, P = float(input_bytes), float(node.parameter_bytes)
    E = A / 4
    if A <= 0:
        return None
    if kind == "Conv2d":
        match = re.match(r"Conv2d\(" + _INT + r", " + _INT + r", kernel_size=\(" + _INT + r", " + _INT + r"\)", text)
        if not match:
            return None
        cin, cout, kh, kw = map(int, match.groups())
        groups = re.search(r"groups=" + _INT, text)
        groups = int(groups.group(1)) if groups else 1
        stride = re.search(r"stride=\(" + _INT + r", " + _INT + r"\)", text)
        sh, sw = (int(stride.group(1)), int(stride.group(2))) if stride else (1, 1)
        # cost/kernels.py: Winograd FLOPs (fp32 profiles) and input read per filter tap, the
        # definition the cost model prices convolutions with (per-tap traffic lifted the
        # cross-validated accuracy of small-channel convolutions: median model error 13.5% -> 10.8%)
        work = conv_kernel(E, cin, kh, kw, sh, sw, groups, I, A, P, simt_fp32=True, cout=cout)
        flops, I, narrow = work.flops, work.hbm_bytes - P - A, work.narrow
    elif kind == "Linear":
        flops = _linear_flops(text, A, first_only=True)
        narrow = 0.0  # unknown (every PipeDream linear layer has >= 512 features)
    elif kind in ("LSTM", "EmuBidirLSTM", "RecurrentAttention", "Classifier"):
        flops, gates = _lstm_flops(text, A)
        flops += _linear_flops(text, A, first_only=False) if kind != "LSTM" else 0.0
        if flops <= 0:
            return None
        forward = [_matrix(flops, I + P + A, where)] + ([_vector(gates / 8, gates, where)] if gates else [])
        backward = [_matrix(flops, I + P + A, where), _matrix(flops, I + P + A, where)]
        backward += [_vector(gates / 8, gates, where)] if gates else []
        return LayerWork(kind, tuple(forward), tuple(backward))
    else:
        return _elementwise(kind, text, A, I, P, E, where)
    if flops <= 0:
        return None
    forward = (_matrix(flops, I + P + A, where, narrow),)
    backward = (_matrix(flops, A + P + I, where, narrow),) * (1 if input_is_model_input else 2)
    return LayerWork(kind, forward, backward)


def _elementwise(kind, text, A, I, P, E, where) -> LayerWork | None:
    pool = re.search(r"kernel_size=\(?" + _INT, text)
    window = int(pool.group(1)) ** 2 if pool else 1
    if kind not in ELEMENTWISE:
        return None
    forward, backward = elementwise_kernels(kind, A, I, P, E, window)
    forward = (_vector(forward.flops, forward.hbm_bytes, where),)
    backward = (_vector(backward.flops, backward.hbm_bytes, where),) if backward else ()
    return LayerWork(kind, forward, backward)


@dataclass(frozen=True)
class ProfileMeasurements:
    """The measurements read from one PipeDream profile, with the profile's total measured time and the part
    the measurements cover.
    """
    model: str
    measurements: tuple[Measurement, ...]
    measured_total_s: float  # every layer's forward + backward, as profiled
    covered_s: float  # the part of it the measurements cover


def profile_measurements(path: str | Path, model: str | None = None) -> ProfileMeasurements:
    """Forward and backward measurements of every layer of a PipeDream `graph.txt` (or folder)."""
    path = Path(path)
    if path.is_dir():
        path = path / "graph.txt"
    model = model or path.parent.name
    nodes, edges = parse_profile(path)
    by_name = {n.name: n for n in nodes}
    producers: dict[str, list[str]] = {n.name: [] for n in nodes}
    consumers: dict[str, list[str]] = {n.name: [] for n in nodes}
    for src, dst, _ in edges:
        if src in by_name and dst in by_name and src not in producers[dst]:
            producers[dst].append(src)
            consumers[src].append(dst)
    works: dict[str, LayerWork] = {}
    for node in nodes:
        inputs = [by_name[p] for p in producers[node.name]]
        input_bytes = sum(sum(p.activation_sizes) for p in inputs)
        from_input = bool(inputs) and all(_kind(p.description).startswith("Input") for p in inputs)
        work = layer_work(node, input_bytes, from_input, f"{path}:{node.line}")
        if work is not None:
            works[node.name] = work
    extra: dict[str, list[Kernel]] = {}
    for node in nodes:  # zero-time work ran inside its only consumer's timing
        if node.name in works and node.forward_ms == 0 and len(consumers[node.name]) == 1:
            extra.setdefault(consumers[node.name][0], []).extend(works[node.name].forward)
    measurements, covered = [], 0.0
    for node in nodes:
        work = works.get(node.name)
        if work is None:
            continue
        where = f"{path}:{node.line}"
        forward = work.forward + tuple(extra.get(node.name, ()))
        for phase, kernels, ms in (("forward", forward, node.forward_ms), ("backward", work.backward, node.backward_ms)):
            if kernels and ms > 0:
                measurements.append(Measurement(f"{model}/{node.name}/{phase}", model, f"{work.kind} {phase}",
                                                tuple(kernels), ms / 1000.0, where, f"pipedream {phase}"))
                covered += ms / 1000.0
    # inputs are data loading, not training compute (some profiles time it at 0.6 s)
    total = sum(n.forward_ms + n.backward_ms for n in nodes if not _kind(n.description).startswith("Input")) / 1000.0
    return ProfileMeasurements(model, tuple(measurements), total, covered)
