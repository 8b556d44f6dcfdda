"""The ``stall`` part in the reports: valid against the shipped results schema, flat JUnit properties
for its p99 and max, one terminal line and the same line on the HTML page."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.plugin.report.document import ResultDocument, result_entry
from pytest_llm_latency.plugin.report.html import render
from pytest_llm_latency.plugin.report.properties import junit_properties
from pytest_llm_latency.plugin.report.terminal import summary_lines
from tests.unit.core.checks.test_stalls import server, workload

jsonschema = pytest.importorskip("jsonschema")


def entry() -> dict:
    res = evaluate(workload({"itl_stall_p99": "60ms", "stall_max": "1s"}), *server())
    return json.loads(json.dumps(result_entry(res, "t.py::test_mix", detail=True)))


def test_the_stall_part_validates_and_junit_gets_its_p99_and_max():
    e = entry()
    doc = ResultDocument("0.0", {"url": None, "api": "openai-completions", "model": None}, 0, "abc", [e]).to_json()
    jsonschema.validate(doc, json.loads(resources.files("pytest_llm_latency").joinpath(
        "data/results.schema.json").read_text()))
    assert e["stall"]["stall_ms_p99"] == 600.0 and e["budgets"]["itl_stall_p99_ms"] == 60.0
    props = dict(junit_properties(e))
    assert (props["llm.stall.stall_ms_p99"], props["llm.stall.stall_ms_max"], props["llm.stall.stall_gaps"]) == \
        (600.0, 600.0, 100)
    assert props["llm.budget.stall_max_ms"] == 1000.0
    assert not any(k.startswith("llm.stall.causes") or k.startswith("llm.stall.worst_per_stream") for k in props)


def test_the_terminal_and_the_page_say_the_stall_in_one_line():
    e = entry()
    lines = summary_lines([e])
    i = lines.index("stalls (gaps overlapping another request's long prefill vs the others):")
    line = (">= 1024 tokens: stall p99 600.0 ms (max 600.0 ms, request 1; 100 gaps) vs clean p99 10.0 ms (7895 "
            "gaps); ")
    assert lines[i + 1].startswith(f"  t.py::test_mix: {line}")
    assert "; 273.7 stalls/min; 100% during long_summarization's prefills (16000 tokens, median window 605 ms)" in \
        lines[i + 1]
    html = render(ResultDocument("0.0", {"url": None}, 0, "abc", [e]).to_json())
    assert "<h3>Stalls (gaps overlapping another request's long prefill vs the others)</h3>" in html
    assert line.replace(">", "&gt;").strip() in html


def test_a_result_without_stalls_shows_no_stall_line():
    e = entry()
    del e["stall"]
    assert not any(ln.startswith("stalls") for ln in summary_lines([e]))
