"""What the ground-truth emitter (``emitter.py``) counts and sends: its one-token-per-word
vocabulary and counting rule (the reference target's), tokens per chunk, HTTP/1.1 chunk framing, and
the read of a request with the kernel's arrival stamp of its last byte (``recv_arrival``)."""
from __future__ import annotations

import random
import socket
import struct
import sys
import time

WORDS = ("the of and to in is that for it as with was on be by at this are from or an which have "
         "cache token prefill decode batch stream model kernel memory tensor vector layer head value "
         "query key weight scale block queue step graph latency budget window signal matrix compute").split()


def count_words(text) -> int:
    return len(text.split()) if isinstance(text, str) else 0


def chat_tokens(messages) -> int:
    n = 1
    for m in messages if isinstance(messages, list) else []:
        c = m.get("content") if isinstance(m, dict) else None
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        n += count_words(c) + 2
    return n


def chunk_sizes(spec: str, total: int, rng: random.Random) -> list[int]:
    """Tokens per chunk: ``"4"`` or ``"var:1-5"`` (seeded uniform), summing to ``total``."""
    if spec.startswith("var:"):
        lo, hi = (int(x) for x in spec[4:].split("-"))
        draw = lambda: rng.randint(lo, hi)  # noqa: E731
    else:
        k = int(spec)
        draw = lambda: k  # noqa: E731
    out, left = [], total
    while left > 0:
        n = min(draw(), left)
        out.append(n)
        left -= n
    return out


def http_chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TS_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0


def recv_arrival(sock: socket.socket) -> tuple[bytes, int | None]:
    """One read of a request and the kernel's arrival stamp of its last byte (monotonic ns; None
    without one); b"" when the client closed.  A socket timeout (set for the sender's writes) only
    means the client is idle between requests: read again."""
    while True:
        try:
            if not _TS_SPACE or SO_TIMESTAMPNS is None:
                return sock.recv(65536), None
            data, anc, _flags, _addr = sock.recvmsg(65536, _TS_SPACE)
            m0 = time.monotonic_ns()
            r = time.time_ns()
            m1 = time.monotonic_ns()
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(raw) >= 16:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    return data, sec * 1_000_000_000 + nsec - (r - (m0 + m1) // 2)
            return data, None
        except socket.timeout:
            continue
