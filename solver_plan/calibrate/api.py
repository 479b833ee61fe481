"""Front door: `calibrate(cluster, profiles=..., csv_files=...) -> Calibration`."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from solver_plan.calibrate.csvfile import read_calibration_csv
from solver_plan.calibrate.fit import ComputeFit, LinkFit, fit_compute, fit_links, predict
from solver_plan.calibrate.measurements import Measurement
from solver_plan.calibrate.profiles import profile_measurements
from solver_plan.cluster.model import Cluster
from solver_plan.errors import InputError
from solver_plan.result import Status


@dataclass(frozen=True)
class Calibration:
    """The calibrated cluster, the fits, and the fit's error on its own measurements (in-sample:
    the cross-validated error is what scripts/accuracy_report.py reports)."""
    status: Status
    cluster: Cluster
    compute: ComputeFit | None
    links: LinkFit
    measurements: int
    collectives: int
    median_error_before: float | None  # |predicted / measured - 1| with the input cluster
    median_error_after: float | None
    runtime_s: float
    notes: tuple[str, ...] = ()

    def summary(self) -> str:
        """Human report of the calibration: what it fitted on, the fitted curves and overheads, the fitted
        link parameters, the in-sample error before and after, notes and warnings.
        """
        lines = [f"calibrated {self.cluster.name} on {self.measurements} kernel measurements and "
                 f"{self.collectives} collectives ({self.status.value}, {self.runtime_s:.1f} s)"]
        if self.compute is not None:
            c = self.compute
            lines.append("  matrix efficiency  " + _curve_text(c.matrix_efficiency, "GFLOP"))
            lines.append("  vector efficiency  " + _curve_text(c.vector_efficiency, "GFLOP"))
            lines.append("  memory efficiency  " + _curve_text(c.memory_efficiency, "MB"))
            lines.append(f"  launch overhead    {c.launch_overhead * 1e6:.2f} us per kernel")
            for name, value in c.measurement_overheads:
                lines.append(f"  measuring overhead {value * 1e6:.1f} us per measurement ({name}; not written)")
        if self.median_error_before is not None:
            lines.append(f"  median |error| per measurement: {100 * self.median_error_before:.1f}% before, "
                         f"{100 * self.median_error_after:.1f}% after (in-sample)")
        link = self.links
        for level, latency, efficiency, p2p in (
                ("intra-node", link.intra_latency, link.intra_efficiency, link.intra_p2p_efficiency),
                ("inter-node", link.inter_latency, link.inter_efficiency, link.inter_p2p_efficiency)):
            if latency is not None or efficiency is not None or p2p is not None:
                lines.append(f"  {level} link: latency {_us(latency)}, efficiency {_fraction(efficiency)}"
                             + ("" if p2p is None else f", point-to-point efficiency {_fraction(p2p)}"))
        lines.extend(f"  note: {n}" for n in self.notes)
        lines.extend(f"  warning: {w}" for w in self.warnings)
        return "\n".join(lines)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Reasons not to trust the fitted values as they are (under-determined, on a bound)."""
        return (self.compute.warnings if self.compute is not None else ()) + self.links.warnings


def _us(value):
    return "unchanged" if value is None else f"{value * 1e6:.2f} us"


def _fraction(value):
    return "unchanged" if value is None else f"{value:.3f}"


def _curve_text(curve, unit) -> str:
    return ", ".join(f">={t:g} {unit}: {e:.3f}" for t, e in curve)


def _median_error(fit_or_device, device, measurements) -> float:
    if isinstance(fit_or_device, ComputeFit):
        values = [abs(fit_or_device.predict(device, m) / m.seconds - 1) for m in measurements]
    else:
        values = [abs(predict(device, m) / m.seconds - 1) for m in measurements]
    return float(statistics.median(values))


def calibrate(cluster: Cluster, profiles=(), csv_files=(), name: str | None = None) -> Calibration:
    """Fit `cluster`'s efficiency curves and launch overhead to kernel measurements (PipeDream
    profiles, CSV rows) and its links' latency and efficiency to collective measurements (CSV)."""
    started = time.perf_counter()
    measurements: list[Measurement] = []
    collectives = []
    notes = []
    if profiles and "v100" not in cluster.device.name.lower():
        notes.append(f"the PipeDream profiles were measured on a V100; fitting them to {cluster.device.name} "
                     f"gives efficiencies relative to its peaks, not a V100's")
    for path in profiles:
        profile = profile_measurements(Path(path))
        measurements.extend(profile.measurements)
        if profile.covered_s < 0.95 * profile.measured_total_s:
            notes.append(f"{profile.model}: the derived kernels cover {profile.covered_s / profile.measured_total_s:.0%} "
                         f"of the profiled time")
    for path in csv_files:
        kernels, comms = read_calibration_csv(path)
        measurements.extend(kernels)
        collectives.extend(comms)
    if not measurements and not collectives:
        raise InputError("nothing to calibrate on: give --profile and/or --csv with measurements", "calibrate")
    device = cluster.device
    for m in measurements:  # a row in a dtype the device cannot run: named by its CSV line
        for kernel in m.kernels:
            if not device.supports(kernel.dtype):
                raise InputError(f"{kernel.dtype.value} {m.kind} measured, but {device.name} of cluster "
                                 f"{cluster.name!r} has no {kernel.dtype.value} units; measure in a dtype it has "
                                 "or calibrate a cluster with that device", m.where or m.name)
    compute = fit_compute(device, measurements) if measurements else None
    calibrated = cluster
    if compute is not None:
        from dataclasses import replace
        calibrated = replace(cluster, device=compute.apply(device))
    links = fit_links(calibrated, collectives)
    calibrated = links.apply(calibrated)
    if name:
        from dataclasses import replace
        calibrated = replace(calibrated, name=name)
    before = after = None
    if compute is not None:
        before = _median_error(device, device, measurements)
        after = _median_error(compute, device, measurements)
    return Calibration(Status.OPTIMAL if compute is None or compute.rounds else Status.FEASIBLE, calibrated, compute,
                       links, len(measurements), len(collectives), before, after,
                       time.perf_counter() - started, tuple(notes))
