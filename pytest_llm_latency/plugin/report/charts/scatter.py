"""TTFT against prompt length: one dot per request (x = prompt tokens, y = TTFT ms), failed
requests marked at the top edge (their TTFT is a miss) or where their first token came, the
prompt-length buckets of a ``ttft_<stat>_by_prompt`` budget as vertical lines, and each bucket's
budget as a horizontal step over its range."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .svg import Scale, domain, el, fmt_num, message, svg_root, to_string, x_axis, y_axis

WIDTH, HEIGHT = 560, 300
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 30, 70
OK, FAILED, BUDGET = "#1f5fbf", "#cf222e", "#cf222e"


@dataclass(frozen=True)
class PromptPoint:
    """One request: its prompt length, its TTFT (None: a miss, no first token) and whether it failed."""
    prompt_tokens: int
    ttft_ms: float | None
    failed: bool = False


@dataclass(frozen=True)
class BucketStep:
    """One bucket of a by-prompt budget: [lo, hi) prompt tokens (hi None: open top) at ``budget_ms``."""
    lo: float
    hi: float | None
    budget_ms: float
    label: str = ""


def ttft_scatter(title: str, points: Sequence[PromptPoint], steps: Sequence[BucketStep] = (), *,
                 width: int = WIDTH, height: int = HEIGHT) -> str:
    """An SVG scatter of TTFT against prompt length; the y axis starts at 0 and holds every drawn
    TTFT and budget; the x axis every prompt length and finite bucket edge."""
    if not points:
        return message(width, height, title, "scatter", "no requests with a known prompt length: nothing to draw")
    xs_vals = [float(p.prompt_tokens) for p in points] + [s.lo for s in steps] + \
              [s.hi for s in steps if s.hi is not None]
    ys_vals = [p.ttft_ms for p in points if p.ttft_ms is not None and math.isfinite(p.ttft_ms)] + \
              [s.budget_ms for s in steps]
    xlo, xhi = domain(xs_vals, log=False, zero=True)
    ylo, yhi = domain(ys_vals or [1.0], log=False, zero=True)
    xs = Scale(xlo, xhi, LEFT, width - RIGHT)
    ys = Scale(ylo, yhi, height - BOTTOM, TOP)
    root = svg_root(width, height, title, "scatter", 1, LEFT, x_min=xlo, x_max=xhi, y_min=ylo, y_max=yhi)
    x_axis(root, xs, height - BOTTOM, "prompt tokens", grid_to=TOP)
    y_axis(root, ys, LEFT, "TTFT (ms)", grid_to=width - RIGHT)
    edges = sorted({e for s in steps for e in (s.lo, s.hi) if e is not None and e > xlo})
    if edges:
        g = el(root, "g", class_="buckets")
        for e in edges:
            el(g, "line", x1=xs(e), x2=xs(e), y1=ys(ylo), y2=float(TOP), stroke="#888", stroke_dasharray="3 3",
               class_="boundary", data_value=repr(e))
    if steps:
        g = el(root, "g", class_="budget")
        for s in steps:
            y = ys(s.budget_ms)
            el(g, "line", x1=xs(s.lo), x2=xs(xhi if s.hi is None else s.hi), y1=y, y2=y, stroke=BUDGET,
               stroke_width="1.5", stroke_dasharray="5 3", class_="step", data_budget=repr(s.budget_ms),
               data_lo=repr(s.lo), data_hi="" if s.hi is None else repr(s.hi))
    g = el(root, "g", class_="series", data_label="requests", data_points=str(len(points)))
    for p in points:
        x = xs(float(p.prompt_tokens))
        if p.ttft_ms is None or not math.isfinite(p.ttft_ms):  # a miss: on the top edge
            el(g, "path", d=f"M{x - 3.5:.1f} {TOP - 3.5:.1f}l7 7m0 -7l-7 7", stroke=FAILED, stroke_width="1.6",
               class_="failed miss", data_x=repr(p.prompt_tokens))
            continue
        y = ys(p.ttft_ms)
        if p.failed:
            el(g, "path", d=f"M{x - 3.5:.1f} {y - 3.5:.1f}l7 7m0 -7l-7 7", stroke=FAILED, stroke_width="1.6",
               class_="failed", data_x=repr(p.prompt_tokens), data_y=repr(p.ttft_ms))
        else:
            el(g, "circle", cx=x, cy=y, r=2.8, fill=OK, fill_opacity="0.7", class_="ok",
               data_x=repr(p.prompt_tokens), data_y=repr(p.ttft_ms))
    failed = sum(1 for p in points if p.failed or p.ttft_ms is None)
    legend = f"{len(points)} requests" + (f", {failed} failed (×)" if failed else "")
    if steps:
        legend += "; budget per bucket: " + ", ".join(f"{s.label or fmt_num(s.lo)} {fmt_num(s.budget_ms)} ms"
                                                        for s in steps)
    el(root, "text", legend, x=float(LEFT), y=float(height - 22), fill="#444", class_="legend")
    return to_string(root)
