"""Comparison plots as PNG (matplotlib, Agg backend: no display needed), one figure per kind of
planner (config and pipeline planners never share a plot).

- Performance profiles (Dolan and More): for each planner, the fraction of the kind's common
  instances on which its objective (left) / its time to the target gap (right) is within a factor
  tau of the best planner's, against tau on a log axis labelled up to the largest finite ratio.
  Every planner stays visible where curves coincide: each has its own line style, marker and width
  (drawn widest first).
- Gap versus time: one panel per family; for each planner the shifted geometric-mean gap of its best
  answer returned by time t (before a run returns it counts as 100%).
Titles say what was compared (the records' folder, instance counts); one legend per figure, outside
the panels, with each planner's style the same in every panel.
"""
from __future__ import annotations

import math
from pathlib import Path

from solver_plan.report.compare import (GAP_SHIFT, TIME_FLOOR_S, UNSOLVED_GAP, Comparison, InstanceResult,
                                        performance_ratios, shifted_geomean)

MARKERS = "osD^v<>phX*P"
LINE_STYLES = ("-", "--", "-.", ":")


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _style(index: int, count: int) -> dict:
    """Distinct style per planner; widths shrink so coinciding curves show as nested lines."""
    return {"color": f"C{index % 10}", "linestyle": LINE_STYLES[index % len(LINE_STYLES)],
            "marker": MARKERS[index % len(MARKERS)],
            "linewidth": 1.0 + 2.5 * (count - 1 - index) / max(1, count - 1), "markersize": 5,
            "markerfacecolor": "none" if index % 2 else None}


def kinds(comparison: Comparison) -> list[str]:
    """The kinds of planner in the comparison, sorted: one figure each."""
    return sorted({result.kind for result in comparison.instances})


def plural(count: int, noun: str) -> str:
    """"1 noun" or "n nouns"."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _source_text(source: str | Path | None) -> str:
    return f" (records in {source})" if source else ""


def performance_profile(comparison: Comparison, path: str | Path, kind: str, source: str | Path | None = None) -> None:
    """Write the performance profiles (Dolan and More) of the `kind` planners to `path`: objective and
    time to the target gap, each relative to the best planner."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for ax, metric, label in ((axes[0], "objective", "plan's objective / best objective found"),
                              (axes[1], "time", f"time to within {100 * comparison.target_gap:g}% / fastest")):
        ratios = performance_ratios(comparison, kind, metric)
        _profile(ax, ratios, label)
    axes[1].legend(loc="center left", bbox_to_anchor=(1.02, 0.5), fontsize="small", title="planner")
    count = len(next(iter(ratios.values()), []))
    fig.suptitle(f"Performance profiles of the {kind} planners on {plural(count, 'common instance')}"
                 f"{_source_text(source)}\nhigher and further left is better: the share of instances on "
                 "which a planner is within a factor tau of the best")
    _save(fig, path)


def _profile(ax, ratios: dict[str, list[float]], label: str) -> None:
    finite = [r for values in ratios.values() for r in values if math.isfinite(r)]
    largest = max(finite, default=1.0)
    if largest < 1.001:  # every planner at the best (up to rounding): one tick, no second "1"
        largest = 1.0
    tau_max = max(largest * 1.05, 1.05)
    for index, (planner, values) in enumerate(ratios.items()):
        taus = sorted(r for r in values if math.isfinite(r))
        total = max(1, len(values))
        xs = [1.0] + taus + [tau_max]
        ys = [0.0] + [(i + 1) / total for i in range(len(taus))] + [len(taus) / total]
        style = _style(index, len(ratios))
        line, = ax.step(xs, ys, where="post", label=planner, **{**style, "marker": None})
        # markers at positions of their own (log-spaced, shifted per planner): visible where curves coincide
        marks = [tau_max ** ((index + 0.5) / len(ratios) * 0.9 + 0.9 * k / 4) for k in range(4)]
        marks = [x for x in marks if x <= tau_max]
        heights = [sum(t <= x for t in taus) / total for x in marks]
        ax.plot(marks, heights, linestyle="none", marker=style["marker"], color=line.get_color(),
                markerfacecolor=style["markerfacecolor"] or line.get_color(), markersize=6)
        line.set_marker(style["marker"])  # the legend shows the marker
        line.set_markevery([])
    ax.set_xscale("log")
    ax.set_xlim(1.0, tau_max)
    ticks = _log_ticks(tau_max, largest)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:.3g}" for t in ticks])
    ax.xaxis.set_minor_formatter(_null_formatter())
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"tau ({label})")
    ax.set_ylabel("fraction of instances within tau")
    ax.grid(True, which="both", alpha=0.3)


def _log_ticks(tau_max: float, largest: float) -> list[float]:
    """1, a few round values between, and the largest finite ratio itself (the axis' right end)."""
    end = largest if largest > 1.0 else tau_max
    step = end ** 0.12  # keep labels apart on the log axis
    ticks = [1.0]
    for value in (1.001, 1.002, 1.005, 1.01, 1.02, 1.05, 1.1, 1.2, 1.5, 2, 3, 5, 10, 20, 50, 100, 1e3, 1e4, 1e5):
        if ticks[-1] * step < value < end / step:
            ticks.append(value)
    return ticks + [end]


def _label_log_axis(axis, low: float, high: float) -> None:
    """Labels at 1, 2 and 5 of each decade over at most two decades (a range within one decade is
    labelled too), at 1 and 3 up to three, at decades beyond: labels never run into each other."""
    import matplotlib.ticker
    decades = math.log10(max(high, low * 1.0001) / low)
    subs = (1.0, 2.0, 5.0) if decades <= 2 else (1.0, 3.0) if decades <= 3 else (1.0,)
    axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=subs))
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _null_formatter():
    import matplotlib.ticker
    return matplotlib.ticker.NullFormatter()


def gap_curve(members: list[InstanceResult], planner: str, times: list[float]) -> list[float]:
    """Shifted geo-mean gap (%) at each time of the planner's best answer returned by then."""
    curve = []
    for t in times:
        gaps = []
        for result in members:
            returned = [e.gap for e in result.entries if e.run.planner == planner and e.gap is not None
                        and max(e.run.runtime_s, TIME_FLOOR_S) <= t]
            gaps.append(min(returned, default=UNSOLVED_GAP))
        curve.append(100 * shifted_geomean(gaps, GAP_SHIFT))
    return curve


def gap_versus_time(comparison: Comparison, path: str | Path, kind: str, source: str | Path | None = None) -> None:
    """Write to `path` one panel per family of `kind`: each planner's shifted geometric-mean gap of its
    best answer by time t."""
    plt = _pyplot()
    families = [group for group in comparison.families if group.kind == kind]
    columns = min(3, max(1, len(families)))
    rows = max(1, math.ceil(len(families) / columns))
    fig, axes = plt.subplots(rows, columns, figsize=(5.4 * max(columns, 2), 3.9 * rows + 1.2), squeeze=False)
    for ax in axes.flat[len(families):]:
        ax.set_visible(False)
    everyone = sorted({e.run.planner for r in comparison.instances if r.kind == kind for e in r.entries})
    handles = {}
    for ax, group in zip(axes.flat, families):
        members = [r for r in comparison.instances if r.instance in set(group.instances) and r.reference_s is not None]
        planners = sorted({e.run.planner for r in members for e in r.entries})
        runtimes = sorted({max(e.run.runtime_s, TIME_FLOOR_S) for r in members for e in r.entries})
        if not members or not runtimes:
            ax.set_title(f"{group.name}: no instance with a plan", fontsize="small")
            continue
        times = sorted(set(runtimes + [runtimes[-1] * 1.2]))
        for planner in planners:
            index = everyone.index(planner)  # one style per planner across panels
            handles[planner], = ax.step(times, gap_curve(members, planner, times), where="post", label=planner,
                                        markevery=max(1, len(times) // 8), **_style(index, len(everyone)))
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=0.01)
        ax.set_ylim(0, 110)
        ax.set_xlabel("wall time of the run (s)")
        ax.set_ylabel("geo-mean gap to best known (%)")
        ax.set_title(f"{group.name} ({plural(len(members), 'instance')} with a plan)", fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
        _label_log_axis(ax.xaxis, times[0], times[-1])
    if handles:
        fig.legend([handles[p] for p in everyone if p in handles], [p for p in everyone if p in handles],
                   loc="lower center", ncol=min(len(handles), 7), fontsize="small", frameon=False, title="planner")
    fig.suptitle(f"Gap versus time of the {kind} planners{_source_text(source)}\nlower is better: the best "
                 "plan each planner returned by that time (no plan yet counts as 100%)")
    _save(fig, path, legend_rows=math.ceil(len(handles) / 7) if handles else 0)


def _save(fig, path: str | Path, legend_rows: int = 0) -> None:
    import matplotlib.pyplot as plt
    height = fig.get_size_inches()[1]
    fig.tight_layout(rect=(0, (0.35 + 0.25 * legend_rows) / height if legend_rows else 0, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
