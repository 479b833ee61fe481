"""Fitting the compute model's parameters to measured kernel times, and the links' to collectives.

Compute (cost/compute.py): a kernel takes max(FLOPs / (peak x e_unit(FLOPs)), bytes / (HBM x
e_mem(bytes))) + launch_overhead, where e_matrix, e_vector and e_mem are step curves. With which of
the two terms binds fixed for every kernel, a measurement's predicted time is linear in the
inverse efficiencies r = 1 / e of the bins its kernels fall in and in the launch overhead. So:
1. assign every kernel to its binding term and bin under the current parameters;
2. solve a weighted non-negative least-squares problem (weights 1 / measured time: relative
   errors count, so 1 ms layers matter as much as 100 ms ones) for the launch overhead and the
   bins' r, written as r_j = 1 + d_1 + ... + d_j with d >= 0 over the bins holding data from the
   largest size down, so efficiency never exceeds 1 and never grows as kernels get smaller;
   plus one nuisance time per `Measurement.overhead` name (what the measuring adds, such as a
   profiler hook: fitted so it does not distort the hardware parameters, never written out);
3. repeat until no kernel changes term or bin (or ROUNDS rounds). Each round also down-weights
   measurements whose relative residual exceeds HUBER (Huber's M-estimator by iteratively
   reweighted least squares), so a few mis-attributed profile timings do not drag the curves.
Bins without data take the efficiency of the nearest larger-size bin with data (or, above every
measured size, that of the largest measured bin). Deterministic: no random starts.

Links: a collective's time is alpha x steps + bytes x beta per level (cost/collectives.py), linear
in the latencies alpha and in 1 / efficiency of each level (beta = 1 / (bandwidth x efficiency));
the coefficients are read off `collective_cost` itself (its derivatives at the current estimate,
so NCCL's ring/tree choice is that of the estimate), then fitted by the same weighted
non-negative least squares, repeated until the estimate settles.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from solver_plan.calibrate.measurements import CollectiveMeasurement, Measurement
from solver_plan.calibrate.nnls import nnls
from solver_plan.cluster.model import Cluster, Curve, DeviceSpec, Link
from solver_plan.cost.collectives import collective_cost
from solver_plan.cost.compute import compute_time
from solver_plan.errors import InputError

# Bin thresholds (descending to 0): matrix and vector curves in GFLOP per kernel, memory in MB.
MATRIX_THRESHOLDS = (64.0, 16.0, 4.0, 1.0, 0.25, 0.0625, 0.0)
VECTOR_THRESHOLDS = (16.0, 1.0, 0.1, 0.0)
MEMORY_THRESHOLDS = (1000.0, 100.0, 10.0, 1.0, 0.0)
# narrow curve: smallest GEMM dimension in elements; the first bin (>= 256) is the wide reference
NARROW_THRESHOLDS = (256.0, 128.0, 64.0, 32.0, 16.0, 8.0, 4.0, 0.0)
CURVES = ("matrix", "vector", "memory")
THRESHOLDS = {"matrix": MATRIX_THRESHOLDS, "vector": VECTOR_THRESHOLDS, "memory": MEMORY_THRESHOLDS}
ROUNDS = 30
HUBER = 0.25  # relative residual beyond which a measurement's weight falls as 1 / |residual|
MIN_EFFICIENCY = 1e-3
ERROR_POWER = 0.5  # residuals divided by measured time ** ERROR_POWER (1: relative, 0: absolute)


def predict(device: DeviceSpec, measurement: Measurement) -> float:
    """The cost model's time for a measurement: the sum of its kernels' compute_time."""
    return sum(compute_time(device, k.flops, k.hbm_bytes, unit=k.unit, dtype=k.dtype, narrow=k.narrow)
               for k in measurement.kernels)


def _bins(thresholds, sizes: np.ndarray) -> np.ndarray:
    """Step-curve bin of every size: the first threshold (descending) the size reaches."""
    return np.sum(sizes[:, None] < np.asarray(thresholds)[None, :], axis=1)


def _levels(curve: Curve, thresholds) -> np.ndarray:
    """The efficiency a step curve gives at each of `thresholds` (1.0 for no curve)."""
    return np.array([_step(curve, t) for t in thresholds])


def _step(curve: Curve, size: float) -> float:
    for threshold, efficiency in curve:
        if size >= threshold:
            return efficiency
    return 1.0


class KernelTable:
    """Every kernel of a list of measurements as arrays, for fast rounds of the fit; `times`
    reproduces `predict` (compute_time) for any curves on the fit's thresholds."""

    def __init__(self, device: DeviceSpec, measurements):
        kernels = [(i, k) for i, m in enumerate(measurements) for k in m.kernels]
        self.owner = np.array([i for i, _ in kernels], dtype=np.int64)
        self.count = len(measurements)
        flops = np.array([k.flops for _, k in kernels])
        nbytes = np.array([k.hbm_bytes for _, k in kernels])
        self.vector = np.array([k.unit == "vector" for _, k in kernels])
        peaks = np.array([device.peak(k.dtype, k.unit) for _, k in kernels])
        self.math_s = np.where(flops > 0, flops / peaks, 0.0)
        hbm = device.hbm_bandwidth
        self.memory_s = nbytes / hbm if hbm else np.zeros(len(kernels))
        self.math_bin = np.where(self.vector, _bins(VECTOR_THRESHOLDS, flops / 1e9), _bins(MATRIX_THRESHOLDS, flops / 1e9))
        self.memory_bin = _bins(MEMORY_THRESHOLDS, nbytes / 1e6)
        narrow = np.array([k.narrow for _, k in kernels])
        self.has_narrow = (narrow > 0) & ~self.vector  # matrix kernels with a known smallest dimension
        self.narrow_bin = _bins(NARROW_THRESHOLDS, narrow)
        self.seconds = np.array([m.seconds for m in measurements])
        self.kernels_per = np.bincount(self.owner, minlength=self.count).astype(float)
        self.overhead_names = tuple(sorted({m.overhead for m in measurements if m.overhead}))
        self.overhead_of = np.array([self.overhead_names.index(m.overhead) if m.overhead else -1
                                     for m in measurements], dtype=np.int64)

    def overhead_times(self, overheads: np.ndarray) -> np.ndarray:
        """The measuring overhead each measurement pays, `overheads[i]` for the measurements of overhead group
        i (0 for the rest).
        """
        return np.where(self.overhead_of >= 0, overheads[np.maximum(self.overhead_of, 0)] if len(overheads) else 0.0, 0.0)

    def narrow_factors(self, narrow: np.ndarray | None) -> np.ndarray:
        """Every kernel's narrow efficiency under per-bin levels (1 where it has no narrow dimension)."""
        if narrow is None or not len(self.has_narrow):
            return np.ones(len(self.has_narrow))
        return np.where(self.has_narrow, narrow[np.minimum(self.narrow_bin, len(narrow) - 1)], 1.0)

    def kernel_parts(self, matrix: np.ndarray, vector: np.ndarray, memory: np.ndarray, narrow: np.ndarray | None = None):
        """(math seconds, memory seconds) of every kernel under per-bin efficiencies."""
        math_eff = np.where(self.vector, vector[np.minimum(self.math_bin, len(vector) - 1)],
                            matrix[np.minimum(self.math_bin, len(matrix) - 1)]) * self.narrow_factors(narrow)
        return self.math_s / math_eff, np.where(self.memory_s > 0, self.memory_s / memory[self.memory_bin], 0.0)

    def times(self, matrix: np.ndarray, vector: np.ndarray, memory: np.ndarray, launch: float,
              overheads: np.ndarray = np.zeros(0), narrow: np.ndarray | None = None) -> np.ndarray:
        """Predicted seconds of every measurement under the given per-bin efficiencies: per kernel max(math
        time, memory time) + launch overhead (the roofline of `compute_time`), summed per measurement, plus
        its measuring overhead.
        """
        math_t, memory_t = self.kernel_parts(matrix, vector, memory, narrow)
        per_kernel = np.maximum(math_t, memory_t) + launch
        return np.bincount(self.owner, weights=per_kernel, minlength=self.count) + self.overhead_times(overheads)


@dataclass(frozen=True)
class ComputeFit:
    """Fitted compute parameters and how the fit went."""
    matrix_efficiency: Curve
    vector_efficiency: Curve
    memory_efficiency: Curve
    launch_overhead: float  # seconds per kernel
    rounds: int
    measurements: int
    # fitted nuisance times of the measuring itself, by Measurement.overhead name (seconds)
    measurement_overheads: tuple[tuple[str, float], ...] = ()
    narrow_efficiency: Curve = ()  # () when no measurement carries a narrow dimension
    parameters: int = 0  # fitted values: bins with data, launch overhead, nuisance times, narrow bins
    warnings: tuple[str, ...] = ()  # under-determined, or values on a bound of the fit (`compute_warnings`)

    def predict(self, device: DeviceSpec, measurement: Measurement) -> float:
        """What the measurement should read under this fit: the cost model's time on the fitted
        device plus the measuring's own overhead."""
        return predict(self.apply(device), measurement) + dict(self.measurement_overheads).get(measurement.overhead, 0.0)

    def apply(self, device: DeviceSpec) -> DeviceSpec:
        """`device` with the fitted curves and launch overhead (its kernel_time_scale reset to 1: the curves
        absorb an earlier calibration factor, so it is not applied twice).
        """
        # the fitted curves absorb any earlier calibration factor, so it is not applied twice
        return replace(device, matrix_efficiency=self.matrix_efficiency, vector_efficiency=self.vector_efficiency,
                       memory_efficiency=self.memory_efficiency, launch_overhead=self.launch_overhead,
                       narrow_efficiency=self.narrow_efficiency or device.narrow_efficiency, kernel_time_scale=1.0)


def _curve(thresholds, r_by_bin: dict[int, float], fallback: Curve) -> Curve:
    """The step curve from fitted r of the bins with data; the other bins as the module text says.
    A curve with no data at all keeps `fallback`."""
    if not r_by_bin:
        return fallback
    data_bins = sorted(r_by_bin)
    efficiencies = []
    for j in range(len(thresholds)):
        larger = [b for b in data_bins if b <= j]
        source = larger[-1] if larger else data_bins[0]
        efficiencies.append(max(MIN_EFFICIENCY, min(1.0, 1.0 / r_by_bin[source])))
    return tuple((float(t), round(float(e), 6)) for t, e in zip(thresholds, efficiencies))


def _solve_round(table: KernelTable, levels, launch: float, weights: np.ndarray):
    """One weighted NNLS with every kernel's binding term and bin fixed under the current levels
    (matrix, vector, memory, narrow); the narrow factors stay fixed (`_solve_narrow` fits them)."""
    math_t, memory_t = table.kernel_parts(*levels)
    memory_binds = memory_t > math_t
    curve = np.where(memory_binds, 2, np.where(table.vector, 1, 0))  # 0 matrix, 1 vector, 2 memory
    bins = np.where(memory_binds, table.memory_bin, table.math_bin)
    base = np.where(memory_binds, table.memory_s, table.math_s / table.narrow_factors(levels[3]))
    columns, index = [], {}
    for c in range(3):
        for b in sorted(set(bins[curve == c].tolist())):
            index[(c, b)] = len(columns)
            columns.append((c, b))
    extra = len(table.overhead_names)
    A = np.zeros((table.count, len(columns) + 1 + extra))
    for j in range(extra):
        A[:, len(columns) + 1 + j] = table.overhead_of == j
    for (c, b), col in index.items():
        # increment d of bin b applies to every kernel of curve c in bin b or a smaller-size bin
        mask = (curve == c) & (bins >= b)
        A[:, col] = np.bincount(table.owner[mask], weights=base[mask], minlength=table.count)
    A[:, len(columns)] = table.kernels_per
    target = table.seconds - np.bincount(table.owner, weights=base, minlength=table.count)
    scale = weights / table.seconds ** ERROR_POWER
    solution = nnls(A * scale[:, None], target * scale)
    r = [{}, {}, {}]
    for c in range(3):
        total = 1.0
        for (cc, b) in columns:
            if cc == c:
                total += solution[index[(c, b)]]
                r[c][b] = total
    key = (curve.tobytes(), bins.tobytes())
    return r, float(solution[len(columns)]), solution[len(columns) + 1:], key


def _solve_narrow(table: KernelTable, levels, launch: float, overheads: np.ndarray, weights: np.ndarray) -> dict[int, float]:
    """The narrow curve's r = 1 / efficiency per bin with data, the size curves, launch overhead
    and nuisance times fixed: a matrix kernel whose arithmetic binds takes m r_b seconds (m: its
    time at the size curve's efficiency), r_b = 1 + d_1 + ... + d_b with d >= 0 from the widest bin
    down, the widest bin (>= NARROW_THRESHOLDS[0]) fixed at 1 so the size curve keeps the scale;
    the same weighted NNLS as `_solve_round`."""
    math_t, memory_t = table.kernel_parts(*levels)
    size_only, _ = table.kernel_parts(*levels[:3])
    fitted = table.has_narrow & (math_t >= memory_t) & (table.narrow_bin > 0)
    per_kernel = np.where(fitted, size_only, np.maximum(math_t, memory_t)) + launch
    constant = np.bincount(table.owner, weights=per_kernel, minlength=table.count) + table.overhead_times(overheads)
    bins = sorted(set(table.narrow_bin[fitted].tolist()))
    if not bins:
        return {}
    A = np.zeros((table.count, len(bins)))
    for col, b in enumerate(bins):
        mask = fitted & (table.narrow_bin >= b)
        A[:, col] = np.bincount(table.owner[mask], weights=size_only[mask], minlength=table.count)
    scale = weights / table.seconds ** ERROR_POWER
    solution = nnls(A * scale[:, None], (table.seconds - constant) * scale)
    return {b: 1.0 + float(np.sum(solution[:col + 1])) for col, b in enumerate(bins)} | {0: 1.0}


def fit_compute(device: DeviceSpec, measurements) -> ComputeFit:
    """Fit the efficiency curves and launch overhead of `device` to `measurements` (module text);
    the narrow curve too when kernels carry narrow dimensions, alternating with the others."""
    measurements = tuple(measurements)
    if not measurements:
        raise InputError("no measurements to calibrate on", "measurements")
    table = KernelTable(device, measurements)
    levels = tuple(_levels(getattr(device, f"{c}_efficiency"), THRESHOLDS[c]) for c in CURVES) + (
        _levels(device.narrow_efficiency, NARROW_THRESHOLDS),)
    launch = device.launch_overhead
    weights = np.ones(table.count)
    fits_narrow = bool(table.has_narrow.any())
    previous, fit = None, None
    for rounds in range(1, ROUNDS + 1):
        r, launch, overheads, key = _solve_round(table, levels, launch, weights)
        parameters = sum(len(bins) for bins in r) + 1 + len(overheads)
        size_levels = tuple(_levels(_curve(THRESHOLDS[c], r[i], getattr(device, f"{c}_efficiency")), THRESHOLDS[c])
                            for i, c in enumerate(CURVES))
        narrow_curve = device.narrow_efficiency
        if fits_narrow:
            r_narrow = _solve_narrow(table, size_levels + (levels[3],), launch, overheads, weights)
            narrow_curve = _curve(NARROW_THRESHOLDS, r_narrow, device.narrow_efficiency)
            parameters += len(r_narrow) - 1  # the widest bin is fixed at 1
        fit = ComputeFit(_curve(MATRIX_THRESHOLDS, r[0], device.matrix_efficiency),
                         _curve(VECTOR_THRESHOLDS, r[1], device.vector_efficiency),
                         _curve(MEMORY_THRESHOLDS, r[2], device.memory_efficiency),
                         launch, rounds, len(measurements),
                         tuple((name, float(v)) for name, v in zip(table.overhead_names, overheads)),
                         narrow_curve if fits_narrow else (), parameters, compute_warnings(r, launch, parameters,
                                                                                            len(measurements)))
        levels = size_levels + (_levels(narrow_curve, NARROW_THRESHOLDS),)
        residuals = table.times(*levels[:3], launch, overheads, narrow=levels[3]) / table.seconds - 1.0
        new_weights = np.minimum(1.0, HUBER / np.maximum(np.abs(residuals), 1e-12))
        state = (key, levels[3].round(4).tobytes())
        if state == previous and np.allclose(new_weights, weights, rtol=1e-3, atol=1e-6):
            break
        previous, weights = state, new_weights
    return fit


# Fitted efficiencies below this, for kernels large enough to fill the device (at least
# LARGE_KERNEL[curve]: GFLOP, or MB for memory), are taken as a sign the measurements are not of
# this device (or not of the kernel the row describes): GPUs reach 0.2-0.9 of peak on such kernels.
IMPLAUSIBLE_EFFICIENCY = 0.05
LARGE_KERNEL = {"matrix": 1.0, "vector": 1.0, "memory": 10.0}


def _bin_text(curve: str, b: int) -> str:
    unit = "MB" if curve == "memory" else "GFLOP"
    return f"{curve} efficiency of kernels >= {THRESHOLDS[curve][b]:g} {unit}"


def compute_warnings(r, launch: float, parameters: int, measurements: int) -> tuple[str, ...]:
    """What a user must know before trusting a compute fit: fewer measurements than fitted values
    (any values fit them exactly), values on a bound of the non-negative least squares (efficiency
    1, the cap; launch overhead 0), or efficiencies too low to be this device's."""
    notes = []
    if measurements <= parameters:
        notes.append(f"under-determined: {measurements} kernel measurements for {parameters} fitted values "
                     "(efficiency bins with data, launch overhead); measure more kernels of each size")
    for i, curve in enumerate(CURVES):
        for b, value in sorted(r[i].items()):
            if value <= 1.0 + 1e-9:
                notes.append(f"{_bin_text(curve, b)} is 1.000, the cap: the measurements are as fast as or "
                             "faster than the peak allows (or do not determine it)")
            elif 1.0 / value < IMPLAUSIBLE_EFFICIENCY and THRESHOLDS[curve][b] >= LARGE_KERNEL[curve]:
                notes.append(f"{_bin_text(curve, b)} is {1.0 / value:.3f}: implausibly low; were these "
                             "measurements taken on this device, in the dtype the rows say?")
    if launch <= 0.0:
        notes.append("launch overhead 0 (its bound): the measurements do not determine it; include small kernels")
    return tuple(notes)


# --- links ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LinkFit:
    """Fitted latency (s), collective efficiency and point-to-point efficiency per link level; None
    where no measurement informs it (p2p rows inform `p2p_efficiency`, collectives `efficiency`)."""
    intra_latency: float | None
    intra_efficiency: float | None
    inter_latency: float | None
    inter_efficiency: float | None
    measurements: int
    intra_p2p_efficiency: float | None = None
    inter_p2p_efficiency: float | None = None
    warnings: tuple[str, ...] = ()  # under-determined, or values on a bound (`link_warnings`)

    def apply(self, cluster: Cluster) -> Cluster:
        """`cluster` with the fitted latency and efficiencies on each link level; figures the fit could not
        inform stay as they were.
        """
        def updated(link: Link | None, latency, efficiency, p2p) -> Link | None:
            if link is None:
                return None
            return replace(link, latency=link.latency if latency is None else latency,
                           efficiency=link.efficiency if efficiency is None else efficiency,
                           p2p_efficiency=link.p2p_efficiency if p2p is None else p2p)
        return replace(cluster, intra_node=updated(cluster.intra_node, self.intra_latency, self.intra_efficiency,
                                                   self.intra_p2p_efficiency),
                       inter_node=updated(cluster.inter_node, self.inter_latency, self.inter_efficiency,
                                          self.inter_p2p_efficiency))


LINK_ROUNDS = 8
# theta: alpha_intra, alpha_inter, 1/eff_intra, 1/eff_inter, 1/p2p_eff_intra, 1/p2p_eff_inter
THETA_STEPS = (1e-7, 1e-7, 1e-3, 1e-3, 1e-3, 1e-3)


def _with_links(cluster: Cluster, theta) -> Cluster:
    """`cluster` with (alpha_i, alpha_e, 1/eff_i, 1/eff_e, 1/p2p_i, 1/p2p_e) = theta, no g override."""
    alpha_i, alpha_e, inv_i, inv_e, inv_pi, inv_pe = theta
    intra = replace(cluster.intra_node, latency=alpha_i, efficiency=1.0 / inv_i, p2p_efficiency=1.0 / inv_pi)
    inter = None if cluster.inter_node is None else replace(cluster.inter_node, latency=alpha_e,
                                                           efficiency=1.0 / inv_e, p2p_efficiency=1.0 / inv_pe)
    return replace(cluster, intra_node=intra, inter_node=inter, g_overrides=())


def _coefficients(cluster: Cluster, m: CollectiveMeasurement, theta) -> np.ndarray:
    """d time / d theta at theta. NCCL's choice between ring and tree (cost/collectives.py) makes
    the time piecewise linear in theta; within the piece theta is in, these are exact."""
    def seconds(t) -> float:
        return collective_cost(_with_links(cluster, t), m.kind, m.nbytes, m.group_size, m.devices_per_node).seconds
    base = seconds(theta)
    gradient = np.zeros(len(theta))
    for j, step in enumerate(THETA_STEPS):
        moved = list(theta)
        moved[j] += step
        gradient[j] = (seconds(moved) - base) / step
    return gradient


def fit_links(cluster: Cluster, measurements) -> LinkFit:
    """Fit latency, collective efficiency and point-to-point efficiency of the levels the
    measurements span (module text), re-linearising at the estimate until the ring/tree choices
    settle. Point-to-point rows (`p2p`) inform only the p2p efficiency, collectives only the
    collective one; a level's latency is shared."""
    measurements = tuple(measurements)
    if not measurements:
        return LinkFit(None, None, None, None, 0)
    for m in measurements:
        if m.devices_per_node > cluster.devices_per_node or m.nodes > cluster.nodes:
            raise InputError(f"a {m.kind} over {m.group_size} devices ({m.devices_per_node} per node) does not "
                             f"fit cluster {cluster.name!r} ({cluster.nodes} x {cluster.devices_per_node})", m.where)
    intra, inter = cluster.intra_node, cluster.inter_node
    theta = [intra.latency, inter.latency if inter else 0.0, 1.0 / intra.efficiency,
             1.0 / inter.efficiency if inter else 1.0, 1.0 / intra.point_to_point_efficiency,
             1.0 / inter.point_to_point_efficiency if inter else 1.0]
    target = np.array([m.seconds for m in measurements])
    scale = 1.0 / target
    informed = np.zeros(len(theta), dtype=bool)
    for _ in range(LINK_ROUNDS):
        A = np.array([_coefficients(cluster, m, theta) for m in measurements])
        informed = np.abs(A).sum(axis=0) > 0
        # time = sum_l a_l alpha_l + sum_k b_k / eff_k with 1 / eff = 1 + d, d >= 0
        constant = A[:, 2:].sum(axis=1)
        solution = nnls(A * scale[:, None], (target - constant) * scale)
        new = [solution[0], solution[1]] + [1.0 + s for s in solution[2:]]
        if np.allclose(new, theta, rtol=1e-9, atol=1e-15):
            break
        theta = new
    values = [theta[0] if informed[0] else None, 1.0 / theta[2] if informed[2] else None,
              theta[1] if informed[1] else None, 1.0 / theta[3] if informed[3] else None]
    p2p = [1.0 / theta[4] if informed[4] else None, 1.0 / theta[5] if informed[5] else None]
    return LinkFit(*(None if v is None else float(v) for v in values), measurements=len(measurements),
                   intra_p2p_efficiency=None if p2p[0] is None else float(p2p[0]),
                   inter_p2p_efficiency=None if p2p[1] is None else float(p2p[1]),
                   warnings=link_warnings(theta, informed, len(measurements)))


LINK_NAMES = ("intra-node latency", "inter-node latency", "intra-node efficiency", "inter-node efficiency",
              "intra-node point-to-point efficiency", "inter-node point-to-point efficiency")


def link_warnings(theta, informed, measurements: int) -> tuple[str, ...]:
    """Fewer collective measurements than link values they inform, or values on a bound of the
    fit (latency 0; efficiency 1, the cap)."""
    names = [LINK_NAMES[j] for j in range(len(theta)) if informed[j]]
    notes = []
    if measurements <= len(names):
        notes.append(f"under-determined: {measurements} collective measurement(s) for {len(names)} link values "
                     f"({', '.join(names)}); measure each collective at several sizes (small ones fix the "
                     "latency, large ones the efficiency)")
    for j in range(len(theta)):
        if informed[j] and j < 2 and theta[j] <= 0.0:
            notes.append(f"{LINK_NAMES[j]} 0 (its bound): the measurements do not determine it; add small messages")
        elif informed[j] and j >= 2 and theta[j] <= 1.0 + 1e-9:
            notes.append(f"{LINK_NAMES[j]} 1.000, the cap: the measurements are as fast as or faster than the "
                         "nominal bandwidth allows (or do not determine it)")
    return tuple(notes)


def relative_errors(device: DeviceSpec, measurements) -> np.ndarray:
    """Relative error of the cost model on each measurement, predicted / measured - 1."""
    return np.array([predict(device, m) / m.seconds - 1.0 for m in measurements])


def describe_curve(curve: Curve) -> str:
    """An efficiency curve as text, ">=threshold: efficiency" per step."""
    return ", ".join(f">={t:g}: {e:.3f}" for t, e in curve)


def geometric_mean_ratio(device: DeviceSpec, measurements) -> float:
    """Geometric mean of predicted / measured over the measurements (1: unbiased on average)."""
    return float(math.exp(np.mean([math.log(predict(device, m) / m.seconds) for m in measurements])))

