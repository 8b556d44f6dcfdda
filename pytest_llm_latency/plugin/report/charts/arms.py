"""A server sweep's arms: one labelled dot per arm at (TTFT p95, ITL or stall p99), filled where the arm met
every budget, ringed where it is the recommended one, a cross where it did not; the budgets on those two
figures, when the workload has them, as dashed lines.  Built on the same SVG pieces as every chart here."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .svg import Scale, domain, el, message, svg_root, to_string, x_axis, y_axis

WIDTH, HEIGHT = 560, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 20, 30, 70
MEETS, MISSES, BUDGET = "#1a7f37", "#cf222e", "#cf222e"


@dataclass(frozen=True)
class ArmPoint:
    """One arm: its name, TTFT p95 and ITL (or stall) p99 in ms (None: a miss or not measured), its verdict
    and whether it is the recommended one."""
    name: str
    x_ms: float | None
    y_ms: float | None
    verdict: str
    recommended: bool = False


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def arms_chart(title: str, points: Sequence[ArmPoint], *, y_label: str = "ITL p99 (ms)",
               x_budget: float | None = None, y_budget: float | None = None,
               width: int = WIDTH, height: int = HEIGHT) -> str:
    """An SVG of the arms; arms without both figures are listed in the legend, not drawn."""
    drawn = [p for p in points if _finite(p.x_ms) and _finite(p.y_ms)]
    if not drawn:
        return message(width, height, title, "arms", "no arm has both figures: nothing to draw")
    xs_vals = [p.x_ms for p in drawn if p.x_ms is not None] + ([x_budget] if x_budget else [])
    ys_vals = [p.y_ms for p in drawn if p.y_ms is not None] + ([y_budget] if y_budget else [])
    xlo, xhi = domain(xs_vals, log=False, zero=True)
    ylo, yhi = domain(ys_vals, log=False, zero=True)
    xs, ys = Scale(xlo, xhi, LEFT, width - RIGHT), Scale(ylo, yhi, height - BOTTOM, TOP)
    root = svg_root(width, height, title, "arms", 1, LEFT, x_min=xlo, x_max=xhi, y_min=ylo, y_max=yhi)
    x_axis(root, xs, height - BOTTOM, "TTFT p95 (ms)", grid_to=TOP)
    y_axis(root, ys, LEFT, y_label, grid_to=width - RIGHT)
    g = el(root, "g", class_="budget")
    if x_budget:
        el(g, "line", x1=xs(x_budget), x2=xs(x_budget), y1=ys(ylo), y2=float(TOP), stroke=BUDGET,
           stroke_dasharray="5 3", class_="x-budget", data_budget=repr(x_budget))
    if y_budget:
        el(g, "line", x1=xs(xlo), x2=xs(xhi), y1=ys(y_budget), y2=ys(y_budget), stroke=BUDGET,
           stroke_dasharray="5 3", class_="y-budget", data_budget=repr(y_budget))
    g = el(root, "g", class_="series", data_label="arms", data_points=str(len(drawn)))
    for p in drawn:
        assert p.x_ms is not None and p.y_ms is not None
        x, y = xs(p.x_ms), ys(p.y_ms)
        meets = p.verdict == "pass"
        data = {"data_arm": p.name, "data_x": repr(p.x_ms), "data_y": repr(p.y_ms), "data_verdict": p.verdict}
        if meets:
            el(g, "circle", cx=x, cy=y, r=4.5, fill=MEETS, class_="arm meets", **data)
        else:
            el(g, "path", d=f"M{x - 4:.1f} {y - 4:.1f}l8 8m0 -8l-8 8", stroke=MISSES, stroke_width="1.8",
               class_="arm misses", **data)
        if p.recommended:
            el(g, "circle", cx=x, cy=y, r=8.0, fill="none", stroke=MEETS, stroke_width="1.5", class_="recommended")
        el(g, "text", p.name + (" (recommended)" if p.recommended else ""), x=x + 9, y=y - 6, fill="#222",
           class_="arm-label")
    left_out = [p.name for p in points if p not in drawn]
    legend = "●: meets every budget, ×: does not; ring: recommended"
    if left_out:
        legend += f"; not drawn (a figure missing): {', '.join(left_out)}"
    el(root, "text", legend, x=float(LEFT), y=float(height - 22), fill="#444", class_="legend")
    return to_string(root)
