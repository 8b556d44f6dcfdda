"""Ollama native NDJSON adapter on MockTransport with a virtual clock."""
import json

import httpx
import pytest

from fakeserver import VirtualTime
from pytest_llm_latency.client.ollama import OllamaClient
from pytest_llm_latency.core import metrics
from pytest_llm_latency.core.errors import MeasurementError


def ollama(lines, vt, status=200, ctype="application/x-ndjson", seen=None):
    def gen():
        for delay_ms, obj in lines:
            vt.advance_ms(delay_ms)
            yield (json.dumps(obj) + "\n").encode()

    def handler(request):
        if seen is not None:
            seen.append(json.loads(request.content))
        if request.url.path == "/api/tags":
            return httpx.Response(200, json={"models": [{"name": "llama3:8b"}]})
        return httpx.Response(status, headers={"content-type": ctype}, content=gen())
    return OllamaClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://o:11434", "llama3:8b", clock=vt)


FINAL = {"done": True, "done_reason": "length", "prompt_eval_count": 12, "prompt_eval_duration": 40_000_000,
         "eval_count": 3, "eval_duration": 30_000_000, "total_duration": 90_000_000}


def test_generate_stream_timings_and_server_counters():
    vt = VirtualTime()
    seen = []
    c = ollama([(80, {"response": "a", "done": False}), (15, {"response": "b", "done": False}),
                (15, {"response": "c", "done": False}), (1, FINAL)], vt, seen=seen)
    rec = c.stream("", "hello", 3, expected_prompt_tokens=12)
    assert metrics.ttft_ms(rec) == pytest.approx(80) and metrics.tpot_ms(rec) == pytest.approx(15)
    assert rec.prompt_tokens == 12 and rec.completion_tokens == 3 and rec.finish_reason == "length"
    st = rec.server_timings
    assert st["prefill_ms"] == 40 and st["decode_ms"] == 30 and st["load_ms"] == 0  # omitted → 0
    assert seen[-1]["options"]["num_predict"] == 3 and seen[-1]["raw"] is True


def test_thinking_is_ttft_but_not_ttfo():
    vt = VirtualTime()
    c = ollama([(50, {"thinking": "hmm", "done": False}), (30, {"response": "ok", "done": False}),
                (1, {**FINAL, "eval_count": 2})], vt)
    rec = c.stream("", "q", 2)
    assert metrics.ttft_ms(rec) == pytest.approx(50) and metrics.ttfo_ms(rec) == pytest.approx(80)


def test_error_line_in_200_stream():
    vt = VirtualTime()
    c = ollama([(5, {"error": "model requires more system memory"})], vt)
    with pytest.raises(MeasurementError, match="more system memory"):
        c.stream("", "q", 2)


def test_stream_without_done_fails():
    vt = VirtualTime()
    c = ollama([(5, {"response": "a", "done": False})], vt)
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "q", 2)
    assert ei.value.kind == "no_done"


def test_unknown_model_lists_local_models():
    def handler(request):
        if request.url.path == "/api/tags":
            return httpx.Response(200, json={"models": [{"name": "qwen2:7b"}]})
        return httpx.Response(404, json={"error": "model 'llama9' not found, try pulling it first"})
    c = OllamaClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://o", "llama9")
    with pytest.raises(MeasurementError, match="local models: qwen2:7b"):
        c.stream("", "q", 2)


def test_ttft_excludes_connect_and_a_stale_retry_is_flagged():
    from connsim import SimulatedConnections
    from pytest_llm_latency.client.http import make_http_client

    vt = VirtualTime()
    lines = [(80, {"response": "a", "done": False}), (15, {"response": "b", "done": False}), (1, FINAL)]
    inner = ollama(lines, vt).http._transport  # the MockTransport of the helper
    transport = SimulatedConnections(inner, vt, already_open=True, stale_after_ms=250, connect_ms=5)
    c = OllamaClient(make_http_client(transport=transport), "http://o:11434", "llama3:8b", clock=vt)
    rec = c.stream("", "hello", 2)
    assert rec.reconnected and metrics.ttft_ms(rec) == pytest.approx(80)   # not 335
    assert metrics.connect_ms(rec) == pytest.approx(5)
