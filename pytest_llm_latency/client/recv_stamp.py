"""Stamp every socket read when it returns, before any byte of it is parsed.

httpx yields a streamed body one HTTP chunk at a time, and h11 parses them out of what one
``recv()`` delivered: when several SSE events arrive in one read (a client that was busy, a
proxy that bunched them), the second is handed over only after the adapter has parsed the
first, so a stamp taken per chunk would put the parsing of the earlier events inside the
later events' times, and every chunk would look like a read of its own.

``StampingBackend`` wraps httpcore's network backend so that each connection's stream records
the measurement clock (``client.clock.MEASUREMENT_CLOCK``) right after each ``read`` returns
(``StampedStream.t_read_ns``);
the response exposes that stream (the ``network_stream`` extension), and ``read_clock``
gives the adapter the time of the read that delivered the chunk in hand: chunks of one read
share one stamp (``events_per_read`` then counts real reads).  Only for records stamped with
``MEASUREMENT_CLOCK`` (the default clock): an injected clock keeps stamping itself.
"""
from __future__ import annotations

from typing import Callable

import httpcore
import httpx
from .clock import MEASUREMENT_CLOCK


class StampedStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream):
        self._inner = inner
        self.t_read_ns: int | None = None

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = self._inner.read(max_bytes, timeout)
        self.t_read_ns = MEASUREMENT_CLOCK()
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
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


def read_clock(resp: httpx.Response, clock: Callable[[], int]) -> Callable[[], int | None] | None:
    """``() -> t_ns`` of the latest read on ``resp``'s connection, or None where there is no
    stamped stream or the record keeps another clock."""
    stream = resp.extensions.get("network_stream")
    if clock is not MEASUREMENT_CLOCK or not isinstance(stream, StampedStream):
        return None
    return lambda: stream.t_read_ns
