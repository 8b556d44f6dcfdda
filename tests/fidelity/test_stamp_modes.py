"""Which stamp each run used, end to end through the plugin's real client (``make_http_client`` +
``OpenAIClient``), against servers on loopback:

* plain HTTP on Linux: every read carries the kernel's arrival stamp (``measurement.stamp: kernel``),
  each token's stamp falls inside the emitter's own send of it (between its stamp before the write
  and after: the kernel stamps the arrival during that write, whatever the client was doing), and the
  request's ``t_send`` is the kernel's transmit stamp of its last byte;
* TLS (a self-signed certificate made here with ``openssl``): the reads are the TLS layer's, so the
  run says ``measurement.stamp: read`` and still carries the calibrated bound;
* a platform without kernel stamps (``kernel_stamps.supported`` answering False): the same.

Bounded: a few requests of 16 tokens at 100 tok/s each; every server runs in this process's threads
or a child process with a bounded start."""
from __future__ import annotations

import contextlib
import select
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from pytest_llm_latency.client.transport import kernel_stamps
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.drivers.load_report import client_summary
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.transport.recv_stamp import install
from pytest_llm_latency.core.result.result import measured
from pytest_llm_latency.core.measure.stamp_bounds import read_bound_ms
from pytest_llm_latency.core.spec.workload import make_workload
from tests.helpers.rawserver import read_request

ROOT = Path(__file__).resolve().parents[2]
TOKENS = 16
#: the kernel's realtime stamp converted to the monotonic clock: the offset's bracket is < 1 µs
CONVERSION_MS = 0.05


@contextlib.contextmanager
def emitter(tmp_path: Path):
    stamps = tmp_path / "stamps.jsonl"
    p = subprocess.Popen([sys.executable, str(ROOT / "benchmarks/emitter.py"), "--port", "0", "--ttft-ms", "20",
                          "--tok-per-s", "100", "--default-tokens", str(TOKENS), "--stamps", str(stamps)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 30)
        assert ready, "the emitter printed no URL within 30 s"
        url = p.stdout.readline().strip()
        assert url.startswith("http://"), url
        yield url
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def emitter_truth(url: str, http: httpx.Client):
    import importlib.util

    dump = http.post(url + "/_emitter/dump", json={}).json()
    spec = importlib.util.spec_from_file_location("emitter_stamps", ROOT / "benchmarks/emitter_stamps.py")
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    _, requests, events = mod.load_stamps(dump["path"])
    return requests, events


def stream(url: str, http: httpx.Client, n: int = 3):
    client = OpenAIClient(http, url, "emitter", continuous_usage=False)
    return [client.stream("", f"[stamp-{i}] tell me a story", TOKENS) for i in range(n)]


def summarized(recs, lag_ms: float):
    res = measured(make_workload("w", {"prompt_tokens": 8, "output_tokens": TOKENS, "samples": len(recs)}), recs, [])
    client_summary(res, [int(lag_ms * 1e6)] * 10)
    return res


@pytest.mark.skipif(not kernel_stamps.supported(), reason="kernel stamps are read on 64-bit Linux only")
def test_plain_http_reads_carry_the_kernels_arrival_inside_the_servers_own_write(tmp_path):
    with emitter(tmp_path) as url, make_http_client() as http:
        recs = stream(url, http)
        requests, events = emitter_truth(url, http)
    # the kernel's transmit stamp of the request's last byte (a stamp not yet queued when read falls back)
    assert any(rec.t_written_ns == rec.t_send_ns for rec in recs)
    by_tag = {req["prompt_head"].split("]")[0] + "]": rid for rid, req in requests.items()}
    for i, rec in enumerate(recs):
        assert rec.stamp == "kernel" and rec.read_delays_ns  # one per read (a late one may carry several tokens)
        assert rec.t_send_ns <= rec.t_written_ns  # the departure never after the write returned
        rid = by_tag[f"[stamp-{i}]"]
        toks = [e for e in events[rid] if e["tok"] > 0]
        assert len(toks) == len(rec.chunks) == TOKENS
        tol = CONVERSION_MS * 1e6
        for chunk, e in zip(rec.chunks, toks):
            # the emitter's write of the token holds its arrival, which lies within the stamp's own bound:
            # at the stamp (a token that ended its read) or up to bound_ns before it (it shared a read
            # with later tokens, read late on a busy machine)
            assert e["sent_ns"] - tol <= chunk.t_ns and chunk.t_ns - chunk.bound_ns <= e["wrote_ns"] + tol, \
                (chunk.t_ns - e["sent_ns"], e["wrote_ns"] - e["sent_ns"], chunk.bound_ns)
            if chunk.bound_ns == 0:
                assert chunk.t_ns <= e["wrote_ns"] + tol, (chunk.t_ns - e["wrote_ns"])
        # the request left before the emitter had read it whole
        assert rec.t_send_ns <= requests[rid]["recv_ns"] + CONVERSION_MS * 1e6
    res = summarized(recs, lag_ms=1.0)
    assert res.measurement.stamp == "kernel"
    assert res.client.stamp_bound_ms_p99 is not None
    bounds = sorted(c.bound_ns for rec in recs for c in rec.chunks)
    assert bounds[len(bounds) // 2] == 0   # most tokens ended their read: exact, not the read stamps' bound
    assert res.client.read_delay_ms_p99 is not None


def test_a_platform_without_kernel_stamps_says_read_and_carries_the_calibrated_bound(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_stamps, "supported", lambda: False)
    with emitter(tmp_path) as url, make_http_client() as http:
        recs = stream(url, http, n=2)
    assert {r.stamp for r in recs} == {"read"} and all(not r.read_delays_ns for r in recs)
    assert all(r.t_written_ns is not None and r.t_written_ns >= r.t_send_ns for r in recs)  # the send's bracket
    res = summarized(recs, lag_ms=2.0)
    assert res.measurement.stamp == "read"
    assert res.client.stamp_bound_ms_p99 == pytest.approx(read_bound_ms(2.0), abs=1e-3)
    assert res.client.read_delay_ms_p99 is None


# ------------------------------------------------------------------ TLS
@contextlib.contextmanager
def tls_sse_server(tmp_path: Path):
    """An HTTPS server (self-signed certificate for 127.0.0.1) streaming TOKENS completion events 10 ms
    apart, chunked, then usage and [DONE]; yields (url, an SSL context trusting it)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    lsock = socket.create_server(("127.0.0.1", 0))
    lsock.settimeout(0.5)
    stop = threading.Event()

    def answer(conn: ssl.SSLSocket) -> None:
        conn.settimeout(10)
        with conn:
            while not stop.is_set():
                if read_request(conn) is None:
                    return
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                             b"transfer-encoding: chunked\r\n\r\n")

                def chunk(data: bytes) -> None:
                    conn.sendall(b"%x\r\n%s\r\n" % (len(data), data))

                time.sleep(0.02)
                for _ in range(TOKENS):
                    chunk(b'data: {"choices":[{"index":0,"text":"tok","finish_reason":null}]}\n\n')
                    time.sleep(0.01)
                chunk(b'data: {"choices":[{"index":0,"text":"","finish_reason":"length"}],"usage":{"prompt_tokens":8,'
                      b'"completion_tokens":%d,"total_tokens":%d}}\n\n' % (TOKENS, TOKENS + 8))
                chunk(b"data: [DONE]\n\n")
                conn.sendall(b"0\r\n\r\n")

    def serve() -> None:
        while not stop.is_set():
            try:
                raw, _ = lsock.accept()
            except (socket.timeout, OSError):
                continue
            try:
                conn = ctx.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                raw.close()
                continue
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    client_ctx = ssl.create_default_context(cafile=str(cert))
    try:
        yield f"https://127.0.0.1:{lsock.getsockname()[1]}", client_ctx
    finally:
        stop.set()
        t.join(5)
        lsock.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_tls_reads_are_read_stamped_and_carry_the_calibrated_bound(tmp_path):
    with tls_sse_server(tmp_path) as (url, ctx):
        transport = install(httpx.HTTPTransport(verify=ctx))  # reads stamped as the plugin's own pool does
        with make_http_client(transport=transport) as http:
            recs = stream(url, http, n=2)
    assert all(len(r.chunks) == TOKENS for r in recs)
    assert {r.stamp for r in recs} == {"read"}  # the TLS layer's reads: no kernel stamp to trust
    res = summarized(recs, lag_ms=0.4)
    assert res.measurement.stamp == "read"
    assert res.client.stamp_bound_ms_p99 == pytest.approx(read_bound_ms(0.4), abs=1e-3)
