"""The run as a timeline: one row per request (send → first token → last token), coloured
by what became of it, and, on the same time axis below, the server's queue depth, running
requests and KV-cache usage where ``/metrics`` was scraped during the run."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from .svg import Scale, domain, el, message, svg_root, to_string, x_axis, y_axis

WIDTH = 1000
LEFT, RIGHT, TOP = 56, 56, 30

def rows_height(n: int) -> int:
    """Height of the request rows: about 2 px a request (so 200 stay apart), within 120..420."""
    return min(max(2 * n + 20, 120), 420)


METRICS_HEIGHT = 110
GAP = 46
#: request status -> (colour, legend text)
STATUS = {"ok": ("#1a7f37", "within budgets"), "over": ("#d9730d", "over a budget limit"),
          "short": ("#8c959f", "short output"), "failed": ("#cf222e", "failed")}
METRIC_COLOURS = ("#1f5fbf", "#6f42c1", "#0a7d8c", "#9a6700")


@dataclass(frozen=True)
class RequestSpan:
    """One request, times in ms on the run's axis: sent, first token, last token, end
    (None where it never got there).  ``status`` is a key of ``STATUS``."""

    send_ms: float
    first_ms: float | None
    last_ms: float | None
    end_ms: float | None
    status: str = "ok"


@dataclass(frozen=True)
class MetricSeries:
    """A server gauge over time: ``points`` are ``(t_ms, value)`` on the same axis as the
    requests.  ``fraction``: a 0..1 ratio (KV usage), drawn on the right-hand % axis."""

    label: str
    points: Sequence[tuple[float, float]]
    fraction: bool = False


def timeline_chart(title: str, spans: Sequence[RequestSpan], metrics: Sequence[MetricSeries] = (), *,
                   width: int = WIDTH, untimed: int = 0) -> str:
    """Requests (one series) plus one series per non-empty metric.  ``untimed``: requests
    that have no timestamps (failed before sending), said in the legend."""
    metrics = [s for s in metrics if any(math.isfinite(v) for _, v in s.points)]
    if not spans and not metrics:
        why = f"{untimed} request(s) failed before any timestamp" if untimed else "no requests were measured"
        return message(width, 90, title, "timeline", f"{why}: nothing to draw")
    times = [t for s in spans for t in (s.send_ms, s.first_ms, s.last_ms, s.end_ms) if t is not None]
    times += [t for s in metrics for t, _ in s.points]
    lo, hi = domain([t / 1000.0 for t in times] + [0.0], log=False, zero=True)
    rows_h = rows_height(len(spans))
    # the legend: one line for the requests, and one for the server's gauges (their labels are long)
    legend_h = 16 if spans and metrics else 0
    height = TOP + (rows_h if spans else 0) + (GAP + METRICS_HEIGHT if metrics else 0) + 58 + legend_h
    root = svg_root(width, height, title, "timeline", (1 if spans else 0) + len(metrics), LEFT, x_min=lo, x_max=hi)
    xs = Scale(lo * 1000.0, hi * 1000.0, LEFT, width - RIGHT)
    sec = Scale(lo, hi, LEFT, width - RIGHT)
    y = TOP
    if spans:
        _requests(root, spans, xs, y, rows_h)
        y += rows_h
        if not metrics:
            x_axis(root, sec, y, "seconds since the first request was sent", grid_to=TOP)
    if metrics:
        if spans:
            y += GAP
            x_axis(root, sec, y - GAP, "", grid_to=None)
        _metrics(root, metrics, xs, y)
        y += METRICS_HEIGHT
        x_axis(root, sec, y, "seconds since the first request was sent", grid_to=y - METRICS_HEIGHT)
    _legend(root, spans, metrics, height - 12 - legend_h, untimed, line_h=legend_h)
    return to_string(root)


def _requests(root, spans: Sequence[RequestSpan], xs: Scale, top: float, rows_h: int) -> None:
    """Rows in send order: a thin line while waiting for the first token, a thick one while
    tokens stream, an x where a failed request ended."""
    n = len(spans)
    rows = Scale(0.0, float(max(n, 1)), top + 4, top + rows_h - 4)
    thick = max(min((rows_h - 8) / max(n, 1) * 0.8, 6.0), 0.8)
    step = max(1, int(Scale(0.0, float(n), 0, 1).ticks(4)[1])) if n > 1 else 1
    numbers = [1] + list(range(step, n + 1, step))  # request numbers (1-based), row k at k - 0.5
    y_axis(root, rows, LEFT, "request # (in send order)", ticks=[k - 0.5 for k in numbers],
           fmt=lambda t: f"{t + 0.5:.0f}")
    g = el(root, "g", class_="series", data_label="requests", data_points=str(n))
    for i, s in enumerate(sorted(spans, key=lambda s: s.send_ms)):
        colour = STATUS.get(s.status, STATUS["ok"])[0]
        y = rows(i + 0.5)
        r = el(g, "g", class_=f"req {s.status}")
        wait_end = s.first_ms if s.first_ms is not None else s.end_ms
        if wait_end is not None:
            el(r, "line", x1=xs(s.send_ms), x2=xs(wait_end), y1=y, y2=y, stroke=colour, stroke_width="1.2",
               stroke_opacity="0.6")
        if s.first_ms is not None and s.last_ms is not None:
            el(r, "line", x1=xs(s.first_ms), x2=max(xs(s.last_ms), xs(s.first_ms) + 1.0), y1=y, y2=y, stroke=colour,
               stroke_width=f"{thick:.1f}")
        if s.status == "failed" and s.end_ms is not None:
            x, d = xs(s.end_ms), max(thick, 3.0)
            el(r, "path", d=f"M{x - d:.1f} {y - d:.1f}L{x + d:.1f} {y + d:.1f}M{x - d:.1f} {y + d:.1f}"
               f"L{x + d:.1f} {y - d:.1f}", stroke=colour, stroke_width="1.5")


def _metrics(root, metrics: Sequence[MetricSeries], xs: Scale, top: float) -> None:
    counts = [v for s in metrics if not s.fraction for _, v in s.points if math.isfinite(v)]
    ys = Scale(0.0, domain(counts + [1.0], log=False, zero=True)[1], top + METRICS_HEIGHT, top)
    pct = Scale(0.0, 1.0, top + METRICS_HEIGHT, top)
    if counts:
        y_axis(root, ys, LEFT, "requests", grid_to=xs.p1)
    if any(s.fraction for s in metrics):
        y_axis(root, pct, xs.p1, "KV usage", fmt=lambda t: f"{t:.0%}", ticks=[0, 0.5, 1.0], right=True)
    for i, s in enumerate(metrics):
        scale = pct if s.fraction else ys
        pts = sorted((t, v) for t, v in s.points if math.isfinite(v))
        d = "".join(f"{'M' if k == 0 else 'L'}{xs(t):.1f} {scale(v):.1f}" for k, (t, v) in enumerate(pts))
        g = el(root, "g", class_="series", data_label=s.label, data_points=str(len(pts)))
        el(g, "path", d=d, fill="none", stroke=METRIC_COLOURS[i % len(METRIC_COLOURS)], stroke_width="1.6",
           stroke_dasharray="5 3" if s.fraction else None)


def _legend(root, spans: Sequence[RequestSpan], metrics: Sequence[MetricSeries], y: float, untimed: int,
            line_h: float = 0) -> None:
    g = el(root, "g", class_="legend")
    x = float(LEFT)
    counts = {k: sum(1 for s in spans if s.status == k) for k in STATUS}
    for key, (colour, text) in STATUS.items():
        if not counts[key]:
            continue
        label = f"{text} ({counts[key]})"
        el(g, "rect", x=x, y=y - 8, width=12.0, height=8.0, fill=colour)
        el(g, "text", label, x=x + 16, y=y)
        x += 26 + 6.2 * len(label)
    if spans:
        el(g, "text", "thin: waiting for the first token · thick: streaming", x=x, y=y, fill="#666")
        x += 26 + 6.0 * 50
    if line_h:  # the gauges on a line of their own
        x, y = float(LEFT), y + line_h
    for i, s in enumerate(metrics):
        el(g, "line", x1=x, x2=x + 16, y1=y - 4, y2=y - 4, stroke=METRIC_COLOURS[i % len(METRIC_COLOURS)],
           stroke_width="2", stroke_dasharray="5 3" if s.fraction else None)
        el(g, "text", s.label, x=x + 20, y=y)
        x += 36 + 6.6 * len(s.label)
    if untimed:
        el(g, "text", f"{untimed} failed request(s) without timestamps not shown", x=x, y=y, fill="#cf222e")
