"""Ollama native NDJSON adapter on MockTransport with a virtual clock."""
import json

import httpx
import pytest

from tests.helpers.fakeserver import VirtualTime
from pytest_llm_latency.client.apis.ollama import OllamaClient
from pytest_llm_latency.core.measure import metrics
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
    from tests.helpers.connsim import SimulatedConnections
    from pytest_llm_latency.client.transport.http import make_http_client

    vt = VirtualTime()
    lines = [(80, {"response": "a", "done": False}), (15, {"response": "b", "done": False}), (1, FINAL)]
    inner = ollama(lines, vt).http._transport  # the MockTransport of the helper
    transport = SimulatedConnections(inner, vt, already_open=True, stale_after_ms=250, connect_ms=5)
    c = OllamaClient(make_http_client(transport=transport), "http://o:11434", "llama3:8b", clock=vt)
    rec = c.stream("", "hello", 2)
    assert rec.reconnected and metrics.ttft_ms(rec) == pytest.approx(80)   # not 335
    assert metrics.connect_ms(rec) == pytest.approx(5)


def test_every_request_asks_the_model_to_stay_loaded_and_chat_sends_messages():
    vt = VirtualTime()
    seen = []
    c = ollama([(5, {"message": {"role": "assistant", "content": "a"}, "done": False}), (1, FINAL)], vt, seen=seen)
    c.api = "chat"
    c.stream("sys ", "hello", 3)
    body = seen[-1]
    assert body["keep_alive"] == "10m" and "raw" not in body and "prompt" not in body
    assert body["messages"] == [{"role": "system", "content": "sys "}, {"role": "user", "content": "hello"}]


def test_chat_thinking_and_tool_calls_are_tokens_content_is_output():
    vt = VirtualTime()
    c = ollama([(40, {"message": {"role": "assistant", "content": "", "thinking": "hmm"}, "done": False}),
                (20, {"message": {"role": "assistant", "content": "", "tool_calls": [{"function": {}}]},
                      "done": False}),
                (1, {**FINAL, "eval_count": 2})], vt)
    c.api = "chat"
    rec = c.stream("", "q", 2)
    assert metrics.ttft_ms(rec) == pytest.approx(40) and metrics.ttfo_ms(rec) == pytest.approx(60)


def test_an_omitted_prompt_eval_count_is_the_prompt_cache_not_missing_usage():
    vt = VirtualTime()
    final = {k: v for k, v in FINAL.items() if k not in ("prompt_eval_count", "prompt_eval_duration")}
    c = ollama([(5, {"response": "a", "done": False}), (1, final)], vt)
    rec = c.stream("", "q", 3, expected_prompt_tokens=12)
    assert rec.prompt_tokens is None and rec.prompt_deviation is None
    assert rec.server_timings["prompt_cached"] is True and rec.server_timings["prefill_ms"] == 0
    rec = ollama([(5, {"response": "a", "done": False}), (1, FINAL)], vt).stream("", "q", 3)
    assert "prompt_cached" not in rec.server_timings


def test_load_duration_is_kept_for_cold_start_detection():
    from pytest_llm_latency.core.measure import coldstart

    vt = VirtualTime()
    recs = [ollama([(5, {"response": "a", "done": False}), (1, {**FINAL, "load_duration": ns})], vt).stream("", "q", 3)
            for ns in (4_000_000, 2_400_000_000)]
    assert [r.server_timings["load_ms"] for r in recs] == [4.0, 2400.0]
    assert [coldstart.is_cold(r) for r in recs] == [False, True]


def tagged(names):
    def handler(request):
        return httpx.Response(200, json={"models": [{"name": n} for n in names]})
    return lambda model: OllamaClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://o", model)


@pytest.mark.parametrize("model", ["llama3", "llama3:latest", "qwen2:7b"])
def test_a_listed_model_passes_with_the_latest_tag_rule(model):
    assert tagged(["llama3:latest", "qwen2:7b"])(model).check_model() is None


@pytest.mark.parametrize("model, hint", [("lama3", "did you mean 'llama3:latest'?"),
                                         ("qwen2", "did you mean 'qwen2:7b'?"),
                                         ("qwen2:8b", "did you mean 'qwen2:7b'?"),
                                         ("mistral", "(/api/tags lists llama3:latest, qwen2:7b) -- `ollama pull")])
def test_an_unlisted_model_is_an_error_with_close_matches(model, hint):
    with pytest.raises(MeasurementError) as ei:
        tagged(["llama3:latest", "qwen2:7b"])(model).check_model()
    assert ei.value.kind == "unknown_model" and hint in ei.value.message, ei.value.message
    assert f"model {model!r} is not available at http://o" in ei.value.message


def test_unload_sends_keep_alive_zero_and_waits_until_api_ps_drops_the_model():
    vt = VirtualTime()
    seen, ps_answers, slept = [], [["llama3:8b"], ["llama3:8b"], []], []

    def handler(request):
        if request.url.path == "/api/ps":
            return httpx.Response(200, json={"models": [{"name": n} for n in ps_answers.pop(0)]})
        seen.append(json.loads(request.content))
        return httpx.Response(200, json={"model": "llama3:8b", "done": True, "done_reason": "unload"})
    c = OllamaClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://o", "llama3:8b", clock=vt,
                     sleep=lambda s: (slept.append(s), vt.advance_ms(s * 1000)))
    c.unload()
    assert seen == [{"model": "llama3:8b", "keep_alive": 0, "stream": False}]
    assert not ps_answers and len(slept) == 2


def test_unload_that_never_happens_is_a_bounded_error():
    vt = VirtualTime()

    def handler(request):
        if request.url.path == "/api/ps":
            return httpx.Response(200, json={"models": [{"name": "llama3:8b"}]})
        return httpx.Response(200, json={"done": True})
    c = OllamaClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://o", "llama3:8b", clock=vt,
                     sleep=lambda s: vt.advance_ms(s * 1000))
    with pytest.raises(MeasurementError, match=r"still lists 'llama3:8b' 30 s after an unload request"):
        c.unload()
