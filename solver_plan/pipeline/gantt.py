"""Gantt charts of a periodic pattern: one period, and the unrolled steady state (matplotlib, Agg)."""
from __future__ import annotations

from solver_plan.pipeline.pattern import PeriodicPattern

COLORS = {"F": "#4c72b0", "B": "#dd8452", "CF": "#8fb0d9", "CB": "#f0b58a"}


def _resources(pattern: PeriodicPattern) -> list[str]:
    names = {op.resource for op in pattern.ops.operations}
    return sorted(names, key=lambda r: (r[0] != "P", [int(x) for x in r[1:].split("-")]))


def _draw(ax, pattern: PeriodicPattern, periods: int, label_batches: bool) -> None:
    rows = {r: i for i, r in enumerate(_resources(pattern))}
    T = pattern.period
    first = 0 if periods == 1 else max(pattern.shift)  # unrolled: start in steady state (batch >= 0)
    for k in range(periods):
        for op, t, h in zip(pattern.ops.operations, pattern.start, pattern.shift):
            begin = k * T + t
            pieces = [(begin, op.duration)]
            if periods == 1 and t + op.duration > T:  # wrap around the period
                pieces = [(begin, T - t), (0.0, t + op.duration - T)]
            for left, width in pieces:
                ax.barh(rows[op.resource], width, left=left, height=0.8, color=COLORS[op.kind], edgecolor="black",
                        linewidth=0.4)
            if op.duration > 0.04 * T * periods and op.kind in ("F", "B"):
                text = f"{op.kind}{op.stage}" + (f"[{first + k - h}]" if label_batches else f"({h})")
                ax.text(begin + min(op.duration, T - t if periods == 1 else op.duration) / 2, rows[op.resource],
                        text, ha="center", va="center", fontsize=6)
    ax.set_yticks(list(rows.values()), list(rows))
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    for k in range(periods + 1):
        ax.axvline(k * T, color="grey", linewidth=0.5, linestyle=":")


def save_gantt(pattern: PeriodicPattern, path, periods: int = 4, title: str | None = None) -> None:
    """Top: one period (labels show shifts); bottom: `periods` periods unrolled (labels show batches)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    height = 0.35 * len(_resources(pattern)) + 1.2
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 2 * height + 0.8))
    _draw(top, pattern, 1, label_batches=False)
    top.set_title(title or f"one period: T = {pattern.period:.4g} s ({pattern.scheduler}); F/B stage (shift)")
    _draw(bottom, pattern, periods, label_batches=True)
    bottom.set_title(f"{periods} periods unrolled; F/B stage [batch]")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
