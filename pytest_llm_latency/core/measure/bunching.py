"""Who bunched the tokens, burst by burst: the client (a read that came late) or upstream (a
buffering proxy, compression, the server itself); docs/load.md#who-bunched-the-tokens.  Pure: no
clock, no I/O.

A **burst** is one read that delivered chunks the server sent apart: each chunk that arrived less
than ``BURST_GAP_NS`` after the previous one joins its burst; a burst of ``k + 1`` chunks merged ``k``
token gaps, which the server sent over about ``k x I`` at the token interval ``I``.  The client's
stalls are the ``client.load.engine.LagMonitor``'s late wake-ups ``(t_wake, lag)``: it could not run
a ready thread during ``[t_wake - lag, t_wake]`` (at least: the stall may have begun up to a tick
before).  A burst read at ``t`` is the **client's** when a stall touching ``t`` (within ``guard``)
could have lasted ``STALL_SHARE`` of the merged span (``lag + tick >= STALL_SHARE x k x I``, ``lag >=
MIN_STALL_NS``), else **upstream's**.
"""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from typing import Iterable, Sequence

#: a chunk this close after the previous one arrived with it (``core.measure.metrics.burst_chunks``)
BURST_GAP_NS = 100_000
#: a stall explains a burst when it could have lasted this share of the gaps the burst merged
STALL_SHARE = 0.5
#: wake-ups later than this are stalls (below: timer slack of an idle machine)
MIN_STALL_NS = 200_000
#: a stall "at" a read: ending (the monitor woke) or beginning within this of the read's stamp
GUARD_NS = 1_000_000


@dataclass(frozen=True)
class Burst:
    t_ns: int      # when the read that delivered it returned (its last chunk's stamp)
    merged: int    # token gaps it merged (chunks - 1)


@dataclass(frozen=True)
class Attribution:
    """Bursts (reads) and the token gaps they merged, put on the client or upstream."""

    client_bursts: int = 0
    client_gaps: int = 0
    upstream_bursts: int = 0
    upstream_gaps: int = 0
    longest_stall_ms: float = 0.0   # the longest stall that explained a client burst


@dataclass(frozen=True)
class StallTimeline:
    """The client's late wake-ups ``(t_wake_ns, lag_ns)`` (sorted) while a monitor woke every
    ``tick_ns`` from ``start_ns`` to ``end_ns``, all on one clock (``client.load.engine.LagMonitor``)."""

    stalls: tuple[tuple[int, int], ...]
    tick_ns: int
    start_ns: int
    end_ns: int

    def covers(self, streams: Iterable[Sequence[int]]) -> bool:
        """Every stamp lies within the monitor's span: the stamps are on its clock (an injected
        clock's virtual time is not) and it watched the whole of every stream."""
        return self.end_ns > self.start_ns and all(
            self.start_ns <= t[0] and t[-1] <= self.end_ns for t in streams if len(t))


def bursts(times_ns: Sequence[int], gap_ns: int = BURST_GAP_NS) -> list[Burst]:
    """The bursts of one stream from its chunks' arrival stamps, in order."""
    out: list[Burst] = []
    merged = 0
    for a, b in zip(times_ns, times_ns[1:]):
        if b - a < gap_ns:
            merged += 1
        elif merged:
            out.append(Burst(a, merged))
            merged = 0
    if merged:
        out.append(Burst(times_ns[-1], merged))
    return out


def stall_at(t_ns: int, stalls: Sequence[tuple[int, int]], guard_ns: int = GUARD_NS,
             max_lag_ns: int | None = None) -> int:
    """The longest stall (its lag, ns) whose interval ``[t_wake - lag, t_wake]`` comes within
    ``guard_ns`` of ``t_ns``, or 0; ``stalls``: ``(t_wake_ns, lag_ns)`` sorted by wake time
    (``max_lag_ns``: their longest lag, to stop the scan early)."""
    if max_lag_ns is None:
        max_lag_ns = max((lag for _, lag in stalls), default=0)
    longest = 0
    for i in range(bisect_left(stalls, (t_ns - guard_ns, -1)), len(stalls)):  # woke from t - guard on
        wake, lag = stalls[i]
        if wake - max_lag_ns > t_ns + guard_ns:
            break  # every later stall began after t + guard
        if wake - lag <= t_ns + guard_ns:
            longest = max(longest, lag)
    return longest


def attribute(streams: Iterable[Sequence[int]], timeline: StallTimeline, interval_ms: float) -> Attribution:
    """Put each burst of ``streams`` (each a stream's chunk stamps, ns) on the client or
    upstream (module docstring).  ``timeline``: the client's stalls on the chunks' clock;
    ``interval_ms``: the token interval (TPOT p50)."""
    tick_ns = timeline.tick_ns
    late = sorted((w, lag) for w, lag in timeline.stalls if lag >= MIN_STALL_NS)
    max_lag = max((lag for _, lag in late), default=0)
    interval_ns = interval_ms * 1e6
    cb = cg = ub = ug = 0
    longest = 0
    for times in streams:
        for b in bursts(times):
            lag = stall_at(b.t_ns, late, GUARD_NS, max_lag)
            if lag and lag + tick_ns >= STALL_SHARE * b.merged * interval_ns:
                cb, cg, longest = cb + 1, cg + b.merged, max(longest, lag)
            else:
                ub, ug = ub + 1, ug + b.merged
    return Attribution(cb, cg, ub, ug, round(longest / 1e6, 3))
