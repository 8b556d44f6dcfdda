"""Stamp every socket read before any byte of it is parsed: with the kernel's arrival stamp where
it gives one (Linux, plain TCP; docs/load.md#stamps-and-their-bound), else when the read returns.
A stamp per HTTP chunk instead would put the parsing of a read's earlier events inside its later
events' times, and every chunk would look like a read of its own.

``StampingBackend`` wraps httpcore's network backend so that each connection's stream records,
per read (``StampedStream``):

* ``t_read_ns``: the stamp of the read's events on ``MEASUREMENT_CLOCK``: the kernel's arrival
  stamp of the read's **last** byte (``kernel_stamps``, converted with an offset sampled when the
  connection opened), or where there is none (TLS, whose reads are the TLS layer's; another
  platform; a read the kernel did not stamp) the moment the read returned (``kernel`` False);
* ``delay_ns``: the client's own delay on that read, ``t_returned − t_arrival`` (kernel stamps only);
* ``span_ns``: how much earlier than ``t_read_ns`` the read's *first* byte may have arrived: since
  the previous read's arrival (TCP delivers in order) or the latest request's departure, whichever
  is later (``core.measure.record.RecordBuilder.stamp``);
* ``seq``: the read's number on the connection (chunks of one read share it);
* ``t_sent_ns``: with kernel stamps, the latest request's transmit stamp (read from the socket's
  error queue at the first read after it): the request's ``t_send``.

``read_clock`` gives the adapter the response's stream (the ``network_stream`` extension), only for
records stamped with ``MEASUREMENT_CLOCK``: an injected clock keeps stamping itself.
"""
from __future__ import annotations

import socket
from typing import Callable

import httpcore
import httpx

from . import kernel_stamps
from .clock import MEASUREMENT_CLOCK

#: a kernel stamp older than this against its read's return is not believed (a wall-clock step
#: between the offset's sample and the read): that read keeps its return time
MAX_BELIEVED_DELAY_NS = 60_000_000_000
_KERNEL = [True]
_LATEST: list[bool | None] = [None]  # did the latest connection this process opened get kernel stamps?


def latest_kernel_stamped() -> bool:
    """Whether the latest connection this process opened reads with kernel stamps (False before any):
    the load engine's threads then need not hurry to their reads (``client.load.engine``)."""
    return bool(_LATEST[0])


def use_kernel_stamps(on: bool) -> None:
    """Ask for kernel arrival stamps on connections opened from now on (the default), or not (every
    read then keeps its return time, as on a platform without them: ``benchmarks/fidelity.py
    --stamp read`` calibrates the fallback's bound this way)."""
    _KERNEL[0] = bool(on)


class StampedStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner
        self.t_read_ns: int | None = None
        self.delay_ns: int | None = None
        self.span_ns = 0
        self.seq = 0
        self.kernel = False
        self._prev_arrival: int | None = None
        self.t_sent_ns: int | None = None  # kernel transmit stamp of the latest request's last byte
        self._tx = self._tx_pending = False
        self._writing = False  # a request is being written (no read since its first write)
        sock = getattr(inner, "_sock", None)
        # a plain socket only: an ssl.SSLSocket's reads are the TLS layer's (and it has no recvmsg)
        self._sock: socket.socket | None = None
        if _KERNEL[0] and type(sock) is socket.socket and kernel_stamps.enable(sock):
            self._sock = sock
            self._offset = kernel_stamps.sample_offset().realtime_minus_monotonic_ns
            self._tx = kernel_stamps.enable_tx(sock)
        _LATEST[0] = self._sock is not None

    @property
    def kernel_socket(self) -> bool:
        """Whether this stream's reads carry the kernel's arrival stamps (``client.transport.read_pump``)."""
        return self._sock is not None

    def fileno(self) -> int:
        """The socket's descriptor (-1 once closed): only a kernel-stamped stream has its socket at hand."""
        assert self._sock is not None, "only a kernel-stamped stream has its socket at hand"
        return self._sock.fileno()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._sock is None:
            data = self._inner.read(max_bytes, timeout)
            t = self.t_read_ns = MEASUREMENT_CLOCK()
            self.kernel, self.delay_ns = False, None
        else:
            try:
                self._sock.settimeout(timeout)
                data, arrived = kernel_stamps.recv_stamped(self._sock, max_bytes)
            except socket.timeout as exc:  # as httpcore's own stream maps them
                raise httpcore.ReadTimeout(exc) from exc
            except OSError as exc:
                raise httpcore.ReadError(exc) from exc
            back = MEASUREMENT_CLOCK()
            t = back if arrived is None else min(arrived - self._offset, back)
            if arrived is None or back - t > MAX_BELIEVED_DELAY_NS:
                t, self.kernel, self.delay_ns = back, False, None
            else:
                self.kernel, self.delay_ns = True, back - t
            self.t_read_ns = t
            if self._tx_pending:  # the request's transmit stamps are queued by now (its answer came)
                self._tx_pending = False
                sent = kernel_stamps.drain_tx(self._sock)
                # a server that answered before the request's last byte left (an early error page):
                # the answer's time is not the request's, so the client's own stamp stays
                sent_ns = None if sent is None else sent - self._offset
                self.t_sent_ns = sent_ns if sent_ns is not None and sent_ns <= t else None
                if self.t_sent_ns is not None:
                    self._prev_arrival = max(self._prev_arrival or 0, self.t_sent_ns)
        self._writing = False
        prev = self._prev_arrival
        self.span_ns = t - prev if prev is not None and t > prev else 0
        self._prev_arrival = t
        self.seq += 1
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        # nothing of the answer can arrive before its request starts to leave: the next read's span
        # starts at the request's first write at the earliest (then at its transmit stamp, where there
        # is one).  Only the first: a request goes out in several writes (head, body, and httpcore's
        # empty one at the end of a sized body), and a thread held up between them may write its
        # last one after the answer began to arrive
        if buffer and not self._writing:
            self._writing = True
            self._prev_arrival = max(self._prev_arrival or 0, MEASUREMENT_CLOCK())
        if buffer and self._tx and not self._tx_pending:
            self._tx_pending, self.t_sent_ns = True, None
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname: str | None = None,
                  timeout: float | None = None) -> "StampedStream":
        return StampedStream(self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class StampingBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend):
        self._inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options=None) -> StampedStream:
        return StampedStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options=None) -> StampedStream:
        return StampedStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def install(transport: httpx.HTTPTransport) -> httpx.HTTPTransport:
    """Stamp the reads of ``transport``'s connections (before it opened any).  A transport
    without httpcore's pool (another httpx version) is left as it is: chunks are then stamped
    as they are handed over."""
    pool = getattr(transport, "_pool", None)
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, httpcore.NetworkBackend) and not isinstance(backend, StampingBackend):
        pool._network_backend = StampingBackend(backend)  # type: ignore[union-attr]
    return transport


def read_clock(resp: httpx.Response, clock: Callable[[], int]) -> StampedStream | None:
    """The stamped stream of ``resp``'s connection (its latest read: ``t_read_ns``, ``seq``,
    ``span_ns``, ``delay_ns``), or None where there is none or the record keeps another clock."""
    stream = resp.extensions.get("network_stream")
    if clock is not MEASUREMENT_CLOCK or not isinstance(stream, StampedStream):
        return None
    return stream
