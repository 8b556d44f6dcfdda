"""How wrong the client's own stamps can be, per sample and per budget statistic: the bound that
decides whether a verdict can be trusted (``core.checks.client_skew``).  Pure.  The two kinds of
stamp, each metric's sensitivity and why a statistic's bound is rigorous: docs/load.md#stamps-and-their-bound.

A request's ``t_send`` is the kernel's transmit stamp of its last byte where the kernel gives one
(exact), else the client's stamp just before writing: the request left between it and
``t_written`` (``send_slack_ms``).
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .record import RequestRecord
from .stats import percentile

NS_PER_MS = 1_000_000
#: a kernel-stamped event's own bound: the clock conversion (its bracket is well under 1 µs, and
#: both clocks are slewed alike) with room to spare
KERNEL_FLOOR_NS = 20_000
#: read stamps: bound = READ_LAG_FACTOR x the lag monitor's p99 + READ_FLOOR_MS (benchmarks/fidelity.py
#: --stamp read, 1-256 streams: the wake-up lag of one ticking thread under-reports how long a stream
#: thread waits for the CPU and the GIL, by up to 17x measured (256 streams with a CPU-bound process
#: beside, 2026-12-05; 4.9x on a quiet machine); 20 leaves a margin: see benchmarks/RESULTS.md)
READ_LAG_FACTOR = 20.0
READ_FLOOR_MS = 0.5
SOURCES = {"kernel": "kernel arrival stamps (exact per read; events sharing a read bounded by its span)",
           "read": f"read stamps: the lag monitor's p99 x {READ_LAG_FACTOR:g} + {READ_FLOOR_MS:g} ms "
                   f"(calibrated in benchmarks/fidelity.py --stamp read)"}


def read_bound_ms(lag_ms_p99: float | None) -> float:
    """The bound on a read stamp's error from the run's lag monitor (docs/load.md#stamps-and-their-bound)."""
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


def end_bound_ms(rec: RequestRecord, read_ms: float) -> float:
    """The bound on ``t_end``, the stream's end: it ends its read (kernel stamps: exact)."""
    if rec.stamp == "kernel":
        return KERNEL_FLOOR_NS / NS_PER_MS
    return read_ms if rec.stamp == "read" else 0.0


def send_slack_ms(rec: RequestRecord) -> float:
    """How much earlier than the request really left ``t_send`` may be (0: the kernel's stamp, or
    an open loop's latency counting from its due time)."""
    if rec.t_scheduled_ns is not None and rec.t_scheduled_ns <= rec.t_send_ns:
        return 0.0
    if rec.t_written_ns is None or rec.t_written_ns <= rec.t_send_ns:
        return 0.0
    return (rec.t_written_ns - rec.t_send_ns) / NS_PER_MS


def _first_index(rec: RequestRecord, output: bool) -> int | None:
    return next((i for i, c in enumerate(rec.chunks) if not output or not c.reasoning), None)


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
        if metric == "e2e":  # t_end: the stream's end, which ends its read
            value = m.e2e_ms(rec)
            if value is not None:
                out.append(Bounded(value, send_slack_ms(rec) + end_bound_ms(rec, read_ms), 0.0))
        elif metric in ("ttft", "ttfo"):
            value = (m.ttft_ms if metric == "ttft" else m.ttfo_ms)(rec)
            i = _first_index(rec, metric == "ttfo")
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


def stat_bound(bounded: Sequence[Bounded], stat: str, measured: float | None = None,
               misses: int = 0) -> StatBound | None:
    """The bound on a statistic (mean, pNN, max) of samples each wrong by at most its own bounds.

    The true statistic lies between the statistic of the samples' lower ends (y_i − below_i) and
    that of their upper ends (y_i + above_i): both are monotone in every sample.  ``misses``:
    failed requests, counted as +inf as the result counts them (exact whatever the clock did).
    ``measured``: the statistic as the result has it; the bound is the distance from this
    sample's own statistic to those ends, so it holds for ``measured`` too."""
    if not bounded:
        return None
    inf = [math.inf] * misses
    values = sorted([s.value for s in bounded] + inf)
    lows = sorted([s.value - s.below for s in bounded] + inf)
    highs = sorted([s.value + s.above for s in bounded] + inf)
    if stat == "mean":
        def at(xs: list[float]) -> float:
            return sum(xs) / len(xs)
    else:
        q = 100.0 if stat == "max" else float(stat[1:])

        def at(xs: list[float]) -> float:
            return percentile(xs, q)
    y = at(values)
    if math.isinf(y):  # a miss decides it: no clock can move it
        return StatBound(y if measured is None else measured, 0.0, 0.0)
    lo, hi = at(lows), at(highs)
    return StatBound(y if measured is None else measured, max(0.0, y - lo),
                     math.inf if math.isinf(hi) else max(0.0, hi - y))


def token_bounds_ms(records: Sequence[RequestRecord], read_ms: float) -> list[float]:
    """Every token chunk's stamp bound (ms), for the client's figures (``client.stamp_bound_ms_*``)."""
    return [x for r in records for x in chunk_bounds_ms(r, read_ms)]


def read_delays_ms(records: Sequence[RequestRecord]) -> list[float]:
    """The client's own delay on each kernel-stamped read (ms): how late it read, which the kernel
    stamps keep out of the figures."""
    return [d / NS_PER_MS for r in records for d in r.read_delays_ns]
