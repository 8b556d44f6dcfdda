"""OpenAI adapter on a scripted MockTransport with virtual time: exact timings."""
import httpx
import pytest

from tests.helpers.fakeserver import Script, VirtualTime, make_transport
from pytest_llm_latency.client.transport.http import Redactor, Timeouts, make_http_client, map_transport_error
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.errors import MeasurementError


def client(script, api="completions", **kw):
    vt = VirtualTime()
    http = make_http_client(transport=make_transport(script, vt), api_key=kw.pop("api_key", None))
    return OpenAIClient(http, "http://fake", script.model, api, clock=vt, sleep=lambda s: None, **kw), vt


def test_completions_ttft_tpot_exact():
    c, _ = client(Script(ttft_ms=120, tpot_ms=25))
    rec = c.stream("", "hello world", 10, expected_prompt_tokens=3)
    assert metrics.ttft_ms(rec) == pytest.approx(120)
    assert metrics.tpot_ms(rec) == pytest.approx(25)
    assert rec.completion_tokens == 10 and rec.prompt_tokens == 3 and rec.finish_reason == "length"
    assert rec.token_counts_exact


def test_role_only_first_chunk_is_not_ttft():
    c, _ = client(Script(ttft_ms=300, tpot_ms=10, role_chunk_ms=5), api="chat")
    rec = c.stream("sys", "hi there", 4)
    assert (rec.t_first_byte_ns - rec.t_send_ns) / 1e6 == pytest.approx(5)
    assert metrics.ttft_ms(rec) == pytest.approx(300)


def test_three_tokens_in_one_chunk_count_as_three():
    c, _ = client(Script(ttft_ms=100, tpot_ms=10, tokens_per_chunk=3))
    rec = c.stream("", "x", 9)
    assert [ch.tokens for ch in rec.chunks] == [3, 3, 3]
    itl = metrics.itl_ms(rec)
    assert len(itl) == 6 and itl == pytest.approx([10.0] * 6)  # 30 ms gaps / 3 tokens
    assert metrics.tpot_ms(rec) == pytest.approx((180 - 120) / 8)  # chunks at 120, 150, 180 ms


def test_without_continuous_usage_chunks_count_one_and_tpot_uses_usage():
    c, _ = client(Script(ttft_ms=100, tpot_ms=10, tokens_per_chunk=2, continuous_usage=False))
    rec = c.stream("", "x", 8)
    assert not rec.token_counts_exact
    assert rec.output_tokens == 8
    assert metrics.tpot_ms(rec) == pytest.approx((170 - 110) / 7)


def test_short_output_is_flagged():
    c, _ = client(Script(stop_after=3))
    rec = c.stream("", "x", 10)
    assert rec.short_output and rec.finish_reason == "stop"


def test_request_body_forces_length_and_usage():
    s = Script()
    c, _ = client(s)
    c.stream("", "x", 7)
    body = s.requests[-1]
    assert body["max_tokens"] == 7 and body["ignore_eos"] is True and body["min_tokens"] == 7
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert s.seen_headers[-1]["accept-encoding"] == "identity"


def test_api_key_sent_as_bearer_and_redacted_from_errors():
    s = Script(status=500, error_body='{"error": {"message": "bad key sk-test-SECRET"}}')
    vt = VirtualTime()
    http = make_http_client(transport=make_transport(s, vt), api_key="sk-test-SECRET")
    c = OpenAIClient(http, "http://fake", "m", clock=vt, redact=Redactor(("sk-test-SECRET",)))
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "x", 3)
    assert s.seen_headers[-1]["authorization"] == "Bearer sk-test-SECRET"
    assert "sk-test-SECRET" not in str(ei.value) and "***" in str(ei.value)
    assert "sk-test-SECRET" not in repr(c)


def test_missing_done_is_a_failed_request():
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=b'data: {"choices":[{"text":"a"}]}\n\n')
    c = OpenAIClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://x", "m")
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "x", 3)
    assert ei.value.kind == "no_done"


def test_error_event_inside_200_stream_shows_server_message():
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=b'data: {"error": {"message": "CUDA out of memory"}}\n\ndata: [DONE]\n\n')
    c = OpenAIClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://x", "m")
    with pytest.raises(MeasurementError, match="CUDA out of memory"):
        c.stream("", "x", 3)


def test_html_error_page_is_reported_as_proxy():
    def handler(request):
        return httpx.Response(200, headers={"content-type": "text/html"}, content=b"<html>Bad gateway</html>")
    c = OpenAIClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://x", "m")
    with pytest.raises(MeasurementError, match=r"non-SSE response \(text/html\).*proxy"):
        c.stream("", "x", 3)


def test_429_is_retried_a_bounded_number_of_times_and_counted():
    calls = []

    def handler(request):
        calls.append(1)
        return httpx.Response(429, headers={"retry-after": "3"}, json={"error": {"message": "busy"}})
    waits = []
    c = OpenAIClient(httpx.Client(transport=httpx.MockTransport(handler)), "http://x", "m", sleep=waits.append)
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "x", 3)
    assert ei.value.kind == "http_429" and len(calls) == 3 and waits == [3.0, 3.0]
    assert "after 2 retries" in str(ei.value) and "Retry-After: 3" in str(ei.value)


def test_stale_keepalive_connection_is_retried_once_then_reported():
    calls = []

    def handler(request):
        calls.append(1)
        if len(calls) == 1:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, json={"data": [{"id": "m"}]})
    http = make_http_client(transport=httpx.MockTransport(handler))
    assert http.get("http://x/v1/models").status_code == 200 and len(calls) == 2

    def always(request):
        raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
    c = OpenAIClient(make_http_client(transport=httpx.MockTransport(always)), "http://x", "m")
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "x", 3)
    # closed with nothing sent is not "another protocol": the phase is named, not TLS/SSH
    assert ei.value.kind == "reset" and "closed before any response (no status line)" in str(ei.value)
    assert "invalid HTTP response" not in str(ei.value)


def test_tokenize_endpoint_that_ignores_our_field_is_not_trusted():
    from pytest_llm_latency.client.prepare.tokens import tokenize_endpoint

    def handler(request):
        import json as _json
        body = _json.loads(request.content)
        if request.url.path == "/tokenize" and "content" in body:  # llama.cpp shape
            return httpx.Response(200, json={"tokens": list(range(len(body["content"]) + 2))})
        if request.url.path == "/tokenize":                         # vLLM shape ignored: 0 tokens
            return httpx.Response(200, json={"tokens": []})
        return httpx.Response(404)
    c = OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://x", "m")
    count = tokenize_endpoint(c)
    assert count("abcd") == 6


def test_server_rejecting_continuous_usage_stats_is_retried_without_it():
    bodies = []

    def handler(request):
        import json as _json
        body = _json.loads(request.content)
        bodies.append(body)
        if body["stream_options"].get("continuous_usage_stats"):
            return httpx.Response(400, json={"error": {"message": "Unrecognized request argument: "
                                                                  "stream_options.continuous_usage_stats"}})
        return httpx.Response(200, headers={"content-type": "text/event-stream"},
                              content=b'data: {"choices":[{"text":"a","finish_reason":"length"}]}\n\n'
                                      b'data: {"choices":[],"usage":{"prompt_tokens":2,"completion_tokens":1}}\n\n'
                                      b'data: [DONE]\n\n')
    c = OpenAIClient(make_http_client(transport=httpx.MockTransport(handler)), "http://x", "m")
    assert c.stream("", "x", 1).completion_tokens == 1
    assert c.stream("", "x", 1).completion_tokens == 1
    assert [("continuous_usage_stats" in b["stream_options"]) for b in bodies] == [True, False, False]


def test_small_answers_are_bounded_in_total_not_just_per_read():
    from pytest_llm_latency.client.transport.http import bounded_request

    now = [0.0]

    def clock():
        return now[0]

    def trickle():  # one byte per (virtual) second: every single read is quick
        for b in b'{"data": []}' * 100:
            now[0] += 1.0
            yield bytes([b])

    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=trickle())))
    with pytest.raises(httpx.ReadTimeout, match="longer than 5s in all") as info:
        bounded_request(http, "GET", "http://x/v1/models", total_s=5, clock=clock)
    assert now[0] == 6.0  # stopped at the first read past the deadline
    # named as a trickle past the total deadline, not as a stall of idle_s
    err = map_transport_error(info.value, "http://x", Timeouts(idle_s=60.0), Redactor())
    assert err.kind == "total_timeout" and "stall" not in err.message, err.message
    assert "still arriving after 5s in all (6 body bytes by then)" in err.message, err.message
    big = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, content=b"x" * 100)))
    with pytest.raises(httpx.DecodingError, match="larger than 10 bytes"):
        bounded_request(big, "GET", "http://x/metrics", total_s=5, max_bytes=10)
    ok = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200, json={"data": [{"id": "m"}]})))
    assert bounded_request(ok, "GET", "http://x/v1/models", total_s=5).json() == {"data": [{"id": "m"}]}


# ---------------------------------------------------------------- connection timing
def _sim_client(script, vt, **sim):
    from tests.helpers.connsim import SimulatedConnections

    transport = SimulatedConnections(make_transport(script, vt), vt, **sim)
    return OpenAIClient(make_http_client(transport=transport), "http://fake", script.model, clock=vt,
                        sleep=lambda s: None), transport


def test_ttft_starts_at_the_send_on_an_open_connection_and_connect_is_apart():
    vt = VirtualTime()
    c, _ = _sim_client(Script(ttft_ms=100, tpot_ms=10), vt, pool_wait_ms=7, connect_ms=3, tls_ms=4)
    rec = c.stream("", "x", 5)
    assert metrics.ttft_ms(rec) == pytest.approx(100)           # not 114: pool wait + connect + TLS are out
    assert metrics.connect_ms(rec) == pytest.approx(7)          # TCP 3 + TLS 4
    assert (rec.t_send_ns - rec.t_submit_ns) / 1e6 == pytest.approx(14)
    assert metrics.e2e_ms(rec) == pytest.approx(140) and not rec.reconnected
    again = c.stream("", "x", 5)                                 # the connection is kept alive
    assert metrics.connect_ms(again) is None and metrics.ttft_ms(again) == pytest.approx(100)


def test_stale_keepalive_retry_is_flagged_and_its_ttft_starts_at_the_resend():
    vt = VirtualTime()
    c, transport = _sim_client(Script(ttft_ms=30, tpot_ms=10), vt, already_open=True, stale_after_ms=500,
                               connect_ms=2)
    rec = c.stream("", "x", 3)
    assert transport.attempts == 2 and rec.reconnected
    assert metrics.ttft_ms(rec) == pytest.approx(30)             # not 532: the dead attempt is not server time
    assert metrics.connect_ms(rec) == pytest.approx(2)           # the reconnect, reported apart
