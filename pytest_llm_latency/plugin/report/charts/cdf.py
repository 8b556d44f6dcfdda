"""The CDF of one latency metric (TTFT, TPOT or ITL): one step curve per series (the
run, and a baseline or the other arm of an A/B pair when there is one), the budget lines,
and the percentile points the terminal reports."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .svg import Scale, domain, el, fmt_num, message, needs_log, svg_root, to_string, x_axis, y_axis

WIDTH, HEIGHT = 386, 296
LEFT, RIGHT, TOP, BOTTOM = 40, 16, 30, 92
#: series colours, in order: the run, then the baseline / B arm
COLOURS = ("#1f5fbf", "#d9730d", "#6f42c1")
DASHES = (None, "6 3", "2 2")


@dataclass(frozen=True)
class CdfSeries:
    """One curve: ``points`` are ``(value, F)`` with ascending values and F in (0, 1].
    ``misses`` of the ``n`` samples were failed requests (+inf): the curve stops below 1."""

    label: str
    points: Sequence[tuple[float, float]]
    n: int
    misses: int = 0


@dataclass(frozen=True)
class BudgetLine:
    """A budget as a vertical line at ``value``; ``q`` is the fraction it applies to
    (0.95 for a p95 budget), drawn as a tick on the line; None for mean/max."""

    label: str
    value: float
    q: float | None = None


@dataclass(frozen=True)
class Mark:
    """A percentile the terminal reports: ``(value, q)`` on the curve; ``value`` None when it
    is a miss (``inf``), shown at the right edge."""

    label: str
    value: float | None
    q: float


def cdf_chart(title: str, unit: str, series: Sequence[CdfSeries], budgets: Sequence[BudgetLine] = (),
              marks: Sequence[Mark] = (), *, width: int = WIDTH, height: int = HEIGHT, empty: str = "") -> str:
    """An SVG CDF chart.  The x range holds every drawn value, budget and mark; it is log10
    when that range spans ``svg.LOG_RATIO`` or more.  With no points at all, a chart that
    says so (zero series): ``empty``, or why it is empty."""
    drawn = [s for s in series if s.points]
    if not drawn:
        why = empty or ("no samples" if not any(s.n for s in series) else "every sample was a miss (failed request)")
        return message(width, height, title, "cdf", f"{why}: nothing to draw")
    values = [x for s in drawn for x, _ in s.points] + [b.value for b in budgets] + \
             [m.value for m in marks if m.value is not None]
    values = [v for v in values if math.isfinite(v)]
    log = needs_log(values)
    lo, hi = domain(values, log=log)
    xs = Scale(lo, hi, LEFT, width - RIGHT, log=log)
    ys = Scale(0.0, 1.0, height - BOTTOM, TOP)
    root = svg_root(width, height, title, "cdf", len(drawn), LEFT, x_min=lo, x_max=hi)
    root.set("data-log", "1" if log else "0")
    x_axis(root, xs, height - BOTTOM, f"{title} ({unit}{', log scale' if log else ''})", grid_to=TOP)
    y_axis(root, ys, LEFT, None, fmt=lambda t: f"{t:g}", ticks=[0, 0.25, 0.5, 0.75, 1.0],
           grid_to=width - RIGHT)
    for b in budgets:
        g = el(root, "g", class_="budget", data_value=repr(b.value))
        x = xs(b.value)
        el(g, "line", x1=x, x2=x, y1=ys(0), y2=ys(1) - 4, stroke="#cf222e", stroke_width="1.5",
           stroke_dasharray="5 3")
        if b.q is not None:
            el(g, "line", x1=x - 5, x2=x + 5, y1=ys(b.q), y2=ys(b.q), stroke="#cf222e", stroke_width="1.5")
        near_right = x > width - RIGHT - 60
        el(g, "text", f"{b.label} budget", x=x - 3 if near_right else x + 3, y=float(TOP + 10 + 12 * budgets.index(b)),
           text_anchor="end" if near_right else "start", fill="#cf222e", font_size="10")
    for i, s in enumerate(drawn):
        colour, dash = COLOURS[i % len(COLOURS)], DASHES[i % len(DASHES)]
        g = el(root, "g", class_="series", data_label=s.label, data_points=str(len(s.points)))
        el(g, "path", d=_step_path(s.points, xs, ys), fill="none", stroke=colour, stroke_width="1.8",
           stroke_dasharray=dash, stroke_linejoin="round")
    if marks:
        gm = el(root, "g", class_="marks")
        for m in marks:
            x = xs(m.value) if m.value is not None else width - RIGHT
            y = ys(m.q)
            el(gm, "circle", cx=x, cy=y, r=3.2, fill="#fff" if m.value is None else COLOURS[0], stroke=COLOURS[0],
               stroke_width="1.2", class_="mark", data_q=repr(m.q))
    _legend(root, drawn, budgets, marks, unit, height, width)
    return to_string(root)


def _step_path(points: Sequence[tuple[float, float]], xs: Scale, ys: Scale) -> str:
    """A right-continuous step: up at each value to its F, then across to the next value."""
    x0, _ = points[0]
    parts = [f"M{xs(x0):.1f} {ys(0):.1f}"]
    for (_x, f), nxt in zip(points, list(points[1:]) + [None]):
        parts.append(f"V{ys(f):.1f}")
        if nxt is not None:
            parts.append(f"H{xs(nxt[0]):.1f}")
    return "".join(parts)


def _legend(root, drawn: Sequence[CdfSeries], budgets: Sequence[BudgetLine], marks: Sequence[Mark], unit: str,
            height: int, width: int) -> None:
    """Below the axis: the series (n, misses), then the percentile values and the budgets."""
    g = el(root, "g", class_="legend")
    y = height - 46
    x = float(LEFT)
    for i, s in enumerate(drawn):
        colour = COLOURS[i % len(COLOURS)]
        el(g, "line", x1=x, x2=x + 16, y1=y - 4, y2=y - 4, stroke=colour, stroke_width="2",
           stroke_dasharray=DASHES[i % len(DASHES)])
        text = f"{s.label} (n={s.n}{f', {s.misses} missed' if s.misses else ''})"
        el(g, "text", text, x=x + 20, y=float(y))
        x += 28 + 6.2 * len(text)
    parts = [f"{m.label} {'inf' if m.value is None else fmt_num(m.value)}" for m in marks]
    if parts:
        el(g, "text", f"{', '.join(parts)} ({unit})", x=float(LEFT), y=float(y + 15), fill="#444", class_="values")
    if budgets:
        text = "budget " + ", ".join(f"{b.label} {fmt_num(b.value)}" for b in budgets) + f" ({unit})"
        el(g, "text", text, x=float(LEFT), y=float(y + 30), fill="#cf222e", class_="budgets")
