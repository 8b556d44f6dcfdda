"""How wrong the client's own stamps can be, per sample and per budget statistic: the bound that
decides whether a verdict can be trusted (``core.checks.client_skew``).  Pure.

A token's stamp (``client/recv_stamp.py``) is either

* a **kernel arrival stamp** (``RequestRecord.stamp == "kernel"``): exact for the event that ended
  its read, up to ``KERNEL_FLOOR_NS`` (the realtime -> monotonic conversion); a token that shared
  its read with later tokens arrived no later than its stamp and at most ``TokenChunk.bound_ns``
  earlier (the read's span since the previous read's arrival).  A last token that shares its read
  only with the stream's end (usage, finish, ``[DONE]``) counts as exact: servers send the end in
  the step of the last token, often in the same write (``RecordBuilder.stamp``);
* or a **read stamp** (``"read"``: TLS, a platform without kernel stamps): late by however long
  the client took to read, which only the lag monitor sees.  Its bound is the run's lag p99
  scaled by ``READ_LAG_FACTOR`` plus ``READ_FLOOR_MS``, calibrated with ``benchmarks/fidelity.py
  --stamp read`` (the reported bound at or above the true per-token error p99 on every row).

A request's ``t_send`` is the kernel's transmit stamp of its last byte where the kernel gives one
(exact), else the client's stamp just before writing: the request left between it and
``t_written`` (``send_slack``).

Each metric's sensitivity follows from its definition (``core.metrics``), with ``b`` a stamp's
bound: TTFT/TTFO/E2E = stamp − t_start can only read long (a stamp is never early, ``t_send``
never late), by at most send slack + b; TPOT = (t_last − t_first)/(N − 1) moves by at most
(b_first + b_last)/(N − 1), either way; a gap of ITL by at most b_prev (shorter) or b_cur (longer),
divided by its tokens.  A percentile of samples each wrong by at most b_i is wrong by at most the
largest b_i among the samples on the side it could move from (``stat_bound``): a rigorous bound,
not an estimate.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .record import RequestRecord
from .stats import percentile

NS_PER_MS = 1_000_000
#: a kernel-stamped event's own bound: the clock conversion (its bracket is well under 1 µs, and
#: both clocks are slewed alike) with room to spare
KERNEL_FLOOR_NS = 20_000
#: read stamps: bound = READ_LAG_FACTOR x the lag monitor's p99 + READ_FLOOR_MS (benchmarks/fidelity.py
#: --stamp read: the wake-up lag of one ticking thread under-reports how long a stream thread waits
#: for the CPU and the GIL, by up to about 2.3x measured; see benchmarks/RESULTS.md)
READ_LAG_FACTOR = 3.0
READ_FLOOR_MS = 0.5
#: metrics whose error is one-sided (measured >= true): a stamp after t_start, never early
ONE_SIDED = ("ttft", "ttfo", "e2e")
SOURCES = {"kernel": "kernel arrival stamps (exact per read; events sharing a read bounded by its span)",
           "read": f"read stamps: the lag monitor's p99 x {READ_LAG_FACTOR:g} + {READ_FLOOR_MS:g} ms "
                   f"(calibrated in benchmarks/fidelity.py --stamp read)"}


def read_bound_ms(lag_ms_p99: float | None) -> float:
    """The bound on a read stamp's error from the run's lag monitor (module docstring)."""
    return READ_LAG_FACTOR * (lag_ms_p99 or 0.0) + READ_FLOOR_MS


def stamp_mode(records: Iterable[RequestRecord]) -> str | None:
    """"kernel" when every stamped record had kernel stamps, "read" when any kept read stamps, None
    when no record says (an injected clock)."""
    modes = {r.stamp for r in records if r.stamp is not None}
    return None if not modes else ("kernel" if modes == {"kernel"} else "read")


def chunk_bounds_ms(rec: RequestRecord, read_ms: float) -> list[float]:
    """Each token chunk's stamp bound (ms), in order."""
    if rec.stamp == "kernel":
        return [(KERNEL_FLOOR_NS + c.bound_ns) / NS_PER_MS for c in rec.chunks]
    return [read_ms] * len(rec.chunks) if rec.stamp == "read" else [0.0] * len(rec.chunks)


def send_slack_ms(rec: RequestRecord) -> float:
    """How much earlier than the request really left ``t_send`` may be (0: the kernel's stamp, or
    an open loop's latency counting from its due time)."""
    if rec.t_scheduled_ns is not None and rec.t_scheduled_ns <= rec.t_send_ns:
        return 0.0
    if rec.t_written_ns is None or rec.t_written_ns <= rec.t_send_ns:
        return 0.0
    return (rec.t_written_ns - rec.t_send_ns) / NS_PER_MS


def _first_index(rec: RequestRecord, output: bool) -> int | None:
    for i, c in enumerate(rec.chunks):
        if not output or not c.reasoning:
            return i
    return None


@dataclass(frozen=True)
class Bounded:
    """One sample of a metric: its measured value, and how far below (``below``) or above
    (``above``) it the true value may lie."""
    value: float
    below: float
    above: float


def samples(records: Sequence[RequestRecord], metric: str, read_ms: float) -> list[Bounded]:
    """The metric's samples with their bounds (misses are not here: a failure is a miss whatever the
    clock did)."""
    from . import metrics as m

    out: list[Bounded] = []
    for rec in records:
        b = chunk_bounds_ms(rec, read_ms)
        if not b:
            continue
        if metric in ("ttft", "ttfo", "e2e"):
            value = {"ttft": m.ttft_ms, "ttfo": m.ttfo_ms, "e2e": m.e2e_ms}[metric](rec)
            i = len(b) - 1 if metric == "e2e" else _first_index(rec, metric == "ttfo")
            if value is not None and i is not None:
                out.append(Bounded(value, send_slack_ms(rec) + b[i], 0.0))
        elif metric == "tpot":
            value = m.tpot_ms(rec)
            if value is not None:
                e = (b[0] + b[-1]) / (rec.output_tokens - 1)
                out.append(Bounded(value, e, e))
        elif metric == "itl":
            chunks = rec.chunks
            for i in range(1, len(chunks)):
                k = max(chunks[i].tokens, 1)
                gap = (chunks[i].t_ns - chunks[i - 1].t_ns) / NS_PER_MS / k
                out += [Bounded(gap, b[i] / k, b[i - 1] / k)] * k
    return out


@dataclass(frozen=True)
class StatBound:
    """How far the true statistic may lie below (``below``) or above (``above``) the measured one."""
    measured: float
    below: float
    above: float


def stat_bound(bounded: Sequence[Bounded], stat: str, measured: float | None = None) -> StatBound | None:
    """The bound on a statistic (mean, pNN, max) of samples each wrong by at most its own bounds.

    For a percentile y_q: at least n − k + 1 samples read >= y_q, and each of them is truly at
    least y_i − below_i >= y_q − max(below over those), so the true percentile is no lower; the
    other way with the samples <= y_q.  The mean moves by at most the mean bound.  ``measured``:
    the statistic as the result has it (failures counted as misses), else computed here."""
    if not bounded:
        return None
    values = sorted(s.value for s in bounded)
    if stat == "mean":
        n = len(bounded)
        y = sum(values) / n if measured is None else measured
        return StatBound(y, sum(s.below for s in bounded) / n, sum(s.above for s in bounded) / n)
    q = 100.0 if stat == "max" else float(stat[1:])
    y = percentile(values, q) if measured is None else measured
    # an interpolated percentile lies between two samples: take the bounds from them outwards
    lo = max((v for v in values if v <= y), default=values[0])
    hi = min((v for v in values if v >= y), default=values[-1])
    below = max((s.below for s in bounded if s.value >= lo), default=0.0)
    above = max((s.above for s in bounded if s.value <= hi), default=0.0)
    return StatBound(y, below, above)


def token_bounds_ms(records: Sequence[RequestRecord], read_ms: float) -> list[float]:
    """Every token chunk's stamp bound (ms), for the client's figures (``client.stamp_bound_ms_*``)."""
    return [x for r in records for x in chunk_bounds_ms(r, read_ms)]


def read_delays_ms(records: Sequence[RequestRecord]) -> list[float]:
    """The client's own delay on each kernel-stamped read (ms): how late it read, which the kernel
    stamps keep out of the figures."""
    return [d / NS_PER_MS for r in records for d in r.read_delays_ns]
