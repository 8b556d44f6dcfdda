"""The read pump (``client/transport/read_pump.py``) on real loopback sockets: one thread reads every
kernel-stamped streamed body of the process, the connection stays httpcore's (reused after a
whole answer, closed after a cut one), and every failure reaches the request's own thread as the
thread path would raise it.  The assertions are about order, counts and errors, never durations.
"""
from __future__ import annotations

import contextlib
import json
import socket
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from pytest_llm_latency.client.transport import kernel_stamps
from pytest_llm_latency.client.transport.http import Timeouts, ensure_connections, make_http_client
from pytest_llm_latency.client.apis.openai import OpenAIClient
from pytest_llm_latency.client.transport.read_pump import shared_pump
from pytest_llm_latency.client.transport.recv_stamp import use_kernel_stamps
from pytest_llm_latency.core.errors import MeasurementError, ProtocolError
from tests.helpers.rawserver import read_request

pytestmark = pytest.mark.skipif(not kernel_stamps.supported(), reason="the pump reads kernel-stamped sockets (Linux)")


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token(i: int, n: int) -> bytes:
    obj = {"choices": [{"index": 0, "text": " t", "finish_reason": "length" if i == n - 1 else None}],
           "usage": {"prompt_tokens": 5, "completion_tokens": i + 1}}
    return chunk(f"data: {json.dumps(obj)}\n\n".encode())


class ScriptedServer:
    """HTTP/1.1 keep-alive; each POST is answered by ``answer(k, n)`` (k: the POST's number, n: its
    max_tokens), a list of byte strings sent one ``sendall`` each; ``None`` in it holds the answer
    until ``release`` is set (a stall), ``"close"`` closes the connection there."""

    def __init__(self, answer):
        self.answer, self.accepts, self.posts = answer, 0, 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._srv = socket.create_server(("127.0.0.1", 0), backlog=128)
        self._srv.settimeout(0.5)
        self._stop = threading.Event()
        self.url = f"http://127.0.0.1:{self._srv.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self._stop.set()
        self.release.set()
        self._srv.close()

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self._srv.accept()
            except OSError:
                continue
            with self._lock:
                self.accepts += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        conn.settimeout(30)
        with conn, contextlib.suppress(OSError):  # a pooled keep-alive connection left idle ends quietly
            self._answer_requests(conn)

    def _answer_requests(self, conn):
        buf = b""
        while not self._stop.is_set():
            if (request := read_request(conn, buf)) is None:
                return
            body, buf = request
            with self._lock:
                self.posts += 1
                k = self.posts
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n")
            for piece in self.answer(k, int(json.loads(body)["max_tokens"])):
                if piece is None:
                    self.release.wait(30)
                elif piece == "close":
                    conn.shutdown(socket.SHUT_RDWR)
                    return
                else:
                    conn.sendall(piece)


def whole(k, n):
    return [token(i, n) for i in range(n)] + [chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"]


@pytest.fixture
def serve():
    servers = []

    def make(answer=whole):
        servers.append(ScriptedServer(answer))
        return servers[-1]
    yield make
    for s in servers:
        s.close()


def client(url, **timeouts):
    t = Timeouts(**{"connect_s": 5, "idle_s": 10, "total_s": 30, **timeouts})
    return OpenAIClient(make_http_client(t), url, "m", timeouts=t)


def test_whole_answers_are_pumped_and_leave_the_connection_reusable(serve):
    srv = serve()
    c = client(srv.url)
    before = shared_pump().bodies
    records = [c.stream("", "hello", 8) for _ in range(3)]
    assert [len(r.chunks) for r in records] == [8, 8, 8]
    assert all(r.finish_reason == "length" and r.completion_tokens == 8 for r in records)
    assert shared_pump().bodies - before == 3          # read by the pump, not by this thread
    assert srv.accepts == 1                            # the one connection served all three


def test_sixty_four_concurrent_streams_share_one_reading_thread(serve):
    srv = serve()
    c = client(srv.url)
    ensure_connections(c.http, 64)
    before = shared_pump().bodies
    with ThreadPoolExecutor(64) as pool:
        records = list(pool.map(lambda _: c.stream("", "hello", 16), range(128)))
    assert all(len(r.chunks) == 16 and r.completion_tokens == 16 for r in records)
    assert shared_pump().bodies - before == 128
    assert [t.name for t in threading.enumerate()].count("llm-latency-reads") == 1
    assert srv.accepts <= 64                           # kept alive: at most one per concurrent stream


def test_a_stall_inside_the_body_is_the_idle_timeout_after_the_tokens_that_came(serve):
    srv = serve(lambda k, n: [token(0, n), token(1, n), None])
    c = client(srv.url, idle_s=0.3)
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "hello", 8)
    assert ei.value.kind == "idle_timeout" and "after 2 tokens" in ei.value.message, ei.value.message
    assert len(ei.value.partial.chunks) == 2


def test_a_connection_cut_mid_body_is_named_mid_stream_and_not_reused(serve):
    srv = serve(lambda k, n: [token(0, n), "close"] if k == 1 else whole(k, n))
    c = client(srv.url)
    with pytest.raises(MeasurementError) as ei:
        c.stream("", "hello", 4)
    assert "closed mid-stream after 1 tokens" in ei.value.message, ei.value.message
    assert len(c.stream("", "hello", 4).chunks) == 4   # the next request opens a new connection
    assert srv.accepts == 2


def test_a_malformed_event_raised_in_the_pump_reaches_the_request_and_the_connection_is_dropped(serve):
    srv = serve(lambda k, n: [token(0, n), chunk(b"data: {not json\n\n"), chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"]
                if k == 1 else whole(k, n))
    c = client(srv.url)
    with pytest.raises(ProtocolError, match="malformed JSON"):
        c.stream("", "hello", 4)
    assert len(c.stream("", "hello", 4).chunks) == 4
    assert srv.accepts == 2                            # the half-read answer's connection was closed


def test_reads_stamped_when_they_return_stay_on_the_requests_own_thread(serve):
    srv = serve()
    use_kernel_stamps(False)
    try:
        c = client(srv.url)
        before = shared_pump().bodies
        assert len(c.stream("", "hello", 4).chunks) == 4
    finally:
        use_kernel_stamps(True)
    assert shared_pump().bodies == before              # the pump's delay would be in those stamps


def test_a_socket_closed_under_the_pump_fails_its_request_and_the_pump_goes_on(serve):
    srv = serve(lambda k, n: [token(0, n), None] if k == 1 else whole(k, n))
    c = client(srv.url)
    pump = shared_pump()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(c.stream, "", "hello", 4)
        job = None
        for _ in range(500):  # bounded: the request reaches the pump within a few ms of its first token
            job = next(iter(pump._jobs.values()), None)
            if job is not None or pending.done():
                break
            threading.Event().wait(0.01)
        assert job is not None, "the request never reached the pump"
        job.stream._sock.close()                         # closed under it (a bug elsewhere, a test, a fork)
        with pytest.raises(MeasurementError) as ei:
            pending.result(timeout=30)                   # failed by the pump's next scan, not the 10 s idle bound
    assert "closed mid-stream after 1 tokens" in ei.value.message, ei.value.message
    assert len(c.stream("", "hello", 4).chunks) == 4    # the pump still reads
