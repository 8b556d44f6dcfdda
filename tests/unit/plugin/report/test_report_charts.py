"""The report's pure chart functions: numbers in, SVG out.  Each SVG is parsed and its
geometry checked against the axis it draws (tick labels), not against the code's formulas."""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_llm_latency.plugin.report.charts import (BudgetLine, CdfSeries, Decode, Mark, MetricSeries, RequestSpan,
                                                     cdf_chart, roofline_chart, timeline_chart)
from pytest_llm_latency.plugin.report.charts.svg import domain, log_ticks, needs_log


def ecdf_points(values: list[float]) -> list[tuple[float, float]]:
    """The empirical CDF the page draws (``report.detail.cdf_samples``): the i-th smallest of n values
    at F = (i + 1) / n; misses (+inf) count in n but are never drawn."""
    finite = sorted(v for v in values if math.isfinite(v))
    return [(v, (i + 1) / len(values)) for i, v in enumerate(finite)]


def parse(svg: str) -> ET.Element:
    """The SVG with its namespace dropped from tag names (``g``, not ``{http://...}g``)."""
    root = ET.fromstring(svg)
    for e in root.iter():
        e.tag = e.tag.rpartition("}")[2]
    return root


def series(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter("g") if g.get("class") == "series"]


def tick_x(root: ET.Element, label: str) -> float:
    """The x of the x-axis tick labelled ``label`` (the axis the reader sees)."""
    for g in root.iter("g"):
        if g.get("class") == "axis x":
            for t in g.iter("text"):
                if t.get("class") == "tick" and t.text == label:
                    return float(t.get("x"))
    raise AssertionError(f"no x tick labelled {label!r}")


def path_points(d: str) -> list[tuple[str, float]]:
    return [(c, float(v)) for c, v in re.findall(r"([MLHV])\s*(-?[\d.]+)", d)]


# ---------------------------------------------------------------------------- CDF
def test_cdf_axis_holds_every_value_and_budget_and_the_budget_line_sits_on_its_tick():
    pts = ecdf_points([110.0, 120.0, 130.0, 150.0, 180.0])
    svg = parse(cdf_chart("TTFT", "ms", [CdfSeries("run", pts, 5)], [BudgetLine("p95", 200.0, 0.95)],
                          [Mark("p50", 130.0, 0.5)]))
    lo, hi = float(svg.get("data-x-min")), float(svg.get("data-x-max"))
    assert svg.get("data-log") == "0"                              # 110..200: no log needed
    assert lo <= 110.0 and hi >= 200.0 and hi - lo < 200           # holds data + budget, not from 0
    line = next(g for g in svg.iter("g") if g.get("class") == "budget").find("line")
    assert float(line.get("x1")) == float(line.get("x2")) == pytest.approx(tick_x(svg, "200"), abs=0.15)
    tick = next(g for g in svg.iter("g") if g.get("class") == "budget").findall("line")[1]  # at F = 0.95
    y0, y1 = float(line.get("y1")), float(line.get("y2")) + 4     # the line spans F = 0 .. 1
    assert float(tick.get("y1")) == pytest.approx(y0 + 0.95 * (y1 - y0), abs=0.15)
    assert len(series(svg)) == 1 and svg.get("data-series") == "1"


def test_cdf_goes_log_when_the_range_needs_it_and_the_budget_still_sits_on_its_tick():
    pts = ecdf_points([2.0, 3.0, 5.0, 8.0, 400.0])               # a long tail
    svg = parse(cdf_chart("ITL", "ms", [CdfSeries("run", pts, 5)], [BudgetLine("p99", 100.0, 0.99)]))
    assert svg.get("data-log") == "1"
    assert float(svg.get("data-x-min")) <= 2.0 and float(svg.get("data-x-max")) >= 400.0
    line = next(g for g in svg.iter("g") if g.get("class") == "budget").find("line")
    assert float(line.get("x1")) == pytest.approx(tick_x(svg, "100"), abs=0.15)
    # on a log axis 10 sits halfway between 1 and 100 (pixel distances, from the ticks)
    assert tick_x(svg, "10") - tick_x(svg, "2") == pytest.approx(tick_x(svg, "100") - tick_x(svg, "20"), abs=0.2)


def test_cdf_curve_ends_below_one_with_misses_and_steps_at_each_value():
    values = [10.0, 20.0, math.inf, math.inf]
    svg = parse(cdf_chart("TTFT", "ms", [CdfSeries("run", ecdf_points(values), 4, misses=2)],
                          marks=[Mark("p99", None, 0.99)]))
    d = series(svg)[0].find("path").get("d")
    pts = path_points(d)
    ys = [v for c, v in pts if c == "V"]
    y_axis = {t.text: float(t.get("y")) - 4 for g in svg.iter("g") if g.get("class") == "axis y"
              for t in g.iter("text") if t.get("class") == "tick"}
    assert ys[-1] == pytest.approx(y_axis["0.5"], abs=0.15)           # F = 2/4: the misses are not drawn
    assert [v for c, v in pts if c == "H"][0] == pytest.approx(tick_x(svg, "20"), abs=0.15)
    mark = next(c for c in svg.iter("circle") if c.get("data-q") == "0.99")
    assert float(mark.get("cx")) == pytest.approx(float(svg.get("width")) - 16, abs=0.5)  # inf: at the right edge
    assert "2 missed" in ET.tostring(svg, encoding="unicode")


def test_cdf_empty_sample_is_a_chart_that_says_so_with_no_series():
    svg = parse(cdf_chart("TPOT", "ms", [CdfSeries("run", [], 0)]))
    assert svg.get("data-series") == "0" and not series(svg)
    assert "no samples" in ET.tostring(svg, encoding="unicode")
    only_misses = parse(cdf_chart("TPOT", "ms", [CdfSeries("run", [], 3, misses=3)]))
    assert "every sample was a miss" in ET.tostring(only_misses, encoding="unicode")


def test_cdf_single_sample_gets_a_real_range_around_it():
    svg = parse(cdf_chart("TTFT", "ms", [CdfSeries("run", [(42.0, 1.0)], 1)]))
    lo, hi = float(svg.get("data-x-min")), float(svg.get("data-x-max"))
    assert lo < 42.0 < hi and hi - lo > 1.0
    pts = path_points(series(svg)[0].find("path").get("d"))
    ticks = [(float(t.text), float(t.get("x"))) for g in svg.iter("g") if g.get("class") == "axis x"
             for t in g.iter("text") if t.get("class") == "tick"]
    (v0, x0), (v1, x1) = ticks[0], ticks[-1]
    assert pts[0] == ("M", pytest.approx(x0 + (42.0 - v0) * (x1 - x0) / (v1 - v0), abs=0.2))
    assert len([c for c, _ in pts if c == "V"]) == 1                 # one step, up to F = 1


def test_cdf_overlays_a_baseline_as_a_second_series():
    run = CdfSeries("this run", ecdf_points([10.0, 11.0, 12.0]), 3)
    base = CdfSeries("baseline main@abc", ecdf_points([20.0, 22.0, 24.0]), 3)
    svg = parse(cdf_chart("TTFT", "ms", [run, base], [BudgetLine("p95", 30.0, 0.95)]))
    got = series(svg)
    assert [g.get("data-label") for g in got] == ["this run", "baseline main@abc"]
    strokes = {g.find("path").get("stroke") for g in got}
    assert len(strokes) == 2                                          # told apart by colour (and dash)
    assert float(svg.get("data-x-min")) <= 10.0 and float(svg.get("data-x-max")) >= 30.0
    first_x = [path_points(g.find("path").get("d"))[0][1] for g in got]
    assert first_x[0] == pytest.approx(tick_x(svg, "10"), abs=0.15) and first_x[1] == pytest.approx(
        tick_x(svg, "20"), abs=0.15)


def test_chart_text_is_escaped():
    svg = cdf_chart("<script>alert(1)</script>", "ms", [CdfSeries("a&b <i>", [(1.0, 1.0)], 1)])
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a&amp;b &lt;i&gt;" in svg
    parse(svg)  # still well-formed


# ---------------------------------------------------------------------------- axes
def test_log_decision_and_ranges():
    assert needs_log([1.0, 25.0]) and not needs_log([1.0, 19.0])
    assert not needs_log([0.0, 1000.0])                               # zero cannot sit on a log axis
    assert domain([3.0, 470.0], log=True) == (2.0, 500.0)             # 1-2-5 bounds
    lo, hi = domain([0.31, 0.36], log=False)
    assert lo <= 0.31 and hi >= 0.36 and hi - lo <= 0.1
    assert log_ticks(2.0, 500.0) == [2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0]


# ---------------------------------------------------------------------------- timeline
def _spans():
    return [RequestSpan(0.0, 40.0, 100.0, 101.0, "ok"), RequestSpan(110.0, 300.0, 400.0, 401.0, "over"),
            RequestSpan(410.0, 450.0, 470.0, 471.0, "short"), RequestSpan(480.0, None, None, 900.0, "failed")]


def test_timeline_draws_each_request_on_the_time_axis_coloured_by_status():
    svg = parse(timeline_chart("Requests", _spans()))
    assert svg.get("data-series") == "1"
    reqs = [g for g in svg.iter("g") if (g.get("class") or "").startswith("req ")]
    assert [g.get("class") for g in reqs] == ["req ok", "req over", "req short", "req failed"]
    colours = {g.get("class"): g.find("line").get("stroke") for g in reqs}
    assert len(set(colours.values())) == 4
    # request 2: waits 110 -> 300 ms, streams 300 -> 400 ms; the axis is in seconds
    wait, stream = reqs[1].findall("line")
    s0, s1 = tick_x(svg, "0"), tick_x(svg, "0.2")
    at = lambda ms: s0 + (s1 - s0) * ms / 200.0  # noqa: E731
    assert float(wait.get("x1")) == pytest.approx(at(110.0), abs=0.2)
    assert float(stream.get("x1")) == pytest.approx(at(300.0), abs=0.2)
    assert float(stream.get("x2")) == pytest.approx(at(400.0), abs=0.2)
    assert reqs[3].find("path") is not None                           # the failed one ends with an x
    assert float(svg.get("data-x-max")) >= 0.9


def test_timeline_metrics_share_the_time_axis_as_extra_series():
    metrics = [MetricSeries("queue depth", [(0.0, 0.0), (200.0, 3.0), (600.0, 1.0)]),
               MetricSeries("running requests", [(0.0, 1.0), (600.0, 4.0)]),
               MetricSeries("KV usage", [(0.0, 0.1), (600.0, 0.8)], fraction=True)]
    svg = parse(timeline_chart("Requests", _spans(), metrics))
    assert svg.get("data-series") == "4"
    got = {g.get("data-label"): g for g in series(svg)}
    assert set(got) == {"requests", "queue depth", "running requests", "KV usage"}
    s0, s1 = tick_x(svg, "0"), tick_x(svg, "0.2")
    q = path_points(got["queue depth"].find("path").get("d"))
    assert q[1] == ("L", pytest.approx(s0 + (s1 - s0) * 200.0 / 200.0, abs=0.2))  # (200 ms, 3): same x scale
    kv_d = got["KV usage"].find("path").get("d")
    kv_last_y = float(re.findall(r"L[\d.]+ ([\d.]+)", kv_d)[-1])
    right_axis = [g for g in svg.iter("g") if g.get("class") == "axis y"][-1]
    pct = {t.text: float(t.get("y")) - 4 for t in right_axis.iter("text") if t.get("class") == "tick"}
    assert kv_last_y == pytest.approx(pct["0%"] + 0.8 * (pct["100%"] - pct["0%"]), abs=0.2)  # 0.8 on the % axis


def test_timeline_with_only_metrics_or_nothing():
    only = parse(timeline_chart("Requests", [], [MetricSeries("queue depth", [(0.0, 1.0), (10.0, 2.0)])]))
    assert only.get("data-series") == "1"
    empty = parse(timeline_chart("Requests", [], untimed=3))
    assert empty.get("data-series") == "0"
    assert "3 request(s) failed before any timestamp" in ET.tostring(empty, encoding="unicode")


# ---------------------------------------------------------------------------- roofline
def test_roofline_bar_ceiling_and_gate_on_the_tok_s_axis():
    svg = parse(roofline_chart("Decode", 200.0, [Decode("this run", 140.0, 120.0)], min_efficiency=0.5))
    assert svg.get("data-series") == "1"
    bar = series(svg)[0].find("rect")
    x0 = tick_x(svg, "0")
    per = (tick_x(svg, "100") - x0) / 100.0
    assert float(bar.get("x")) == pytest.approx(x0, abs=0.2)
    assert float(bar.get("width")) == pytest.approx(140.0 * per, abs=0.3)
    ceiling = next(g for g in svg.iter("g") if g.get("class") == "ceiling").find("line")
    assert float(ceiling.get("x1")) == pytest.approx(tick_x(svg, "200"), abs=0.2)
    gate = next(g for g in svg.iter("g") if g.get("class") == "gate").find("line")
    assert float(gate.get("x1")) == pytest.approx(tick_x(svg, "100"), abs=0.2)       # 0.5 x 200
    text = ET.tostring(svg, encoding="unicode")
    assert "140 tok/s = 70%" in text
    p95 = next(ln for ln in series(svg)[0].iter("line") if ln.get("class") == "p95")
    assert float(p95.get("x1")) == pytest.approx(x0 + 120.0 * per, abs=0.3)


def test_roofline_with_a_baseline_and_without_figures():
    two = parse(roofline_chart("Decode", 200.0, [Decode("this run", 140.0), Decode("baseline", 150.0)]))
    assert two.get("data-series") == "2"
    none = parse(roofline_chart("Decode", None, [Decode("this run", 140.0)]))
    assert none.get("data-series") == "0" and "not evaluated" in ET.tostring(none, encoding="unicode")
