"""What the ground-truth emitter (``emitter.py``) counts and sends: its one-token-per-word
vocabulary and counting rule (the reference target's), tokens per chunk, and HTTP/1.1 chunk framing."""
from __future__ import annotations

import random

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
