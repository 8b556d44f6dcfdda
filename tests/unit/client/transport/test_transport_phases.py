"""The transport error mapping by phase -- nothing, status and headers only, N body bytes,
N tokens -- on MockTransport (virtual time: exact "after X s") and on raw-socket servers
(real httpx and h11 errors); and ``/v1/models`` failures reported, not read as "no models"."""
from __future__ import annotations

import json

import httpx
import pytest

from tests.helpers.fakeserver import VirtualTime
from tests.helpers.rawserver import raw_server
from pytest_llm_latency.client.transport.http import Redactor, Timeouts, make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.core.errors import MeasurementError

HINT = "a proxy read timeout shorter than TTFT? (nginx proxy_read_timeout, envoy route timeout)"
SSE = {"content-type": "text/event-stream", "server": "nginx/1.22.1"}
ROLE = b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n'


def token(text: str = "a") -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text}]}).encode() + b"\n\n"


class CutStream(httpx.SyncByteStream):
    """Yields ``parts`` (advancing virtual time ``step_ms`` before each), then raises ``exc``
    (``None``: ends cleanly) after another ``step_ms``."""

    def __init__(self, vt: VirtualTime, parts: list[bytes], exc: Exception | None, step_ms: float = 250.0):
        self.vt, self.parts, self.exc, self.step_ms = vt, parts, exc, step_ms

    def __iter__(self):
        for p in self.parts:
            self.vt.advance_ms(self.step_ms)
            yield p
        self.vt.advance_ms(self.step_ms)
        if self.exc is not None:
            raise self.exc


def mock_client(handler, vt: VirtualTime, model: str | None = "m", **kw) -> OpenAIClient:
    http = make_http_client(transport=httpx.MockTransport(handler))
    return OpenAIClient(http, "http://proxy:8080", model, clock=vt, sleep=lambda s: None, **kw)


def stream_error(parts: list[bytes], exc: Exception | None, step_ms: float = 250.0) -> MeasurementError:
    vt = VirtualTime()

    def handler(request):
        return httpx.Response(200, headers=SSE, stream=CutStream(vt, parts, exc, step_ms))
    with pytest.raises(MeasurementError) as ei:
        mock_client(handler, vt).stream("", "hello", 4)
    return ei.value


def raising(exc: Exception):
    def handler(request):
        raise exc
    with pytest.raises(MeasurementError) as ei:
        mock_client(handler, VirtualTime()).stream("", "hello", 4)
    return ei.value


# ------------------------------------------------------------------ MockTransport, by phase
def test_nothing_received_not_http_keeps_the_protocol_hint():
    err = raising(httpx.RemoteProtocolError("illegal status line: bytearray(b'SSH-2.0-OpenSSH_9.6')"))
    assert err.kind == "protocol" and "invalid HTTP response from http://proxy:8080/v1/completions" in err.message
    assert "not TLS, SSH or another protocol on that port" in err.message


@pytest.mark.parametrize("exc", [httpx.RemoteProtocolError("Server disconnected without sending a response."),
                                 httpx.ReadError("[Errno 104] Connection reset by peer")])
def test_nothing_received_closed_is_named_as_such_not_as_another_protocol(exc):
    err = raising(exc)
    assert err.kind == "reset" and "closed before any response (no status line)" in err.message, err.message
    assert "invalid HTTP response" not in err.message and "token" not in err.message


def test_nothing_received_stall_says_no_status_line():
    err = raising(httpx.ReadTimeout("timed out"))
    assert err.kind == "idle_timeout"
    assert "stall: no bytes from http://proxy:8080/v1/completions for 60s before any response (no status line)" \
        in err.message


def test_status_and_headers_only_then_closed_names_the_proxy_read_timeout():
    err = stream_error([], httpx.RemoteProtocolError("peer closed connection without sending complete message "
                                                      "body (incomplete chunked read)"), step_ms=1000)
    assert err.kind == "reset"
    assert err.message.startswith(
        f"the response from http://proxy:8080/v1/completions started (HTTP 200) but the connection closed after "
        f"1.0 s before the first token — {HINT}. Response headers from: nginx/1.22.1. (RemoteProtocolError: ")
    assert err.partial is not None and err.partial.t_first_token_ns is None


def test_status_and_headers_only_then_idle_is_a_stall_before_any_body_byte():
    err = stream_error([], httpx.ReadTimeout("timed out"))
    assert err.kind == "idle_timeout"
    assert "after the response headers (HTTP 200), before any body byte" in err.message


def test_body_bytes_without_a_token_then_closed_counts_the_bytes():
    err = stream_error([ROLE, b": keep-alive\n\n"], httpx.ReadError("[Errno 104] Connection reset by peer"))
    n = len(ROLE) + len(b": keep-alive\n\n")
    assert err.kind == "reset"
    assert (f"started (HTTP 200) and {n} body bytes arrived, but the connection closed after 0.8 s before the "
            f"first token — {HINT}") in err.message, err.message


def test_body_bytes_then_idle_says_zero_tokens():
    err = stream_error([ROLE], httpx.ReadTimeout("timed out"))
    assert err.kind == "idle_timeout" and f"after {len(ROLE)} body bytes and 0 tokens" in err.message


def test_tokens_then_closed_is_mid_stream_with_the_count_and_partial_timings():
    err = stream_error([token("a"), token("b")], httpx.RemoteProtocolError("peer closed connection"), step_ms=100)
    assert err.kind == "reset"
    assert "connection to http://proxy:8080/v1/completions closed mid-stream after 2 tokens after 0.3 s" \
        in err.message
    assert "before the first token" not in err.message
    assert len(err.partial.chunks) == 2  # TTFT and the gap measured before the cut are kept


def test_tokens_then_idle_is_the_classic_stall():
    err = stream_error([token()], httpx.ReadTimeout("timed out"))
    assert "stall: no bytes from http://proxy:8080/v1/completions for 60s after 1 tokens" in err.message


def test_close_delimited_body_ending_before_a_token_names_the_phase():
    """HTTP/1.0 (close-delimited) bodies end cleanly: no transport error, but no [DONE]."""
    err = stream_error([ROLE], None, step_ms=500)
    assert err.kind == "no_done"
    assert (f"stream ended without 'data: [DONE]' and without a token ({len(ROLE)} body bytes, 1.0 s after the "
            f"request): the server or a proxy closed it before the first token — {HINT}") in err.message


def test_phase_messages_are_redacted():
    vt = VirtualTime()

    def handler(request):
        return httpx.Response(200, headers=SSE, stream=CutStream(vt, [], httpx.RemoteProtocolError("cut")))
    http = make_http_client(transport=httpx.MockTransport(handler))
    c = OpenAIClient(http, "http://user:hunter22@proxy:8080", "m", clock=vt, sleep=lambda s: None,
                     redact=Redactor(secrets=("hunter22",)))
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "x", 2)
    assert "hunter22" not in ei.value.message and "before the first token" in ei.value.message


# -------------------------------------------------------------- raw sockets (real httpx/h11)
HEAD = (b"HTTP/1.1 200 OK\r\nServer: envoy\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


@pytest.mark.parametrize("reply, kind, expect", [
    (b"", "reset", "closed before any response (no status line)"),
    (b"SSH-2.0-OpenSSH_9.6\r\nInvalid SSH identification string.\r\n", "reset", "speaks another protocol"),
    (b"SSH-2.0-OpenSSH_9.6 not http at all\r\n\r\n", "protocol", "not TLS, SSH or another protocol on that port"),
    (HEAD, "reset", "started (HTTP 200) but the connection closed after"),
    (HEAD + chunk(ROLE), "reset", f"started (HTTP 200) and {len(ROLE)} body bytes arrived, but the connection closed"),
    (HEAD + chunk(token("a")) + chunk(token("b")), "reset", "closed mid-stream after 2 tokens"),
], ids=["nothing", "ssh-banner-closed", "not-http", "headers-only", "body-bytes", "tokens"])
def test_raw_socket_phases(reply, kind, expect):
    port, stop = raw_server(lambda request: reply)
    try:
        http = make_http_client(Timeouts(connect_s=5, idle_s=5, total_s=10))
        with http:
            c = OpenAIClient(http, f"http://127.0.0.1:{port}", "m")
            with pytest.raises(MeasurementError) as ei:
                c.stream("", "hello", 4)
    finally:
        stop()
    assert ei.value.kind == kind and expect in ei.value.message, ei.value.message
    if b"HTTP/1.1 200" in reply and b"token" not in reply and b'"text"' not in reply:
        assert HINT in ei.value.message and "Response headers from: envoy" in ei.value.message


# ------------------------------------------------------------------------------ /v1/models
NGINX_502 = (b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway"
             b"</h1></center>\r\n<hr><center>nginx/1.22.1</center>\r\n</body>\r\n</html>\r\n")


def models_client(status: int, body: bytes, ctype: str, model: str | None, secret: str = "",
                  server: str = "nginx/1.22.1") -> OpenAIClient:
    def handler(request):
        if request.url.path == "/v1/models":
            return httpx.Response(status, content=body, headers={"content-type": ctype, "server": server})
        raise AssertionError(f"unexpected request {request.url}")
    http = make_http_client(transport=httpx.MockTransport(handler))
    return OpenAIClient(http, "http://proxy:8080", model, redact=Redactor(secrets=(secret,) if secret else ()))


@pytest.mark.parametrize("model", [None, "llama"])
def test_models_behind_a_proxy_with_the_upstream_down_is_the_proxy_page(model):
    c = models_client(502, NGINX_502, "text/html", model)
    with pytest.raises(MeasurementError) as ei:
        c.resolve_model() if model is None else c.check_model()
    msg = ei.value.message
    assert ei.value.kind == "http_502"
    assert msg.startswith("HTTP 502 response (text/html) from http://proxy:8080/v1/models — a proxy or load "
                          "balancer error page (Server: nginx/1.22.1)?"), msg
    assert "<title>502 Bad Gateway</title>" in msg and "lists none" not in msg


def test_models_envoy_plain_text_503_is_detected_as_a_proxy_page():
    c = models_client(503, b"upstream connect error or disconnect/reset before headers. reset reason: "
                           b"connection failure", "text/plain", None, server="envoy")
    with pytest.raises(MeasurementError) as ei:
        c.resolve_model()
    assert "HTTP 503 response (text/plain)" in ei.value.message and "(Server: envoy)?" in ei.value.message


def test_models_server_error_gives_status_content_type_and_a_redacted_excerpt():
    body = json.dumps({"error": {"message": "engine dead; key sk-secret-123 rejected"}}).encode()
    c = models_client(500, body, "application/json", None, secret="sk-secret-123", server="uvicorn")
    with pytest.raises(MeasurementError) as ei:
        c.resolve_model()
    msg = ei.value.message
    assert ei.value.kind == "http_500" and "sk-secret-123" not in msg
    assert msg.startswith("HTTP 500 (application/json) from http://proxy:8080/v1/models: 'engine dead; key ***")
    assert "could not list its models" in msg


def test_models_not_served_is_fine_with_a_configured_model_and_named_without_one():
    with_model = models_client(404, b'{"detail":"Not Found"}', "application/json", "llama")
    assert with_model.models() == [] and with_model.check_model() is None
    only_completions = models_client(404, b"<html><h1>404 Not Found</h1></html>", "text/html", "llama")
    assert only_completions.models() == []  # a proxy exposing the completion path only
    without = models_client(404, b'{"detail":"Not Found"}', "application/json", None)
    with pytest.raises(MeasurementError, match=r"HTTP 404 \(application/json\) from http://proxy:8080/v1/models: "
                                               r"'Not Found' — set --llm-latency-model"):
        without.resolve_model()


def test_models_answer_cut_after_the_headers_names_that_phase():
    port, stop = raw_server(lambda request: b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                            b"Content-Length: 500\r\n\r\n{\"data\": [")
    try:
        with make_http_client(Timeouts(connect_s=5, idle_s=5)) as http:
            with pytest.raises(MeasurementError) as ei:
                OpenAIClient(http, f"http://127.0.0.1:{port}", None).resolve_model()
    finally:
        stop()
    assert ei.value.kind == "reset"
    assert "/v1/models started (HTTP 200) but the connection closed after 10 body bytes" in ei.value.message
    assert "before the answer was complete" in ei.value.message
