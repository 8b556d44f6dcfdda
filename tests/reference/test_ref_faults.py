"""One quick check per fault mode: the raw response is what the mode promises.

Timing checks (stall, trickle) compare a fault's seconds with gaps of the same stream
and leave headroom for a busy 2-core machine: a read can be ~100 ms late there."""
from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from pytest_llm_latency.core.errors import ConfigError
from pytest_llm_latency.targets.reference.faults import MAX_FAULT_SECONDS, parse_fault

BODY = {"prompt": "a b c d", "max_tokens": 8, "ignore_eos": True, "stream": True}


def raw(client: httpx.Client, url: str, fault: str | None, body: dict = BODY, path: str = "/v1/completions"):
    """-> (status, headers, [(t, line)], error) reading raw lines, keeping what came before an error."""
    headers = {"x-reference-fault": fault} if fault else {}
    lines, buf, err = [], b"", None
    with client.stream("POST", url + path, json=body, headers=headers, timeout=10.0) as resp:
        try:
            for chunk in resp.iter_raw():
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line:
                        lines.append((time.perf_counter(), line))
        except httpx.HTTPError as e:
            err = e
        if buf:
            lines.append((time.perf_counter(), buf))
        return resp.status_code, resp.headers, lines, err


def data(lines):
    return [line[6:] for _, line in lines if line.startswith(b"data: ")]


def tokens(lines) -> int:
    n = 0
    for d in data(lines):
        try:
            obj = json.loads(d)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("choices"):
            n += len((obj["choices"][0].get("text") or "").split())
    return n


def http_request(port: int, headers: str = "") -> bytes:
    body = json.dumps(BODY).encode()
    req = (f"POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n{headers}"
           f"content-length: {len(body)}\r\n\r\n").encode() + body
    return req


@pytest.fixture(scope="module")
def server():
    from pytest_llm_latency.targets.reference.launch import start_reference

    with start_reference("reference://h100-sxm/llama-3.1-8b?time_scale=0.05", mode="thread") as h:
        yield h


@pytest.fixture
def client():
    with httpx.Client() as c:
        yield c


def _recv_all(sock: socket.socket, seconds: float) -> tuple[bytes, bool]:
    """Read until EOF/reset or ``seconds``; -> (bytes, closed by peer)."""
    sock.settimeout(0.1)
    out, deadline = b"", time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            return out, True
        if not chunk:
            return out, True
        out += chunk
    return out, False


def test_refuse_server_wide(serve):
    h = serve("time_scale=0&fault=refuse", mode="thread")
    port = int(h.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(http_request(port))
        except OSError:
            pass
        got, closed = _recv_all(s, 3)
    assert got == b"" and closed
    with pytest.raises(httpx.TransportError):
        httpx.get(h.url + "/health", timeout=3)


def test_refuse_per_request(server):
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(http_request(port, "x-reference-fault: refuse\r\n"))
        got, closed = _recv_all(s, 3)
    assert got == b"" and closed


def test_reset_after_k_tokens(server, client):
    status, _, lines, err = raw(client, server.url, "reset;after=3")
    assert status == 200 and isinstance(err, (httpx.ReadError, httpx.RemoteProtocolError))
    assert tokens(lines) == 3 and b"[DONE]" not in b"".join(data(lines))


def test_stall_pauses_mid_stream(server, client):
    status, _, lines, err = raw(client, server.url, "stall;after=2;seconds=1")
    assert status == 200 and err is None
    times = [t for t, line in lines if line.startswith(b"data: {")]
    gaps = [b - a for a, b in zip(times, times[1:])]
    # one 1 s pause after the 2nd token; the other gaps are 0.3 ms steps (time_scale 0.05)
    assert gaps[1] >= 0.9 and max(gaps[:1] + gaps[2:]) < 0.45, gaps
    assert tokens(lines) == 8 and data(lines)[-1] == b"[DONE]"


def test_trickle_sends_one_byte_at_a_time(server):
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(http_request(port, "x-reference-fault: trickle;bytes_per_s=10;max_seconds=1\r\n"))
        t0 = time.monotonic()
        got, closed = _recv_all(s, 6)
        elapsed = time.monotonic() - t0
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    # ~10 bytes in 1 s, then closed; late wake-ups send fewer bytes and close later
    assert 5 <= len(body) <= 13 and closed and 0.9 <= elapsed < 3.0, (len(body), closed, elapsed)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(http_request(port, "x-reference-fault: trickle;bytes_per_s=20;max_seconds=0.5;headers=1\r\n"))
        got, closed = _recv_all(s, 5)
    assert closed and 5 <= len(got) <= 12 and b"HTTP/1.1 200 OK".startswith(got[:len(b"HTTP/1.1 200 OK")])


@pytest.mark.parametrize("fault, status, ctype, retry_after, needle", [
    ("429", 429, "application/json", "1", b"RateLimitError"),
    ("429;retry_after=7", 429, "application/json", "7", b"Too many"),
    ("503", 503, "application/json", None, b"ServiceUnavailable"),
    ("503;retry_after=2", 503, "application/json", "2", b"ServiceUnavailable"),
    ("context_length", 400, "application/json", None, b"maximum context length"),
    ("html502", 502, "text/html", None, b"<html>"),
])
def test_status_faults(server, client, fault, status, ctype, retry_after, needle):
    r = client.post(server.url + "/v1/completions", json=BODY, headers={"x-reference-fault": fault})
    assert r.status_code == status and r.headers["content-type"] == ctype
    assert r.headers.get("retry-after") == retry_after and needle in r.content
    if ctype == "application/json":
        assert r.json()["error"]["code"] == status


def test_malformed_json_event(server, client):
    _, _, lines, err = raw(client, server.url, "malformed_json;after=2")
    bad = []
    for d in data(lines)[:-1]:
        try:
            json.loads(d)
        except ValueError:
            bad.append(d)
    assert err is None and len(bad) == 1
    assert tokens(lines) == 8 and data(lines)[-1] == b"[DONE]"


def test_missing_done(server, client):
    body = {**BODY, "stream_options": {"include_usage": True}}
    _, _, lines, err = raw(client, server.url, "no_done", body)
    assert err is None and tokens(lines) == 8
    assert b"[DONE]" not in data(lines) and json.loads(data(lines)[-1])["choices"] == []


def test_error_event_mid_stream(server, client):
    status, _, lines, err = raw(client, server.url, "error_event;after=2")
    events = data(lines)
    assert status == 200 and err is None and tokens(lines) == 2
    error = json.loads(events[-2])["error"]
    assert set(error) >= {"message", "type", "code"} and events[-1] == b"[DONE]"


def test_early_stop_despite_ignore_eos(server, client):
    r = client.post(server.url + "/v1/completions", json={**BODY, "stream": False, "max_tokens": 20},
                    headers={"x-reference-fault": "early_stop;after=3"}).json()
    assert r["choices"][0]["finish_reason"] == "stop" and r["usage"]["completion_tokens"] == 3


def test_huge_line(server, client):
    _, _, lines, err = raw(client, server.url, "huge_line;bytes=2000000;after=1")
    sizes = sorted(len(line) for _, line in lines)
    assert err is None and sizes[-1] >= 2_000_000 and sizes[-2] < 1000
    json.loads(max((line for _, line in lines), key=len)[6:])            # valid JSON, just huge
    assert tokens(lines) == 8 and data(lines)[-1] == b"[DONE]"


def test_wrong_content_type(server, client):
    status, headers, lines, _ = raw(client, server.url, "wrong_content_type")
    assert status == 200 and headers["content-type"] == "application/json" and data(lines)[-1] == b"[DONE]"
    r = client.post(server.url + "/v1/completions", json=BODY,
                    headers={"x-reference-fault": "wrong_content_type;body=json"})
    assert r.headers["content-type"] == "application/json" and r.json()["usage"]["completion_tokens"] == 8


def test_ollama_stream_faults(server, client):
    body = {"model": "llama-3.1-8b", "prompt": "a b", "options": {"num_predict": 5}}
    _, _, lines, _ = raw(client, server.url, "error_event;after=1", body, "/api/generate")
    objs = [json.loads(line) for _, line in lines]
    assert "error" in objs[-1] and not any(o.get("done") for o in objs)
    _, _, lines, _ = raw(client, server.url, "no_done", body, "/api/generate")
    assert not any(json.loads(line).get("done") for _, line in lines)


def test_server_wide_fault_spares_health(serve):
    h = serve("time_scale=0&fault=503", mode="thread")
    assert httpx.get(h.url + "/health").status_code == 200
    assert httpx.post(h.url + "/v1/completions", json=BODY).status_code == 503


def test_bad_fault_header_and_bounds(server, client):
    r = client.post(server.url + "/v1/completions", json=BODY, headers={"x-reference-fault": "explode"})
    assert r.status_code == 400 and "unknown fault mode" in r.json()["error"]["message"]
    assert parse_fault("stall;seconds=1000").seconds("seconds") == MAX_FAULT_SECONDS
    assert parse_fault("trickle;max_seconds=1e9").seconds("max_seconds") == MAX_FAULT_SECONDS
    assert parse_fault("none") is None and parse_fault("rate_limit").mode == "429"
    for bad in ("huge_line;bytes=999999999", "trickle;bytes_per_s=0", "stall;after=-1", "stall;after=x"):
        with pytest.raises(ConfigError):
            parse_fault(bad)
