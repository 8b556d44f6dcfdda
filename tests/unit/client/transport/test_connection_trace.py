"""Connection timing: the httpcore trace callback on synthetic events and a virtual clock,
the pool sized to the workload's concurrency, and warm-up at that concurrency."""
import threading
from types import SimpleNamespace

import httpx
import pytest

from tests.helpers.fakeserver import MS, VirtualTime
from pytest_llm_latency.core.result.result_parts import ClientHealth
from pytest_llm_latency.client.transport.http import (STALE_RETRY_EVENT, ConnectionTrace, ensure_connections,
    make_http_client)
from pytest_llm_latency.client.runner import connection_counts, warm_up
from pytest_llm_latency.core.measure import metrics
from pytest_llm_latency.core.measure.record import RecordBuilder
from pytest_llm_latency.core.result.result import Failure


def P(user):  # warm_up only hands prompts to `one`
    return SimpleNamespace(system="", user=user)


def _play(vt, trace, events):
    for delay_ms, name in events:
        vt.advance_ms(delay_ms)
        trace(name, {})


def test_trace_stamps_send_after_pool_wait_connect_and_tls():
    vt = VirtualTime()
    b = RecordBuilder(vt)
    t_submit = vt.now
    _play(vt, ConnectionTrace(b), [(5, "connection.connect_tcp.started"), (2, "connection.connect_tcp.complete"),
                                   (0, "connection.start_tls.started"), (3, "connection.start_tls.complete"),
                                   (1, "http11.send_request_headers.started"),
                                   (0, "http11.send_request_headers.complete"), (1, "http11.send_request_body.started"),
                                   (0, "http11.receive_response_headers.started")])
    vt.advance_ms(40)
    b.token_chunk(b.stamp())
    rec = b.finish(vt.now)
    assert rec.t_submit_ns == t_submit and rec.t_send_ns == t_submit + 11 * MS
    assert metrics.connect_ms(rec) == pytest.approx(5)       # TCP 2 + TLS 3
    assert metrics.ttft_ms(rec) == pytest.approx(41)          # from the send, body write included
    assert not rec.reconnected


def test_trace_after_stale_retry_uses_the_resend_and_the_reconnect():
    vt = VirtualTime()
    b = RecordBuilder(vt)
    trace = ConnectionTrace(b)
    _play(vt, trace, [(0, "http11.send_request_headers.started"), (300, "http11.receive_response_headers.failed")])
    trace(STALE_RETRY_EVENT, {"exception": None})
    _play(vt, trace, [(1, "connection.connect_tcp.started"), (4, "connection.connect_tcp.complete"),
                      (0, "http11.send_request_headers.started")])
    vt.advance_ms(20)
    b.token_chunk(b.stamp())
    rec = b.finish(vt.now)
    assert rec.reconnected and metrics.ttft_ms(rec) == pytest.approx(20)
    assert metrics.connect_ms(rec) == pytest.approx(4)
    assert (rec.t_send_ns - rec.t_submit_ns) / MS == pytest.approx(305)


def test_without_connection_events_send_is_the_hand_over():
    vt = VirtualTime()
    b = RecordBuilder(vt)
    ConnectionTrace(b)("connection.close.started", {})      # unrelated events change nothing
    assert b.record.t_send_ns == b.record.t_submit_ns and metrics.connect_ms(b.record) is None


def test_a_failed_connect_is_not_a_connect_time():
    vt = VirtualTime()
    b = RecordBuilder(vt)
    _play(vt, ConnectionTrace(b), [(0, "connection.connect_tcp.started"), (9, "connection.connect_tcp.failed")])
    assert metrics.connect_ms(b.record) is None


def _keepalive_limit(http) -> int:
    wrapper = http._transport
    return wrapper.inner._pool._max_keepalive_connections  # httpcore's own limit, as it will apply it


def test_pool_grows_to_the_workload_concurrency_and_never_caps_connections():
    http = make_http_client()
    ensure_connections(http, 4)                               # smaller than the default: kept as is
    small = http._transport.inner
    assert _keepalive_limit(http) >= 4
    ensure_connections(http, 200)                             # more than the old fixed 64
    assert _keepalive_limit(http) == 200 and http._transport.inner is not small
    assert http._transport.inner._pool._max_connections >= 2 ** 31  # uncapped: no wait for a connection
    ensure_connections(http, 8)                               # never shrinks (no churn between workloads)
    assert _keepalive_limit(http) == 200
    http.close()


def test_a_given_transport_is_not_replaced():
    mock = httpx.MockTransport(lambda r: httpx.Response(200))
    http = make_http_client(transport=mock)
    ensure_connections(http, 500)
    assert http._transport.inner is mock
    ensure_connections(None, 3)                               # not our client: no-op


def test_warm_up_runs_at_the_workload_concurrency():
    """Four warm-up requests must be in flight at once: each waits for the other three
    (a sequential warm-up would break this barrier)."""
    together = threading.Barrier(4, timeout=20)
    calls = []

    def one(p):
        calls.append(p.user)
        together.wait()
        return Failure("x", f"failed {p.user}") if p.user == "b" else object()
    prompts = [P("a"), P("b")]
    failures = warm_up(one, prompts, concurrency=4)
    assert sorted(calls) == ["a", "a", "b", "b"]              # max(warmup, concurrency), prompts reused
    assert [f.message for f in failures] == ["failed b", "failed b"]


def test_warm_up_zero_means_none_and_concurrency_one_is_sequential():
    assert warm_up(lambda p: pytest.fail("no warm-up asked"), [], concurrency=8) == []
    order = []
    warm_up(lambda p: order.append(p.user), [P("a"), P("b"), P("c")], 1)
    assert order == ["a", "b", "c"]


def test_connects_and_reconnects_are_counted():
    vt = VirtualTime()
    recs = []
    for connect, stale in ((None, False), (3.0, False), (5.0, True)):
        b = RecordBuilder(vt)
        if connect:
            b.connect_started(vt.now)
            b.connected(vt.now + int(connect * MS))
        b.record.reconnected = stale
        recs.append(b.record)
    client = ClientHealth()
    connection_counts(recs, client)
    assert client.to_json() == {"connect_samples": 2, "reconnected_samples": 1, "connect_ms_p50": 4.0}
    client = ClientHealth()
    connection_counts(recs[:1], client)
    assert client.to_json() == {"connect_samples": 0, "reconnected_samples": 0}
