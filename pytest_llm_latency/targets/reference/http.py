"""A small HTTP/1.1 server on plain asyncio streams: keep-alive, chunked responses.

HTTP/1.0 clients (nginx's default upstream protocol, ``curl --http1.0``) get ``HTTP/1.0``
replies: no chunked encoding (RFC 9112 forbids it for a 1.0 client), so a stream is sent
with ``Connection: close`` and its body is delimited by the close; a ``Content-Length``
answer keeps the connection only when the client asked for ``Connection: keep-alive``.

Why plain asyncio streams, not Starlette + uvicorn: docs/servers.md#why-plain-asyncio-streams.

Scope: what LLM clients send.  Requests with ``Content-Length`` or chunked bodies,
``Connection: close``/keep-alive, no pipelining of a second request before the first
response ends, no TLS, no HTTP/2.  Limits: 64 KiB of headers, 64 MiB of body.
"""
from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from dataclasses import dataclass
from typing import Awaitable, Callable
from urllib.parse import parse_qsl, urlsplit

MAX_HEADER = 64 * 1024
MAX_BODY = 64 * 1024 * 1024
KEEPALIVE_IDLE_S = 75.0    # longer than httpx's 5 s pool expiry, so the client closes first
SERVER = "pytest-llm-latency-reference"
REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
           413: "Payload Too Large", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Request:
    method: str
    target: str
    path: str
    query: dict
    headers: dict          # lower-case names; a repeated header keeps the last value
    body: bytes
    keep_alive: bool

    def header(self, name: str, default: str | None = None) -> str | None:
        return self.headers.get(name.lower(), default)


class Connection:
    """One client connection; handlers answer with ``send`` or a chunked stream."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.transport = writer.transport
        self.must_close = False
        self._keep_alive = True
        self._http10 = False        # the current request is HTTP/1.0: no chunked encoding
        self._trickle: _Trickle | None = None

    @property
    def closed(self) -> bool:
        return self.transport.is_closing()

    # -- requests -----------------------------------------------------------------------
    async def read_request(self) -> Request | None:
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as e:
            if e.partial.strip():
                raise BadRequest(400, "incomplete request head") from None
            return None
        except asyncio.LimitOverrunError:
            raise BadRequest(431, "request head too large") from None
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ", 2)
        except ValueError:
            raise BadRequest(400, "bad request line") from None
        pairs = (line.partition(":") for line in lines[1:] if line)
        headers = {name.strip().lower(): value.strip() for name, _, value in pairs}
        conn_hdr = headers.get("connection", "").lower()
        keep_alive = "close" not in conn_hdr if version == "HTTP/1.1" else "keep-alive" in conn_hdr
        self._http10 = version != "HTTP/1.1"
        if headers.get("expect", "").lower() == "100-continue" and not self._http10:  # curl, bodies > 1 KiB
            self.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        try:
            body = await self._read_body(headers)
        except ValueError:
            raise BadRequest(400, "bad content-length or chunk size") from None
        parts = urlsplit(target)
        self._keep_alive = keep_alive
        return Request(method.upper(), target, parts.path or "/", dict(parse_qsl(parts.query)),
                       headers, body, keep_alive)

    async def _read_body(self, headers: dict) -> bytes:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            out = bytearray()
            while True:
                size_line = await self.reader.readuntil(b"\r\n")
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    return bytes(out)
                if len(out) + size > MAX_BODY:
                    raise BadRequest(413, "request body too large")
                out += await self.reader.readexactly(size)
                await self.reader.readexactly(2)
        length = int(headers.get("content-length", "0") or 0)
        if length > MAX_BODY:
            raise BadRequest(413, "request body too large")
        return await self.reader.readexactly(length) if length else b""

    # -- responses ----------------------------------------------------------------------
    def _head(self, status: int, headers: list[tuple[str, str]], extra: str | None) -> bytes:
        keep = self._keep_alive and not self.must_close
        version = "HTTP/1.0" if self._http10 else "HTTP/1.1"
        lines = [f"{version} {status} {REASONS.get(status, 'Status')}", f"server: {SERVER}"]
        lines += [f"{k}: {v}" for k, v in headers]
        lines += [extra] if extra else []
        lines += ["connection: keep-alive" if keep else "connection: close", "", ""]
        return "\r\n".join(lines).encode("latin-1")

    def _write(self, data: bytes, head: bool = False) -> None:
        if self._trickle is not None and (not head or self._trickle.headers):
            self._trickle.buf += data
        elif not self.transport.is_closing():
            self.writer.write(data)

    async def send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self._write(self._head(status, headers, f"content-length: {len(body)}"), head=True)
        self._write(body)
        await self._drain()

    async def start_stream(self, status: int, headers: list[tuple[str, str]]) -> None:
        """Chunked for HTTP/1.1; for HTTP/1.0 the body runs until the connection closes."""
        if self._http10:
            self.must_close = True
        self._write(self._head(status, headers, None if self._http10 else "transfer-encoding: chunked"), head=True)
        await self._drain()

    async def write_chunk(self, data: bytes) -> None:
        if data:
            self._write(data if self._http10 else b"%x\r\n%s\r\n" % (len(data), data))
            await self._drain()

    async def end_stream(self) -> None:
        """The last chunk (1.1); for 1.0 the close that follows (``must_close``) ends the body."""
        if not self._http10:
            self._write(b"0\r\n\r\n")
        await self._drain()

    async def _drain(self) -> None:
        if self._trickle is None and not self.transport.is_closing():
            await self.writer.drain()

    def reset(self) -> None:
        """Abort the TCP connection with a RST (SO_LINGER 0)."""
        self.must_close = True
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    def close(self) -> None:
        self.must_close = True
        self.transport.close()

    def trickle(self, bytes_per_s: float, max_seconds: float, headers: bool) -> None:
        """From now on send at ``bytes_per_s``; the connection closes after ``max_seconds``."""
        self.must_close = True
        self._trickle = _Trickle(self, bytes_per_s, max_seconds, headers)

    async def finish(self) -> None:
        """Wait until a trickled response is out (bounded by its ``max_seconds``)."""
        if self._trickle is not None:
            await asyncio.shield(self._trickle.task)


class _Trickle:
    def __init__(self, conn: Connection, rate: float, max_seconds: float, headers: bool):
        self.conn, self.interval, self.headers = conn, 1.0 / rate, headers
        self.buf = bytearray()
        self.task = asyncio.get_running_loop().create_task(self._run(max_seconds))

    async def _run(self, max_seconds: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_seconds
        try:
            while loop.time() < deadline and not self.conn.closed:
                if self.buf:
                    self.conn.writer.write(bytes(self.buf[:1]))
                    del self.buf[:1]
                await asyncio.sleep(min(self.interval, max(0.0, deadline - loop.time())))
        finally:
            self.conn.close()


Handler = Callable[[Request, Connection], Awaitable[None]]


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           handler: Handler) -> None:
    conn = Connection(reader, writer)
    try:
        while not conn.closed:
            try:
                req = await asyncio.wait_for(conn.read_request(), KEEPALIVE_IDLE_S)
            except asyncio.TimeoutError:
                break
            except BadRequest as e:
                conn.must_close = True
                await conn.send(e.status, [("content-type", "text/plain")], str(e).encode())
                break
            if req is None:
                break
            await handler(req, conn)
            await conn.finish()
            if conn.must_close or not req.keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        if not conn.closed:
            writer.close()
