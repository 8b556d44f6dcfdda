"""Aggregates of a run under load: goodput and the fluidity index.

**Goodput** (DistServe): the requests that met *every* per-request budget, per second of the
measured window, and as a fraction of all requests.  A budget ``<metric>_<stat>`` applies to
one request as "its own value of that metric is within the limit" (for ITL: its own ITL
``stat`` over its gaps; ``output_tps_min``: its own output tok/s).  A failed request is never
good; a short output is never good.

**Fluidity index** (Etalon, Agrawal et al. 2024): every token has a deadline.  The first
token's is ``t_start + D_ttft`` (the TTFT budget); each later token's is the previous deadline
+ ``D_tpot`` (the TPOT budget, else the ITL budget), so a token that came early leaves slack
to later ones.  A token that misses its deadline resets the schedule: the next deadline is
counted from that token's arrival (one stall is one run of misses, not a ruined request).  A
request's index = tokens on time / tokens; the run's is the mean over requests (a failed
request scores the tokens it got on time over the tokens it was asked for).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

from ..measure import metrics as m
from ..measure.record import RequestRecord
from ..measure.stats import summarize
from ..spec.workload import Budget, Workload

PER_REQUEST = ("ttft", "ttfo", "tpot", "itl", "e2e", "output_tps")


def meets(rec: RequestRecord, budgets: tuple[Budget, ...] | list[Budget]) -> bool:
    """Did this one request meet every per-request budget?"""
    if rec.short_output:
        return False
    scalars = m.per_request(rec)
    for b in budgets:
        if b.metric not in PER_REQUEST:
            continue
        if b.metric == "itl":
            gaps = m.itl_ms(rec)
            if not gaps:
                continue
            v = summarize(gaps, "ITL").get(b.stat)
        else:
            got = scalars.get(b.metric)
            if got is None:
                return False
            v = got
        if (v < b.limit) if b.is_floor else (v > b.limit):
            return False
    return True


@dataclass(frozen=True)
class Goodput:
    good: int
    total: int
    window_s: float

    @property
    def fraction(self) -> float:
        return self.good / self.total

    @property
    def per_s(self) -> float:
        return self.good / self.window_s


def goodput(records: list[RequestRecord], failed: int, budgets, window_s: float | None) -> Goodput | None:
    """None on an empty run or an unknown window (never a goodput of 0 for nothing measured)."""
    total = len(records) + failed
    if not total or not window_s or window_s <= 0:
        return None
    return Goodput(sum(1 for r in records if meets(r, budgets)), total, window_s)


def deadlines(workload: Workload) -> tuple[float, float] | None:
    """(first-token deadline, per-token deadline) in ms: the tightest TTFT and TPOT (else ITL)
    budgets, or None when the workload has no such pair."""
    def tightest(metric):
        limits = [b.limit for b in workload.budgets if b.metric == metric]
        return min(limits) if limits else None
    first, per = tightest("ttft"), tightest("tpot") or tightest("itl")
    return None if first is None or per is None else (first, per)


def fluidity_of(start_ns: int, token_times_ns: list[int], first_ms: float, per_ms: float,
                owed: int | None = None) -> float | None:
    """One request's index: token arrival times (one entry per token) against the deadlines.
    ``owed``: tokens the request should have produced (a failed one), else ``len``."""
    total = max(owed or 0, len(token_times_ns))
    if not total:
        return None
    deadline = start_ns + first_ms * m.NS_PER_MS
    on_time = 0
    for i, t in enumerate(token_times_ns):
        if i:
            deadline += per_ms * m.NS_PER_MS
        if t <= deadline:
            on_time += 1
        else:
            deadline = t  # missed: later deadlines count from this token's arrival
    return on_time / total


def token_times(rec: RequestRecord) -> list[int]:
    """One arrival time per token (a chunk of k tokens gives k entries)."""
    return [c.t_ns for c in rec.chunks for _ in range(max(c.tokens, 1))]


def fluidity(records: list[RequestRecord], failures, workload: Workload) -> float | None:
    """The run's fluidity index, or None without a TTFT + TPOT/ITL budget pair or requests."""
    d = deadlines(workload)
    if d is None:
        return None
    scores = []
    for r in records:
        s = fluidity_of(m.start_ns(r), token_times(r), *d, owed=r.expected_output_tokens or workload.output_tokens)
        if s is not None:
            scores.append(s)
    for f in failures:  # the tokens it got, on their deadlines; the ones it never sent are late
        if f.ttft_ms is None:
            scores.append(0.0)
            continue
        times = accumulate(f.itl_ms, initial=f.ttft_ms)
        s = fluidity_of(0, [round(x * m.NS_PER_MS) for x in times], *d, owed=workload.output_tokens)
        if s is not None:  # it has a first token, so it has an index
            scores.append(s)
    return sum(scores) / len(scores) if scores else None
