"""Kernel arrival stamps (client.transport.kernel_stamps) on a real loopback socket, against the sender's own
stamps; and the realtime -> monotonic offset on injected clocks."""
import socket
import threading
import time

import pytest

from pytest_llm_latency.client.transport import kernel_stamps as ks


def test_the_offset_comes_from_the_narrowest_bracket():
    mono = iter([100, 180, 1000, 1010, 2000, 2500])     # brackets of 80, 10 and 500 ns
    real = iter([5_000_140, 5_000_905, 5_002_250])
    off = ks.sample_offset(3, monotonic=lambda: next(mono), realtime=lambda: next(real))
    assert off.realtime_minus_monotonic_ns == 5_000_905 - 1005 and off.uncertainty_ns == 5


@pytest.mark.skipif(not ks.supported(), reason="kernel arrival stamps are read on 64-bit Linux only")
def test_a_late_read_knows_when_its_events_arrived_and_its_own_delay():
    # three events sent 20 ms apart; the reader sleeps 50 ms after the last before reading once
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=10)
    conn, _ = server.accept()
    assert ks.enable(client)
    sends: list[tuple[int, int]] = []

    def sender():
        for i in range(3):
            if i:
                time.sleep(0.02)
            before = time.monotonic_ns()
            conn.sendall(f"data: event {i}\n\n".encode())
            sends.append((before, time.monotonic_ns()))

    t = threading.Thread(target=sender)
    t.start()
    t.join(timeout=10)
    assert len(sends) == 3
    time.sleep(0.05)
    offset = ks.sample_offset()
    data, stamp = ks.recv_stamped(client, 4096)
    t_read = time.monotonic_ns()
    for s in (client, conn, server):
        s.close()
    assert data.count(b"data: event") == 3, data  # one read carried all three
    assert stamp is not None
    arrival = stamp - offset.realtime_minus_monotonic_ns  # on the monotonic clock, as recv_stamp converts
    slack = offset.uncertainty_ns + 1_000_000
    last_before, last_after = sends[-1]
    assert last_before - slack <= arrival <= last_after + slack  # the last byte's arrival
    assert t_read - arrival >= 50_000_000  # the reader's own delay, exactly what it was
    assert arrival >= sends[0][1]  # never earlier than the first event (a read is stamped with its last byte)


def test_a_socket_that_refuses_the_option_keeps_read_stamps(monkeypatch):
    class Refusing:
        def setsockopt(self, *args):
            raise OSError("not here")

    assert ks.enable(Refusing()) is False
    monkeypatch.setattr(ks.sys, "platform", "darwin")
    with socket.socket() as s:
        assert ks.enable(s) is False


def stamped_loopback():
    """A loopback connection: (listening socket, client socket, server side, the client's StampedStream)."""
    from httpcore._backends.sync import SyncStream

    from pytest_llm_latency.client.transport.recv_stamp import StampedStream

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    raw = socket.create_connection(server.getsockname(), timeout=10)
    conn, _ = server.accept()
    return server, raw, conn, StampedStream(SyncStream(raw))


@pytest.mark.skipif(not ks.supported(), reason="kernel arrival stamps are read on 64-bit Linux only")
def test_the_clients_stream_reports_its_own_delay_and_the_span_its_merged_events_arrived_in():
    server, raw, conn, stream = stamped_loopback()
    stream.write(b"GET / HTTP/1.1\r\n\r\n")           # the request: nothing can arrive before it left
    assert conn.recv(100).startswith(b"GET")
    sends = []
    for i in range(3):
        if i:
            time.sleep(0.02)
        before = time.monotonic_ns()
        conn.sendall(f"data: event {i}\n\n".encode())
        sends.append((before, time.monotonic_ns()))
    time.sleep(0.05)
    data = stream.read(4096, timeout=5)
    for s in (raw, conn, server):
        s.close()
    assert data.count(b"data: event") == 3 and stream.kernel
    assert sends[-1][0] - 1_000_000 <= stream.t_read_ns <= sends[-1][1] + 1_000_000   # the last event's arrival
    # the client's own delay: the read returned after the 50 ms sleep that began when the last send returned;
    # the kernel may stamp the arrival a little after sendall returns (softirq under load), never much
    assert stream.t_read_ns + stream.delay_ns >= sends[-1][1] + 50_000_000
    assert stream.delay_ns >= 49_000_000
    assert stream.t_sent_ns is not None and stream.t_sent_ns <= sends[0][0]           # the request's departure
    # the first event arrived no earlier than the request left: the span covers it
    assert stream.t_read_ns - stream.span_ns <= sends[0][0] and stream.span_ns >= 40_000_000


@pytest.mark.skipif(not ks.supported(), reason="kernel arrival stamps are read on 64-bit Linux only")
def test_a_requests_late_last_write_does_not_shorten_the_span_its_answer_arrived_in():
    # httpcore writes a request in pieces (head, body, an empty write ending a sized body); a thread held
    # up before its last write may make it after the answer began to arrive: the span still starts at
    # the request's first write
    server, raw, conn, stream = stamped_loopback()
    first_write = time.monotonic_ns()
    stream.write(b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n")
    stream.write(b"{}")
    assert conn.recv(100).endswith(b"{}")
    sent = time.monotonic_ns()
    conn.sendall(b"data: event 0\n\n")
    time.sleep(0.02)
    stream.write(b"")                                  # the late empty write, after the answer arrived
    conn.sendall(b"data: event 1\n\n")
    time.sleep(0.01)
    stream.read(4096, timeout=5)
    for s in (raw, conn, server):
        s.close()
    assert stream.kernel
    # the first event (sent at `sent`) lies inside the read's span, which starts no later than the first write
    assert stream.t_read_ns - stream.span_ns <= min(sent, max(first_write, stream.t_sent_ns or 0))


def test_draining_transmit_stamps_of_a_socket_closed_under_the_reader_gives_none():
    s = socket.socket()
    s.close()
    assert ks.drain_tx(s) is None
