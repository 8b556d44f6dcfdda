"""A speculating server's roofline in the reports: the terminal line and the HTML chart show the
engine steps/s (judged against the step ceiling) and the token rate (tokens per step × steps/s);
the JSON and JUnit carry the part's fields as they carry every part's."""
import re
import xml.etree.ElementTree as ET

import pytest

from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.charts import roofline_chart
from pytest_llm_latency.plugin.report.charts.roofline import Decode
from pytest_llm_latency.plugin.report.document import result_entry
from pytest_llm_latency.plugin.report.html import render
from pytest_llm_latency.plugin.report.properties import junit_properties
from pytest_llm_latency.plugin.report.terminal import step_lines, summary_lines
from tests.helpers.records import record

MS = 1_000_000


def entry(spec: bool = True):
    w = make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": 2,
                            "confidence": None, "slo": {"ttft_p95": 1000}})
    res = evaluate(w, [record(100.0, gap_ms=10.0, tokens=4, expected=4, send_ms=s, t0_ns=5_000 * MS)
                       for s in (0.0, 200.0)], [])
    res.roofline.set(status="pass", ceiling_tok_s=40.0, decode_efficiency=2.5, hardware="H100-SXM", model_bytes=2e9,
                     min_decode_efficiency=0.6,
                     arithmetic="H100-SXM 3350 GB/s ÷ (2.00 GB weights, drafter not counted)")
    if spec:
        res.roofline.set(tokens_per_step=3.0, steps_per_s=33.3, step_efficiency=0.8325,
                         draft="not counted: no roofline.draft")
        res.spec_decode.set(source="vLLM /metrics counters", scope="run", decode_tokens=6, decode_steps=2.0,
                            accepted_tokens=4.0, draft_tokens=6.0, tokens_per_step=3.0, acceptance_rate=4 / 6)
    return result_entry(res, "t.py::test_w", detail=True)


def test_the_terminal_says_tokens_per_step_times_steps_per_second():
    lines = summary_lines([entry()])
    i = lines.index("decode roofline per engine step (speculative decoding / MTP):")
    assert lines[i + 1] == ("  t.py::test_w: 99.9 tok/s = 3.00 tokens per step × 33.3 steps/s; steps at 0.83 of the "
                            "ceiling, draft acceptance 67% (run totals; vLLM /metrics counters)")
    assert step_lines([entry(spec=False)]) == []


def test_the_json_and_junit_carry_the_step_figures():
    e = entry()
    assert e["roofline"]["step_efficiency"] == 0.8325 and e["spec_decode"]["tokens_per_step"] == 3.0
    props = dict(junit_properties(e))
    assert props["llm.roofline.step_efficiency"] == 0.8325 and props["llm.roofline.tokens_per_step"] == 3.0
    assert props["llm.spec_decode.acceptance_rate"] == pytest.approx(4 / 6)


def test_the_html_chart_shows_step_rate_and_token_rate():
    html = render({"version": 2, "plugin_version": "9.9", "target": {"url": "http://h:1"}, "seed": 7,
                   "nonce": "n", "results": [entry()]})
    svg = next(s for s in re.findall(r"<svg.*?</svg>", html, re.S) if "Decode roofline per engine step" in s)
    root = ET.fromstring(svg)
    for e in root.iter():  # the namespace dropped from tag names (g, not {http://...}g)
        e.tag = e.tag.rpartition("}")[2]
    assert root.get("data-series") == "2"
    rows = [(g.get("data-label"), float(g.get("data-value"))) for g in root.iter("g") if g.get("class") == "series"]
    assert rows == [("engine steps", 33.3), ("tokens (3.00 per step)", pytest.approx(99.9))]
    ceiling = next(g for g in root.iter("g") if g.get("class") == "ceiling")
    assert float(ceiling.get("data-value")) == pytest.approx(33.3 / 0.8325)
    text = ET.tostring(root, encoding="unicode")
    assert "ceiling 40 steps/s" in text and "engine steps: 33.3 steps/s = 83%" in text
    assert "tokens (3.00 per step): 99.9 tok/s" in text and "wrong inputs" not in text  # tokens are not judged
    assert "decode = 99.9 tok/s = 3.00 tokens per step × 33.3 steps/s (run totals; tokens per step from vLLM" in html
    assert "step efficiency = 33.3 / 40.0 = 0.83; gate ≥ 0.60: met" in html
    assert "draft acceptance: 4 of 6 drafted tokens = 67%" in html


def test_steps_above_their_ceiling_still_show_the_wrong_inputs_band():
    svg = roofline_chart("D", 30.0, [Decode("engine steps", 33.3), Decode("tokens", 99.9, judged=False)],
                         unit="steps/s")
    assert "wrong inputs" in svg
