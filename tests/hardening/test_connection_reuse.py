"""Real loopback connections: after warm-up no measured sample pays a connect, and a
forced stale keep-alive reconnect is flagged and timed as connect_ms, not as TTFT.

The server below speaks HTTP/1.1 keep-alive with chunked SSE and stamps ground truth with
the same clock as the client (``client.transport.clock.MEASUREMENT_CLOCK``, same process): when it accepted
each connection and when it dropped a request on a kept-alive connection.  The assertions
compare order of events (causal), not durations, so a loaded machine cannot break them.
"""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from pytest_llm_latency.client.transport.clock import MEASUREMENT_CLOCK
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.runner import measure
from pytest_llm_latency.core.checks import judge
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.spec.workload import Workload

clock = MEASUREMENT_CLOCK  # the client's default clock


class KeepAliveSSE:
    """OpenAI /v1/completions over keep-alive connections.  ``drop_post``: the k-th POST (1-based),
    if it arrives on a connection that already served one, is read and then dropped without
    an answer after ``drop_wait_s`` (a server closing a kept-alive connection)."""

    def __init__(self, first_token_s: float = 0.05, drop_post: int | None = None, drop_wait_s: float = 0.3):
        self.first_token_s, self.drop_post, self.drop_wait_s = first_token_s, drop_post, drop_wait_s
        self.accepts: list[int] = []
        self.drops: list[int] = []
        self.posts = 0
        self._lock = threading.Lock()
        self._srv = socket.socket()
        self._srv.bind(("127.0.0.1", 0))
        self._srv.listen(64)
        self._srv.settimeout(0.5)
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._srv.getsockname()[1]}"
        threading.Thread(target=self._accept_loop, daemon=True).start()

    def close(self):
        self._stop.set()
        self._srv.close()

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                continue
            self.accepts.append(clock())
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket):
        conn.settimeout(30)
        buf = b""
        served_here = 0
        with conn:
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next((int(ln.split(":", 1)[1]) for ln in lines if ln.lower().startswith("content-length:")), 0)
                while len(buf) < length:
                    buf += conn.recv(65536)
                body, buf = buf[:length], buf[length:]
                if not lines[0].startswith("POST"):
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                with self._lock:
                    self.posts += 1
                    k = self.posts
                if k == self.drop_post and served_here > 0:
                    time.sleep(self.drop_wait_s)   # the client waits on a dead connection meanwhile
                    self.drops.append(clock())
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                served_here += 1
                self._stream(conn, json.loads(body))

    def _stream(self, conn: socket.socket, req: dict):
        n = int(req.get("max_tokens", 2))

        def chunk(data: bytes) -> bytes:
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        time.sleep(self.first_token_s)
        for i in range(n):
            obj = {"choices": [{"index": 0, "text": " t", "finish_reason": "length" if i == n - 1 else None}],
                   "usage": {"prompt_tokens": 5, "completion_tokens": i + 1}}
            conn.sendall(chunk(f"data: {json.dumps(obj)}\n\n".encode()))
        conn.sendall(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


@pytest.fixture
def server(request):
    srv = KeepAliveSSE(**getattr(request, "param", {}))
    yield srv
    srv.close()


def _measure(server, **w):
    http = make_http_client()
    client = OpenAIClient(http, server.url, "m", clock=clock)
    try:
        workload = Workload(name="w", klass="custom", prompt_tokens=5, output_tokens=3, **w)
        return judge(measure(client, workload, counter=lambda text: len(text.split()) + 1))
    finally:
        http.close()


def test_no_measured_sample_pays_a_connect_after_warm_up_at_concurrency_4(server):
    # warmup 2 < concurrency 4: the warm-up still opens all four connections
    res = _measure(server, samples=12, warmup=2, concurrency=4)
    assert res.n == 12 and not res.failures, res.failures
    assert res.client.connect_samples == 0 and res.client.reconnected_samples == 0
    first_send = min(r.t_send_ns for r in res.records)
    assert len(server.accepts) == 4                      # ground truth: one connection per concurrent stream
    assert max(server.accepts) < first_send              # ...all open before the first measured send


@pytest.mark.parametrize("server", [{"drop_post": 3, "drop_wait_s": 0.3}], indirect=True)
def test_forced_reconnect_is_flagged_and_timed_as_connect_not_ttft(server):
    res = _measure(server, samples=4, warmup=1, concurrency=1)  # POST 1 warm-up, POST 3 = second sample
    assert res.n == 4 and not res.failures, res.failures
    flagged = [r for r in res.records if r.reconnected]
    assert len(flagged) == 1 and len(server.drops) == 1
    rec = flagged[0]
    assert res.client.reconnected_samples == 1 and res.client.connect_samples == 1
    assert metrics.connect_ms(rec) is not None and rec.t_connect_ns > server.drops[0]
    # TTFT starts at the re-send, after the server dropped the first attempt (ground truth)
    assert rec.t_send_ns > server.drops[0] > rec.t_submit_ns
    assert not any("re-sent" in n for n in res.notes)  # counted (extra, JUnit), not a warning: TTFT is right
    assert all(metrics.connect_ms(r) is None for r in res.records if r is not rec)
