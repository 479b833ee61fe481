"""Gantt charts of a periodic pattern: one period, and the unrolled steady state (matplotlib, Agg).

Both panels label a bar the same way: operation and stage, then the mini-batch it works on
("F4 n-1": forward of stage 4 on the batch one before the newest, n, of the period drawn; in the
unrolled panel n is a number). Bars too narrow for that get the short label, rotated if needed;
a legend says what the colours and the link rows are.
"""
from __future__ import annotations

from solver_plan.pipeline.pattern import PeriodicPattern

COLORS = {"F": "#4c72b0", "B": "#dd8452", "W": "#55a868", "CF": "#8fb0d9", "CB": "#f0b58a"}
KIND_NAMES = {"F": "forward (F)", "B": "backward (B)", "W": "weight gradient (W, exact-zb)", "CF": "activation transfer", "CB": "gradient transfer"}
FONT_PT = 7
CHAR_PT = 0.62 * FONT_PT  # average glyph width of the default sans-serif font
ROW_HEIGHT = 0.8


def _resources(pattern: PeriodicPattern) -> list[str]:
    names = {op.resource for op in pattern.ops.operations}
    return sorted(names, key=lambda r: (r[0] != "P", [int(x) for x in r[1:].split("-")]))


def _row_label(resource: str) -> str:
    if resource.startswith("P"):
        return f"processor {resource[1:]}"
    return f"link {resource[1:].replace('-', '–')}"


def _time_unit(period: float) -> tuple[float, str]:
    return (1e3, "ms") if period < 1.0 else (1.0, "s")


def _batch_text(shift: int, period_index: int | None) -> str:
    if period_index is None:  # one period: relative to the newest batch n
        return "n" if shift == 0 else f"n-{shift}"
    return str(period_index - shift)


def _label(ax, x_mid: float, row: int, width_pt: float, name: str, batch: str) -> None:
    full, short = f"{name} {batch}", name
    if width_pt >= CHAR_PT * (len(full) + 1):
        ax.text(x_mid, row, full, ha="center", va="center", fontsize=FONT_PT, clip_on=True)
    elif width_pt >= CHAR_PT * (len(short) + 0.5):
        ax.text(x_mid, row, short, ha="center", va="center", fontsize=FONT_PT, clip_on=True)
    elif width_pt >= FONT_PT - 1.5:  # rotated: the bar's height holds it
        ax.text(x_mid, row, short, ha="center", va="center", fontsize=FONT_PT - 1.5, rotation=90, clip_on=True)


def _draw(ax, pattern: PeriodicPattern, periods: int, scale: float, width_pt: float) -> None:
    rows = {r: i for i, r in enumerate(_resources(pattern))}
    T = pattern.period
    span = T * periods
    first = 0 if periods == 1 else max(pattern.shift)  # unrolled: start in steady state (batch >= 0)
    for k in range(periods):
        for op, t, h in zip(pattern.ops.operations, pattern.start, pattern.shift):
            begin = k * T + t
            pieces = [(begin, op.duration)]
            if periods == 1 and t + op.duration > T:  # wraps around the period: drawn in two pieces
                pieces = [(begin, T - t), (0.0, t + op.duration - T)]
            batch = _batch_text(h, None if periods == 1 else first + k)
            name = op.name if op.kind in ("F", "B", "W") else op.kind + str(op.stage)
            for left, width in pieces:
                ax.barh(rows[op.resource], width * scale, left=left * scale, height=ROW_HEIGHT,
                        color=COLORS[op.kind], edgecolor="black", linewidth=0.4)
                _label(ax, (left + width / 2) * scale, rows[op.resource], width / span * width_pt, name, batch)
    ax.set_yticks(list(rows.values()), [_row_label(r) for r in rows])
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(0, span * scale)
    for k in range(periods + 1):
        ax.axvline(k * T * scale, color="grey", linewidth=0.6, linestyle=":")


def save_gantt(pattern: PeriodicPattern, path, periods: int = 4, title: str | None = None) -> None:
    """Top: one period (bars labelled with the batch relative to the newest, n); bottom: `periods`
    periods unrolled in steady state (bars labelled with batch numbers). `title` says what was run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    rows = len(_resources(pattern))
    width_in = 12.0
    height = 0.38 * rows + 1.3
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(width_in, 2 * height + 1.4))
    scale, unit = _time_unit(pattern.period)
    axes_width_pt = 0.8 * width_in * 72  # the plot area after the row labels
    period_text = f"period T = {pattern.period * scale:.4g} {unit}"
    fig.suptitle(f"{title}\n{period_text}" if title else period_text, fontsize=11)
    _draw(top, pattern, 1, scale, axes_width_pt)
    top.set_title("one period in steady state (label: operation+stage, mini-batch; n = newest batch started)",
                  fontsize=9)
    _draw(bottom, pattern, periods, scale, axes_width_pt)
    bottom.set_title(f"{periods} periods unrolled (label: operation+stage, mini-batch number); "
                     "dotted lines: period boundaries", fontsize=9)
    for ax in (top, bottom):
        ax.set_xlabel(f"time ({unit})")
    kinds = [k for k in COLORS if any(op.kind == k for op in pattern.ops.operations)]
    handles = [Patch(facecolor=COLORS[k], edgecolor="black", linewidth=0.4, label=KIND_NAMES[k]) for k in kinds]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8, frameon=False,
               title="F = forward, B = backward, CF / CB = transfers of stage s's output / input gradient "
                     "on the link between its processors", title_fontsize=8)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
