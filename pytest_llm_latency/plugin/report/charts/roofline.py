"""The decode roofline as a bar: measured decode tok/s against the memory-bandwidth
ceiling, over efficiency bands (and the gate's minimum, when one is set).  The arithmetic
is written beside it by the page (``page.roofline_text``).  A speculating server's chart is
in engine steps/s (the judged bar) with its token rate beside it (``judged=False``: tokens per
step × steps/s, not compared with the step ceiling)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .svg import Scale, domain, el, fmt_num, message, svg_root, to_string, x_axis

WIDTH, LEFT, RIGHT, TOP = 560, 14, 24, 50
BAR, ROW = 18, 28
BAND_ROW = 18  # band labels, under the bars
#: efficiency bands: (from, to, fill, label); above 1.05 the inputs are wrong (see core.roofline.ceiling)
BANDS = ((0.0, 0.5, "#fbe9e7", "< 50%"), (0.5, 0.8, "#fff4e0", "50-80%"), (0.8, 1.0, "#e6f4ea", "80-100%"),
         (1.0, 1.05, "#f2f2f2", ""), (1.05, math.inf, "#f6e3f3", "above the ceiling: wrong inputs"))
COLOURS = ("#1f5fbf", "#d9730d")


@dataclass(frozen=True)
class Decode:
    """One measured decode rate: p50 (the gate's figure) and, when known, p95."""

    label: str
    tok_s: float                       # the rate, in the chart's unit (or ``unit``)
    tok_s_p95: float | None = None
    unit: str = ""                     # "" : the chart's unit
    judged: bool = True                # False: shown beside the ceiling, not as a share of it


def roofline_chart(title: str, ceiling_tok_s: float | None, measured: Sequence[Decode], *,
                   min_efficiency: float | None = None, width: int = WIDTH, unit: str = "tok/s",
                   axis: str = "decode tok/s per stream (1000 / TPOT)") -> str:
    """One bar per measured series (the run; a baseline when there is one), the ceiling as a
    line at 100 %, the bands behind, the gate's minimum as a dashed line."""
    measured = [m for m in measured if m.tok_s is not None and math.isfinite(m.tok_s) and m.tok_s > 0]
    if not ceiling_tok_s or not math.isfinite(ceiling_tok_s) or ceiling_tok_s <= 0 or not measured:
        return message(width, 90, title, "roofline", "roofline not evaluated for this test")
    top_value = max([ceiling_tok_s * 1.1] + [m.tok_s * 1.05 for m in measured]
                    + [m.tok_s_p95 * 1.05 for m in measured if m.tok_s_p95])
    lo, hi = domain([0.0, top_value], log=False, zero=True)
    height = TOP + ROW * len(measured) + BAND_ROW + 8 + 40
    root = svg_root(width, height, title, "roofline", len(measured), LEFT, x_min=lo, x_max=hi)
    xs = Scale(lo, hi, LEFT, width - RIGHT)
    plot_bottom = TOP + ROW * len(measured) + BAND_ROW + 8
    above = any(m.judged and m.tok_s > ceiling_tok_s for m in measured) or all(m.judged for m in measured)
    for a, b, fill, label in BANDS:
        if a > 1.0 and not above:  # only a rate not judged (tokens of a speculating server) is beyond
            label = "tokens: several per step"
        x0, x1 = xs(min(a * ceiling_tok_s, hi)), xs(min(b * ceiling_tok_s, hi))
        if x1 <= x0:
            continue
        band = el(root, "g", class_="band")
        el(band, "rect", x=x0, y=float(TOP), width=x1 - x0, height=float(plot_bottom - TOP), fill=fill)
        if label and x1 - x0 > 5.6 * len(label) + 6:
            el(band, "text", label, x=(x0 + x1) / 2, y=float(plot_bottom - 5), text_anchor="middle", fill="#666",
               font_size="10")
    x_axis(root, xs, float(plot_bottom), axis)
    ceiling = el(root, "g", class_="ceiling", data_value=repr(ceiling_tok_s))
    xc = xs(ceiling_tok_s)
    el(ceiling, "line", x1=xc, x2=xc, y1=float(TOP - 30), y2=float(plot_bottom), stroke="#222", stroke_width="2")
    el(ceiling, "text", f"ceiling {fmt_num(ceiling_tok_s)} {unit}", x=xc - 4, y=float(TOP - 20), text_anchor="end",
       fill="#222")
    if min_efficiency is not None:
        gate = el(root, "g", class_="gate", data_value=repr(min_efficiency * ceiling_tok_s))
        xg = xs(min_efficiency * ceiling_tok_s)
        el(gate, "line", x1=xg, x2=xg, y1=float(TOP - 14), y2=float(plot_bottom), stroke="#cf222e",
           stroke_width="1.5", stroke_dasharray="5 3")
        el(gate, "text", f"gate ≥ {min_efficiency:.0%}", x=xg - 4, y=float(TOP - 4), text_anchor="end",
           fill="#cf222e")
    for i, m in enumerate(measured):
        y = TOP + 5 + ROW * i
        g = el(root, "g", class_="series", data_label=m.label, data_value=repr(m.tok_s))
        bar = xs(m.tok_s) - xs(0.0)
        el(g, "rect", x=xs(0.0), y=float(y), width=bar, height=float(BAR), fill=COLOURS[i % len(COLOURS)],
           fill_opacity="0.9" if m.judged else "0.45")
        text = (f"{m.label}: {fmt_num(m.tok_s)} {m.unit or unit} = {m.tok_s / ceiling_tok_s:.0%}" if m.judged
                else f"{m.label}: {fmt_num(m.tok_s)} {m.unit or unit}")
        inside = bar > 6.4 * len(text) + 8
        el(g, "text", text, x=xs(0.0) + 5 if inside else xs(m.tok_s) + 5, y=float(y + 13),
           fill="#fff" if inside else "#222", font_weight="600")
        if m.tok_s_p95:
            xp = xs(m.tok_s_p95)
            el(g, "line", x1=xp, x2=xp, y1=float(y - 2), y2=float(y + BAR + 2), stroke="#222", stroke_width="2",
               class_="p95")
    return to_string(root)
