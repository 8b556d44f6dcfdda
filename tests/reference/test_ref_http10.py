"""HTTP/1.0 clients (nginx's default upstream protocol, ``curl --http1.0``) get HTTP/1.0
replies: no chunked encoding (RFC 9112 section 6.1: a server must not send it to a 1.0
client), ``Connection: close`` and the body delimited by the close; HTTP/1.1 is unchanged."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess

import pytest

from tests.reference.refclient import words

MODEL = "llama-3.1-8b"
STREAM = {"model": MODEL, "prompt": words(12), "max_tokens": 5, "ignore_eos": True, "stream": True}


def raw_exchange(url: str, request: bytes, timeout_s: float = 10.0) -> tuple[bytes, bool]:
    """Send ``request`` and read until the server closes (True) or ``timeout_s`` passes
    with the connection still open (False)."""
    host, port = url.split("://", 1)[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout_s) as s:
        s.sendall(request)
        data = b""
        try:
            while True:
                got = s.recv(65536)
                if not got:
                    return data, True
                data += got
        except socket.timeout:
            return data, False


def post(path: str, body: dict, version: str, extra: str = "") -> bytes:
    raw = json.dumps(body).encode()
    return (f"POST {path} HTTP/{version}\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(raw)}\r\n\r\n").encode() + raw


def split(reply: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    return lines[0], headers, body


def sse_events(body: bytes) -> list[str]:
    return [blk[len(b"data: "):].decode() for blk in body.split(b"\n\n") if blk.startswith(b"data: ")]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (.ci/run installs it)")
def test_curl_http10_gets_a_valid_http10_stream(fast_server):
    out = subprocess.run(
        ["curl", "--http1.0", "-sS", "-i", "--max-time", "20", "-H", "Content-Type: application/json",
         "-d", json.dumps(STREAM), "-w", "\n%{http_version} %{exitcode}", fast_server.url + "/v1/completions"],
        capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr
    reply, _, trailer = out.stdout.rpartition(b"\n")
    assert trailer == b"1 0", trailer  # curl read it as HTTP/1.0, without an error
    status, headers, body = split(reply)
    assert status == "HTTP/1.0 200 OK"
    assert "transfer-encoding" not in headers and "content-length" not in headers, headers
    assert headers["connection"] == "close" and headers["content-type"].startswith("text/event-stream")
    events = sse_events(body)
    assert events[-1] == "[DONE]" and len(events) == 5 + 1, events
    assert all(json.loads(e)["object"] == "text_completion" for e in events[:-1])


def test_http10_stream_is_delimited_by_the_close_without_chunk_framing(fast_server):
    reply, closed = raw_exchange(fast_server.url, post("/v1/completions", STREAM, "1.0"))
    assert closed, "the server must close an HTTP/1.0 stream: the close ends the body"
    status, headers, body = split(reply)
    assert status.startswith("HTTP/1.0 200") and headers["connection"] == "close"
    assert body.startswith(b"data: {") and body.endswith(b"data: [DONE]\n\n"), body[:80]  # no "1f\r\n" sizes
    assert len(sse_events(body)) == 6


def test_http10_keep_alive_is_honoured_for_a_content_length_answer(fast_server):
    req = b"GET /v1/models HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"
    reply, closed = raw_exchange(fast_server.url, req, timeout_s=1.0)
    status, headers, body = split(reply)
    assert not closed and status == "HTTP/1.0 200 OK" and headers["connection"] == "keep-alive"
    assert int(headers["content-length"]) == len(body) and json.loads(body)["data"][0]["id"] == MODEL
    plain, closed = raw_exchange(fast_server.url, b"GET /v1/models HTTP/1.0\r\nHost: x\r\n\r\n")
    assert closed and split(plain)[1]["connection"] == "close"


def test_http10_client_gets_no_100_continue(fast_server):
    reply, closed = raw_exchange(fast_server.url, post("/v1/completions", STREAM, "1.0", "Expect: 100-continue\r\n"))
    assert closed and reply.startswith(b"HTTP/1.0 200 OK\r\n"), reply[:60]


def test_http11_stream_is_still_chunked_and_kept_alive(fast_server):
    reply, closed = raw_exchange(fast_server.url, post("/v1/completions", STREAM, "1.1"), timeout_s=1.0)
    status, headers, body = split(reply)
    assert status == "HTTP/1.1 200 OK" and headers["transfer-encoding"] == "chunked"
    assert headers["connection"] == "keep-alive" and not closed and body.endswith(b"0\r\n\r\n")
