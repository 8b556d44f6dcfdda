"""Reads are stamped when the socket read returns, before parsing: SSE events that arrived in
one read share its stamp (the parsing of the first is not inside the second's time), and
``events_per_read`` counts real reads.  A raw loopback server writes the whole response
(headers, three token events, usage, [DONE]) in one ``sendall``."""
from __future__ import annotations

import json
from pytest_llm_latency.client.transport.clock import MEASUREMENT_CLOCK

from tests.helpers.rawserver import raw_server
from pytest_llm_latency.client.transport.http import make_http_client
from pytest_llm_latency.client.drivers.load_report import events_per_read
from pytest_llm_latency.client.apis.openai import OpenAIClient


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def _response() -> bytes:
    events = [{"choices": [{"index": 0, "text": f" w{i}", "finish_reason": None if i < 2 else "length"}]}
              for i in range(3)] + [{"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 3}}]
    body = b"".join(_chunked(f"data: {json.dumps(e)}\n\n".encode()) for e in events)
    body += _chunked(b"data: [DONE]\n\n") + b"0\r\n\r\n"
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
            b"connection: close\r\n\r\n" + body)


def test_events_of_one_read_share_the_reads_stamp():
    port, stop = raw_server(lambda request: _response())
    try:
        with make_http_client() as http:
            before = MEASUREMENT_CLOCK()
            rec = OpenAIClient(http, f"http://127.0.0.1:{port}", "m").stream("", "hello", 3)
            after = MEASUREMENT_CLOCK()
    finally:
        stop()
    assert [c.tokens for c in rec.chunks] == [1, 1, 1] and rec.token_count_rule == "one each"
    assert len({c.t_ns for c in rec.chunks}) == 1, [c.t_ns for c in rec.chunks]  # one read, one stamp
    assert before < rec.t_send_ns <= rec.t_first_byte_ns == rec.chunks[0].t_ns < after
    assert events_per_read([rec]) == 3.0


def test_an_injected_clock_stamps_on_its_own():
    """A record kept on another clock is never mixed with the measurement clock's read stamps."""
    ticks = iter(range(10**6))
    port, stop = raw_server(lambda request: _response())
    try:
        with make_http_client() as http:
            rec = OpenAIClient(http, f"http://127.0.0.1:{port}", "m", clock=lambda: next(ticks)).stream("", "x", 3)
    finally:
        stop()
    assert all(c.t_ns < 10**6 for c in rec.chunks) and len({c.t_ns for c in rec.chunks}) == 3
