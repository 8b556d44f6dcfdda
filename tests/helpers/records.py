"""``RequestRecord`` builders: one streamed request as the client records it, with chosen
times (ms), through the real ``RecordBuilder`` (so first byte, chunks, usage and the end are
set the way a client sets them).

    record(100, gap_ms=10, tokens=4)          # TTFT 100 ms, then 3 gaps of 10 ms
    record(50, [8, 8, 8], send_ms=20)         # explicit gaps, sent 20 ms into the run
    record_at([50, 58, 66, 74])               # absolute token arrival times
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_llm_latency.core.measure.record import RecordBuilder, RequestRecord

MS = 1_000_000  # ns per ms

#: ``expected`` default: the forced output length is the tokens sent (not a short output)
AS_SENT = -1


def record(ttft_ms: float = 100.0, gaps_ms: Sequence[float] | None = None, *, gap_ms: float = 10.0,
           tokens: int = 4, chunk_tokens: Sequence[int] | None = None, expected: int | None = AS_SENT,
           send_ms: float = 0.0, t0_ns: int = 0, prompt_tokens: int | None = 10,
           completion_tokens: int | None = None, tail_ms: float = 0.0,
           server_timings: dict[str, Any] | None = None, reasoning_chunks: int = 0) -> RequestRecord:
    """A completed request sent at ``t0_ns + send_ms``: its first token ``ttft_ms`` later, then
    one chunk after each of ``gaps_ms`` (default ``tokens - 1`` gaps of ``gap_ms``), the end
    ``tail_ms`` after the last token.

    ``chunk_tokens``: each chunk's token count as the stream reported it (exact counts); None:
    one token a chunk, counted from usage only.  ``expected``: the forced output length
    (``AS_SENT``: the completion tokens; None: not forced).  ``completion_tokens``: usage's
    count (default: the tokens sent).  ``reasoning_chunks``: the first k chunks carry only
    reasoning text (``TokenChunk.reasoning``)."""
    gaps = [gap_ms] * (tokens - 1) if gaps_ms is None else list(gaps_ms)
    if chunk_tokens is not None and len(chunk_tokens) != len(gaps) + 1:
        raise ValueError(f"chunk_tokens: {len(chunk_tokens)} counts for {len(gaps) + 1} chunks")
    sent = sum(chunk_tokens) if chunk_tokens is not None else len(gaps) + 1
    completion = sent if completion_tokens is None else completion_tokens
    t = [t0_ns + int(send_ms * MS)]
    b = RecordBuilder(lambda: t[0], expected_output_tokens=completion if expected == AS_SENT else expected)
    t[0] += int(ttft_ms * MS)
    counts: list[int | None] = list(chunk_tokens) if chunk_tokens is not None else [None] * (len(gaps) + 1)
    b.token_chunk(b.stamp(), n_tokens=counts[0], reasoning=reasoning_chunks > 0)
    for i, (g, n) in enumerate(zip(gaps, counts[1:]), 1):
        t[0] += int(g * MS)
        b.token_chunk(t[0], n_tokens=n, reasoning=i < reasoning_chunks)
    b.usage(prompt_tokens, completion)
    if server_timings:
        b.record.server_timings.update(server_timings)
    return b.finish(t[0] + int(tail_ms * MS))


def record_at(times_ms: Sequence[float], *, send_ms: float = 0.0, **kw: Any) -> RequestRecord:
    """A request whose tokens arrived at these absolute times (ms on the run's clock), one
    token a chunk with exact counts; the other arguments as ``record``."""
    gaps = [b - a for a, b in zip(times_ms, times_ms[1:])]
    kw.setdefault("chunk_tokens", [1] * len(times_ms))
    return record(times_ms[0] - send_ms, gaps, send_ms=send_ms, **kw)
