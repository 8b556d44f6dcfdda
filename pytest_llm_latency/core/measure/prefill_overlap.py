"""The pause a long prompt imposes on the streams beside it (issue 37): every stream's gaps split into
those that overlapped another request's long prefill (**stall gaps**) and the others (**clean gaps**).
Pure: no clock, no I/O.  (Not "stall": in ``core.measure.bunching`` a stall is the client's own lag.)

**Prefill windows.**  The client sent every request and stamped its first token, so each request's
prefill lay within ``[t_send, t_first_token]`` (a failure with a measured TTFT: ``t_send .. t_send +
TTFT``; one without: no window).  The window is an upper bound on when the server prefilled: it also
holds the request's wait in the server's queue and the network both ways.  The stamps only widen it:
``t_send`` is at or before the request really left (``core.measure.stamp_bounds.send_slack_ms``) and
a token's stamp at or after its arrival, so the window as stamped holds the true one.  A prefill is
**long** when its prompt has at least ``stall_prompt_tokens`` tokens: the server's count
(``usage.prompt_tokens``), else the planned length.  ``index`` is the request's number in send order,
as the report's request table numbers its rows.

**Gaps.**  A stream's gaps are the arrival gaps of its consecutive token chunks (every completed
request, short outputs too: a reader saw those pauses), not divided by the tokens a chunk carries as
ITL is: a stall is the pause the reader saw.  A gap is a **stall gap** when it overlaps the long
prefill window of *another* request (its own prefill ended at its first token, before any gap), else
**clean**.  The overlap is tested on the widest interval the gap's stamps allow: its first chunk may
have arrived up to that chunk's stamp bound earlier (``core.measure.stamp_bounds.chunk_bounds_ms``).
A stall gap keeps every long window it overlapped; its **cause** is the one with the most prompt
tokens (ties: the longer window), which names the cause's class (``mix_class``; None: "other
requests").

**The client's own gaps are left out** of both (and counted): with read stamps a stream thread that
could not run stamps its next chunk late, and the gap grows by the client's stall, not the server's.
A gap is the client's when the lag monitor saw a stall at its end (``core.measure.bunching.stall_at``)
that could have lasted ``bunching.STALL_SHARE`` of it (``lag + tick >= STALL_SHARE x gap``), as a burst
is put on the client in ``bunching.attribute``.  Kernel-stamped streams keep every gap: their stamps
are the arrival, whatever the client did.  Without the client's stall timeline on the stamps' clock
(an injected clock, a driver without a lag monitor) nothing is left out.

**Figures** (``figures``: the ``stall`` part's fields, ``core.result.traffic_parts.StallInfo``): the
stall and clean gaps' p50/p99 (ms) and counts, the worst stall per stream and overall, **stalls** (the
stall gaps longer than ``NOTICED`` x the clean gaps' p99: a pause a reader notices, longer by a margin than
almost any pause outside the long prefills; summed over the streams) per minute of the run (first send to
last end), each cause class's share of the stall gaps, and the long prefills' median window and prompt
length.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Protocol

from .bunching import GUARD_NS, MIN_STALL_NS, STALL_SHARE, StallTimeline, stall_at
from .record import RequestRecord
from .stamp_bounds import NS_PER_MS, chunk_bounds_ms
from .stats import percentile

#: the stall budgets' metric (``core.spec.stall_spec``): a stream's gaps that overlapped a long prefill
STALL_METRIC = "itl_stall"
#: the cause of a stall gap whose prefill belonged to no class of a mix
OTHERS = "other requests"
#: a stall gap this many times the clean gaps' p99 is a stall a reader notices (``figures``: ``stalls``)
NOTICED = 2.0


def possessive(cause: str) -> str:
    """``long_summarization's``, ``other requests'``."""
    return f"{cause}'" if cause.endswith("s") and " " in cause else f"{cause}'s"


class FailedRequest(Protocol):
    """What a failed request (``core.result.result.Failure``) tells about its prefill."""
    @property
    def t_send_ns(self) -> int | None: ...
    @property
    def t_end_ns(self) -> int | None: ...
    @property
    def ttft_ms(self) -> float | None: ...
    @property
    def prompt_tokens(self) -> int | None: ...
    @property
    def mix_class(self) -> str | None: ...


@dataclass(frozen=True)
class PrefillWindow:
    """When one request's prefill may have run: ``[start_ns, end_ns]`` (its send to its first token)."""
    start_ns: int
    end_ns: int
    prompt_tokens: int | None
    mix_class: str | None
    index: int                 # its number in send order (the request table's row), 1-based

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_MS

    def is_long(self, threshold: int) -> bool:
        return self.prompt_tokens is not None and self.prompt_tokens >= threshold

    @property
    def cause(self) -> str:
        return self.mix_class if self.mix_class is not None else OTHERS


def send_order(records: Sequence[RequestRecord], failures: Sequence[FailedRequest] = ()) -> list[Any]:
    """Records and failures in send order, as the request table lists them (failures with no send
    stamp last; ``plugin/report/detail.request_rows``)."""
    rows = [(r.t_send_ns, r) for r in records] + [(f.t_send_ns, f) for f in failures]
    rows.sort(key=lambda x: (x[0] is None, x[0] or 0))
    return [item for _, item in rows]


def prefill_windows(records: Sequence[RequestRecord], failures: Sequence[FailedRequest] = ()) -> list[PrefillWindow]:
    """Every request's prefill window, in send order (module docstring); a request with no first
    token (a failure before it, a record without chunks) has none but keeps its number."""
    out = []
    for index, item in enumerate(send_order(records, failures), 1):
        if isinstance(item, RequestRecord):
            end = item.t_first_token_ns
            tokens = item.prompt_tokens if item.prompt_tokens is not None else item.expected_prompt_tokens
        else:
            end = None if item.t_send_ns is None or item.ttft_ms is None else \
                item.t_send_ns + round(item.ttft_ms * NS_PER_MS)
            tokens = item.prompt_tokens
        if end is not None and item.t_send_ns is not None:
            out.append(PrefillWindow(item.t_send_ns, end, tokens, item.mix_class, index))
    return out


@dataclass(frozen=True)
class StallGap:
    """One gap of a stream that overlapped other requests' long prefills (``windows``)."""
    request: int               # the stream's number in its result's request table
    start_ns: int
    end_ns: int
    windows: tuple[PrefillWindow, ...]

    @property
    def ms(self) -> float:
        return (self.end_ns - self.start_ns) / NS_PER_MS

    @property
    def cause(self) -> PrefillWindow:
        """The overlapped prefill with the most prompt tokens (ties: the longer window)."""
        return max(self.windows, key=lambda w: (w.prompt_tokens or 0, w.end_ns - w.start_ns))


@dataclass(frozen=True)
class GapSplit:
    """Every stream's gaps, split (module docstring)."""
    stall: tuple[StallGap, ...]
    clean_ms: tuple[float, ...]
    client_gaps: int           # left out of both: the client's own stall made them
    client_stall_gaps: int     # of which overlapped a long prefill
    threshold: int             # stall_prompt_tokens
    long_windows: tuple[PrefillWindow, ...]

    @property
    def stall_ms(self) -> list[float]:
        return [g.ms for g in self.stall]


class _Long:
    """The long windows, for finding those that overlap an interval."""

    def __init__(self, windows: Iterable[PrefillWindow]):
        self.windows = sorted(windows, key=lambda w: w.start_ns)
        self.starts = [w.start_ns for w in self.windows]
        self.longest = max((w.end_ns - w.start_ns for w in self.windows), default=0)

    def overlapping(self, lo: int, hi: int, own: tuple[int, int | None]) -> tuple[PrefillWindow, ...]:
        first, last = bisect_left(self.starts, lo - self.longest), bisect_left(self.starts, hi)
        return tuple(w for w in self.windows[first:last] if w.end_ns > lo and (w.start_ns, w.end_ns) != own)


def split_gaps(records: Sequence[RequestRecord], windows: Sequence[PrefillWindow], threshold: int, *,
               numbers: dict[int, int] | None = None, stalls: StallTimeline | None = None,
               read_ms: float = 0.0) -> GapSplit:
    """Split every stream's gaps against the long ``windows`` (``threshold`` prompt tokens or more).
    ``numbers``: ``id(record)`` -> its request number (default: its position in ``records`` + 1);
    ``stalls``: the client's lag-monitor stalls; ``read_ms``: a read stamp's bound
    (``core.measure.stamp_bounds.read_bound_ms``)."""
    long_ = _Long(w for w in windows if w.is_long(threshold))
    late = sorted((w, lag) for w, lag in stalls.stalls if lag >= MIN_STALL_NS) if stalls is not None else []
    max_lag = max((lag for _, lag in late), default=0)
    stall: list[StallGap] = []
    clean: list[float] = []
    client = client_stall = 0
    for pos, rec in enumerate(records):
        chunks = rec.chunks
        if len(chunks) < 2:
            continue
        number = numbers.get(id(rec), pos + 1) if numbers is not None else pos + 1
        bounds = chunk_bounds_ms(rec, read_ms)
        times = [c.t_ns for c in chunks]
        watched = bool(late) and stalls is not None and rec.stamp != "kernel" and stalls.covers([times])
        own = (rec.t_send_ns, rec.t_first_token_ns)
        for i in range(1, len(chunks)):
            a, b = times[i - 1], times[i]
            over = long_.overlapping(a - round(bounds[i - 1] * NS_PER_MS), b, own) if long_.windows else ()
            if watched and stalls is not None:
                lag = stall_at(b, late, GUARD_NS, max_lag)
                if lag and lag + stalls.tick_ns >= STALL_SHARE * (b - a):
                    client += 1
                    client_stall += bool(over)
                    continue
            if over:
                stall.append(StallGap(number, a, b, over))
            else:
                clean.append((b - a) / NS_PER_MS)
    return GapSplit(tuple(stall), tuple(clean), client, client_stall, threshold, tuple(long_.windows))


def run_span_ns(records: Sequence[RequestRecord], failures: Sequence[FailedRequest] = ()) -> int:
    """From the first send to the last end (or last stamp) of the run; 0 when unknown."""
    starts = [r.t_send_ns for r in records] + [f.t_send_ns for f in failures if f.t_send_ns is not None]
    ends = [t for r in records if (t := r.t_end_ns or r.t_last_token_ns) is not None]
    ends += [f.t_end_ns for f in failures if f.t_end_ns is not None]
    return max(ends) - min(starts) if starts and ends and max(ends) > min(starts) else 0


def _p(values: Sequence[float], q: float) -> float | None:
    return round(percentile(sorted(values), q), 3) if values else None


def _median(values: Iterable[float]) -> float | None:
    vals = list(values)
    return round(median(vals), 3) if vals else None


def cause_rows(gaps: Sequence[StallGap], long_windows: Sequence[PrefillWindow]) -> list[dict[str, Any]]:
    """Per cause class, most gaps first: ``{cause, gaps, share, prefills, prompt_tokens_p50,
    window_ms_p50}`` -- the stall gaps it caused, their share of ``gaps``, and its long prefills."""
    counts: dict[str, int] = {}
    for g in gaps:
        counts[g.cause.cause] = counts.get(g.cause.cause, 0) + 1
    rows = []
    for cause, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        mine = [w for w in long_windows if w.cause == cause]
        rows.append({"cause": cause, "gaps": n, "share": round(n / len(gaps), 4), "prefills": len(mine),
                     "prompt_tokens_p50": _median(w.prompt_tokens or 0 for w in mine),
                     "window_ms_p50": _median(w.ms for w in mine)})
    return rows


def figures(split: GapSplit, span_ns: int) -> dict[str, Any]:
    """The ``stall`` part's fields (``core.result.traffic_parts.StallInfo``) from ``split``; ``span_ns``:
    the run's span (``run_span_ns``), for the stalls per minute."""
    stall_ms, clean = split.stall_ms, split.clean_ms
    clean_p99 = _p(clean, 99)
    noticed = sum(1 for v in stall_ms if clean_p99 is None or v > NOTICED * clean_p99)
    per_stream: dict[int, list[float]] = {}
    for g in split.stall:
        per_stream.setdefault(g.request, []).append(g.ms)
    out: dict[str, Any] = {
        "stall_prompt_tokens": split.threshold, "long_prefills": len(split.long_windows),
        "long_prompt_tokens_p50": _median(w.prompt_tokens or 0 for w in split.long_windows),
        "long_window_ms_p50": _median(w.ms for w in split.long_windows),
        "stall_gaps": len(stall_ms), "clean_gaps": len(clean), "client_gaps": split.client_gaps,
        "stall_ms_mean": round(math.fsum(stall_ms) / len(stall_ms), 3) if stall_ms else None,
        "stall_ms_p50": _p(stall_ms, 50), "stall_ms_p90": _p(stall_ms, 90), "stall_ms_p95": _p(stall_ms, 95),
        "stall_ms_p99": _p(stall_ms, 99),
        "stall_ms_max": round(max(stall_ms), 3) if stall_ms else None,
        "clean_ms_p50": _p(clean, 50), "clean_ms_p99": clean_p99, "stalls": noticed,
        "stalls_per_min": round(noticed / (span_ns / 60e9), 3) if span_ns > 0 else None,
        "worst_per_stream": [{"request": k, "stall_ms": round(max(v), 3), "stall_gaps": len(v)}
                             for k, v in sorted(per_stream.items())],
        "causes": cause_rows(split.stall, split.long_windows)}
    if split.stall:
        worst = max(split.stall, key=lambda g: g.ms)
        out.update(worst_request=worst.request, worst_cause=worst.cause.cause,
                   worst_cause_request=worst.cause.index, worst_cause_prompt_tokens=worst.cause.prompt_tokens)
    return out
