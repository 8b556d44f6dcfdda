"""Incremental NDJSON decoder (Ollama's native API): bytes in, JSON objects out.

One JSON object per line; ``\\r\\n`` accepted; blank lines skipped; UTF-8
decoded incrementally; lines capped at ``max_line_bytes``.  Malformed JSON
raises ``ProtocolError`` quoting the start of the bad line.
"""
from __future__ import annotations

import codecs
import json

from ...core.errors import ProtocolError
from .sse import DEFAULT_MAX_LINE_BYTES


class NDJSONDecoder:
    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES):
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._buf = ""
        self._max = max_line_bytes

    def feed(self, chunk: bytes) -> list[dict]:
        try:
            self._buf += self._utf8.decode(chunk)
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"NDJSON stream is not valid UTF-8: {exc}") from None
        *lines, self._buf = self._buf.split("\n")
        if len(self._buf) > self._max:
            raise ProtocolError(f"NDJSON line longer than {self._max} bytes without a newline (cap)")
        return [obj for line in lines if (obj := self._parse(line)) is not None]

    def _parse(self, line: str) -> dict | None:
        line = line.strip()
        if not line:
            return None
        if len(line) > self._max:
            raise ProtocolError(f"NDJSON line of {len(line)} characters exceeds the {self._max}-byte cap")
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ProtocolError(f"malformed JSON in NDJSON stream ({exc.msg}): {line[:120]!r}") from None
        except (ValueError, RecursionError) as exc:  # e.g. a 5000-digit integer, or [[[[... nested too deep
            raise ProtocolError(f"unreadable JSON in NDJSON stream ({type(exc).__name__}: {str(exc)[:80]}): "
                                f"{line[:120]!r}") from None
        if not isinstance(obj, dict):
            raise ProtocolError(f"NDJSON line is not a JSON object: {line[:120]!r}")
        return obj

    def close(self) -> list[dict]:
        try:
            rest = self._buf + self._utf8.decode(b"", final=True)
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"NDJSON stream ended inside a UTF-8 character: {exc}") from None
        self._buf = ""
        obj = self._parse(rest)
        return [obj] if obj is not None else []
