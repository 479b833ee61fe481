"""Comparison plots as PNG (matplotlib, Agg backend: no display needed).

- Performance profile (Dolan and More): for each planner, the fraction of instances on which its
  objective is within a factor tau of the best found, against tau.
- Gap versus time: one point per run, the planner's runtime against its gap to the reference.
"""
from __future__ import annotations

import math
from pathlib import Path

from solver_plan.report.compare import Comparison, performance_ratios

MARKERS = "osD^v<>phX*"


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def matplotlib_ticker():
    import matplotlib.ticker
    return matplotlib.ticker


def performance_profile(comparison: Comparison, path: str | Path) -> None:
    plt = _pyplot()
    ratios = performance_ratios(comparison)
    finite = [r for values in ratios.values() for r in values if math.isfinite(r)]
    tau_max = max(max(finite, default=1.0) * 1.1, 1.1)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for index, (planner, values) in enumerate(ratios.items()):
        taus = sorted(r for r in values if math.isfinite(r))
        xs = [1.0] + taus + [tau_max]
        ys = [0.0] + [(i + 1) / len(values) for i in range(len(taus))] + [len(taus) / len(values)]
        ax.step(xs, ys, where="post", label=planner, marker=MARKERS[index % len(MARKERS)], markevery=[-1])
    ax.set_xscale("log")
    ax.set_xlim(1.0, tau_max)
    plain = matplotlib_ticker().FuncFormatter(lambda value, _: f"{value:g}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("tau (objective / best objective found)")
    ax.set_ylabel("fraction of instances within tau")
    ax.set_title("Performance profile")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    _save(fig, path)


def gap_versus_time(comparison: Comparison, path: str | Path) -> None:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plotted = False
    for index, planner in enumerate(comparison.planners):
        points = [(max(entry.run.runtime_s, 1e-4), 100 * entry.gap) for result in comparison.instances
                  for entry in result.entries if entry.run.planner == planner and entry.gap is not None]
        if points:
            ax.scatter(*zip(*points), label=planner, marker=MARKERS[index % len(MARKERS)], alpha=0.75)
            plotted = True
    ax.set_xscale("log")
    ax.set_xlabel("runtime (s)")
    ax.set_ylabel("gap to reference (%)")
    ax.set_title("Gap versus time")
    ax.grid(True, which="both", alpha=0.3)
    if plotted:
        ax.legend(loc="upper right", fontsize="small")
    _save(fig, path)


def _save(fig, path: str | Path) -> None:
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
