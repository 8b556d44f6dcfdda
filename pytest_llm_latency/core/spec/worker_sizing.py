"""How many worker processes send a load (``workers: auto``, the default of the load engine's loops):
the token events per second the load will bring, over what one process carries.  Pure: the
caller (``client.placement.plan``) gives the streams, the warm-up's measured rate, the CPUs and whether
the target runs on this host.

The rule: processes = ceil(expected events/s / ``EVENTS_PER_S_PER_PROCESS``), where expected
events/s = streams in flight x the per-stream token-event rate the warm-up measured (an open
loop: requests/s x events per request); without a measured rate (no warm-up, or none of it
streamed), ceil(streams / ``STREAMS_PER_PROCESS``).  At most one per stream; at most the CPUs,
one left for a server on this host; at least 1.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Iterable, Sequence

#: the token events per second one process stamps with a first-token and per-token error p99 <= 1 ms
#: (``benchmarks/fidelity.py``: one process, a closed loop of streams x 50 tok/s against the exact
#: emitter on the 2-core VM, kernel arrival stamps, the read pump of ``client/transport/read_pump.py``):
#: 128 streams (6,400 events/s) held it in every run (4 of 4, TTFT error p99 <= 0.06 ms); 160
#: (8,000) and 192 (9,600) in 2 of 3 (the others: about 1 % of tokens read 20-40 ms late, merged
#: with the next; every affected budget refused).  Recorded in ``benchmarks/results/
#: fidelity_repeats_pump.json`` and benchmarks/RESULTS.md.  Recalibrate after the client's
#: per-token cost changes, on the machine the tests run on.
EVENTS_PER_S_PER_PROCESS = 6400
#: the per-stream rate the calibration ran at; with no measured rate, a process takes
#: ``EVENTS_PER_S_PER_PROCESS / REFERENCE_TOKENS_PER_S`` streams (``STREAMS_PER_PROCESS``)
REFERENCE_TOKENS_PER_S = 50.0
STREAMS_PER_PROCESS = int(EVENTS_PER_S_PER_PROCESS // REFERENCE_TOKENS_PER_S)


@dataclass(frozen=True)
class StreamRate:
    """What the warm-up measured: token events per second per stream (the median over its
    requests of (chunks - 1) / (last chunk - first chunk)) and token events per request (median)."""
    events_per_s: float
    events_per_request: float
    requests: int


@dataclass(frozen=True)
class WorkerSizing:
    """The worker processes a load is sent by, and why (JSON ``load.workers`` / ``load.workers_reason``)."""
    count: int
    reason: str


def stream_rate(chunk_stamps: Iterable[Sequence[int]]) -> StreamRate | None:
    """The warm-up's ``StreamRate`` from each request's chunk arrival stamps (ns); None when no
    request streamed two chunks over a positive time."""
    rates, counts = [], []
    for stamps in chunk_stamps:
        if len(stamps) >= 2 and stamps[-1] > stamps[0]:
            rates.append((len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1e9))
            counts.append(len(stamps))
    if not rates:
        return None
    return StreamRate(statistics.median(rates), statistics.median(counts), len(rates))


def cpu_cap(cpus: int | None, local: bool) -> int:
    """The most processes: the CPUs, one left for a server on this host (``local``); at least 1."""
    return max(1, (cpus or 1) - (1 if local else 0))


def size_workers(workers: "int | str", *, streams: int, cpus: int | None, local: bool,
                 rate: StreamRate | None = None, open_rps: float | None = None) -> WorkerSizing:
    """``workers`` (``N`` or ``auto``) for a load of ``streams`` in flight at most (a closed loop's
    concurrency; an open loop's thread cap) at ``open_rps`` requests/s (an open loop) or as fast as
    they stream (a closed loop), given the warm-up's ``rate`` (None: none measured), the host's
    ``cpus`` and whether the target runs on this host (``local``)."""
    if workers != "auto":
        n = int(workers)
        return WorkerSizing(n, f"workers: {n} (given)")
    streams = max(int(streams), 1)
    if rate is not None and open_rps is not None:
        events = open_rps * rate.events_per_request
        how = f"{_num(open_rps)} requests/s x {_num(rate.events_per_request)} token events = {_num(events)} events/s"
    elif rate is not None:
        events = streams * rate.events_per_s
        how = f"{streams} streams x {_num(rate.events_per_s)} tok/s = {_num(events)} events/s"
    else:
        events = None
    if events is not None:
        wanted = max(1, math.ceil(events / EVENTS_PER_S_PER_PROCESS))
        why = f"{how} (warm-up), {EVENTS_PER_S_PER_PROCESS:,} events/s per process -> {wanted}"
    else:
        wanted = max(1, math.ceil(streams / STREAMS_PER_PROCESS))
        why = (f"{streams} streams, no token rate from a warm-up: {STREAMS_PER_PROCESS} streams per process "
               f"(at {REFERENCE_TOKENS_PER_S:g} tok/s) -> {wanted}")
    cap = cpu_cap(cpus, local)
    n = max(1, min(wanted, streams, cap))
    if n < wanted and n == cap and cap <= streams:
        why += (f"; capped at {cap} ({cpus or 1} CPU{'s' if (cpus or 1) != 1 else ''}"
                f"{', one left for the local server' if local else ''})")
    elif n < wanted:
        why += f"; at most one per stream: {streams}"
    return WorkerSizing(n, f"auto: {why}")


def _num(x: float) -> str:
    """A figure as the reason shows it: 6,100 / 48 / 2.5."""
    return f"{x:,.0f}" if abs(x) >= 10 or float(x).is_integer() else f"{x:.2g}"
