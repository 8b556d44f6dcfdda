"""The shared streaming POST: bounded timeouts, 429/503 retries, status mapping, redaction and
connection timing (``ConnectionTrace``).  See docs/troubleshooting.md#how-a-request-fails; messages
for transport failures and proxy pages are in ``failures.py``."""
from __future__ import annotations

import math
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

import httpx

from ...core.errors import MeasurementError
from ...core.measure.record import Clock, RecordBuilder
from ...core.redact import Redactor  # also the client layer's import of it
from .read_pump import h11_connection, shared_pump
from .recv_stamp import install, read_clock
from .failures import (MAX_ERROR_BODY, RECEIVED_ATTR, AnswerDeadline, Received, content_type, error_text,
    map_transport_error, proxy_page, proxy_page_error)

DEFAULT_POOL_SIZE = 16
STALE_RETRY_EVENT = "llm_latency.stale_connection_retry"


@dataclass(frozen=True)
class Timeouts:
    connect_s: float = 10.0
    idle_s: float = 60.0
    total_s: float = 600.0
    max_retries: int = 2
    max_retry_wait_s: float = 10.0

    def httpx(self) -> httpx.Timeout:
        return httpx.Timeout(connect=self.connect_s, read=self.idle_s, write=self.idle_s, pool=self.connect_s)


def request_bound_s(t: Timeouts) -> float:
    """The longest one request can take on a client with timeouts ``t``: each try's connect, its
    total timeout and a last stalled read, and the waits between its 429/503 retries (the bound a
    controller gives a worker process or a Ray node per request before naming it)."""
    return (t.connect_s + t.total_s + t.idle_s) * (t.max_retries + 1) + t.max_retry_wait_s * t.max_retries


class ConnectionTrace:
    """httpcore ``trace`` callback for one request attempt: stamps, with the record's clock,

    * ``connection.connect_tcp.started`` (or ``connect_unix_socket``) → ``t_connect``;
    * ``connection.connect_tcp.complete`` / ``connection.start_tls.complete`` → ``t_connected``;
    * ``http11.send_request_headers.started`` (``http2.`` too) → ``t_send``: the request is
      written on an open connection.  The *last* one wins, so after a stale keep-alive
      retry TTFT starts at the retry's send;
    * ``http11.send_request_body.complete`` (``http2.`` too) → ``t_written``: the request's last byte
      was handed to the kernel by then (the server starts on it between ``t_send`` and this);
    * ``STALE_RETRY_EVENT`` (sent by ``StaleConnectionRetry``) → ``reconnected``.

    Other events are ignored.  Called in the thread that sends the request.
    """

    def __init__(self, builder: RecordBuilder):
        self.builder = builder

    def __call__(self, name: str, info: dict[str, Any]) -> None:
        b = self.builder
        if name in ("connection.connect_tcp.started", "connection.connect_unix_socket.started"):
            b.connect_started(b.clock())
        elif name in ("connection.connect_tcp.complete", "connection.connect_unix_socket.complete",
                      "connection.start_tls.complete"):
            b.connected(b.clock())
        elif name in ("http11.send_request_headers.started", "http2.send_request_headers.started"):
            b.sent(b.clock())
        elif name in ("http11.send_request_body.complete", "http2.send_request_body.complete"):
            b.written(b.clock())
        elif name == STALE_RETRY_EVENT:
            b.record.reconnected = True


class StaleConnectionRetry(httpx.BaseTransport):
    """The pooled transport: retries once on a keep-alive connection the server had closed before
    it sent any response (docs/troubleshooting.md#how-a-request-fails; announced to the request's
    ``trace`` as ``STALE_RETRY_EVENT``), and grows its pool to the concurrency a workload needs.

    Without ``inner`` it owns an ``httpx.HTTPTransport`` keeping ``pool_size`` keep-alive
    connections (connections are never capped: the workload's threads bound them);
    ``ensure_pool(n)`` replaces it by a larger one when a workload needs more.  A given
    ``inner`` (tests, the transport hook) is used as it is.
    """

    def __init__(self, inner: httpx.BaseTransport | None = None, *, pool_size: int = DEFAULT_POOL_SIZE):
        self.owns_pool = inner is None
        self.pool_size = pool_size
        self.inner = inner if inner is not None else _pooled_transport(pool_size)

    def ensure_pool(self, n: int) -> None:
        """Keep at least ``n`` connections alive.  Call between workloads (nothing in flight):
        a larger pool replaces the old one, whose connections are closed."""
        if not self.owns_pool or n <= self.pool_size:
            return
        old, self.inner, self.pool_size = self.inner, _pooled_transport(n), n
        old.close()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return self.inner.handle_request(request)
        except httpx.RemoteProtocolError as exc:
            if "without sending a response" not in str(exc):
                raise
            trace = request.extensions.get("trace")
            if trace is not None:
                trace(STALE_RETRY_EVENT, {"exception": exc})
            return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def _pooled_transport(pool_size: int) -> httpx.HTTPTransport:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=pool_size)
    return install(httpx.HTTPTransport(limits=limits, trust_env=False))  # reads stamped as they return


_TRANSPORTS: "weakref.WeakKeyDictionary[httpx.Client, StaleConnectionRetry]" = weakref.WeakKeyDictionary()


def make_http_client(timeouts: Timeouts = Timeouts(), api_key: str | None = None,
                     transport: httpx.BaseTransport | None = None, *, auth: tuple[str, str] | None = None,
                     pool_size: int = DEFAULT_POOL_SIZE) -> httpx.Client:
    """One pooled client per target.  ``Accept-Encoding: identity``: gzip would bunch tokens.

    ``auth`` (user, password) from a URL's ``user:password@`` is sent as HTTP basic auth;
    it cannot be combined with an API key (both are the ``Authorization`` header)."""
    if api_key and auth:
        raise ValueError("an API key and URL credentials both set the Authorization header; use one")
    headers = {"Accept-Encoding": "identity", "User-Agent": "pytest-llm-latency"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    wrapper = StaleConnectionRetry(transport, pool_size=pool_size)
    http = httpx.Client(timeout=timeouts.httpx(), headers=headers, transport=wrapper, trust_env=False,
                        auth=httpx.BasicAuth(*auth) if auth else None)
    _TRANSPORTS[http] = wrapper
    return http


def ensure_connections(http: object, n: int) -> None:
    """Let ``http`` keep ``n`` connections alive (a workload at concurrency ``n``), so that
    connections do not churn.  No-op for clients not made by ``make_http_client``."""
    wrapper = _TRANSPORTS.get(http) if isinstance(http, httpx.Client) else None
    if wrapper is not None:
        wrapper.ensure_pool(n)


CONTEXT_LENGTH_HINTS = ("maximum context length", "maximum model length", "exceed_context_size",
                        "context length", "context size", "too long", "max_model_len")


def _retry_after(resp: httpx.Response) -> float | None:
    try:
        seconds = float(resp.headers.get("retry-after", "nan"))
    except ValueError:  # an HTTP date, or garbage: use the default wait
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def raw_chunks(resp: httpx.Response) -> Iterator[bytes]:
    """Bytes as they arrive; an already-buffered body (some transports) comes as one chunk."""
    try:
        yield from resp.iter_raw()
    except httpx.StreamConsumed:
        yield resp.content


@dataclass(frozen=True)
class SmallResponse:
    """A small non-streamed answer (models list, tokenize, metrics) read within a deadline."""

    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        import json

        return json.loads(self.content)


def bounded_request(http: httpx.Client, method: str, url: str, *, total_s: float,
                    max_bytes: int = 8 * 1024 * 1024, clock: Callable[[], float] = time.monotonic,
                    **kw) -> SmallResponse:
    """``http.request`` whose *whole* answer must arrive within ``total_s`` and ``max_bytes``.

    Raises ``AnswerDeadline`` (an ``httpx.ReadTimeout`` that ``map_transport_error`` names
    ``total_timeout``, not a stall) past the deadline and ``httpx.DecodingError`` past the size
    cap.  An error after the status line carries what had arrived (``RECEIVED_ATTR``)."""
    start = clock()
    deadline = start + total_s
    with http.stream(method, url, **kw) as resp:
        data = bytearray()
        try:
            for chunk in raw_chunks(resp):
                data += chunk
                if len(data) > max_bytes:
                    raise httpx.DecodingError(f"answer from {url} larger than {max_bytes} bytes",
                                              request=resp.request)
                if clock() > deadline:
                    raise AnswerDeadline(f"answer from {url} took longer than {total_s:g}s in all",
                                         total_s=total_s, request=resp.request)
        except httpx.HTTPError as exc:  # the status had arrived: map_transport_error names that phase
            setattr(exc, RECEIVED_ATTR, Received.from_response(resp, len(data), elapsed_s=clock() - start,
                                                               stream=False))
            raise
        return SmallResponse(resp.status_code, resp.headers, bytes(data))


def _error_body(resp: httpx.Response) -> str:
    data = b""
    for chunk in raw_chunks(resp):
        data += chunk
        if len(data) >= MAX_ERROR_BODY:
            break
    return error_text(data)  # cut at MAX_ERROR_BODY


def _stamp_failure(rec: Any, clock: Clock) -> None:
    """When the failure was seen (``t_end``, for the report's timeline), unless already stamped."""
    if getattr(rec, "t_end_ns", 0) is None:
        rec.t_end_ns = clock()


class StreamingPost:
    """POST a streaming request and push its body, stamped read by read, to the adapter's consumer."""

    def __init__(self, http: httpx.Client, timeouts: Timeouts, clock: Clock, redact: Redactor,
                 sleep: Callable[[float], None] = time.sleep):
        self.http, self.timeouts, self.clock, self.redact, self.sleep = http, timeouts, clock, redact, sleep

    def run(self, url: str, body: dict, builder_factory: Callable[[], RecordBuilder],
            expected_types: tuple[str, ...], describe_status: Callable[[int, str], MeasurementError | None],
            consumer: Callable[[RecordBuilder], "BodyConsumer"]) -> RecordBuilder:
        """POST, retry 429/503, check status and content type, then push the body to
        ``consumer(builder)``, each chunk stamped on arrival; transport errors become ``MeasurementError``."""
        retries = 0
        while True:
            builder = builder_factory()
            builder.record.retries = retries
            received = Received()
            try:
                trace = {"trace": ConnectionTrace(builder)}
                with self.http.stream("POST", url, json=body, extensions=trace) as resp:
                    received = Received.from_response(resp)
                    if resp.status_code in (429, 503) and retries < self.timeouts.max_retries:
                        wait = min(_retry_after(resp) or 1.0, self.timeouts.max_retry_wait_s)
                        retries += 1
                        resp.close()
                        self.sleep(wait)
                        continue
                    if resp.status_code >= 400:
                        raise self._status_error(resp, url, retries, describe_status)
                    ctype = content_type(resp.headers)
                    if ctype not in expected_types:
                        snippet = _error_body(resp)[:160]
                        what = "a proxy or load balancer error page?" if proxy_page(ctype, snippet) else \
                            "is the URL pointing at the LLM server, and does it support streaming?"
                        raise MeasurementError("content_type", self.redact(
                            f"non-SSE response ({ctype or 'no content-type'}) from {url}, expected "
                            f"{' or '.join(expected_types)} — {what} Body starts: {snippet!r}"))
                    self._read_body(resp, builder, received, consumer(builder))
                    return builder
            except MeasurementError as exc:
                exc.partial = exc.partial or builder.record  # what arrived before the failure (TTFT, gaps)
                _stamp_failure(exc.partial, self.clock)
                raise
            except httpx.HTTPError as exc:
                received.tokens = len(builder.record.chunks)
                received.elapsed_s = (builder.clock() - builder.record.t_send_ns) / 1e9
                err = map_transport_error(exc, url, self.timeouts, self.redact, received)
                err.partial = builder.record
                _stamp_failure(err.partial, self.clock)
                raise err from None

    def _status_error(self, resp: httpx.Response, url: str, retries: int,
                      describe_status: Callable[[int, str], MeasurementError | None]) -> MeasurementError:
        msg = self.redact(_error_body(resp))
        code = resp.status_code
        special = describe_status(code, msg)
        if special is not None:
            return special
        ctype = content_type(resp.headers)
        if proxy_page(ctype, msg):
            return proxy_page_error(code, ctype, url, resp.headers, msg, self.redact, what="non-SSE response")
        if code in (401, 403):
            return MeasurementError("auth", self.redact(
                f"HTTP {code} from {url}: {msg} — check the API key in LLM_LATENCY_API_KEY"))
        if code in (429, 503):
            ra = resp.headers.get("retry-after")
            return MeasurementError(f"http_{code}", self.redact(
                f"HTTP {code} from {url} after {retries} retries"
                f"{f' (Retry-After: {ra})' if ra else ''}: {msg} — the server is at capacity or loading; "
                f"lower concurrency or wait for readiness"))
        return MeasurementError(f"http_{code}", self.redact(f"HTTP {code} from {url}: {msg}"))

    def _read_body(self, resp: httpx.Response, builder: RecordBuilder, received: Received,
                   consumer: "BodyConsumer") -> None:
        """Push the body to ``consumer`` a chunk at a time, each stamped by the read that brought it
        (before any parsing); ``received.body_bytes`` counts them (the phase a transport error then
        names).  A socket with kernel stamps is read by this process's ``ReadPump`` (one thread for
        every stream); any other by this thread."""
        assert builder.record.t_submit_ns is not None  # stamped when the request was submitted
        deadline = builder.record.t_submit_ns + int(self.timeouts.total_s * 1e9)
        stream = read_clock(resp, builder.clock)  # the stamped socket reads that bring the chunks
        if stream is not None and stream.t_sent_ns is not None:
            builder.sent_kernel(stream.t_sent_ns)  # when the request's last byte left, by the kernel
        # an HTTP chunk is one write of the server's; a body without them is handed over a read at a time
        builder.body_framing("chunked" in resp.headers.get("transfer-encoding", "").lower())
        redact, total_s, feed = self.redact, self.timeouts.total_s, consumer.feed

        def chunk(data: bytes) -> None:
            if stream is None:
                t = builder.stamp()  # stamp before any parsing
            else:  # the read's stamp (kernel arrival, or its return), its number, span and delay
                t = builder.stamp(stream.t_read_ns, read=(stream.seq, stream.span_ns, stream.delay_ns))
            received.body_bytes += len(data)
            feed(t, data)
            if t > deadline:
                raise MeasurementError("total_timeout", redact(
                    f"request exceeded the total timeout of {total_s:g}s after "
                    f"{len(builder.record.chunks)} tokens (trickling server or proxy?)"))

        conn = h11_connection(resp, stream) if stream is not None and stream.kernel_socket else None
        if conn is None:
            for data in raw_chunks(resp):
                chunk(data)
        else:
            # the read timeout httpcore would have used between two reads: the HTTP client's
            read_s = resp.request.extensions.get("timeout", {}).get("read") or self.timeouts.idle_s
            left_s = max(deadline - builder.clock(), 0) / 1e9
            shared_pump().pump(resp, conn, stream, chunk, idle_s=read_s,  # type: ignore[arg-type]
                               wait_s=left_s + read_s + 1.0)
        consumer.close()


class BodyConsumer(Protocol):
    """An adapter's reader of one streamed body (``OpenAIClient``'s SSE, ``OllamaClient``'s NDJSON):
    ``feed`` each chunk with its stamp, then ``close`` at the end of the body (a pending event, the
    end-of-stream checks, ``RecordBuilder.finish``)."""

    def feed(self, t: int, chunk: bytes) -> None: ...

    def close(self) -> None: ...
