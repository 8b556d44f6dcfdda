"""SVG building blocks for the report's charts: scales with readable ticks, and elements.

Elements are built with the standard library's ``xml.etree.ElementTree``, so every text and
attribute is escaped by the serializer, never by hand.  Pure: numbers in, strings out.
"""
from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from typing import Iterable

SVG_NS = "http://www.w3.org/2000/svg"
#: a range at least this wide (max / min) is drawn on a log axis
LOG_RATIO = 20.0
FONT = 11


def px(v: float) -> str:
    """A coordinate as written in the SVG: one decimal, no trailing zeros (keeps files small)."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else s


def fmt_num(v: float) -> str:
    """A tick or label value: ``0.25``, ``3.5``, ``40``, ``1500``, ``12k``."""
    a = abs(v)
    if a >= 10000:
        return f"{v / 1000:.0f}k"
    if a >= 100 or v == int(v):
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}".rstrip("0").rstrip(".")
    if a >= 1:
        return f"{v:.2f}".rstrip("0").rstrip(".")
    return f"{v:.3g}"


def _nice_step(span: float, n: int) -> float:
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


@dataclass(frozen=True)
class Scale:
    """Maps the domain ``[lo, hi]`` onto pixels ``[p0, p1]``, linearly or in log10."""

    lo: float
    hi: float
    p0: float
    p1: float
    log: bool = False

    def __call__(self, v: float) -> float:
        if self.log:
            v = max(v, self.lo)
            f = (math.log10(v) - math.log10(self.lo)) / (math.log10(self.hi) - math.log10(self.lo))
        else:
            f = (v - self.lo) / (self.hi - self.lo)
        return self.p0 + f * (self.p1 - self.p0)

    def ticks(self, n: int = 5) -> list[float]:
        if self.log:
            return log_ticks(self.lo, self.hi)
        step = _nice_step(self.hi - self.lo, n)
        first = math.ceil(self.lo / step - 1e-9) * step
        out, k = [], 0
        while first + k * step <= self.hi + step * 1e-9:
            out.append(round(first + k * step, 12))
            k += 1
        return out


def log_ticks(lo: float, hi: float) -> list[float]:
    """1-2-5 ticks per decade when the range spans few decades, powers of ten otherwise."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    mults = (1, 2, 5) if len(decades) <= 4 else (1,)
    return [m * 10.0 ** d for d in decades for m in mults if lo * (1 - 1e-9) <= m * 10.0 ** d <= hi * (1 + 1e-9)]


def needs_log(values: Iterable[float]) -> bool:
    """Log-x when the positive values span at least ``LOG_RATIO`` (a long tail, or a budget
    far from the bulk); never with a zero or negative value."""
    vals = [v for v in values if math.isfinite(v)]
    if not vals or min(vals) <= 0:
        return False
    return max(vals) / min(vals) >= LOG_RATIO


def domain(values: Iterable[float], *, log: bool, zero: bool = False) -> tuple[float, float]:
    """An axis range that holds every value, widened to readable bounds: 1, 2 or 5 x 10^k on
    a log axis, whole tick steps on a linear one (from 0 when ``zero``).  A single value (or none)
    gets a range around it, never an empty one."""
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return (0.0, 1.0)
    lo, hi = min(vals), max(vals)
    if log:
        return _log_floor(lo), _log_ceil(hi)
    if zero:
        lo = min(lo, 0.0)
    if hi - lo <= 1e-12 * max(abs(hi), 1.0):
        pad = abs(hi) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad
        if zero or (vals and min(vals) >= 0):
            lo = max(lo, 0.0)
    step = _nice_step(hi - lo, 5)
    return math.floor(lo / step + 1e-9) * step, math.ceil(hi / step - 1e-9) * step


def _log_floor(v: float) -> float:
    """The largest 1, 2 or 5 x 10^k at or below ``v``."""
    d = math.floor(math.log10(v) + 1e-9)
    return max(m * 10.0 ** d for m in (1, 2, 5) if m * 10.0 ** d <= v * (1 + 1e-9))


def _log_ceil(v: float) -> float:
    """The smallest 1, 2 or 5 x 10^k at or above ``v``."""
    d = math.floor(math.log10(v) + 1e-9)
    return min(m * 10.0 ** d for m in (1, 2, 5, 10) if m * 10.0 ** d >= v * (1 - 1e-9))


def svg_root(width: int, height: int, label: str, kind: str, series: int, title_x: float | None = None,
             **bounds: float) -> ET.Element:
    """The chart's ``<svg>``: scalable (viewBox), named for screen readers, and tagged with
    its kind and how many data series it draws (``data-series``; one ``g.series`` each); its axis
    ``bounds`` as ``data-*`` (``x_min=`` is ``data-x-min``) and, with ``title_x``, the label drawn as its title."""
    root = ET.Element("svg", {"xmlns": SVG_NS, "viewBox": f"0 0 {width} {height}", "width": str(width),
                              "height": str(height), "role": "img", "aria-label": label,
                              "class": f"chart {kind}", "data-series": str(series),
                              "font-family": "system-ui, sans-serif", "font-size": str(FONT)})
    ET.SubElement(root, "title").text = label
    for k, v in bounds.items():
        root.set("data-" + k.replace("_", "-"), repr(v))
    if title_x is not None:
        el(root, "text", label, x=float(title_x), y=16.0, font_weight="600", font_size="13")
    return root


def el(parent: ET.Element, tag: str, text: str | None = None, **attrs) -> ET.Element:
    """A child element; ``class_`` is ``class``, ``_`` in other names is ``-``, floats are ``px``."""
    a = {"class" if k == "class_" else k.replace("_", "-"): px(v) if isinstance(v, float) else str(v)
         for k, v in attrs.items() if v is not None}
    e = ET.SubElement(parent, tag, a)
    if text is not None:
        e.text = text
    return e


def to_string(root: ET.Element) -> str:
    return ET.tostring(root, encoding="unicode", short_empty_elements=True)


def message(width: int, height: int, label: str, kind: str, text: str) -> str:
    """A chart with nothing to draw: the frame and a sentence saying why (zero series)."""
    root = svg_root(width, height, label, kind, 0)
    el(root, "rect", x=0.5, y=0.5, width=width - 1.0, height=height - 1.0, fill="#fafafa", stroke="#ddd")
    el(root, "text", label, x=12.0, y=20.0, font_weight="600")
    el(root, "text", text, x=width / 2, y=height / 2, text_anchor="middle", fill="#666", class_="empty")
    return to_string(root)


def x_axis(parent: ET.Element, scale: Scale, y: float, label: str, fmt=fmt_num, grid_to: float | None = None) -> None:
    """Ticks and labels below ``y`` (and light grid lines up to ``grid_to``), then the axis title."""
    g = el(parent, "g", class_="axis x")
    el(g, "line", x1=scale.p0, x2=scale.p1, y1=y, y2=y, stroke="#888")
    for t in scale.ticks():
        x = scale(t)
        if grid_to is not None:
            el(g, "line", x1=x, x2=x, y1=grid_to, y2=y, stroke="#eee")
        el(g, "line", x1=x, x2=x, y1=y, y2=y + 4, stroke="#888")
        el(g, "text", fmt(t), x=x, y=y + 15, text_anchor="middle", fill="#444", class_="tick")
    el(g, "text", label, x=(scale.p0 + scale.p1) / 2, y=y + 30, text_anchor="middle", fill="#222")


def y_axis(parent: ET.Element, scale: Scale, x: float, label: str | None, fmt=fmt_num, ticks=None,
           grid_to: float | None = None, right: bool = False) -> None:
    g = el(parent, "g", class_="axis y")
    el(g, "line", x1=x, x2=x, y1=scale.p0, y2=scale.p1, stroke="#888")
    d = 4 if right else -4
    for t in ticks if ticks is not None else scale.ticks(4):
        y = scale(t)
        if grid_to is not None:
            el(g, "line", x1=x, x2=grid_to, y1=y, y2=y, stroke="#eee")
        el(g, "line", x1=x, x2=x + d, y1=y, y2=y, stroke="#888")
        el(g, "text", fmt(t), x=x + 3 * d / 2, y=y + 4, text_anchor="start" if right else "end", fill="#444",
           class_="tick")
    if label:
        mid = (scale.p0 + scale.p1) / 2
        tx = x + (38 if right else -38)
        el(g, "text", label, x=tx, y=mid, text_anchor="middle", fill="#222",
           transform=f"rotate({90 if right else -90} {px(tx)} {px(mid)})")
