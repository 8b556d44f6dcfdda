"""Connection events on virtual time, for adapter unit tests.

``httpx.MockTransport`` opens no connections, so httpcore never calls the request's
``trace`` callback.  ``SimulatedConnections`` wraps a mock transport and plays the events a
real pooled connection produces (connect, TLS, send), advancing the ``VirtualTime`` in
between, and can make the first attempt fail the way a stale keep-alive connection does.
"""
from __future__ import annotations

import httpx

STALE = "Server disconnected without sending a response."


class SimulatedConnections(httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport, vt, *, pool_wait_ms: float = 0.0, connect_ms: float = 0.0,
                 tls_ms: float = 0.0, already_open: bool = False, stale_after_ms: float | None = None):
        self.inner, self.vt = inner, vt
        self.pool_wait_ms, self.connect_ms, self.tls_ms = pool_wait_ms, connect_ms, tls_ms
        self.open = already_open
        self.stale_after_ms = stale_after_ms  # first request: sent on a dead keep-alive connection
        self.attempts = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        trace = request.extensions.get("trace") or (lambda name, info: None)
        self.attempts += 1
        self.vt.advance_ms(self.pool_wait_ms)
        if self.stale_after_ms is not None and self.attempts == 1:
            trace("http11.send_request_headers.started", {"request": request})
            trace("http11.send_request_headers.complete", {"return_value": None})
            self.vt.advance_ms(self.stale_after_ms)
            self.open = False
            trace("http11.receive_response_headers.failed", {"exception": None})
            raise httpx.RemoteProtocolError(STALE)
        if not self.open:
            trace("connection.connect_tcp.started", {"host": "x", "port": 1})
            self.vt.advance_ms(self.connect_ms)
            trace("connection.connect_tcp.complete", {"return_value": None})
            if self.tls_ms:
                trace("connection.start_tls.started", {})
                self.vt.advance_ms(self.tls_ms)
                trace("connection.start_tls.complete", {"return_value": None})
            self.open = True
        trace("http11.send_request_headers.started", {"request": request})
        trace("http11.send_request_headers.complete", {"return_value": None})
        trace("http11.send_request_body.started", {"request": request})
        return self.inner.handle_request(request)
