"""Transport and status failures as messages that say what happened and where to look: by how far
the response had got (``Received``) and whether a proxy answered (``proxy_page``); see
docs/troubleshooting.md#how-a-request-fails.  Every message passes through the caller's redactor."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import httpx

from ...core.errors import MeasurementError
from ...core.redact import Redactor

MAX_ERROR_BODY = 64 * 1024


class AnswerDeadline(httpx.ReadTimeout):
    """A small answer (``http.bounded_request``) still arriving at its *total* deadline: bytes
    kept coming, too slowly.  A ``ReadTimeout`` for httpx's callers, but not a stall."""

    def __init__(self, message: str, *, total_s: float, request: httpx.Request):
        super().__init__(message, request=request)
        self.total_s = total_s


class _Timeouts(Protocol):  # http.Timeouts (http imports this module, not the other way)
    @property
    def connect_s(self) -> float: ...

    @property
    def idle_s(self) -> float: ...


def error_text(data: bytes) -> str:
    """An error body as one line: a JSON error's message, else the whitespace-squashed text."""
    text = data[:MAX_ERROR_BODY].decode("utf-8", "replace")
    try:
        import json

        obj = json.loads(text)
        err = obj.get("error", obj) if isinstance(obj, dict) else obj
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)
        return str(err)
    except ValueError:
        return " ".join(text.split())[:300]


def content_type(headers: httpx.Headers) -> str:
    return headers.get("content-type", "").split(";")[0].strip().lower()


#: bodies that reverse proxies and load balancers send as plain text (envoy, GCP/AWS LBs)
PROXY_TEXTS = ("upstream connect error", "no healthy upstream", "upstream request timeout",
               "bad gateway", "gateway timeout")


def proxy_page(ctype: str, text: str) -> bool:
    """Does this error answer look like a proxy's or load balancer's own page (docs/reverse-proxy.md#error-pages)?"""
    low = text.lower()
    return ctype == "text/html" or (ctype in ("text/plain", "") and any(t in low for t in PROXY_TEXTS))


def proxy_page_error(code: int, ctype: str, url: str, headers: httpx.Headers, text: str, redact: Redactor, *,
                     what: str = "response") -> MeasurementError:
    """The one message for a proxy or load balancer error page, on any path (docs/reverse-proxy.md#error-pages)."""
    by = "; ".join(f"{h.title()}: {headers[h]}" for h in ("server", "via") if headers.get(h))
    return MeasurementError(f"http_{code}", redact(
        f"HTTP {code} {what} ({ctype or 'no content-type'}) from {url} — a proxy or load balancer error page"
        f"{f' ({by})' if by else ''}? Check the URL and that the LLM server behind the proxy is up. "
        f"Body: {text[:160]!r}"))


@dataclass
class Received:
    """How far one response had got when a transport error struck (``phase``: ``nothing``, ``headers``,
    ``body``, ``tokens``; docs/troubleshooting.md#how-a-request-fails), which decides its message.
    ``elapsed_s``: seconds from sending the request to the failure, when known."""

    status: int | None = None
    server: str | None = None        # the Server / Via header: who answered (a proxy names itself)
    body_bytes: int = 0
    tokens: int = 0
    elapsed_s: float | None = None
    stream: bool = True              # a token stream (False: a small answer: models, tokenize)

    @classmethod
    def from_response(cls, resp: httpx.Response, body_bytes: int = 0, **kw) -> "Received":
        by = ", ".join(resp.headers[h] for h in ("server", "via") if resp.headers.get(h)) or None
        return cls(resp.status_code, by, body_bytes, **kw)

    @property
    def phase(self) -> str:
        if self.status is None:
            return "nothing"
        if self.tokens:
            return "tokens"
        return "body" if self.body_bytes else "headers"

    def after(self) -> str:
        return "" if self.elapsed_s is None else f" after {self.elapsed_s:.1f} s"


#: the likeliest cause of a stream cut after the headers but before the first token
PROXY_TIMEOUT_HINT = ("a proxy read timeout shorter than TTFT? (nginx proxy_read_timeout, envoy route timeout)")

#: ``bounded_request`` sets this attribute on an ``httpx.HTTPError`` raised after the headers
RECEIVED_ATTR = "llm_latency_received"


def closed_before_first_token(url: str, received: Received, detail: str = "") -> str:
    """The stream ended (cut or closed) after the response started, before any token."""
    got = f" and {received.body_bytes} body bytes arrived," if received.body_bytes else ""
    by = f" Response headers from: {received.server}." if received.server else ""
    return (f"the response from {url} started (HTTP {received.status}){got} but the connection closed"
            f"{received.after()} before the first token — {PROXY_TIMEOUT_HINT}.{by}{detail}")


def map_transport_error(exc: httpx.HTTPError, url: str, timeouts: _Timeouts, redact: Redactor,
                        received: Received | None = None) -> MeasurementError:
    """One clear message per transport failure, by what had arrived (``Received.phase``)."""
    if received is None:
        received = getattr(exc, RECEIVED_ATTR, None) or Received()
    what = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.ConnectTimeout):
        return MeasurementError("connect_timeout", redact(
            f"connect to {url} timed out after {timeouts.connect_s:g}s ({exc})"))
    if isinstance(exc, httpx.ConnectError):
        return MeasurementError("connect", redact(
            f"cannot connect to {url}: {exc} — is the server running and the URL right?"))
    phase = received.phase
    if isinstance(exc, AnswerDeadline):
        got = f"{received.body_bytes} body bytes" if phase in ("body", "tokens") else "no body byte"
        return MeasurementError("total_timeout", redact(
            f"the answer from {url} was still arriving after {exc.total_s:g}s in all ({got} by then): "
            f"bytes kept coming, too slowly -- a server or proxy trickling the response"))
    if isinstance(exc, httpx.ReadTimeout):
        where = {"nothing": "before any response (no status line)",
                 "headers": f"after the response headers (HTTP {received.status}), before any body byte",
                 "body": f"after {received.body_bytes} body bytes and 0 tokens",
                 "tokens": f"after {received.tokens} tokens"}[phase]
        return MeasurementError("idle_timeout", redact(
            f"stall: no bytes from {url} for {timeouts.idle_s:g}s {where} "
            f"(idle timeout; raise --llm-latency-idle-timeout if the server is just slow)"))
    closed = isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError))
    if closed and phase == "nothing":
        if isinstance(exc, httpx.RemoteProtocolError) and "without sending a response" not in str(exc):
            return MeasurementError("protocol", redact(
                f"invalid HTTP response from {url} ({what}) — is this an HTTP LLM server "
                f"(not TLS, SSH or another protocol on that port)?"))
        return MeasurementError("reset", redact(
            f"connection to {url} closed before any response (no status line){received.after()} — the server "
            f"or a proxy in front of it dropped the request (check their logs), or that port speaks another "
            f"protocol (an SSH banner without a blank line ends like this) ({what})"))
    if closed and phase in ("headers", "body") and not received.stream:
        return MeasurementError("reset", redact(
            f"the response from {url} started (HTTP {received.status}) but the connection closed after "
            f"{received.body_bytes} body bytes{received.after()}, before the answer was complete — the server "
            f"or a proxy cut it ({what})"))
    if closed and phase in ("headers", "body"):
        return MeasurementError("reset", redact(closed_before_first_token(url, received, f" ({what})")))
    if closed:
        return MeasurementError("reset", redact(
            f"connection to {url} closed mid-stream after {received.tokens} tokens{received.after()} ({what}) — "
            f"server crash or a proxy timeout? Check the server's and the proxy's logs"))
    return MeasurementError("http", redact(f"{type(exc).__name__} talking to {url}: {exc}"))
