"""The report's data (per-request detail in the JSON) and its page: built from the same result
dicts as the terminal table, in the terminal's words, tolerant of missing and extra fields."""
from __future__ import annotations

import json
import math
import re
from importlib import resources

import pytest

from pytest_llm_latency.core.errors import MeasurementError
from pytest_llm_latency.core.measure.record import RecordBuilder
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.result.result import Failure, metric_values
from pytest_llm_latency.core.measure.stats import percentile
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.detail import CDF_POINTS, cdf_samples, detail, request_rows
from pytest_llm_latency.plugin.report.html import render
from pytest_llm_latency.plugin.report.document import ResultDocument, result_entry
from pytest_llm_latency.plugin.report.terminal import row, summary_lines
from tests.helpers.records import record

MS = 1_000_000
T0 = 5_000 * MS  # an arbitrary clock origin (perf_counter's is arbitrary too)


def rec(send_ms, ttft_ms=100.0, gap_ms=10.0, tokens=4, expected=4):
    return record(ttft_ms, gap_ms=gap_ms, tokens=tokens, expected=expected, send_ms=send_ms, t0_ns=T0, tail_ms=1.0)


def wl(samples=4, rate=0.5, **slo):
    # two or three toy samples that exercise the page, not the statistics: the point estimate
    # (confidence bounds on the page: test_statistical_bounds_are_on_the_page_in_the_terminals_words)
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 4, "samples": samples,
                               "max_error_rate": rate, "confidence": None, "slo": slo})


def failed(send_ms, after_ms):
    """A failure as the client makes it: a MeasurementError with the partial record."""
    t = [T0 + int(send_ms * MS)]
    b = RecordBuilder(lambda: t[0], expected_output_tokens=4)
    t[0] += int(50 * MS)
    b.token_chunk(b.stamp())
    exc = MeasurementError("reset", "connection reset after 1 token")
    exc.partial = b.record
    b.record.t_end_ns = T0 + int((send_ms + after_ms) * MS)
    return Failure.from_error(exc)


def result_dict(res, nodeid="t.py::test_w"):
    """The result's entry in the run's document, with the per-request detail (as the JSON file)."""
    return result_entry(res, nodeid, detail=True)


# ---------------------------------------------------------------------------- detail
def test_request_rows_are_timestamps_on_the_runs_axis_in_send_order():
    res = evaluate(wl(ttft_p95=1000), [rec(200.0, ttft_ms=30.0), rec(0.0, ttft_ms=120.0)],
                   [failed(100.0, 400.0)])
    rows = request_rows(res)
    assert [r["send_ms"] for r in rows] == [0.0, 100.0, 200.0]
    first = rows[0]
    assert first["first_token_ms"] == pytest.approx(120.0) and first["last_token_ms"] == pytest.approx(150.0)
    assert first["end_ms"] == pytest.approx(151.0) and first["ttft_ms"] == pytest.approx(120.0)
    assert first["tpot_ms"] == pytest.approx(10.0) and first["status"] == "ok" and first["output_tokens"] == 4
    fail = rows[1]
    assert fail["status"] == "failed" and fail["kind"] == "reset"
    assert fail["first_token_ms"] == pytest.approx(150.0) and fail["end_ms"] == pytest.approx(500.0)


def test_failures_without_timestamps_are_kept_untimed():
    res = evaluate(wl(), [], [Failure("connect", "refused"), Failure("connect", "refused")])
    assert request_rows(res) == [{"status": "failed", "kind": "connect", "send_ms": None}] * 2


def test_cdf_samples_are_the_statistics_samples():
    recs = [rec(10.0 * i, ttft_ms=100.0 + i) for i in range(10)]
    res = evaluate(wl(samples=11), recs, [Failure("idle_timeout", "stall")])
    cdf = cdf_samples(res)
    assert cdf["ttft_ms"]["n"] == 11 and cdf["ttft_ms"]["misses"] == 1
    assert [x for x, _ in cdf["ttft_ms"]["points"]] == sorted(100.0 + i for i in range(10))
    assert cdf["ttft_ms"]["points"][-1][1] == pytest.approx(10 / 11)   # the miss: never drawn, F stops short
    itl = metric_values(res.records, res.failures, 4)["itl"]
    assert cdf["itl_ms"]["n"] == len(itl)


def test_large_samples_become_quantiles_of_the_same_percentile_method():
    recs = [rec(0.0, ttft_ms=1.0 + (i * 37 % 1000) / 10.0) for i in range(CDF_POINTS + 200)]
    res = evaluate(wl(samples=len(recs)), recs, [])
    pts = cdf_samples(res)["ttft_ms"]["points"]
    assert len(pts) == CDF_POINTS
    vals = sorted(metric_values(res.records, [], 4)["ttft"])
    for x, f in (pts[0], pts[250], pts[-1]):
        assert x == pytest.approx(percentile(vals, 100.0 * f), abs=1e-3)


def test_json_with_detail_matches_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    res = evaluate(wl(ttft_p95=1000), [rec(0.0), rec(200.0)], [failed(100.0, 300.0), Failure("connect", "x")])
    doc = ResultDocument("0", {"url": None, "api": "openai-completions", "model": None}, 0, "n",
                         [json.loads(json.dumps(result_dict(res)))]).to_json()
    schema = json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())
    jsonschema.validate(doc, schema)


# ---------------------------------------------------------------------------- page
def doc_of(*results, target=None):
    return {"version": 2, "plugin_version": "9.9",
            "target": target or {"url": "http://h:1", "api": "openai-chat", "model": "m"},
            "seed": 7, "nonce": "abc123", "results": list(results)}


def svgs(html: str) -> list[str]:
    return re.findall(r"<svg .*?</svg>", html, flags=re.S)


def series_counts(html: str) -> list[int]:
    return [int(re.search(r'data-series="(\d+)"', s).group(1)) for s in svgs(html)]


def test_page_repeats_the_terminal_table_and_messages_word_for_word():
    passing = result_dict(evaluate(wl(ttft_p95=1000), [rec(0.0), rec(200.0)], []), "t.py::test_ok")
    failing = result_dict(evaluate(wl(ttft_p50=50, rate=0.0), [rec(0.0), rec(200.0)], [failed(100.0, 300.0)]),
                          "t.py::test_slow")
    html = render(doc_of(passing, failing))
    for r in (passing, failing):
        cells = row(r)
        table_row = re.search(rf'<a href="#test-\d">{re.escape(cells[0])}</a>.*?</tr>', html).group(0)
        assert re.findall(r"<td>([^<]*)</td>", table_row) == list(cells[1:-1])   # same numbers, same order
        assert f">{cells[-1]}</span>" in table_row
    for line in summary_lines([passing, failing]):  # every violation / error / note line's text
        if line.startswith("  t.py::"):
            text = line.split(": ", 1)[1]
            assert text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in html
    assert any("TTFT p50" in v for v in failing["violations"]) and any("server failed" in v
                                                                   for v in failing["violations"])
    assert "<script" not in html and "http://h:1" in html and "abc123" in html and "9.9" in html
    assert 'id="test-1"' in html and 'id="test-2"' in html


def test_page_draws_every_chart_with_its_series():
    res = evaluate(wl(ttft_p95=1000), [rec(0.0), rec(200.0)], [])
    res.roofline.set(status="pass", ceiling_tok_s=200.0, decode_efficiency=0.5, decode_efficiency_p95=0.45,
                     model_bytes=16e9, min_decode_efficiency=0.4, arithmetic="H100 3350 GB/s ÷ (16 GB weights)")
    r = result_dict(res)
    html = render(doc_of(r))
    assert series_counts(html) == [1, 1, 1, 1, 1]            # TTFT, TPOT, ITL, timeline, roofline
    assert "decode = 1000 / TPOT p50 10.00 ms = 100.0 tok/s" in html
    assert "efficiency = 100.0 / 200.0 = 0.50; gate ≥ 0.40: met" in html
    assert "ceiling = H100 3350 GB/s ÷ (16 GB weights) = 200.0 tok/s" in html


def test_page_overlays_a_baseline_and_a_metrics_timeline_when_a_result_carries_them():
    res = evaluate(wl(ttft_p95=1000), [rec(0.0), rec(200.0)], [])
    base = detail(evaluate(wl(), [rec(0.0, ttft_ms=300.0), rec(400.0, ttft_ms=320.0)], []))
    res.baseline.set(label="baseline main@1234", cdf=base["cdf"])
    res.server.metrics_timeline = {"vllm:num_requests_waiting": [[0, 0], [150, 2], [400, 0]],
                               "vllm:num_requests_running": [[0, 1], [400, 1]],
                               "vllm:kv_cache_usage_perc": [[0, 0.1], [400, 0.3]],
                               "vllm:something_else": [[0, 5]]}
    run = result_dict(res)
    html = render(doc_of(run))
    assert series_counts(html)[:4] == [2, 2, 2, 4]
    assert "baseline main@1234" in html and "queue depth (vllm:num_requests_waiting)" in html


def test_page_tolerates_missing_and_extra_fields():
    minimal = {"nodeid": "t.py::test_<b>", "verdict": "error", "errors": ["no successful requests out of 3"],
               "future_field": {"x": [1, 2]}, "cdf": {"ttft_ms": {"points": "garbage"}}, "requests": [None, 3]}
    html = render(doc_of(minimal, {"verdict": "pass"}, target={"url": "https://u:s3cret@h/v1", "api": "ollama",
                                                               "model": None, "server": "vLLM 0.11"}))
    assert series_counts(html) == [0] * 10
    assert "t.py::test_&lt;b&gt;" in html and "s3cret" not in html and "u:***@h" in html
    assert "vLLM 0.11" in html and "no successful requests out of 3" in html


def test_a_statistic_that_is_a_miss_is_inf_on_the_page_as_in_the_terminal():
    r = result_dict(evaluate(wl(rate=1.0, ttft_p95=1000), [rec(0.0)], [failed(10.0, 50.0)] * 3))
    assert r["tpot_ms"]["p95"] is None and row(r)[5] == "inf"
    html = render(doc_of(r))
    assert "<td>inf</td>" in html and "p95 inf" in html and not math.isnan(0.0)


def test_a_failed_request_keeps_when_it_was_sent_and_when_it_failed():
    from tests.helpers.fakeserver import Script, VirtualTime, make_transport
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.client.apis.openai import OpenAIClient

    vt = VirtualTime()
    http = make_http_client(transport=make_transport(Script(status=500, error_body="boom"), vt))
    c = OpenAIClient(http, "http://fake", "m", "completions", clock=vt, sleep=lambda s: None)
    with pytest.raises(MeasurementError) as info:
        c.stream("", "x", 4)
    f = Failure.from_error(info.value)
    assert f.kind == "http_500" and f.t_send_ns is not None and f.t_end_ns == vt.now >= f.t_send_ns
    row_ = request_rows(evaluate(wl(), [], [f]))[0]
    assert row_["status"] == "failed" and row_["send_ms"] == 0.0 and row_["end_ms"] is not None


def test_a_prompt_sweep_shows_the_terminals_prefill_line_and_a_malformed_one_none():
    r = result_dict(evaluate(wl(ttft_p95=1000), [rec(0.0), rec(200.0)], []), "t.py::test_sweep")
    r["prefill"] = {"tok_s": 11358.2, "overhead_ms": 7.9, "lengths": "256,1024,4096", "samples": 9,
                    "residual_mad_ms": 0.4, "linearity": "linear", "status": "fail", "mfu": 0.199,
                    "hardware": "H100-SXM", "peak_tflops": 989.0}
    from pytest_llm_latency.plugin.report.terminal import prefill_lines
    (line,) = [ln.split(": ", 1)[1] for ln in prefill_lines([r])[1:]]
    assert "11,358 tok/s" in line and "MFU 0.20" in line
    html = render(doc_of(r))
    assert "Prefill roofline" in html and line.replace("&", "&amp;") in html
    r["prefill"] = {"tok_s": "fast"}            # malformed: no prefill block, and no crash
    assert "Prefill roofline" not in render(doc_of(r))


def test_an_agent_session_shows_the_terminals_agent_line_and_a_malformed_value_left_out():
    res = evaluate(wl(ttft_p95=1000), [rec(0.0), rec(200.0)], [])
    res.agent.set(sessions=4, steps=3, prefix_reuse=0.931, turn_ttft_ms_p95=67.5, session_e2e_ms_p95=629.8,
                  turns=[{"turn": 2, "reuse": 0.94}, {"turn": 3, "reuse": 0.92}])
    r = result_dict(res, "t.py::test_agent")
    from pytest_llm_latency.plugin.report.terminal import agent_lines
    (line,) = [ln.split(": ", 1)[1] for ln in agent_lines([r])[1:]]
    assert line == ("4 sessions x 3 turns, prefix reuse 93% (t2 94%, t3 92%); turn TTFT p95 67.5 ms, "
                    "session model time p95 629.8 ms")
    html = render(doc_of(r))
    assert "Agent sessions" in html and line in html
    r["agent"]["prefix_reuse"] = "most"  # malformed: the value is left out (report.entry), no crash
    assert "4 sessions x 3 turns, prefix reuse not reported; turn TTFT p95 67.5 ms" in render(doc_of(r))
    r["agent"]["sessions"] = "four"      # without its sessions: no agent block
    assert "Agent sessions" not in render(doc_of(r))


def test_statistical_bounds_are_on_the_page_in_the_terminals_words():
    from pytest_llm_latency.core.spec.workload import with_statistics
    from pytest_llm_latency.plugin.report.terminal import bound_lines

    w = with_statistics(wl(samples=4, ttft_p50=1000), {"confidence": 0.9}, lambda p: "test")
    r = result_dict(evaluate(w, [rec(float(i) * 200) for i in range(4)], []), "t.py::test_bounds")
    lines = bound_lines(r)
    assert r.get("bounds") and len(lines) >= 2, r.get("bounds")
    html = render(doc_of(r))
    assert "Statistical verdicts" in html
    for line in lines[1:]:                      # every budget's bound, word for word
        assert line.strip().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in html
    r["bounds"] = {"ttft_p50": "garbled"}       # malformed: no block, no crash
    assert "Statistical verdicts" not in render(doc_of(r))


def test_the_page_names_how_itl_knew_its_per_chunk_token_counts():
    doc = {"results": [{"nodeid": "a", "verdict": "pass", "n": 3, "measurement": {"itl_token_counts": "tokenize"}},
                       {"nodeid": "b", "verdict": "pass", "n": 3, "measurement": {}}]}
    page = render(doc)
    assert re.search(r"ITL token counts\W+(\w+\W+){0,6}tokenize", page), page[:2000]
    assert page.count("ITL token counts") == 1  # only where the result says


def test_each_finding_keeps_its_checks_name_to_the_renderers():
    failing = result_dict(evaluate(wl(ttft_p50=50, rate=0.0), [rec(0.0), rec(200.0)], [failed(100.0, 300.0)]),
                          "t.py::test_slow")
    said = {(f["check"], f["kind"]) for f in failing["findings"]}
    assert ("budgets", "violation") in said and ("error_rate", "failed") in said, failing["findings"]
    # the lists say the same texts, in the same order, without their checks
    assert [f["text"] for f in failing["findings"] if f["kind"] in ("violation", "failed")] == failing["violations"]
    from pytest_llm_latency.plugin.report.terminal import messages
    assert ("violation", failing["violations"][0], "budgets") in messages(failing)
    html = render(doc_of(failing))
    assert '<span class="check">budgets</span>' in html and '<span class="check">error_rate</span>' in html
    older = {k: v for k, v in failing.items() if k != "findings"}  # a file written before findings: check unknown
    assert messages(older)[0] == ("violation", failing["violations"][0], "?")
