"""TTFT against prompt length (``charts/scatter.py``) and where the report shows it (``page.prompt_scatter``):
the SVG is parsed and each dot, bucket edge and budget step checked against the axis ticks it draws."""
from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from pytest_llm_latency.plugin.report.charts import BucketStep, PromptPoint, ttft_scatter
from pytest_llm_latency.plugin.report.page import prompt_scatter


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    for e in root.iter():
        e.tag = e.tag.rpartition("}")[2]
    return root


def tick(root: ET.Element, axis: str, label: str) -> float:
    for g in root.iter("g"):
        if g.get("class") == f"axis {axis}":
            for t in g.iter("text"):
                if t.get("class") == "tick" and t.text == label:
                    return float(t.get("x" if axis == "x" else "y")) - (0 if axis == "x" else 4)
    raise AssertionError(f"no {axis} tick labelled {label!r}")


def by_class(root: ET.Element, cls: str) -> list[ET.Element]:
    return [e for e in root.iter() if cls in (e.get("class") or "").split()]


POINTS = [PromptPoint(100, 200.0), PromptPoint(1000, 500.0), PromptPoint(1500, 800.0, failed=True),
          PromptPoint(2000, None, failed=True)]
STEPS = [BucketStep(0, 1000, 300.0, "ttft_p95_by_prompt[<1000]"), BucketStep(1000, 2000, 1000.0, "[1000..<2000]")]


def test_each_request_is_a_dot_at_its_prompt_length_and_ttft():
    root = parse(ttft_scatter("TTFT against prompt length", POINTS, STEPS))
    assert root.get("class") == "chart scatter" and root.get("data-series") == "1"
    dots = by_class(root, "ok")
    assert [(d.get("data-x"), d.get("data-y")) for d in dots] == [("100", "200.0"), ("1000", "500.0")]
    second = dots[1]
    assert float(second.get("cx")) == pytest.approx(tick(root, "x", "1000"), abs=0.06)
    assert float(second.get("cy")) == pytest.approx(tick(root, "y", "500"), abs=0.06)


def test_failed_requests_are_marked_and_a_miss_sits_on_the_top_edge():
    root = parse(ttft_scatter("t", POINTS, STEPS))
    failed = by_class(root, "failed")
    assert [f.get("data-x") for f in failed] == ["1500", "2000"]
    assert "miss" in failed[1].get("class") and failed[1].get("data-y") is None
    assert "2 failed" in by_class(root, "legend")[0].text


def test_bucket_edges_are_vertical_lines_and_budgets_steps_over_their_ranges():
    root = parse(ttft_scatter("t", POINTS, STEPS))
    edges = by_class(root, "boundary")
    assert [e.get("data-value") for e in edges] == ["1000", "2000"]  # 0 is the axis itself
    assert float(edges[0].get("x1")) == pytest.approx(tick(root, "x", "1000"), abs=0.06)
    steps = by_class(root, "step")
    assert [(s.get("data-lo"), s.get("data-hi"), s.get("data-budget")) for s in steps] == [
        ("0", "1000", "300.0"), ("1000", "2000", "1000.0")]
    assert float(steps[1].get("y1")) == pytest.approx(tick(root, "y", "1000"), abs=0.06)
    assert float(steps[1].get("x2")) == pytest.approx(tick(root, "x", "2000"), abs=0.06)


def test_an_open_top_bucket_runs_to_the_right_edge_and_no_buckets_draw_no_lines():
    root = parse(ttft_scatter("t", POINTS, [BucketStep(0, 1000, 300.0), BucketStep(1000, None, 900.0)]))
    top = by_class(root, "step")[1]
    assert top.get("data-hi") == "" and float(top.get("x1")) == pytest.approx(tick(root, "x", "1000"), abs=0.06)
    assert float(top.get("x2")) == 560 - 16  # the plot's right edge (WIDTH - RIGHT)
    plain = parse(ttft_scatter("t", POINTS))
    assert by_class(plain, "boundary") == [] and by_class(plain, "step") == []


def test_no_points_is_a_chart_that_says_so():
    root = parse(ttft_scatter("t", []))
    assert root.get("data-series") == "0" and "nothing to draw" in by_class(root, "empty")[0].text


def test_the_report_shows_it_only_where_prompt_lengths_vary():
    rows = [{"prompt_tokens": 64, "ttft_ms": 10.0, "status": "ok"}, {"prompt_tokens": 2000, "ttft_ms": 90.0,
                                                                     "status": "ok"},
            {"prompt_tokens": 900, "ttft_ms": None, "status": "failed"}, {"ttft_ms": 5.0, "status": "failed"}]
    by_prompt = {"buckets": [{"key": "k[<1024]", "lo": 0, "hi": 1024, "budget_ms": 50.0, "n": 2, "status": "pass"},
                             {"key": "k[1024..<4096]", "lo": 1024, "hi": 4096, "budget_ms": 80.0, "n": 1,
                              "status": "fail"}]}
    root = parse(prompt_scatter({"requests": rows, "by_prompt": by_prompt}))
    assert [d.get("data-x") for d in by_class(root, "ok")] == ["64", "2000"]
    assert [f.get("data-x") for f in by_class(root, "failed")] == ["900"]
    assert [e.get("data-value") for e in by_class(root, "boundary")] == ["1024.0", "4096.0"]
    same = [{"prompt_tokens": 512, "ttft_ms": 10.0, "status": "ok"}] * 3
    assert prompt_scatter({"requests": same}) == "" and prompt_scatter({}) == ""
