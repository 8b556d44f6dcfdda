"""Reasoning models (``core.measure.reasoning``): reasoning tokens vs answer tokens per request, from the
server's usage count (preferred) or the stream, in the result, the JSON rows and the table; and
the decode figures (TPOT, the roofline, spec-decode) count every decoded token, reasoning included."""
from __future__ import annotations

import json
from importlib import resources

import pytest

from pytest_llm_latency.core.measure import metrics, reasoning, spec_decode
from pytest_llm_latency.core.checks import evaluate
from pytest_llm_latency.core.roofline.hardware import Hardware
from pytest_llm_latency.core.roofline.modelbytes import ModelBytes
from pytest_llm_latency.core.roofline.ceiling import measure_roofline
from pytest_llm_latency.core.spec.workload import make_workload
from pytest_llm_latency.plugin.report.detail import request_rows
from pytest_llm_latency.plugin.report.document import ResultDocument, result_entry
from pytest_llm_latency.plugin.report.html import render
from pytest_llm_latency.plugin.report.terminal import summary_lines
from tests.helpers.fakeserver import Script, VirtualTime, make_transport
from tests.helpers.records import record

MS = 1_000_000


def thinker(reasoning_chunks: int = 6, tokens: int = 10, **kw):
    """10 tokens 10 ms apart, the first ``reasoning_chunks`` of them reasoning."""
    return record(100, gap_ms=10, tokens=tokens, reasoning_chunks=reasoning_chunks, **kw)


def wl(samples=3):
    return make_workload("w", {"class": "custom", "prompt_tokens": 10, "output_tokens": 10, "samples": samples,
                               "max_error_rate": 0.5, "confidence": None, "slo": {"ttft_p50": "1s"}})


def with_totals(records):
    """A judged result with the reasoning figures the pipeline sets (``reasoning.totals``)."""
    res = evaluate(wl(len(records)), records, [])
    figures, notes = reasoning.totals(records)
    res.measurement.set(**figures)
    res.notes += notes
    return res


# ------------------------------------------------------------------------ the split
def test_stream_split_counts_the_reasoning_chunks_tokens():
    s = reasoning.split(thinker(6))
    assert (s.reasoning_tokens, s.answer_tokens, s.source) == (6, 4, reasoning.SOURCE_STREAM)


def test_stream_split_uses_the_chunks_token_counts_not_the_chunks():
    rec = record(100, gap_ms=10, tokens=4, chunk_tokens=[3, 3, 2, 2], reasoning_chunks=2)
    s = reasoning.split(rec)
    assert (s.reasoning_tokens, s.answer_tokens) == (6, 4)


def test_the_servers_count_is_preferred_and_named():
    # the stream showed 6 reasoning chunks, the server counted 7 reasoning tokens: the server wins
    s = reasoning.split(thinker(6, server_timings={reasoning.REASONING_TOKENS: 7}))
    assert (s.reasoning_tokens, s.answer_tokens, s.source) == (7, 3, reasoning.SOURCE_SERVER)


def test_a_server_count_above_the_output_is_not_used_and_a_note_says_so():
    rec = thinker(6, server_timings={reasoning.REASONING_TOKENS: 11})
    s = reasoning.split(rec)
    assert (s.reasoning_tokens, s.source) == (6, reasoning.SOURCE_STREAM)
    figures, notes = reasoning.totals([rec, thinker(6)])
    assert figures["reasoning_tokens"] == 12 and figures["reasoning_source"] == "stream"
    assert len(notes) == 1 and "1 of 2 responses" in notes[0] and "exceeds its completion_tokens" in notes[0]


def test_reasoning_chunks_without_token_counts_have_no_split_never_a_guess():
    rec = thinker(6)
    rec.token_count_rule = "per chunk"  # the counts could not be recovered: chunks, not tokens
    assert reasoning.split(rec) is None
    figures, notes = reasoning.totals([rec, thinker(0)])
    assert figures["reasoning_requests"] == 1 and "reasoning_source" not in figures
    assert figures["reasoning_tokens"] == 0 and figures["answer_tokens"] == 10  # the known request only
    assert len(notes) == 1 and "1 of 2 responses streamed reasoning" in notes[0] and "left out" in notes[0]


def test_a_model_that_does_not_reason_adds_nothing():
    assert reasoning.totals([thinker(0), thinker(0)]) == ({}, [])
    # a server that counts 0 reasoning tokens (OpenAI does for every model) did not reason either
    assert reasoning.totals([thinker(0, server_timings={reasoning.REASONING_TOKENS: 0})]) == ({}, [])


def test_run_totals_and_share_and_mixed_sources():
    recs = [thinker(6), thinker(4, server_timings={reasoning.REASONING_TOKENS: 5}), thinker(0)]
    figures, notes = reasoning.totals(recs)
    assert figures == {"reasoning_tokens": 11, "answer_tokens": 19, "reasoning_requests": 2,
                       "reasoning_source": "stream 1, server 1", "reasoning_share": round(11 / 30, 4)}
    assert notes == []
    one_source, _ = reasoning.totals(recs[:1])
    assert one_source["reasoning_source"] == "stream"


def test_hidden_reasoning_is_named_it_makes_tpot_read_fast():
    """The server counts 30 reasoning tokens the stream never showed: TPOT divides the visible
    interval by all N − 1 tokens, so the note says TPOT reads too fast there."""
    rec = thinker(0, completion_tokens=40, server_timings={reasoning.REASONING_TOKENS: 30})
    assert reasoning.hidden_reasoning(rec) and not reasoning.hidden_reasoning(thinker(6))
    figures, notes = reasoning.totals([rec])
    assert figures["reasoning_tokens"] == 30 and figures["answer_tokens"] == 10
    assert len(notes) == 1 and "never showed" in notes[0] and "TPOT" in notes[0] and "too fast" in notes[0]


# ------------------------------------------------- every decoded token counts in decode
def test_tpot_the_roofline_and_spec_decode_count_reasoning_tokens_too():
    """6 reasoning + 4 answer tokens, 10 ms apart: TPOT = 90 ms / 9, not 30 ms / 3 (the answer
    alone), so the roofline's decode rate is 100 tok/s for every token the engine decoded."""
    recs = [thinker(6) for _ in range(3)]
    assert metrics.tpot_ms(recs[0]) == pytest.approx(10.0)
    res = evaluate(wl(), recs, [])
    assert res.completed["tpot"].p50 == pytest.approx(10.0)
    assert spec_decode.decode_tokens(recs) == 27  # Σ (N − 1), reasoning included
    assert spec_decode.decode_time_ms(recs) == pytest.approx(270.0)
    hw = Hardware(key="test", name="test", mem_bandwidth_gb_s=1.0)
    roof = measure_roofline(hw, ModelBytes(weight_bytes=5e6, kv_bytes_per_token=None), context=0.0,
                            tpot_p50_ms=res.completed["tpot"].p50)
    assert roof.measured_tok_s == pytest.approx(100.0)  # 1000 / TPOT over all 9 decoded tokens
    assert roof.ceiling_tok_s == pytest.approx(200.0)   # 1 GB/s ÷ 5 MB per step
    assert roof.decode_efficiency == pytest.approx(0.5)  # the answer alone would read 100 / 3 tok/s


# ------------------------------------------------------------------ the adapter
def chat_client(script):
    from pytest_llm_latency.client.transport.http import make_http_client
    from pytest_llm_latency.client.apis.openai import OpenAIClient

    vt = VirtualTime()
    http = make_http_client(transport=make_transport(script, vt))
    return OpenAIClient(http, "http://fake", script.model, "chat", clock=vt, sleep=lambda s: None)


def test_the_adapter_keeps_usages_reasoning_tokens_and_marks_reasoning_chunks():
    rec = chat_client(Script(reasoning=5)).stream("sys", "think first", 8)
    assert rec.server_timings[reasoning.REASONING_TOKENS] == 5
    assert [c.reasoning for c in rec.chunks] == [True] * 5 + [False] * 3
    assert metrics.ttfo_ms(rec) > metrics.ttft_ms(rec)
    s = reasoning.split(rec)
    assert (s.reasoning_tokens, s.answer_tokens, s.source) == (5, 3, reasoning.SOURCE_SERVER)


def test_without_the_servers_count_the_stream_counts():
    rec = chat_client(Script(reasoning=5, usage_reasoning=False)).stream("sys", "think first", 8)
    assert reasoning.REASONING_TOKENS not in rec.server_timings
    s = reasoning.split(rec)
    assert (s.reasoning_tokens, s.answer_tokens, s.source) == (5, 3, reasoning.SOURCE_STREAM)


def test_a_reasoning_count_that_is_not_a_count_is_a_protocol_error():
    from pytest_llm_latency.client.apis.openai import OpenAIClient
    from pytest_llm_latency.core.errors import ProtocolError
    from pytest_llm_latency.core.measure.record import RecordBuilder

    c = OpenAIClient.__new__(OpenAIClient)
    c.api, c.redact = "chat", (lambda s: s)
    b = RecordBuilder(lambda: 0)
    bad = json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4,
                                               "completion_tokens_details": {"reasoning_tokens": -2}}})
    with pytest.raises(ProtocolError, match="completion_tokens_details.reasoning_tokens"):
        c._event(b, 0, bad, None, {"done": False, "finish": None, "running": 0})


# ------------------------------------------------------- JSON rows, table, HTML
def schema() -> dict:
    return json.loads(resources.files("pytest_llm_latency").joinpath("data/results.schema.json").read_text())


def test_rows_and_measurement_part_carry_the_split_and_validate():
    jsonschema = pytest.importorskip("jsonschema")
    res = with_totals([thinker(6), thinker(2), thinker(0)])
    rows = request_rows(res)
    assert [(r["reasoning_tokens"], r["answer_tokens"]) for r in rows] == [(6, 4), (2, 8), (0, 10)]
    entry = result_entry(res, "t.py::test_w", detail=True)
    assert entry["measurement"]["reasoning_tokens"] == 8 and entry["measurement"]["answer_tokens"] == 22
    assert entry["measurement"]["reasoning_share"] == pytest.approx(8 / 30, abs=1e-4)
    doc = ResultDocument("0.0", {"url": None, "api": "openai-chat", "model": None}, 0, "abc", [entry])
    jsonschema.validate(json.loads(json.dumps(doc.to_json())), schema())


def test_a_run_that_did_not_reason_writes_no_reasoning_keys():
    res = with_totals([thinker(0), thinker(0)])
    assert all("reasoning_tokens" not in r for r in request_rows(res))
    entry = result_entry(res, "t", detail=True)
    assert "reasoning_tokens" not in entry.get("measurement", {}) and "reasoning_tokens" not in entry


def test_table_has_a_reasoning_column_only_when_a_result_reasoned():
    plain = result_entry(with_totals([thinker(0)] * 3), "t.py::plain")
    thinking = result_entry(with_totals([thinker(6), thinker(6), thinker(0)]), "t.py::thinking")
    assert "reasoning" not in summary_lines([plain])[0]
    lines = summary_lines([plain, thinking])
    assert lines[0].split()[-2:] == ["reasoning", "verdict"]
    row = {ln.split()[0]: ln.split() for ln in lines if ln.startswith("t.py::")}
    # the share, and the reasoning tokens per request (p95 of 6, 6, 0)
    assert row["t.py::thinking"][-4:] == ["40%,", "p95", "6", "PASS"] and row["t.py::plain"][-2:] == ["-", "PASS"]
    assert any("reasoning = share of the output tokens" in ln for ln in lines)


def test_html_summary_has_the_same_reasoning_column():
    entry = result_entry(with_totals([thinker(6), thinker(6), thinker(0)]), "t.py::thinking", detail=True)
    doc = ResultDocument("0.0", {"url": None, "api": "openai-chat", "model": None}, 0, "abc", [entry]).to_json()
    page = render(json.loads(json.dumps(doc)))
    assert "<th>reasoning</th>" in page and "<td>40%, p95 6</td>" in page
