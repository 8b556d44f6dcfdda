"""Incremental Server-Sent Events decoder: bytes in, events out.

Follows the WHATWG event-stream rules that LLM servers rely on:
``\\n``, ``\\r\\n`` and ``\\r`` line endings; lines starting with ``:`` are
comments/keep-alive pings (TGI, llama.cpp ``--sse-ping-interval``) and never
events; ``data:`` lines accumulate until a blank line dispatches the event.
UTF-8 is decoded incrementally, so a character split across reads is fine.
A line longer than ``max_line_bytes`` raises ``ProtocolError`` (a runaway or
hostile stream must not eat memory).  Old llama.cpp sent a non-standard
``error:`` field; it is kept in ``SSEEvent.error``.
"""
from __future__ import annotations

import codecs
from typing import NamedTuple

from ...core.errors import ProtocolError

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024


class SSEEvent(NamedTuple):  # a tuple: the cheapest object per event on the read path
    data: str
    event: str | None = None
    error: str | None = None


class SSEDecoder:
    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._buf = ""
        self._data: list[str] = []
        self._event: str | None = None
        self._error: str | None = None
        self._max = max_line_bytes
        self._skip_lf = False

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        try:
            text = self._utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"SSE stream is not valid UTF-8: {exc}") from None
        if not text:  # e.g. an empty read, or half a UTF-8 character: keep a pending "\r" pending
            return []
        if self._skip_lf and text.startswith("\n"):
            text = text[1:]
        self._skip_lf = False
        buf = self._buf + text if self._buf else text
        if "\r" not in buf:  # LLM servers end lines with "\n" only (recordings): the fast path
            return self._feed_lf(buf)
        self._buf = buf
        out: list[SSEEvent] = []
        start = 0
        while True:
            i_n = buf.find("\n", start)
            i_r = buf.find("\r", start)
            if i_n < 0 and i_r < 0:
                break
            if i_r < 0 or (0 <= i_n < i_r):
                end, nxt = i_n, i_n + 1
            elif i_r + 1 < len(buf):
                end, nxt = i_r, i_r + (2 if buf[i_r + 1] == "\n" else 1)
            else:  # "\r" at the very end: maybe "\r\n" split across reads
                end, nxt = i_r, i_r + 1
                self._skip_lf = True
            self._line(buf[start:end], out)
            start = nxt
        self._keep(buf[start:])
        return out

    def _keep(self, rest: str) -> None:
        """Keep the text after the last line end for the next read, within the cap."""
        self._buf = rest
        if len(rest) > self._max:
            raise ProtocolError(f"SSE line longer than {self._max} bytes without a newline (cap); "
                                f"the server or a proxy sent a runaway line")

    def _feed_lf(self, buf: str) -> list[SSEEvent]:
        """``feed`` for text without ``\r``: split once, ``data:`` lines and blank lines inline
        (the same rules as ``_line``, which takes every other line)."""
        out: list[SSEEvent] = []
        lines = buf.split("\n")
        rest = lines.pop()
        mx = self._max
        for line in lines:
            if not line:
                if self._data or self._error is not None:
                    out.append(SSEEvent("\n".join(self._data), self._event, self._error))
                self._data, self._event, self._error = [], None, None
            elif line.startswith("data:") and len(line) <= mx:
                self._data.append(line[6:] if line[5:6] == " " else line[5:])
            else:
                self._line(line, out)
        self._keep(rest)
        return out

    def _line(self, line: str, out: list[SSEEvent]) -> None:
        if len(line) > self._max:
            raise ProtocolError(f"SSE line of {len(line)} characters exceeds the {self._max}-byte cap")
        if line == "":
            if self._data or self._error is not None:
                out.append(SSEEvent("\n".join(self._data), self._event, self._error))
            self._data, self._event, self._error = [], None, None
            return
        if line.startswith(":"):
            return
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "error":
            self._error = value
        # id:, retry: and unknown fields are ignored, as the spec says

    def close(self) -> list[SSEEvent]:
        """End of stream: a pending event without its blank line is still dispatched."""
        out: list[SSEEvent] = []
        try:
            tail = self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"SSE stream ended inside a UTF-8 character: {exc}") from None
        rest = self._buf + tail
        self._buf = ""
        if rest:
            self._line(rest, out)
        self._line("", out)
        return out
